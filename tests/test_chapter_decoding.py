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
    assert m == {"mem_tokens": 100, "mem_growth": 2.0, "mem_last": 7.5}


def test_ratio_rows_and_profile_timings(tmp_path):
    bench = {"capture_throughput": {"ratio": 0.9, "figure": 900, "baseline": 1000, "peak_rss_mib": 700},
             "speculative_decoding": {"speedup_vs_plain_t0": 1.2, "speedup_vs_plain_t1": None},
             "metrics": {"entries": {"renyi2_all_triples": {"ratio": 1.2e6, "seconds": 0.1, "peak_rss_mb": 5,
                                                            "baseline": {"seconds": 1.2e5}}}}}
    rows = perf.ratio_rows(bench)
    # the decoding speeds are the cost page's; no internal key names a row
    assert [r["benchmark"] for r in rows] == ["capture (all hidden states) vs plain forward",
                                              "S2 of all triples: closed form vs eigen"]
    assert all("_" not in r["benchmark"] for r in rows)
    # one scale per axis: the closed form's ratio of a million stays in the table, out of the figure
    assert [r["ratio"] for r in perf.figure_rows(rows)] == [0.9]
    run = lambda fp32, bf16: {"median": {"fp32": fp32, "bf16": bf16}, "ratio_fp32_over_bf16": fp32 / bf16}  # noqa: E731
    bench["training_precision"] = {"native": run(200.0, 500.0), "avx2_only": run(200.0, 20.0), "peak_rss_mib": 9}
    extra = perf.ratio_rows(bench)[2:]
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
    assert t["ch6_longest_min"] == 79.0 and t["ch6_last_min"] == 10.0


def test_hypotheses_follow_their_preregistered_rules():
    from types import SimpleNamespace as NS

    from activation_wave.study.chapters import drafter_predictors as dp

    cmp = lambda name, fam, d, lo, p: dp.Comparison(name, (1, 2, 3), fam, d, lo, lo + 0.1, p,  # noqa: E731
                                                    p if fam == "rules" else None, p, 96, 0.1, 0.03, 0.04)
    pred = NS(reference="eagle3-default", sets=[],  # no per-prompt taus: the working-instrument check passes
              comparisons=[cmp("combined", "rules", 0.05, 0.01, 0.01), cmp("exhaustive", "rules", 0.02, -0.01, 0.2),
                           cmp("last-k", "other", 0.09, 0.05, 0.001)],
              predictors=[dp.Predictor("renyi2", "triples", -0.3, -0.7, 0.2, 11)],
              filtering=[dp.FilterPredictor(0.5, 100, -0.2, -0.6, 0.3, 11, 0.05, -0.1, 0.2, 0.5)],
              norm_predictors=[dp.Predictor("deepest", "triples, no norm", -0.8, -0.95, -0.5, 10),
                               dp.Predictor("deepest", "triples, per-layer RMSNorm", -0.6, -0.9, -0.1, 10)])
    h = {x.name: x for x in ch6.evaluate_hypotheses(pred)}
    assert h["H1"].supported and "combined" in h["H1"].statistic and "n = 96" in h["H1"].statistic
    assert h["H2"].supported is False and "n = 11 triples" in h["H2"].statistic
    assert h["H3"].supported is False and h["H4"].supported is True
    # the findings record's words: intervals covering 0 (H2, H3) read "within noise"
    from activation_wave.study import findings

    assert [findings.word(x) for x in h.values()] == ["supported", "within noise", "within noise", "supported"]
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




def _rows(speeds: dict[str, float], n: int = 4, rounds: int = 3) -> list[dict]:
    """Per-prompt rows of the decoding benchmark: ``method -> wall seconds`` of 10 tokens per prompt
    and round, prompt i's time scaled by (1 + i / 10) for every method (prompts differ, methods keep
    their ratio)."""
    return [{"id": f"p{i}", "round": r, **{m: {"tokens": 10, "wall_s": w * (1 + i / 10)} for m, w in speeds.items()}}
            for r in range(rounds) for i in range(n)]


