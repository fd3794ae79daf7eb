"""Chapter 11 ("Where does EAGLE-3 pay on a CPU?"): the third model's drafter config, and
the tables, cost model, verdicts and texts read from a canned ``llamacpp_1.5b`` entry."""

import dataclasses
import math

import pytest

from activation_wave.core.config import ConfigError, load_config
from activation_wave.plots import plot_break_even_by_size, plot_round_costs
from activation_wave.select.across_models import third_config, third_drafter_config
from activation_wave.study.chapters import cpu_payoff as cpu


def test_third_drafter_config_takes_the_third_sections_drafter_settings():
    cfg = load_config("default")
    d = third_drafter_config(cfg)
    t = cfg.third
    assert d.model == t.model and d.data.engine == t.engine == "llamacpp"
    assert (d.data.max_prompts_per_source, d.data.max_new_tokens, d.data.engine_slots) == (
        t.drafter_prompts_per_source, t.drafter_max_new_tokens, t.drafter_engine_slots)
    assert d.data.samples_per_prompt == 0 and d.draft.samples_per_prompt == 0
    assert d.draft.epochs == t.drafter_epochs and d.draft.workers == 1
    assert d.draft.threads == cfg.draft.threads * cfg.draft.workers  # the cores the workers would have used
    # the layer study's capture of the third model is untouched by the drafter settings
    assert third_config(cfg).data.max_prompts_per_source == t.max_prompts_per_source
    assert third_config(cfg).data.engine_slots == cfg.data.engine_slots
    assert cpu.has_drafters(cfg) and not cpu.has_drafters(load_config("smoke"))


def test_bad_drafter_settings_are_refused():
    with pytest.raises(ConfigError, match="drafter_epochs"):
        load_config("default", {"third.drafter_epochs": 0})
    with pytest.raises(ConfigError, match="drafter_seeds"):
        load_config("default", {"third.drafter_seeds": -1})


def test_run_drafters_refuses_a_profile_without_them():
    with pytest.raises(ValueError, match="trains no third-architecture drafters"):
        cpu.run_drafters(load_config("smoke"))


def _method(tps, speedup, ci, tau, same=12, n=12, rc=None, **extra):
    return {"tokens_per_s": tps, "speedup": speedup, "speedup_ci": ci, "tau": tau, "identical_to_plain": same,
            "prompts": n, "round_costs": rc, "rounds": 400, **extra}


def _rc(step, verify, draft_ms, round_steps, calls=1100):
    return {"plain_step_ms": step, "verify_in_plain_steps": verify, "draft_ms_per_round": draft_ms,
            "round_in_plain_steps": round_steps, "draft_calls": calls}


ENTRY = {
    "small": {"model": "smollm2-135m", "gguf_mib": 100.0, "params": 135_000_000, "by_threads": {
        "1": {"threads": 1, "plain": {"tokens_per_s": 70.0},
              "eagle3": _method(25.0, 0.36, [0.33, 0.39], 1.5, rc=_rc(14.0, 3.4, 6.0, 3.83))}}},
    "large": {"model": "qwen2.5-coder-1.5b", "gguf_mib": 1000.0, "params": 1_540_000_000, "by_threads": {
        "1": {"threads": 1, "plain": {"tokens_per_s": 6.0},
              "eagle3": _method(7.0, 1.17, [1.05, 1.30], 2.2, rc=_rc(160.0, 1.5, 48.0, 1.8)),
              "ngram": _method(6.2, 1.03, [0.98, 1.08], 1.1, same=11, first_difference={"p7": 40})},
        "2": {"threads": 2, "plain": {"tokens_per_s": 10.0},
              "eagle3": _method(9.0, 0.9, [0.8, 0.99], 2.2, same=11, rc=_rc(100.0, 1.9, 40.0, 2.3))}}},
}


def test_speed_and_round_tables_read_the_entry():
    speed = cpu.speed_frame(ENTRY)
    assert set(speed.target) == {"135M", "1.5B"}
    row = speed[(speed.target == "1.5B") & (speed.threads == 1) & (speed.method == "EAGLE-3")].iloc[0]
    assert row["95% interval"] == "[1.05, 1.30]" and row.identical == "12/12"
    rounds = cpu.round_frame(ENTRY)
    assert list(rounds["round = break-even tau"]) == [3.83, 1.8, 2.3]
    assert rounds.iloc[1]["drafting (steps)"] == pytest.approx(0.3)
    fig = plot_round_costs(rounds.to_dict("records"))
    assert fig.axes[0].get_ylabel() == "plain decoding steps per round"


