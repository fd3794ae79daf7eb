"""The llama.cpp ceiling (issue 42): the round model's arithmetic, and the benchmark's
orchestration and analysis against a fake llama-server whose costs follow a planted model."""

from __future__ import annotations

import textwrap

import math

import pytest

from activation_wave.benchmarks import llamacpp_ceiling as C
from activation_wave.decode import ceiling as cm
from helpers import install_fake_server

# ----------------------------------------------------------------------------- the arithmetic


def test_verify_cost_counts_rounds_without_a_draft_as_plain_steps():
    v = cm.verify_cost(ms=300.0, rounds=12, drafting_rounds=10, draft_tokens=30, step_ms=10.0)
    assert v == {"k": 4.0, "ms": 28.0, "steps": 2.8}
    with pytest.raises(ValueError, match="never drafted"):
        cm.verify_cost(100.0, 10, 0, 0, 10.0)


def test_verify_curve_interpolates_measured_points_and_extrapolates_its_line():
    v = cm.VerifyCurve({2: 1.5, 3: 2.0, 4: 2.5})
    assert v.slope == pytest.approx(0.5)
    assert v.at(1) == 1.0 and v.at(2.5) == pytest.approx(1.75)
    assert v.at(6) == pytest.approx(3.5) and v.extrapolated(6) and not v.extrapolated(4)
    bent = cm.VerifyCurve({2: 1.2, 3: 2.4})  # between points the measured values, not the line
    assert bent.at(2) == 1.2 and bent.at(3) == 2.4


def test_round_prediction_ceiling_and_speedups():
    v = cm.VerifyCurve({k: 1.0 + 0.5 * (k - 1) for k in range(2, 9)})
    r = cm.predict_round(v, depth=3, extraction=0.1, call=0.2)
    assert r == pytest.approx(2.5 + 0.1 + 0.8)
    assert cm.ceiling(r, 3) == round(4 / r, 4)
    curve = cm.speedup_curve(2.0, 3)
    assert curve == [(1, 0.5), (2, 1.0), (3, 1.5), (4, 2.0)]  # break-even at tau = round cost
    assert cm.agreement(1.1, 1.0) == 0.1 and cm.agreement(0.9, 1.0) == -0.1


def test_ngram_round_mixes_plain_steps_and_verifies_and_says_when_it_extrapolates():
    v = cm.VerifyCurve({k: 1.0 + 0.25 * (k - 1) for k in range(2, 9)})
    p = cm.predict_ngram_round(v, rounds=10, drafting_rounds=4, draft_tokens=12, lookup=0.01)
    assert p["mean_batch"] == 4.0 and not p["extrapolated"]
    assert p["steps"] == pytest.approx((6 * 1.0 + 4 * 1.75) / 10 + 0.01)
    long = cm.predict_ngram_round(v, rounds=10, drafting_rounds=2, draft_tokens=40)
    assert long["extrapolated"] and long["mean_batch"] == 21.0


def test_thread_model_recovers_a_planted_roofline_and_solves_for_threads():
    mem, cmp1 = 20.0, 40.0  # ms: a weight read that does not speed up, compute that divides over threads
    pts = {t: (mem + cmp1 / t, (cmp1 / t) / (mem + cmp1 / t)) for t in (1, 2)}
    m = cm.thread_model(pts)
    assert m.mem_ms == pytest.approx(mem) and m.cmp_ms == pytest.approx(cmp1)
    assert m.slope(8) == pytest.approx(5 / 25)
    t = m.threads_for(1.5, depth=3, extraction=0.05, call=0.02)
    assert m.round_steps(t, 3, 0.05, 0.02) == pytest.approx(1.5)
    assert m.threads_for(1.2, depth=3, extraction=0.1, call=0.05) is None  # the drafter alone costs more
    assert cm.thread_model({}) is None


# ----------------------------------------------------------------------------- the benchmark's helpers


def test_probe_and_synthetic_flags():
    f = C.probe_flags(3)
    assert f[f.index("--spec-ngram-simple-size-m") + 1] == "3" and f[-1] == "1,1,1"
    with pytest.raises(ValueError, match="at least one drafted token"):
        C.probe_flags(0)
    assert C.synth_flags(2) == ("--spec-synth-rates", "1,1")
    assert C.synth_flags(3, 1.5595) == ("--spec-synth-len", "1.5595")
    with pytest.raises(ValueError, match="between 1 and 4"):
        C.synth_flags(3, 5.0)
    assert [C.full_rounds(48, k) for k in (1, 2, 4, 8)] == [48, 47, 45, 41]


