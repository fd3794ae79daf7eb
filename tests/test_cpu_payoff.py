"""Chapter 11 ("Where does EAGLE-3 pay on a CPU?"): the third model's drafter config, and
the tables, cost model, verdicts and values read from a canned ``llamacpp_1.5b`` entry."""

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
    assert cpu.cost_model(ENTRY, threads="2") is None  # no 135M point at 2 threads
    rising = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {"1": {
        **ENTRY["large"]["by_threads"]["1"], "eagle3": _method(5, 0.8, [0.7, 0.9], 2.0, rc=_rc(160.0, 4.0, 48.0, 4.5))}}}}
    flat = cpu.cost_model(rising, threads="1")
    assert flat.size_for(2.0) is None
    assert plot_break_even_by_size(cm).axes[0].get_xscale() == "log"
    assert plot_break_even_by_size(None).axes  # a panel that says it was not measured


def test_verdicts_follow_the_preregistered_rules():
    c1, c2 = cpu.evaluate_hypotheses(ENTRY, None)
    assert c1.name == "C1" and "2 threads" in c1.claim and c1.supported is False  # [0.8, 0.99] is below 1
    assert "11/12" in c1.statistic and c2.supported is None
    up = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {"2": ENTRY["large"]["by_threads"]["1"] | {"threads": 2}}}}
    assert cpu.evaluate_hypotheses(up, None)[0].supported is True  # [1.05, 1.30] is above 1
    assert cpu.evaluate_hypotheses(None, None)[0].supported is None
    # a speedup's value of no effect is 1: an interval below 1 is "not supported", one across it "within noise"
    from activation_wave.study.findings import word

    assert word(c1) == "not supported" and word(cpu.evaluate_hypotheses(None, None)[0]) == "not testable"
    across = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {"1": {
        **ENTRY["large"]["by_threads"]["1"], "eagle3": {**ENTRY["large"]["by_threads"]["1"]["eagle3"],
                                                         "speedup_ci": [0.95, 1.04]}}}}}
    assert word(cpu.evaluate_hypotheses(across, None)[0]) == "within noise"


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




@pytest.mark.parametrize(("lo", "hi", "word"), [(1.05, 1.30, "faster than plain decoding"),
                                                (0.80, 0.99, "slower than plain decoding"),
                                                (0.97, 1.13, "within noise of plain decoding"),
                                                (None, None, "not measured")])
def test_a_speed_reads_by_where_its_interval_lies(lo, hi, word):
    """The page's sentence "ran at 0.36x plain decoding (...): <word>." reads right for every word."""
    assert cpu.speed_word(lo, hi) == word
    assert f"ran at 1.00x plain decoding (95% interval ...): {cpu.speed_word(lo, hi)}." .count(" plain decoding") >= 1


def test_side_values_take_the_largest_thread_count_and_word_each_method():
    v = cpu.side_values(ENTRY)
    assert v["side_threads"] == 2 and v["side_n"] == 12
    assert (v["toy_speedup"], v["toy_lo"], v["toy_hi"]) == (0.9, 0.8, 0.99)
    assert v["toy_word"] == "slower than plain decoding" and v["toy_identical"] == "11/12"
    assert v["ng_word"] == "not measured" and math.isnan(v["ng_speedup"])  # no n-gram run at 2 threads
    assert v["corp_word"] == "not measured" and v["default_identical"] == "-"
    up = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {"2": {
        **ENTRY["large"]["by_threads"]["1"], "threads": 2, cpu.LARGE_METHOD: _method(5.0, 1.02, [0.97, 1.08], 1.6),
        "plain_repack": _method(12.5, 1.25, [1.2, 1.3], None)},
    }, "lossless_check": {"eagle3": {"identical_to_plain": 9, "prompts": 12},
                          "eagle3_never_drafts": {"identical_to_plain": 12, "prompts": 12}}}}
    v = cpu.side_values(up)
    assert v["toy_word"] == "faster than plain decoding" and v["corp_word"] == "within noise of plain decoding"
    assert v["ng_word"] == "within noise of plain decoding" and v["ng_identical"] == "11/12"
    assert v["repack_cost"] == pytest.approx(6.0 / 12.5)
    assert (v["default_identical"], v["never_identical"]) == ("9/12", "12/12")
    assert cpu.side_values(None)["side_n"] == 0
    assert cpu.side_values(None)["toy_word"] == "not measured"
    # the corpus drafter once it is in the side by side, at the largest thread count
    with_corpus = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {t: {**r, cpu.LARGE_METHOD: _method(
        5.0, 0.45, [0.41, 0.49], 1.6)} for t, r in ENTRY["large"]["by_threads"].items()}}}
    v = cpu.side_values(with_corpus)
    assert v["side_threads"] == 2 and (v["corp_speedup"], v["corp_lo"], v["corp_hi"], v["corp_tau"]) == (0.45, 0.41, 0.49, 1.6)
    assert v["corp_identical"] == "12/12"
    # n-gram lookup where it was run (1 thread only in the canned entry)
    two = {**ENTRY, "large": {**ENTRY["large"], "by_threads": {"1": ENTRY["large"]["by_threads"]["1"]}}}
    v = cpu.side_values(two)
    assert v["side_threads"] == 1 and (v["ng_speedup"], v["ng_lo"], v["ng_hi"]) == (1.03, 0.98, 1.08)
    assert v["ng_identical"] == "11/12"


def _res(taus):
    from activation_wave.study.chapters import drafter_predictors as dp
    from activation_wave.study.chapters.eagle3_speedup import LayerProfile

    sets = (cpu.cd.SingleLayerTau("eagle3-default", (2, 14, 25), 1, taus[0], taus[0], taus[0], (taus[0],) * 4),
            cpu.cd.SingleLayerTau("combined", (2, 25, 27), 1, taus[1], taus[1], taus[1], (taus[1],) * 4))
    cmp_ = dp.Comparison("combined", (2, 25, 27), "rules", 0.006, 0.004, 0.008, 0.0002, 0.0002, 0.0002, 4, 0.005,
                         0.003, 0.003)
    return cpu.cd.CrossDrafterResult(model="q", n_layers=28, rule="combined", prompt_ids=("a", "b", "c", "d"),
                                     sets=sets, comparison=cmp_, depth=None, entropy=None, entropy_vs_depth=None,
                                     profile=LayerProfile((), (), (), (), ()), training_records=128,
                                     training_positions=10_000, train_s=1000.0, n_drafters=2)


def test_c2_is_not_testable_against_a_default_drafter_that_never_drafts():
    """A verdict rests on a working instrument: against a default drafter whose tau is 1 on
    every prompt, C2 is "not testable" (cross_drafters' dead instrument), whatever its paired
    difference; the answer's word for it is the vocabulary's."""
    from activation_wave.study.findings import word

    c2 = cpu.evaluate_hypotheses(ENTRY, _res((1.0, 1.006)))[-1]
    assert c2.name == "C2" and c2.supported is None and "not testable" in c2.note
    assert word(c2) == "not testable"