@pytest.mark.parametrize(("wall", "word"), [(0.8, "faster than plain decoding"), (1.25, "slower than plain decoding")])
def test_pytorch_speeds_take_their_interval_over_prompts_and_a_speed_word(wall, word):
    rows = _rows({"plain_t0": 1.0, "spec_chain_t0": wall, "adopted_chain_t0": 1.0})
    d = perf.prompt_speedup(rows, "spec_chain_t0", n_boot=500)
    assert d["speedup"] == pytest.approx(1 / wall) and d["n"] == 4  # prompts, not prompt runs
    spec = {"per_prompt": rows, "tau_t0": 1.8, "spec": {"depth": 3}, "rounds": 3, "lossless_t0_chain": "12/12 x",
            "speedup_vs_plain_t0": 1.2, "tokens_per_s": {"plain_t0": 20.0, "spec_chain_t0": 24.0},
            "cost_model": {"components_ms": {"step_ms": 50.0, "verify_ms": {"4": 65.0}},
                           "predicted_chain_t0": {"break_even_tau": 1.4, "ceiling": 2.9, "round_ms": 70.0}},
            "adopted": {"tau_t0": 1.5}}
    v = perf.pytorch_values(spec)
    assert v["pt_word"] == word and v["pta_word"] == "within noise of plain decoding"  # a ratio of 1 everywhere
    assert v["pt_verify_rel"] == pytest.approx(1.3) and v["pt_lossless"] == "12/12"
    # break-even from the round the timed run measured (tau / speedup = 1.5 steps), not the cost model's 1.4
    assert v["pt_break_even"] == pytest.approx(1.5) and v["pt_step_ms"] == 50.0 and v["pt_round_ms"] == 75.0
    missing = perf.pytorch_values(None)
    assert set(missing) == set(v) and math.isnan(missing["pt_speedup"]) and missing["pt_word"] == "not measured"


def test_a_speed_interval_over_prompts_is_wider_than_one_over_rounds():
    """Rounds repeat the same prompts: prompts that differ widen the interval, rounds do not."""
    same = perf.prompt_speedup(_rows({"plain_t0": 1.0, "s": 0.9}, n=8), "s", n_boot=500)
    rows = [r | {"s": {"tokens": 10, "wall_s": r["plain_t0"]["wall_s"] * (0.7 if int(r["id"][1:]) % 2 else 1.2)}}
            for r in _rows({"plain_t0": 1.0}, n=8)]
    mixed = perf.prompt_speedup(rows, "s", n_boot=500)
    assert same["hi"] - same["lo"] < 1e-9 < mixed["hi"] - mixed["lo"]
    assert mixed["lo"] < 1.0 < mixed["hi"]


def test_data_scaling_values_read_the_greedy_shares_and_name_no_target():
    points = [{"samples_per_prompt": 0, "loss_tokens": 1000, "tau_offline": 1.30, "train_acc_last_epoch": 0.9},
              {"samples_per_prompt": 0, "loss_tokens": 2000, "tau_offline": 1.40, "train_acc_last_epoch": 0.95},
              {"samples_per_prompt": 2, "loss_tokens": 8000, "tau_offline": 1.50, "train_acc_last_epoch": 0.8}]
    v = perf.data_scaling_values({"points": points, "tau_per_doubling": 0.1, "sample_temperature": 0.7})
    assert v == {"ds_per_doubling": 0.1, "ds_full_tokens": 2000, "ds_full_tau": 1.40, "ds_train_acc": 0.95, "ds_n": 2,
                 "ds_temperature": 0.7}
    missing = perf.data_scaling_values(None)
    assert set(missing) == set(v) and math.isnan(missing["ds_full_tau"]) and missing["ds_n"] == 0