def test_probe_block_is_distinct_tokens_and_the_prompt_repeats_it():
    class Tok:
        def encode(self, text, add_special_tokens=False):
            return [hash(w) % 1000 for w in text.split()] + [7, 7]

    block = C.probe_block(Tok(), n=8)
    assert len(set(block)) == 8
    assert C.periodic([1, 2], block, repeats=3) == [1, 2, *block, *block, *block]
    with pytest.raises(ValueError, match="distinct tokens"):
        C.probe_block(Tok(), n=500)


def test_a_missing_ledger_drafter_gets_a_stand_in_of_its_shape(tmp_path, monkeypatch, tiny_llama):
    from types import SimpleNamespace

    from activation_wave.models.drafter import DrafterSpec

    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    stub = SimpleNamespace(name="tiny", model=SimpleNamespace(config=tiny_llama.config))
    path, how = C.pick_drafter("capture/nope/drafters/L1-2-3-abc", stub, tmp_path, layers=(1, 2, 3), draft_vocab=16)
    assert how["weights"].startswith("stand-in") and how["layers"] == [1, 2, 3]
    spec = DrafterSpec.from_hf_config(__import__("json").loads((path / "config.json").read_text()))
    assert spec.draft_vocab_size == 16 and spec.hidden_size == tiny_llama.config.hidden_size
    given, how = C.pick_drafter(None, stub, tmp_path, layers=(1, 2, 3), draft_vocab=16, override=path)
    assert given == path and how["weights"] == "given"


# ----------------------------------------------------------------------------- against a fake server

#: A llama-server whose costs follow the round model with planted terms: a plain step 10 ms, a
#: verify of k tokens 10 + 5 (k - 1) ms, the hidden-state extraction 1 ms a round, a drafter
#: call 2 ms (timed by llama.cpp's drafting timer for the calls made while drafting; two more,
#: untimed: the feature encode and the decode over the verify batch, as in llama.cpp's process()).
#: As llama-server's, ``predicted_ms`` leaves out the first token (the prompt pass makes it). Synthetic acceptance flags accept every draft (or reach the
#: given mean length); without them the EAGLE-3 server's drafts are all rejected, the n-gram
#: lookup never finds one. Outputs equal plain decoding's unless drafts are accepted.
FAKE_SERVER = textwrap.dedent('''
    import http.server, json, sys
    args = sys.argv[1:]
    opt = lambda name, default: args[args.index(name) + 1] if name in args else default
    eagle = "-md" in args
    kind = opt("--spec-type", "none")
    depth = int(opt("--spec-draft-n-max", "3")) if eagle else int(opt("--spec-ngram-simple-size-m", "0"))
    p_min = float(opt("--spec-draft-p-min", "0"))
    rates = opt("--spec-synth-rates", "")
    synth_len = float(opt("--spec-synth-len", "0"))
    print("argv:", *args, flush=True)
    if eagle:
        print("spec common_specu: adding speculative implementation 'draft-eagle3'")
        print(f"spec common_specu: - n_max={depth}, n_min=0, p_min={p_min:f}, backend_sampling=1", flush=True)
    tot = {"calls": 0, "drafts": 0, "tokens": 0, "acc": 0, "t_g": 0.0}
    STEP, PER_TOKEN, EXTRACT, CALL = 10.0, 5.0, 1.0, 2.0

    JSON_HANDLER

    class H(JsonHandler):
        def do_POST(self):
            req = self.read_json()
            n = req["n_predict"]
            tokens = [req["prompt"][0]] * n
            timings = {"predicted_n": n}
            if eagle and p_min >= 1.0:  # never drafts: one seed call a round, extraction on
                rounds = n - 1
                ms = rounds * (STEP + EXTRACT + 2 * CALL)  # the seed call (timed) and the encode (untimed)
                tot["calls"] += rounds; tot["t_g"] += rounds * CALL
                timings.update(draft_n=0, draft_n_accepted=0)
            elif eagle:
                per = depth + 1 if rates else (synth_len if synth_len else 1.0)
                rounds = round((n - 1) / per)
                acc = (n - 1) - rounds
                ms = rounds * (STEP + PER_TOKEN * depth + EXTRACT + (depth + 2) * CALL)
                tot["calls"] += rounds; tot["drafts"] += rounds; tot["tokens"] += rounds * depth; tot["acc"] += acc
                tot["t_g"] += rounds * depth * CALL
                timings.update(draft_n=rounds * depth, draft_n_accepted=acc)
                if acc:
                    tokens = [t + 1 for t in tokens]
            elif kind == "ngram-simple" and rates:
                rounds = (n - 1) // (depth + 1)
                ms = rounds * (STEP + PER_TOKEN * depth)
                tot["calls"] += rounds; tot["drafts"] += rounds; tot["tokens"] += rounds * depth; tot["acc"] += rounds * depth
                timings.update(draft_n=rounds * depth, draft_n_accepted=rounds * depth)
                tokens = [t + 1 for t in tokens]
            else:  # plain, or an n-gram lookup that never matches
                ms = STEP * (n - 1)
                if kind != "none":
                    tot["calls"] += n - 1
                    timings.update(draft_n=0, draft_n_accepted=0)
            timings["predicted_ms"] = ms
            if eagle or kind != "none":
                print(f"spec print_stats: statistics {'draft-eagle3' if eagle else kind:>16}: #calls(b,g,a) =    1 "
                      f"{tot['calls']:6d} {tot['calls']:6d}, #gen drafts = {tot['drafts']:6d}, #acc drafts =     0, "
                      f"#gen tokens = {tot['tokens']:6d}, #acc tokens = {tot['acc']:5d}, "
                      f"dur(b,g,a) = 0.000, {tot['t_g']:.3f}, 0.000 ms", flush=True)
            self.send({"tokens": tokens, "timings": timings})

    http.server.HTTPServer(("127.0.0.1", int(opt("--port", "0"))), H).serve_forever()
''')


