"""The exploratory predictors analysis: loads drafters only, and its numbers follow from their logs."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from activation_wave.study.chapters import drafter_predictors as dp
from activation_wave.draft.experiment import DrafterJob
from activation_wave.draft.experiment import run_jobs
from activation_wave.core.results import load_result, save_result
from activation_wave.measure.layer_stats import LayerStats
from activation_wave.core.stats import holm, seed_mean, spearman
from helpers import permutation_world, tiny_drafter_config

SETS = {"eagle3-default": [1, 2, 4], "entropy-greedy": [2, 3, 4], "combined": [1, 3, 4], "random-0": [1, 2, 3],
        "single-1": [1], "single-2": [2], "single-4": [4]}
PROBE = {"n_train": 150, "n_eval": 60, "rank": 4, "vocab": 32, "steps": 2}


@pytest.fixture(scope="module")
def world(tiny_tokenizer, tmp_path_factory):
    """A capture of the permutation target and two tiny drafters per set."""
    root = tmp_path_factory.mktemp("pred")
    mp, target, cache = permutation_world(tiny_tokenizer, root, seed=7)
    cfg = tiny_drafter_config(n_seeds=2)
    rows = run_jobs(target, cache, [(j.set, j.layers, j.config) for j in _jobs(SETS, cfg)], 1, progress=False)
    yield target, cache, cfg, rows, root
    mp.undo()


def _jobs(sets, cfg, seeds=(0, 1), arm="triples", **change):
    return [DrafterJob(name, tuple(ids), arm, dataclasses.replace(cfg.draft, seed=s, **change))
            for name, ids in sets.items() for s in seeds]


def _snapshot(path):
    return {str(p): p.stat().st_mtime_ns for p in sorted(path.rglob("*"))}


def test_find_drafters_lists_missing_ones_and_trains_nothing(world):
    _, cache, cfg, _, _ = world
    before = _snapshot(cache.path)
    found, missing = dp.find_drafters(cache, _jobs({**SETS, "untrained": [1, 2]}, cfg))
    assert len(found) == 2 * len(SETS) and missing == ["untrained/seed0", "untrained/seed1"]
    assert _snapshot(cache.path) == before


def test_run_numbers_follow_from_the_drafters_logs(world, tmp_path):
    target, cache, cfg, rows, _ = world
    before = _snapshot(cache.path)
    res = dp.run(cfg, cache, target, _jobs(SETS, cfg), n_boot=300, probe_kw=PROBE)
    assert _snapshot(cache.path) == before  # loads only: nothing written into the capture or its drafters
    assert res.missing_drafters == () and res.depth == 2 and res.draft_threshold == 0.0
    assert len(res.prompt_ids) == 5

    # per-prompt tau: the drafters' own eval logs (same depth, no threshold), seeds averaged
    by_set = {s.set: s for s in res.sets}
    for name in SETS:
        logs = [r for r in rows if r["set"] == name]
        assert by_set[name].tau_pooled == pytest.approx(np.mean([r["tau"] for r in logs]))
        assert by_set[name].seeds == (0, 1)
    per_seed = []
    for r in [r for r in rows if r["set"] == "combined"]:
        log = json.loads((Path(r["path"]) / "train_log.json").read_text())["eval"]["per_record"]
        per_seed.append([p["tau"] if p["rounds"] else np.nan for p in log])
    np.testing.assert_allclose(np.array(by_set["combined"].per_prompt, float), seed_mean(np.array(per_seed)))
    # each seed's per-prompt tau is kept too (the seed spread on the outcome), in the order of `seeds`
    np.testing.assert_allclose(np.array(by_set["combined"].per_seed, float), np.array(per_seed))
    assert all(len(s.per_seed) == len(s.seeds) for s in res.sets)

    # paired comparisons: every set but the reference, Holm within the rules and over all
    cmp = {c.set: c for c in res.comparisons}
    assert set(cmp) == set(SETS) - {"eagle3-default"}
    ref = np.array(by_set["eagle3-default"].per_prompt, float)
    for name, c in cmp.items():
        d = np.array(by_set[name].per_prompt, float) - ref
        assert c.delta == pytest.approx(np.nanmean(d)) and c.n == np.isfinite(d).sum()
        assert c.lo <= c.delta <= c.hi and c.mde < c.mde_holm
    assert {n for n, c in cmp.items() if c.family == "rules"} == {"entropy-greedy", "combined"}
    rules = ["entropy-greedy", "combined"]
    assert [cmp[n].p_holm_rules for n in rules] == pytest.approx(holm([cmp[n].p for n in rules]))
    assert cmp["random-0"].p_holm_rules is None
    others = list(cmp)
    assert [cmp[n].p_holm_all for n in others] == pytest.approx(holm([cmp[n].p for n in others]))

    # predictors: rho of each score against the mean tau of the units
    triples = [s for s in SETS if len(SETS[s]) == 3]
    tau3 = [by_set[s].tau for s in triples]
    pred = {(p.name, p.units): p for p in res.predictors}
    assert pred[("deepest", "triples")].rho == pytest.approx(spearman([max(SETS[s]) for s in triples], tau3))
    assert pred[("probe", "triples")].rho == pytest.approx(spearman([res.scores[s]["probe"] for s in triples], tau3))
    assert pred[("renyi2", "single layers")].n == 3 and ("mean_cka", "single layers") not in pred
    assert pred[("renyi2", "triples")].n == 4

    # filtering: equal token budget, differences against q = 0
    filt = {f.quantile: f for f in res.filtering}
    assert sorted(filt) == [0.0, 0.25, 0.5, 0.75] and {f.n_tokens for f in filt.values()} == {32}
    assert filt[0.0].delta_vs_unfiltered is None
    for q in (0.25, 0.5, 0.75):
        assert filt[q].delta_vs_unfiltered == pytest.approx(filt[q].rho - filt[0.0].rho)
    assert res.probe.n_triples == math.comb(4, 3) and len(res.best_probe_triples) == 4

    # a result object that round-trips through the results file
    save_result(dp.NAME, res, cfg, root=tmp_path)
    back = load_result(dp.NAME, cfg, root=tmp_path, cls=dp.DrafterPredictors)
    assert back.comparisons == res.comparisons and back.probe == res.probe
    assert back.sets == res.sets and dp.seed_spread(back, 3).n_sets == len(SETS) - 3


def test_filtered_s2_keeps_the_highest_entropy_tokens_of_a_larger_sample(world):
    _, cache, cfg, _, _ = world
    sets = {"a": [1, 2, 4], "b": [2, 3]}
    budget, s2 = dp.filtered_s2(cache, cfg, sets, quantiles=(0.0, 0.5), budget=40)
    assert budget == 40
    plain = cache.sample_tokens(40, seed=cfg.metrics.seed, layers=[1, 2, 3, 4])
    stats = LayerStats.from_hidden(plain.hidden, [1, 2, 3, 4], cache.n_layers)
    assert s2[0.0]["a"] == pytest.approx(stats.concat_entropy([1, 2, 4], 2.0))
    big = cache.sample_tokens(80, seed=cfg.metrics.seed, layers=[1, 2, 3, 4])
    top = np.sort(np.argsort(-big.next_entropy, kind="stable")[:40])
    stats = LayerStats.from_hidden(big.hidden[:, top], [1, 2, 3, 4], cache.n_layers)
    assert s2[0.5]["b"] == pytest.approx(stats.concat_entropy([2, 3], 2.0))
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        dp.filtered_s2(cache, cfg, sets, quantiles=(1.0,))


def test_run_without_reference_drafters_says_so(world):
    target, cache, cfg, _, _ = world
    with pytest.raises(FileNotFoundError, match="never trains"):
        dp.run(cfg, cache, target, _jobs({"x": [1, 3]}, cfg), n_boot=10, probe_kw=PROBE)
    with pytest.raises(ValueError, match="reference set"):
        dp.run(cfg, cache, target, _jobs({"combined": [1, 3, 4]}, cfg), n_boot=10, probe_kw=PROBE)


def test_prose_values_read_the_holm_adjusted_rules_in_one_vocabulary():
    from types import SimpleNamespace

    def comp(name, p, delta):
        return dp.Comparison(set=name, layers=(1, 2, 3), family="rules", delta=delta, lo=delta - 0.02, hi=delta + 0.02,
                             p=p, p_holm_rules=p, p_holm_all=p, n=96, sd=0.1, mde=0.03, mde_holm=0.04)

    res = SimpleNamespace(reference="eagle3-default", mde_rules_pooled=0.04,
                          comparisons=(comp("exhaustive", 0.30, -0.01), comp("combined", 0.12, 0.01)))
    v = dp.prose_values(res)
    assert (v["paired_n_higher"], v["paired_n_lower"], v["best_rule"], v["best_rule_word"]) == (0, 0, "combined",
                                                                                                 "within noise")
    res.comparisons = (comp("exhaustive", 0.01, -0.05), comp("combined", 0.40, 0.0))
    v = dp.prose_values(res)
    assert (v["paired_n_lower"], v["best_rule"], v["best_rule_word"]) == (1, "combined", "within noise")
    res.comparisons = (comp("exhaustive", 0.01, 0.05), comp("combined", 0.40, 0.0))
    assert dp.prose_values(res)["best_rule_word"] == "higher" and dp.prose_values(res)["paired_n_higher"] == 1
    res.comparisons = tuple(dataclasses.replace(c, n=2) for c in res.comparisons)
    v = dp.prose_values(res)  # a handful of prompts: nothing is tested
    assert v["best_rule_word"] == "not testable" and v["paired_n_higher"] == v["paired_n_lower"] == 0


def test_a_drafter_that_accepts_nothing_makes_a_comparison_not_testable():
    """The study's rule: a verdict rests on a working instrument. A reference or candidate
    drafter with tau 1 on every prompt measures nothing, so H1 (chapter 6) and G1/C2 (the other
    architectures) are not testable against it, whatever the paired p says."""
    from types import SimpleNamespace

    from activation_wave.study.chapters import cross_drafters as cd, eagle3_speedup as e6

    assert dp.dead_instrument([1.0] * 32) and not dp.dead_instrument([1.0] * 31 + [1.2])
    comp = dp.Comparison(set="combined", layers=(2, 25, 27), family="rules", delta=0.006, lo=0.004, hi=0.008, p=0.0002,
                         p_holm_rules=0.0002, p_holm_all=0.0002, n=32, sd=0.005, mde=0.003, mde_holm=0.003)
    alive = [1.0 + 0.01 * (i % 3) for i in range(32)]
    for ref, cand, expect in (([1.0] * 32, alive, None), (alive, [1.0] * 32, None), (alive, alive, True)):
        sets = [dp.SetTaus("eagle3-default", (2, 14, 25), (0,), 1.0, 1.0, tuple(ref)),
                dp.SetTaus("combined", (2, 25, 27), (0,), 1.0, 1.0, tuple(cand))]
        pred = SimpleNamespace(comparisons=[comp], sets=sets, reference="eagle3-default", predictors=[], filtering=[],
                               norm_predictors=[])
        assert e6.evaluate_hypotheses(pred)[0].supported is expect
        xd = SimpleNamespace(comparison=comp, sets=[cd.SingleLayerTau(s.set, s.layers, 1, 1.0, 1.0, 1.0, s.per_prompt)
                                                     for s in sets], depth=None, entropy=None)
        g1 = cd.evaluate_hypotheses(xd)[0]
        assert g1.supported is expect and (expect or "accepts no draft" in g1.note)


def test_norm_arm_pairs_each_triple_with_its_normed_twin():
    rng = np.random.default_rng(0)
    base = rng.uniform(1.2, 1.6, size=40)
    taus, layers = {}, {}
    for i, ids in enumerate([(1, 2, 3), (1, 2, 9), (2, 5, 12), (4, 8, 20)]):
        name = f"t{i}"
        taus[name] = np.stack([base - 0.05 * max(ids) / 10, base - 0.05 * max(ids) / 10 + 0.01])  # 2 seeds
        taus[name + "+norm"] = (base + 0.02 + 0.001 * max(ids))[None, :]
        layers[name] = layers[name + "+norm"] = ids
    effects, rhos = dp.norm_arm(taus, layers, n_boot=200)
    e = {x.set: x for x in effects}
    assert set(e) == {"t0", "t1", "t2", "t3"} and e["t0"].n == 40
    assert e["t3"].delta == pytest.approx(0.02 + 0.02 + 0.05 * 20 / 10 - 0.005)  # norm minus the seed mean
    assert e["t3"].tau_norm == pytest.approx(float(np.mean(base + 0.04)))
    plain, normed = rhos
    assert plain.units == "triples, no norm" and plain.rho == pytest.approx(-1.0) and plain.n == 4
    assert normed.units == "triples, per-layer RMSNorm" and normed.rho == pytest.approx(1.0)
    assert dp.norm_arm({"t0": taus["t0"]}, layers, n_boot=10) == ([], [])