def test_cost_model_is_a_two_point_line_of_the_overhead_solved_for_each_tau():
    cm = cpu.cost_model(ENTRY, threads="1")
    # the overhead above one step: 2.83 at 100 MiB, 0.8 at 1000 MiB
    assert cm.slope == pytest.approx(math.log(0.8 / 2.83) / math.log(10.0))
    assert cm.break_even_at(100.0) == pytest.approx(3.83) and cm.break_even_at(1000.0) == pytest.approx(1.8)
    assert cm.taus == {"1.5B drafter": 2.2, "135M drafter": 1.5}
    at = cm.size_for(1.5)  # a gain of 0.5 tokens per round pays where the overhead falls to 0.5
    assert at > 1000.0 and cm.break_even_at(at) == pytest.approx(1.5)
    assert cm.size_for(2.2) < 1000.0  # this drafter already pays at 1.5B on this line
    assert cm.size_for(1.0) is None  # a drafter that gains nothing never pays
    assert cm.params_for(1.5) == pytest.approx(at * 2**20 / (1000.0 * 2**20 / 1.54e9) / 1e9)
    text = cpu.cost_text(cm)
    assert "Extrapolated" in text and "135M drafter (tau 1.50) would break even at about" in text
    assert cpu.cost_model(ENTRY, threads="2") is None  # no 135M point at 2 threads
    rising = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {"1": {
        **ENTRY["large"]["by_threads"]["1"], "eagle3": _method(5, 0.8, [0.7, 0.9], 2.0, rc=_rc(160.0, 4.0, 48.0, 4.5))}}}}
    flat = cpu.cost_model(rising, threads="1")
    assert flat.size_for(2.0) is None and "predict no size" in cpu.cost_text(flat)
    assert plot_break_even_by_size(cm).axes[0].get_xscale() == "log"
    assert plot_break_even_by_size(None).axes  # a panel that says it was not measured


def test_verdicts_follow_the_preregistered_rules():
    c1, c2 = cpu.evaluate_hypotheses(ENTRY, None)
    assert c1.name == "C1" and "2 threads" in c1.claim and c1.supported is False  # [0.8, 0.99] is below 1
    assert "11/12" in c1.statistic and c2.supported is None
    up = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {"2": ENTRY["large"]["by_threads"]["1"] | {"threads": 2}}}}
    assert cpu.evaluate_hypotheses(up, None)[0].supported is True  # [1.05, 1.30] is above 1
    assert cpu.evaluate_hypotheses(None, None)[0].supported is None


def test_texts_say_what_was_not_measured():
    assert "has not been measured" in cpu.speed_text(None)
    text = cpu.speed_text(ENTRY)
    assert "at 1 thread plain llama.cpp decodes 6.0 tokens/s and EAGLE-3 7.0 (1.17x [1.05, 1.30]" in text
    assert "n-gram lookup 6.2 (1.03x)" in text
    assert "trains no drafters" in cpu.drafters_text(None)
    assert "needs both target sizes" in cpu.cost_text(None)


def test_landing_sentence_quotes_the_largest_thread_count_with_its_interval():
    text = cpu.landing_text(ENTRY)
    assert "0.90x the speed of plain llama.cpp on 2 threads (95% interval 0.80 to 0.99, n = 12 prompts" in text
    assert "11/12 outputs identical" in text and "2.30 plain steps at 1.5B, so a drafter breaks even only at tau 2.30" in text
    assert "corpus drafter" not in text  # not in the side by side yet
    with_corpus = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {t: {**r, cpu.LARGE_METHOD: _method(
        5.0, 0.45, [0.41, 0.49], 1.6)} for t, r in ENTRY["large"]["by_threads"].items()}}}
    assert "(chapter 11's corpus drafter) it runs at 0.45x (0.41 to 0.49, tau 1.60, 2 threads, 12/12 identical)" in \
        cpu.landing_text(with_corpus)
    assert cpu.landing_text(None).startswith("not measured yet")
    assert "n-gram" not in text  # no n-gram run at 2 threads in the canned entry
    two = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {"1": ENTRY["large"]["by_threads"]["1"]}}}
    assert "n-gram lookup runs at 1.03x (0.98 to 1.08, 11/12 identical)" in cpu.landing_text(two)