@pytest.fixture
def fake_lc(tmp_path):
    return install_fake_server(tmp_path / "lc", FAKE_SERVER)


def test_the_benchmark_recovers_planted_terms_and_predicts_its_rounds(fake_lc, tmp_path):
    prompts = [("a", [5, 6]), ("b", [7, 8])]
    probe = [(p, C.periodic(ids, [1, 2, 3, 4, 5, 6, 7, 8, 9], 2)) for p, ids in prompts]
    drafts = {"f16": tmp_path / "d16.gguf", "q8_0": tmp_path / "d8.gguf"}
    raw = C.measure_setting(fake_lc, tmp_path / "t.gguf", drafts, prompts, probe, threads=1, max_new=25,
                            workdir=tmp_path / "w", depths=(1, 2, 3), ks=range(1, 5), tau_now=1.5)
    logs = sorted((tmp_path / "w").glob("*.log"))
    assert all("--no-repack" in f.read_text() for f in logs)  # the llamacpp_1.5b entry's flags, plain included
    assert any("--spec-synth-rates 1,1,1" in f.read_text() for f in logs)
    a = C.analyse_setting(raw, depths=(1, 2, 3), tau_now=1.5)
    assert a["verify_cost_by_k"] == {"1": 1.0, "2": 1.5, "3": 2.0, "4": 2.5}
    assert a["verify_slope"] == pytest.approx(0.5)
    assert all(p["exact"] for p in a["verify_probe"].values())
    assert a["extraction_cost"]["steps"] == pytest.approx(0.3)  # extraction 1 ms + the untimed encode 2 ms
    assert a["draft_call_cost"]["f16"]["steps"] == pytest.approx(0.2)
    for v in ("f16", "q8_0"):
        for d in ("1", "2", "3"):
            measured = a["round_cost_measured"][v][d]
            assert measured == pytest.approx(1 + 0.5 * int(d) + 0.3 + 0.2 * (int(d) + 1))
            assert a["round_cost_predicted"][v][d] == pytest.approx(measured)
            assert a["agreement"][v][d] == pytest.approx(0.0, abs=1e-3)
        assert a["ceiling"][v]["3"] == round(4 / a["round_cost_measured"][v]["3"], 4)
    assert set(a["round_cost_measured"]) >= {"eagle3_at_tau", "ngram"}
    assert a["round_cost_measured"]["eagle3_at_tau"]["tau_set"] == 1.5
    assert a["identical_to_plain"]["eagle3_f16"] == "2/2" and a["identical_to_plain"]["ngram"] == "2/2"
    assert "eagle3_at_tau" not in a["identical_to_plain"]  # synthetic acceptance: outputs not valid by design
    head = C.summary({"135M": {"by_threads": {"1": a}}})
    assert head["ceiling"]["135M"]["1"]["3"] == max(a["ceiling"][v]["3"] for v in a["ceiling"])
    assert head["worst_agreement"] == max(abs(x) for v in a["agreement"].values()
                                          for x in (v.values() if isinstance(v, dict) else [v]))


