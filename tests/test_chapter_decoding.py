"""The analysis of chapters 6 and 9 on tiny data: interval policy, set summaries, pairs,
correlations, verdicts, the cost-model derivation and the data-scaling extrapolation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from activation_wave.study.chapters import eagle3_speedup as ch6
from activation_wave.study.chapters import performance as perf
from activation_wave.core.results import from_jsonable, to_jsonable
from activation_wave.measure.layer_stats import LayerStats
from activation_wave.select.selection import score_set


def test_design_lists_the_preregistered_drafters_in_training_order():
    from activation_wave.core.config import DraftConfig

    selected = {"eagle3-default": (2, 4, 5), "combined": [1, 3, 6], "last-k": [5, 6, 7], "evenly-spaced": [2, 4, 6],
                "random-0": [1, 2, 3], "random-1": [3, 4, 5], "random-2": [1, 5, 7]}
    draft = DraftConfig(seed=10, n_seeds=3, control_seeds=2, n_random=2, sweep_stride=3, sweep_fraction=0.5,
                        sweep_seed_every=2, norm_arm=True)
    jobs = ch6.design(selected, 7, draft)
    got = [(j.set, j.layers, j.arm, j.config.seed, j.config.records_fraction, j.config.fused_norm) for j in jobs]
    triples = [("eagle3-default", (2, 4, 5), 3), ("combined", (1, 3, 6), 3), ("last-k", (5, 6, 7), 2),
               ("random-0", (1, 2, 3), 2), ("random-1", (3, 4, 5), 2)]
    want = [(n, ids, "triples", 10 + i, 1.0, False) for n, ids, k in triples for i in range(k)]
    want += [("single-1", (1,), "sweep", 10, 0.5, False), ("single-4", (4,), "sweep", 10, 0.5, False),
             ("single-4", (4,), "sweep", 11, 0.5, False), ("single-7", (7,), "sweep", 10, 0.5, False)]
    want += [(f"{n}+norm", ids, "norm", 10, 1.0, True) for n, ids, _ in triples]
    assert got == want  # evenly-spaced and the third random triple are not trained
    plain = ch6.design({"eagle3-default": (2, 4, 5)}, 7, DraftConfig(n_seeds=1, sweep_stride=0))
    assert [(j.set, j.arm) for j in plain] == [("eagle3-default", "triples")]
    with pytest.raises(ValueError, match="eagle3-default"):
        ch6.design({"combined": [1, 2, 3]}, 7, draft)


def test_tau_interval_one_seed_is_its_record_interval_several_take_the_wider():
    assert ch6.tau_interval([1.5], [1.4], [1.6]) == (1.4, 1.6)
    # seeds nearly agree, records spread: the mean per-seed record interval wins
    lo, hi = ch6.tau_interval([1.50, 1.51], [1.30, 1.32], [1.70, 1.72])
    assert (lo, hi) == pytest.approx((1.31, 1.71))
    # seeds far apart, tight records: the bootstrap over seeds wins (and contains both means' mean)
    lo, hi = ch6.tau_interval([1.0, 2.0, 3.0], [0.99, 1.99, 2.99], [1.01, 2.01, 3.01])
    assert lo < 2.0 < hi and lo <= 1.5 and hi >= 2.5


def _runs():
    acc = lambda a: [a, a / 2]  # noqa: E731
    rows = []
    for name, ids, taus in (("eagle3-default", [1, 2, 3], [1.40, 1.42]), ("combined", [1, 3, 4], [1.55, 1.53]),
                            ("single-1", [1], [1.20]), ("single-4", [4], [1.30, 1.36]),
                            ("combined+norm", [1, 3, 4], [1.45])):
        arm = "norm" if name.endswith("+norm") else "sweep" if len(ids) == 1 else "triples"
        for s, tau in enumerate(taus):
            rows.append({"set": name, "layers": ids, "k": len(ids), "seed": s, "path": f"/d/{name}-{s}", "arm": arm,
                         "train_s": 10.0 + s, "tokens_per_s": 100.0, "acceptance_by_position": acc(tau - 1),
                         "final_loss_by_step": [1.0], "final_acc_by_step": [0.5], "tau": tau,
                         "tau_lo": tau - 0.05, "tau_hi": tau + 0.05, "eval_records": 4})
    return rows


@pytest.fixture(scope="module")
def stats():
    torch.manual_seed(0)
    return LayerStats.from_hidden(torch.randn(5, 64, 8))


def test_summarise_sets_orders_by_tau_and_scores_each_set(stats):
    summary = ch6.summarise_sets(_runs(), stats)
    assert [s.set for s in summary] == ["combined", "combined+norm", "eagle3-default", "single-4", "single-1"]
    comb = summary[0]
    assert comb.tau == pytest.approx(1.54) and comb.n_seeds == 2 and comb.layers == (1, 3, 4)
    assert comb.acc1 == pytest.approx(0.54) and comb.train_s == pytest.approx(10.5)
    assert comb.renyi2 == pytest.approx(score_set(stats, [1, 3, 4])["renyi2"])
    assert 0 <= comb.percentile <= 100 and comb.mean_cka is not None
    single = summary[-1]
    assert single.mean_cka is None and single.percentile is None
    assert single.renyi2 == pytest.approx(float(stats.entropy2[stats.pos([1])[0]]))
    assert (single.tau_lo, single.tau_hi) == pytest.approx((1.15, 1.25))


def test_verdict_and_the_result_round_trip(stats):
    summary = ch6.summarise_sets(_runs(), stats)
    best = ch6.SetTau("combined", (1, 3, 4), 1.54, 1.50, 1.58)
    default = ch6.SetTau("eagle3-default", (1, 2, 3), 1.41, 1.36, 1.46)
    v = ch6.verdict(best, default)
    assert v.gap == pytest.approx(0.13) and not v.overlap and v.text == "clearly above the default's"
    assert ch6.verdict(default, default).text == "the default itself"
    assert ch6.verdict(ch6.SetTau("x", (1,), 1.45, 1.40, 1.50), default).overlap
    recon = ch6.Reconciliation("eagle3-default", 1.41, 1.45, 1.43, 1.40, 0.04, -0.02, -0.03)
    profile = ch6.LayerProfile((0, 1), (1.0, 2.0), (1.0, 3.0), (None, 3.0), (None, 0.9))
    res = ch6.Eagle3SpeedupResult(
        runs=tuple(ch6._drafter_run(r) for r in _runs()), summary=tuple(summary),
        online={"eagle3-default": ch6.OnlineDrafter((1, 2, 3), 1.4, 1.3, 9.0, 8.0, 2, 2, 1.1, 1.0, 0.9,
                                                    (0.4, float("nan")), 1.41)},
        baselines=ch6.OnlineBaselines(8.0, 8.0, 10.0), prompts=("a", "b"), default=default, best=best,
        best_rule=best, verdict=v, reconciliation=(recon,), training_capture="/c", training_records=10,
        training_positions=100, profile=profile)
    back = from_jsonable(ch6.Eagle3SpeedupResult, to_jsonable(res))
    assert back.summary == res.summary and back.online["eagle3-default"].acceptance_t0 == (0.4, None)
    assert back.reconciliation == (recon,) and back.profile == profile
    assert back.first_seed_acceptance("combined") == pytest.approx((0.55, 0.275))
    assert [s.set for s in back.sets_of_size(1)] == ["single-1", "single-4"]
    assert [s.set for s in back.sets_of_size(3)] == ["combined", "eagle3-default"]
    assert [s.set for s in back.sets_of_size(3, "norm")] == ["combined+norm"]
    ((a, b),) = ch6._seed_pairs(back.runs, "sweep")
    assert (a.set, a.seed, b.seed) == ("single-4", 0, 1)


def test_performance_docstring_examples():
    import doctest

    assert doctest.testmod(perf).failed == 0


def test_speedup_verdict_rests_on_the_interval_over_rounds():
    five = [1.22, 1.31, 1.24, 1.27, 1.26]
    assert perf.speedup_verdict(1.26, five, 1.2) == ("above the study's target of 1.2x, as that interval lies above it "
                                                     "(every round reached it)")
    # two rounds, both above the target, are not evidence: the interval is wide
    assert perf.speedup_verdict(1.28, [1.255, 1.303], 1.2).startswith("within noise of the study's target")
    assert perf.speedup_verdict(1.1, [1.05, 1.08, 1.12, 1.1, 1.09], 1.2).startswith("below the study's target")
    assert "(2 of 5 rounds below it)" in perf.speedup_verdict(1.2, [1.15, 1.25, 1.19, 1.22, 1.21], 1.2)
    assert perf.speedup_verdict(1.3, [1.3], 1.2).endswith("from one round: no interval (the default profile runs at "
                                                          "least 5 rounds)")
    assert perf.speedup_verdict(1.1, [], 1.2).startswith("0.100 short of the study's target of 1.2x, from one run")
    assert perf.rounds_text(five) == ("5 interleaved rounds over the prompts (per round 1.220x to 1.310x, sd 0.034; "
                                      "mean 1.260x, 95% interval [1.218, 1.302])")


def _spec_entry():
    return {"layers": [2, 15, 27], "tau_t0": 1.8, "speedup_vs_plain_t0": 1.2, "speedup_vs_plain_t1": 1.1,
            "speedup_vs_prompt_lookup_t0": 1.05, "n_prompts": 4, "lossless_t0_chain": "8/8",
            "spec": {"depth": 3}, "tokens_per_s": {"plain_t0": 20.0, "spec_chain_t0": 24.0},
            "cost_model": {"components_ms": {"step_ms": 50.0, "verify_ms": {"4": 65.0}},
                           "predicted_chain_t0": {"speedup": 1.3, "ceiling": 2.9, "break_even_tau": 1.4,
                                                  "round_ms": 70.0}},
            "by_source": {"humaneval": {"speedup_vs_plain_t0": 1.3}},
            "by_round": [{"speedup_vs_plain_t0": 1.15}, {"speedup_vs_plain_t0": 1.25}],
            "drafter_training": {"tokens_per_s": 500.0, "train_wall_s": 600.0, "n_loss_tokens": 1000},
            "drafter_data": {"samples_per_prompt": 6, "train_records": 700, "sampled_train_records": 600},
            "drafter_config": {"epochs": 10, "dtype": "bf16"}}


def test_cost_model_derivation_from_the_benchmark_entry():
    v = perf.decoding_values(_spec_entry(), 1.2)
    assert v["spec_verify_rel"] == pytest.approx(1.3) and v["spec_marginal_ms"] == pytest.approx(5.0)
    assert v["obs_step_ms"] == pytest.approx(50.0) and v["obs_round_ms"] == pytest.approx(75.0)
    assert v["obs_round_rel"] == pytest.approx(1.5) and v["obs_tau_needed"] == pytest.approx(1.8)
    assert v["spec_train_prompts"] == 100 and v["spec_train_min"] == 10.0 and v["spec_speedup_chat"] != v["spec_speedup_chat"]
    assert v["spec_rounds"].startswith("2 interleaved rounds over the prompts (per round 1.150x to 1.250x")
    assert v["spec_verdict"].startswith("within noise of the study's target of 1.2x") and v["spec_epochs"] == 10
    assert v["spec_train_dtype"] == "bf16"  # the benchmark's drafter may train in another precision than chapter 6's
    missing = perf.decoding_values(None, 1.2)
    assert set(missing) == set(v) and math.isnan(missing["spec_tau"]) and missing["spec_lossless"] == "(not measured)"


def test_data_scaling_extrapolation():
    points = [{"samples_per_prompt": 0, "loss_tokens": 1000, "tau_offline": 1.30, "train_acc_last_epoch": 0.9},
              {"samples_per_prompt": 0, "loss_tokens": 2000, "tau_offline": 1.40, "train_acc_last_epoch": 0.95},
              {"samples_per_prompt": 2, "loss_tokens": 8000, "tau_offline": 1.50, "tau_predicted": 1.60,
               "train_acc_last_epoch": 0.8}]
    scaling = {"points": points, "tau_per_doubling": 0.1, "sample_temperature": 0.7}
    points.append({"fraction": 1.0, "samples_per_prompt": 4, "loss_tokens": 16000, "tau_offline": 1.6,
                   "tau_predicted": 1.7, "train_acc_last_epoch": 0.8})
    for p in points[1:]:
        p["fraction"] = 1.0
    spec = {"tau_t0": 1.5, "drafter_eval_offline": {"tau_offline": 1.5}}
    v = perf.data_scaling_values(scaling, spec, obs_tau_needed=1.7, speedup_target=1.2)
    # the figure is costs.data_multiple's, the function chapter 10's projection reads (one source)
    from activation_wave.study import training_costs as costs
    m = costs.data_multiple(costs.data_curve({"drafter_data_scaling": scaling}), 1.7)
    assert 1.0 < m["multiple"] < 4.0 and m["lo"] < m["multiple"] and (m["hi"] is None or m["hi"] > m["multiple"])
    assert f"about {m['multiple']:.2f} times today's data" in v["ds_need"]
    assert "(1.70 on the data curve's offline scale)" in v["ds_need"]
    assert v["ds_full_tokens"] == 2000 and v["ds_last_gain"] == pytest.approx(0.1) and v["ds_n"] == 2
    assert v["ds_sampled"].startswith("With 2 sampled responses per prompt (4.0x the positions) it reaches 1.500")
    reached = perf.data_scaling_values(scaling, {"tau_t0": 1.7}, obs_tau_needed=1.6, speedup_target=1.2)
    assert reached["ds_need"] == "the benchmark's drafter reaches the 1.2x target on its mixed prompts"
    assert perf.data_scaling_values(None, None, 1.6, 1.2)["ds_need"] == "(not measured)"


def test_study_drafters_low_precision_and_memory_values():
    d = perf.study_drafter_values([60.0, 120.0, None], workers=2)
    assert d == {"study_drafters_n": 3, "study_drafter_s": 90.0, "study_drafters_min": 1.5, "study_workers": 2}
    low = {"dtype": "bfloat16", "speedup_bfloat16": 1.3, "speedup_fp32": 1.1, "plain_bfloat16_vs_fp32": 1.5,
           "spec_bfloat16_vs_plain_fp32": 1.9, "n_prompts": 8, "tau": {"spec_chain_bfloat16": 1.6},
           "identical": {"spec_vs_plain_bfloat16": "3/8 prompts identical", "spec_vs_plain_fp32": "8/8 prompts identical",
                         "plain_bfloat16_vs_plain_fp32": "2/8 prompts identical"},
           "verify_4_over_step": {"bfloat16": 1.05, "fp32": 1.3}}
    lw = perf.low_precision_values(low)
    assert lw["low_identical"] == "3/8" and lw["low_identical_fp32"] == "8/8" and lw["low_v4"] == 1.05
    assert set(perf.low_precision_values(None)) == set(lw)
    m = perf.memory_values({"tokens": 100, "growth_mib_from_first_to_last": 2.0, "figure": {"10": 5.0, "100": 7.5}})
    assert m == {"mem_tokens": 100, "mem_growth": 2.0, "mem_last": 7.5, "mem_change": "2 MiB above"}


def test_ratio_rows_and_profile_timings(tmp_path):
    bench = {"capture_throughput": {"ratio": 0.9, "figure": 900, "baseline": 1000, "peak_rss_mib": 700},
             "speculative_decoding": {"speedup_vs_plain_t0": 1.2, "speedup_vs_plain_t1": None}}
    rows = perf.ratio_rows(bench, 1.2)
    assert [r["benchmark"] for r in rows] == ["capture (all hidden states) vs plain forward",
                                              "speculative decoding: speedup_vs_plain_t0"]
    assert rows[0]["target"] == 0.85 and rows[1]["target"] == 1.2
    run = lambda fp32, bf16: {"median": {"fp32": fp32, "bf16": bf16}, "ratio_fp32_over_bf16": fp32 / bf16}  # noqa: E731
    bench["training_precision"] = {"native": run(200.0, 500.0), "avx2_only": run(200.0, 20.0), "peak_rss_mib": 9}
    extra = perf.ratio_rows(bench, 1.2)[2:]
    assert [(r["benchmark"], r["ratio"], r["figure"], r["baseline"]) for r in extra] == [
        ("drafter training, fp32 vs bf16 autocast (this CPU)", 0.4, 200.0, 500.0),
        ("drafter training, fp32 vs bf16 autocast (AVX2 kernels only)", 10.0, 200.0, 20.0)]
    (tmp_path / "smoke").mkdir()
    (tmp_path / "smoke" / "timings.json").write_text('{"notebooks": {"06": 30.5, "00": 2.0}, '
                                                     '"longest": {"06": {"seconds": 300.0, "finished": "x"}}}')
    assert perf.profile_timings(tmp_path) == [
        {"profile": "smoke", "notebook": "00", "seconds": 2.0, "longest seconds": 2.0},
        {"profile": "smoke", "notebook": "06", "seconds": 30.5, "longest seconds": 300.0}]
    assert np.isnan(perf.capture_values(None)["capture_ratio"])
    rows = perf.profile_timings(tmp_path) + [
        {"profile": "default", "notebook": "06_eagle3_speedup", "seconds": 600.0, "longest seconds": 4740.0}]
    t = perf.timing_values(rows)
    assert t["total_smoke_min"] == 32.5 / 60 and t["longest_smoke_min"] == 302.0 / 60
    assert t["ch6_longest_min"] == 79.0 and t["ch6_last_min"] == 10.0  # what chapter 9 cites for chapter 6


def test_llamacpp_values_read_the_benchmark_entry():
    from activation_wave.study.chapters.performance import llamacpp_values

    missing = llamacpp_values(None)
    assert set(missing) == set(llamacpp_values({"by_threads": {}})) and "not measured" in missing["lc_drafter_note"]
    rc = {"round_in_plain_steps": 3.46, "draft_ms_per_round": 6.1, "verify_and_rest_ms_per_round": 97.8,
          "plain_step_ms": 30.0, "tau_needed": {"1x": 3.46, "1.5x": 5.19}}
    lc = {"drafter": "d", "by_threads": {"1": {"plain": {"tokens_per_s": 33.3},
                                             "eagle3": {"tokens_per_s": 9.8, "speedup": 0.295, "tau": 1.01,
                                                        "identical_to_plain": 10, "prompts": 10, "round_costs": rc}}}}
    v = llamacpp_values(lc)
    assert v["lc_speedup"] == 0.295 and v["lc_identical"] == "10/10" and v["lc_tau_15x"] == 5.19
    assert v["lc_round_steps"] == 3.46 and v["lc_plain_tps"] == 33.3 and v["lc_note"] == ""
    assert set(v) == set(missing)  # the prose finds every value either way
    assert v["lc_best_setting"] == "-" and v["lc_drafter_note"] == "a default-profile drafter reading layers ?, folder d"
    # an entry without the server's reported settings drafted with llama.cpp's default depth, 3: tau <= 4
    assert v["lc_depth"] == 3 and v["lc_tau_max"] == 4
    assert v["lc_reach"].endswith("break-even needs tau 3.46, within that limit; 1.5x needs tau 5.19, out of reach "
                                  "at this depth")
    # a sweep written before the settings check (per-request fields the server ignored) is not reported as one
    lc["investigation"] = {"rows": [{"outtype": "f16", "depth": 1, "p_min": 0.0, "speedup": 0.64, "tau": 1.92,
                                     "round_in_plain_steps": 3.04},
                                    {"outtype": "f16", "depth": 3, "p_min": 0.0, "speedup": 0.51, "tau": 1.92,
                                     "round_in_plain_steps": 3.8}]}
    old = llamacpp_values(lc)
    assert old["lc_best_setting"].startswith("no valid setting (the sweep in this results file predates the check")
    assert old["lc_sweep"] == perf.UNCHECKED_SWEEP and perf.sweep_rows(lc) == []
    for row, drafted in zip(lc["investigation"]["rows"], (1.0, 2.9)):
        row.update(drafted_per_round=drafted, settings_checked=True)
    lc["investigation"]["rows"].append({"outtype": "f16", "depth": 3, "p_min": 0.3, "speedup": 0.6, "tau": 1.8,
                                        "round_in_plain_steps": 3.2, "drafted_per_round": 1.7,
                                        "settings_checked": True})
    new = llamacpp_values(lc)
    assert new["lc_best_setting"] == ("0.64x (outtype f16, depth 1, p_min 0.0; tau 1.92, a round costs 3.04 plain "
                                      "steps); none of the 3 settings reached plain llama.cpp's speed")
    assert new["lc_sweep"] == ("from depth 1 to 3 (f16 drafter, p_min 0), tau went from 1.92 to 1.92 (+0%) while a "
                               "round's cost went from 3.04 to 3.80 plain steps (+25%), so the speedup went from 0.64x "
                               "to 0.51x; at depth 3, p_min 0.3 gave tau 1.80 with 1.70 drafted per round (0.60x)")
    lc["drafter_training"] = {"epochs": 1, "train_positions": 39361, "tau_offline": 1.311}
    assert llamacpp_values(lc)["lc_drafter_note"] == ("a default-profile drafter reading layers ?, trained 1 epoch on "
                                                      "39,361 response positions (offline tau 1.31 on the eval split), "
                                                      "folder d")
    # the decoding entry's adopted drafter is named as such only when llama.cpp ran that very drafter
    adopted = {"drafter": "d", "adopted_from": {"label": "eagle3-default@16x@B4", "seed": 0}}
    assert llamacpp_values(lc, adopted=adopted)["lc_drafter_note"].startswith(
        "the data-scale design's adopted drafter (eagle3-default@16x@B4, seed 0, the one the PyTorch path's adopted "
        "row decodes) reading layers ?, trained 1 epoch")
    assert llamacpp_values(lc, adopted=adopted | {"drafter": "e"})["lc_drafter_note"].startswith("a default-profile")
    assert [r["depth"] for r in perf.sweep_rows(lc)] == [1, 3, 3]


def test_hypotheses_follow_their_preregistered_rules():
    from types import SimpleNamespace as NS

    from activation_wave.study.chapters import drafter_predictors as dp

    cmp = lambda name, fam, d, lo, p: dp.Comparison(name, (1, 2, 3), fam, d, lo, lo + 0.1, p,  # noqa: E731
                                                    p if fam == "rules" else None, p, 96, 0.1, 0.03, 0.04)
    pred = NS(comparisons=[cmp("combined", "rules", 0.05, 0.01, 0.01), cmp("exhaustive", "rules", 0.02, -0.01, 0.2),
                           cmp("last-k", "other", 0.09, 0.05, 0.001)],
              predictors=[dp.Predictor("renyi2", "triples", -0.3, -0.7, 0.2, 11)],
              filtering=[dp.FilterPredictor(0.5, 100, -0.2, -0.6, 0.3, 11, 0.05, -0.1, 0.2, 0.5)],
              norm_predictors=[dp.Predictor("deepest", "triples, no norm", -0.8, -0.95, -0.5, 10),
                               dp.Predictor("deepest", "triples, per-layer RMSNorm", -0.6, -0.9, -0.1, 10)])
    h = {x.name: x for x in ch6.evaluate_hypotheses(pred)}
    assert h["H1"].supported and "combined" in h["H1"].statistic and "n = 96" in h["H1"].statistic
    assert h["H2"].supported is False and "n = 11 triples" in h["H2"].statistic
    assert h["H3"].supported is False and h["H4"].supported is True
    # intervals covering 0 (H2, H3) say so; those that exclude it (H1, H4) do not
    assert ["within noise" in h[n].statistic for n in ("H1", "H2", "H3", "H4")] == [False, True, True, False]
    assert ch6.within_noise(None, 0.2) == "" and ch6.within_noise(float("nan"), 0.2) == ""
    pred.comparisons = [dp.Comparison("combined", (1, 2, 3), "rules", 0.05, 0.01, 0.11, 0.01, 0.01, 0.01, 5, 0.1,
                                      0.1, 0.1)]
    assert ch6.evaluate_hypotheses(pred)[0].supported is None  # 5 prompts: too few to test
    pred.comparisons = [cmp("combined", "rules", 0.05, 0.01, 0.08)]  # adjusted p above 0.05: not supported
    pred.norm_predictors = []
    h = {x.name: x for x in ch6.evaluate_hypotheses(pred)}
    assert h["H1"].supported is False and h["H4"].supported is None


def test_layer_profile_reads_entropy_norms_and_neighbour_cka(stats):
    from types import SimpleNamespace as NS

    torch.manual_seed(1)
    hidden = torch.randn(5, 64, 8).numpy() * np.arange(1, 6)[:, None, None]
    st = LayerStats.from_hidden(hidden)
    prof = ch6.layer_profile(NS(stats=st, sample=NS(hidden=hidden), keep=np.ones(64, bool)))
    med = np.median(np.linalg.norm(hidden, axis=-1), axis=1)
    assert prof.ids == tuple(st.ids) and prof.median_norm == pytest.approx(tuple(med))
    assert prof.norm_ratio[0] is None and prof.norm_ratio[2] == pytest.approx(med[2] / med[1])
    assert prof.cka_prev[1] == pytest.approx(float(st.cka[1, 0]))


def test_cold_cost_text_never_calls_more_training_part_of_a_shorter_run():
    assert perf.cold_cost_text(40.0, 79.0).startswith("That is part of chapter 6's longest (cold-cache) execution, 79")
    longer = perf.cold_cost_text(114.0, 79.0)
    assert "more than chapter 6's longest recorded execution, 79 minutes" in longer and "part of" not in longer
    assert "no recorded time" in perf.cold_cost_text(float("nan"), 79.0)