def test_the_benchmark_entry_holds_what_the_issue_asks_for(monkeypatch, tmp_path):
    """``llamacpp_1.5b``: plain and EAGLE-3 tokens/s per thread count, the speedup with its
    interval, tau and the identical count of the 1.5B target, the 135M target beside it."""
    from activation_wave.benchmarks import llamacpp_speed as B
    from activation_wave.engines import llamacpp

    monkeypatch.setattr(llamacpp, "find_llamacpp", lambda: "lc")
    from activation_wave.benchmarks import large_drafter

    monkeypatch.setattr(cpu, "trained_drafters", lambda cfg: {cpu.DEFAULT_SET: "d-large"})
    corpus = [None]  # issue 42's corpus drafter: not trained yet, then trained
    monkeypatch.setattr(large_drafter, "trained", lambda cfg: corpus[0])
    seen = []

    def fake_size_run(lc, model, drafters, profile, **kw):
        seen.append((model, dict(drafters), kw["ngram"], kw.get("diagnose", False)))
        return ENTRY["large" if "qwen" in model else "small"] | {"model": model}

    monkeypatch.setattr(B, "_size_run", fake_size_run)
    cfg = load_config("default")
    with pytest.raises(FileNotFoundError, match="WAVE_LLAMACPP_SMALL_DRAFTER"):
        B.run_sizes(cfg, small_drafter=tmp_path / "missing")
    small = tmp_path / "small"
    small.mkdir()
    out = B.run_sizes(cfg, small_drafter=small, threads=(1, 2))
    assert seen == [("qwen2.5-coder-1.5b", {"eagle3": "d-large"}, True, True),
                    ("smollm2-135m", {"eagle3": small}, False, False)]
    assert out["server_flags"] == ["--no-repack"] and "--no-repack" in out["baseline_unit"]
    assert "1.5b" in out["model"] and out["ratio"] == 0.9 and out["ratio_ci"] == [0.8, 0.99]
    assert out["tokens_per_s_by_threads"]["2"] == {"plain": 10.0, "eagle3": 9.0}
    assert out["identical_to_plain"] == {"1": "12/12", "2": "11/12"} and out["tau_by_threads"]["1"] == 2.2
    corpus[0] = "d-corpus"
    B.run_sizes(cfg, small_drafter=small, threads=(1, 2))
    assert seen[-2][1] == {"eagle3": "d-large", large_drafter.METHOD: "d-corpus"}


def test_drafters_text_says_when_the_drafters_are_too_weak_to_rank_layers():
    from activation_wave.study.chapters import drafter_predictors as dp
    from activation_wave.study.chapters.eagle3_speedup import LayerProfile

    sets = (cpu.cd.SingleLayerTau("eagle3-default", (2, 14, 25), 1, 1.0, 1.0, 1.0, (1.0,) * 4),
            cpu.cd.SingleLayerTau("combined", (2, 25, 27), 1, 1.006, 1.004, 1.008, (1.0, 1.01, 1.0, 1.014)))
    cmp_ = dp.Comparison("combined", (2, 25, 27), "rules", 0.006, 0.004, 0.008, 0.0002, 0.0002, 0.0002, 4, 0.005,
                         0.003, 0.003)
    res = cpu.cd.CrossDrafterResult(model="q", n_layers=28, rule="combined", prompt_ids=("a", "b", "c", "d"), sets=sets,
                                    comparison=cmp_, depth=None, entropy=None, entropy_vs_depth=None,
                                    profile=LayerProfile((), (), (), (), ()), training_records=128,
                                    training_positions=10_000, train_s=1000.0, n_drafters=2)
    text = cpu.drafters_text(res, epochs=2, threshold=0.15)
    assert "about 40 response positions per second" in text and "delta tau = +0.006 [+0.004, +0.008]" in text
    assert "Both drafters barely draft" in text and "threshold (0.15)" in text
    strong = dataclasses.replace(res, sets=tuple(dataclasses.replace(s, tau=1.5) for s in sets))
    assert "barely draft" not in cpu.drafters_text(strong, epochs=2)