# ----------------------------------------------------------------------------- chapter 11 and the landing page


def _setting(step, slope, ext, call, rounds, threads):
    """One target at one thread count as analyse_setting writes it (depths 1-4, two variants)."""
    measured = {v: {str(d): r for d, r in rounds.items()} for v in ("f16", "q8_0")}
    return {"threads": threads, "plain_step_ms": {"verify": step, "rounds": step, "ceiling": step},
            "verify_cost_by_k": {str(k): 1 + slope * (k - 1) for k in range(1, 9)}, "verify_slope": slope,
            "verify_probe": {str(k): {"k": float(k), "steps": 1 + slope * (k - 1), "exact": True} for k in range(2, 9)},
            "extraction_cost": {"steps": ext}, "draft_call_cost": {v: {"steps": call} for v in ("f16", "q8_0")},
            "round_cost_measured": measured,
            "round_cost_predicted": {v: {d: r * 1.05 for d, r in m.items()} for v, m in measured.items()},
            "agreement": {v: {d: 0.05 for d in m} for v, m in measured.items()},
            "ceiling": {v: {d: round((int(d) + 1) / r, 4) for d, r in m.items()} for v, m in measured.items()},
            "identical_to_plain": {"eagle3_f16": "4/4", "eagle3_q8_0": "4/4"}}


#: A canned ceiling entry: at 135M every ceiling is below 1 (the drafter's calls dominate); at 1.5B
#: on 2 threads a perfect drafter pays.
CEILING_ENTRY = {"n_prompts": 4, "max_new_tokens": 40, "targets": {
    "135M": {"model": "smollm2-135m", "by_threads": {
        "1": _setting(7.0, 0.6, 0.3, 0.9, {1: 3.4, 2: 4.5, 3: 5.6, 4: 6.7}, 1)}},
    "1.5B": {"model": "qwen2.5-coder-1.5b", "by_threads": {
        "1": _setting(42.0, 0.7, 0.1, 0.1, {1: 2.0, 2: 2.8, 3: 3.6, 4: 4.4}, 1),
        "2": _setting(33.0, 0.5, 0.1, 0.1, {1: 1.7, 2: 2.3, 3: 2.9, 4: 3.5}, 2)}}}}
SIZES = {"large": {"by_threads": {"2": {
    "eagle3": {"tau": 1.05, "speedup": 0.31, "speedup_ci": [0.30, 0.33], "prompts": 12},
    "ngram": {"speedup": 1.61, "speedup_ci": [1.22, 2.22], "prompts": 12, "tau": 1.94, "identical_to_plain": 12}}}},
    "small": {"by_threads": {"2": {"eagle3": {"tau": 1.56}}}}}