def test_reading_names_what_pays_and_where_outputs_differ():
    entry = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {"2": {
        "threads": 2, "plain": {"tokens_per_s": 10.0},
        "eagle3": _method(4.7, 0.48, [0.46, 0.49], 1.05, same=10, rc=_rc(100.0, 1.9, 32.0, 2.23), acceptance=0.018,
                          first_difference={"b": 31, "a": 5}),
        "ngram": _method(15.0, 1.52, [1.14, 2.15], 1.87, first_difference={})}}}}
    text = cpu.reading_text(entry)
    assert text.startswith("At 2 threads, n-gram lookup pays")
    assert "would need tau 2.23 to break even" in text and "drafting 0.32" in text and "1.8% of its drafts" in text
    assert "far below a step each, as a memory-bound" not in text  # no drafted_per_round in this canned run
    assert "10 of 12 prompts; the others first differ at a at token 5, b at token 31" in text
    assert "The n-gram lookup method" in text and cpu.reading_text(None) == "" and "near-ties" not in text
    entry["large"]["by_threads"]["2"]["eagle3"]["first_difference_margins"] = {
        "a": {"margin_nats": 0.02, "median_margin_before": 3.3}, "b": {"margin_nats": 0.15, "median_margin_before": 1.7}}
    assert "lie 0.02 to 0.15 nats apart in log-probability, against a median of 1.7 to 3.3" in cpu.reading_text(entry)
    cm = cpu.cost_model(ENTRY, threads="1")
    assert "where the line says nothing" in cpu.cost_text(dataclasses.replace(cm, taus={"weak": 1.01}))
    assert "far beyond what two points support" in cpu.cost_text(dataclasses.replace(cm, taus={"fair": 1.1}))


def test_lossless_check_explains_the_flag_and_its_cost():
    """The entry's ``lossless_check`` (default flags) beside the identical counts under the
    entry's flags, and plain decoding with repacked weights as a second reference."""
    runs = {"2": {"threads": 2, "plain": {"tokens_per_s": 28.0},
                  "eagle3": _method(8.4, 0.3, [0.29, 0.31], 1.05, against={
                      "plain_repack": {"speedup": 0.24, "speedup_ci": [0.23, 0.25]}}),
                  "plain_repack": _method(35.0, 1.25, [1.2, 1.3], None, same=10)}}
    check = {"threads": 2, "plain": {"tokens_per_s": 35.0},
             "eagle3": {"identical_to_plain": 9, "prompts": 12, "first_difference": {"b": 35, "a": 21}},
             "eagle3_never_drafts": {"identical_to_plain": 12, "prompts": 12, "first_difference": {}}}
    entry = {"server_flags": ["--no-repack"], "large": {"model": "q", "server_flags": ["--no-repack"],
                                                          "by_threads": runs, "lossless_check": check}}
    text = cpu.lossless_text(entry)
    assert "EAGLE-3's outputs equal plain decoding on 9 of 12 prompts (first differences: a at token 21, b at " in text
    assert "never drafts" in text and "equals plain on 12 of 12" in text and "the batched verify does" in text
    assert "With --no-repack on every server, plain included, EAGLE-3 equals plain on 2 threads: 12/12" in text
    assert "plain runs at 0.80x of its speed with repacked weights" in text
    assert "its outputs agree on 10 of 12 prompts at 2 threads" in text
    assert text in cpu.reading_text(entry)
    speed = cpu.speed_frame(entry)
    assert list(speed.method) == ["plain", "EAGLE-3", "plain, repacked weights (llama.cpp's default)"]
    assert speed.iloc[1]["vs repacked plain"] == "0.24x [0.23, 0.25]"
    assert "plain with llama.cpp's default repacked weights 35.0, against which EAGLE-3 runs at 0.24x" in \
        cpu.speed_text(entry)
    assert "every server started with --no-repack" in cpu.speed_text(entry)
    assert "0.24x (0.23 to 0.25) the speed of plain llama.cpp with its default repacked weights" in \
        cpu.landing_text(entry)
    assert cpu.reading_text(entry).startswith("At 2 threads, no method pays")  # the repacked plain is a reference
    assert cpu.lossless_text(ENTRY) == ""  # an entry without the check says nothing about it
    entry["small"] = {"target_gguf": "s.gguf", "by_threads": {"2": {"eagle3": {"first_difference_margins": {
        "p": {"position": 93, "margin_nats": 0.12, "median_margin_before": 2.04}}}}}}
    assert "The s.gguf target still parts from plain on p at 2 threads (token 93, a near-tie of 0.12 nats" in \
        cpu.lossless_text(entry)


def test_reading_says_what_a_drafted_token_costs_in_the_verify():
    run = {"threads": 2, "plain": {"tokens_per_s": 30.0},
           "eagle3": _method(9.4, 0.31, [0.30, 0.33], 1.05, rc=_rc(33.0, 3.12, 9.5, 3.4), drafted_per_round=2.94)}
    text = cpu.reading_text({"large": {"by_threads": {"2": run}}})
    assert "Its verify of 1 + 2.9 tokens costs 3.12 plain steps, 0.72 of a step for each drafted token" in text
    assert "paid nearly token by token" in text
    run["eagle3"]["round_costs"] = _rc(100.0, 1.3, 9.5, 1.4)
    assert "far below a step each" in cpu.reading_text({"large": {"by_threads": {"2": run}}})