def test_ceiling_frame_and_values_give_one_break_even_per_target_and_thread_count():
    from activation_wave.study.chapters import cpu_payoff as cpu

    df = cpu.ceiling_frame(CEILING_ENTRY)
    assert len(df) == 3 * 2 * 4 and set(df["depth"]) == {1, 2, 3, 4}
    row = df[(df["target"] == "135M") & (df["variant"] == "f16") & (df["depth"] == 3)].iloc[0]
    assert row["verify (steps)"] == pytest.approx(2.8) and row["drafter calls (steps)"] == pytest.approx(3.6)
    assert row["break-even tau"] == row["round measured"] == 5.6
    v = cpu.ceiling_values(CEILING_ENTRY)
    # break-even: the measured depth-3 round of the f16 drafter, one number per target and thread count
    assert (v["be_big_1"], v["be_big_2"], v["be_small_1"]) == (3.6, 2.9, 5.6) and math.isnan(v["be_small_2"])
    assert v["ceil_big_2"] == pytest.approx(5 / 3.5, abs=1e-4) and v["ceil_big_2_depth"] == 4
    assert v["ceil1_small_1"] < 1.0 and v["ceil1_big_2"] == pytest.approx(2 / 1.7, abs=1e-4)
    assert (v["slope_min"], v["slope_max"]) == (0.5, 0.7) and v["ceil_n"] == 4 and v["ceil_tokens"] == 40
    assert v["agree_worst"] == pytest.approx(0.05) and v["agree_settings"] == 24
    empty = cpu.ceiling_values(None)
    assert math.isnan(empty["be_big_2"]) and cpu.ceiling_frame(None).empty and empty["agree_settings"] == 0
    terms = cpu.terms_frame(CEILING_ENTRY)
    assert list(terms["per extra token"]) == [0.6, 0.7, 0.5] and terms["identical f16"].iloc[0] == "4/4"
    assert len(cpu.ceiling_tables(CEILING_ENTRY)) == 2 and cpu.ceiling_tables(None) == []


def test_where_it_pays_marks_measured_points_apart_from_the_model():
    from activation_wave.study.chapters import cpu_payoff as cpu

    pts = cpu.where_points(CEILING_ENTRY)
    big = [p for p in pts if p["target"] == "1.5B"]
    assert {p["threads"] for p in big if p["measured"]} == {1, 2}
    assert [p["break_even"] for p in big if p["measured"]] == [3.6, 2.9]
    model = [p for p in big if not p["measured"]]
    assert [p["threads"] for p in model] == [1, 2, 4, 8, 16]
    assert all(a["break_even"] > b["break_even"] for a, b in zip(model, model[1:]))  # more threads, cheaper verify
    assert cpu.today_taus(SIZES) == {"1.5B drafter": 1.05, "135M drafter": 1.56}
    v = cpu.where_values(CEILING_ENTRY, SIZES)
    assert v["small_llama_tau"] == 1.56 and v["floor_big"] == pytest.approx(1.5)  # 1 + the slope at 2 threads
    assert v["model16_big"] == model[-1]["break_even"] and v["model_err_big"] >= 0
    assert math.isnan(cpu.where_values(None, SIZES)["floor_big"])


def test_ceiling_figures_have_labelled_axes_and_a_not_measured_state():
    import matplotlib.pyplot as plt

    from activation_wave.plots import plot_ceiling, plot_where_it_pays
    from activation_wave.study.chapters import cpu_payoff as cpu

    fig = plot_ceiling(cpu.ceiling_frame(CEILING_ENTRY).to_dict("records"))
    assert len(fig.axes) == 3 and all(ax.get_xlabel() for ax in fig.axes) and fig.axes[0].get_ylabel()
    fig2 = plot_where_it_pays(cpu.where_points(CEILING_ENTRY), cpu.today_taus(SIZES))
    ax = fig2.axes[0]
    assert ax.get_xlabel() == "threads" and ax.get_ylabel()
    assert any("extrapolated" in t.get_text() for t in ax.get_legend().get_texts())
    for f in (plot_ceiling([]), plot_where_it_pays([])):
        assert "not measured" in f.axes[0].texts[0].get_text()
    plt.close("all")


def test_a_depth_one_ceiling_is_given_as_measured_with_its_target_and_threads():
    """One run of a few prompts has no interval: the page gives the depth-1 ceiling as a number
    (0.97 here) and says only that below 1 no drafter of that depth can pay."""
    from activation_wave.study.chapters import cpu_payoff as cpu

    entry = {**CEILING_ENTRY, "targets": {"1.5B": {"model": "qwen2.5-coder-1.5b", "by_threads": {
        "1": _setting(42.0, 0.7, 0.1, 0.1, {1: 2.06, 2: 2.8, 3: 3.6, 4: 4.4}, 1)}}}}
    v = cpu.ceiling_values(entry)
    assert round(v["ceil1_big_1"], 2) == 0.97 and math.isnan(v["ceil1_big_2"])
