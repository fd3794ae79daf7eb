"""Chapter 7's drafters on the second architecture: the design, and numbers that follow from the drafters."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from activation_wave.study.chapters import cross_drafters as cd
from activation_wave.study.chapters.drafter_predictors import Comparison, Predictor
from activation_wave.core.config import DraftConfig, load_config
from activation_wave.core.results import load_result, save_result
from activation_wave.core.stats import spearman
from helpers import permutation_world, tiny_drafter_config

SETS = {"eagle3-default": [1, 2, 3], "combined": [2, 3, 4], "exhaustive": [1, 3, 4]}


def test_drafter_config_is_the_second_model_on_the_study_prompts_greedy_only():
    cfg = load_config("default")
    d = cd.drafter_config(cfg)
    assert d.model == cfg.cross.model == "gemma3-270m"
    assert d.data.sources == cfg.data.sources and d.data.max_prompts_per_source == 0
    assert d.data.max_new_tokens == 128 and d.data.batch_size == cfg.data.batch_size
    assert d.data.samples_per_prompt == 0 and d.draft.samples_per_prompt == 0
    assert d.draft.epochs == cfg.draft.epochs and d.spec == cfg.spec
    smoke = load_config("smoke")
    assert cd.drafter_config(smoke).data.max_prompts_per_source == 12 and load_config("paper").cross.drafter_sweep_stride == 4


def test_design_lists_the_preregistered_drafters():
    draft = DraftConfig(seed=5)
    jobs = cd.design(SETS, "combined", 18, draft, seeds=2, sweep_stride=1)
    assert [(j.set, j.config.seed) for j in jobs[:4]] == [("eagle3-default", 5), ("eagle3-default", 6),
                                                         ("combined", 5), ("combined", 6)]
    assert [j.layers for j in jobs[4:]] == [(i,) for i in range(1, 19)]
    assert {j.arm for j in jobs[4:]} == {"sweep"} and {j.config for j in jobs[4:]} == {draft}
    assert len(cd.design(SETS, "combined", 18, draft, seeds=1, sweep_stride=6)) == 2 + 3
    assert len(cd.design(SETS, "combined", 18, draft, seeds=1, sweep_stride=0)) == 2
    with pytest.raises(ValueError, match="cka-diverse"):
        cd.design(SETS, "cka-diverse", 18, draft, seeds=1, sweep_stride=1)


@pytest.fixture(scope="module")
def world(tiny_tokenizer, tmp_path_factory):
    """Tiny drafters of the design on the 4-block permutation target."""
    mp, target, cache = permutation_world(tiny_tokenizer, tmp_path_factory.mktemp("cross"), seed=3)
    cfg = tiny_drafter_config()
    jobs = cd.design(SETS, "combined", cache.n_layers, cfg.draft, seeds=2, sweep_stride=1)
    res = cd.analyse(cfg, target, cache, jobs, "combined", n_boot=300)
    yield cfg, target, cache, jobs, res
    mp.undo()


def test_analyse_numbers_follow_from_the_per_prompt_taus(world, tmp_path):
    cfg, target, cache, jobs, res = world
    assert res.n_drafters == len(jobs) == 2 * 2 + 4 and res.n_layers == 4 and len(res.prompt_ids) == 5
    assert [s.set for s in res.sets] == ["eagle3-default", "combined", "single-1", "single-2", "single-3", "single-4"]
    assert res.training_records == 15 and res.training_positions == 15 * 16

    # each set's tau: mean over prompts of the seed-averaged per-prompt tau, inside its interval
    for s in res.sets:
        y = np.array(s.per_prompt, float)
        assert s.tau == pytest.approx(np.nanmean(y)) and s.lo <= s.tau <= s.hi
        assert s.n_seeds == (2 if len(s.layers) == 3 else 1)

    # G1: the paired delta is the mean per-prompt difference, p and MDE attached
    c = res.comparison
    d = np.array(res.set_tau("combined").per_prompt, float) - np.array(res.set_tau("eagle3-default").per_prompt, float)
    assert c.set == "combined" and c.layers == (2, 3, 4) and c.n == np.isfinite(d).sum()
    assert c.delta == pytest.approx(np.nanmean(d)) and c.lo <= c.delta <= c.hi and 0 < c.p <= 1 and c.mde > 0

    # G2 / G3: rho over the single layers against their mean tau
    singles = res.singles()
    tau1 = [s.tau for s in singles]
    assert res.depth.rho == pytest.approx(spearman([1, 2, 3, 4], tau1)) and res.depth.n == 4
    st_entropy = [res.profile.entropy2[res.profile.ids.index(i)] for i in (1, 2, 3, 4)]
    assert res.entropy.rho == pytest.approx(spearman(st_entropy, tau1))
    assert res.entropy_vs_depth == pytest.approx(spearman(st_entropy, [1, 2, 3, 4]))

    # a cached rerun trains nothing and gives the same numbers; the result round-trips
    again = cd.analyse(cfg, target, cache, jobs, "combined", n_boot=300)
    assert again == dataclasses.replace(res, train_s=again.train_s) and again.train_s == res.train_s
    save_result(cd.NAME, res, cfg, root=tmp_path)
    assert load_result(cd.NAME, cfg, root=tmp_path, cls=cd.CrossDrafterResult) == res


def _comparison(delta, lo, hi, p, n=96):
    return Comparison("combined", (4, 12, 18), "rules", delta, lo, hi, p, p, p, n, 0.1, 0.03, 0.03)


def _res(world, **change):
    return dataclasses.replace(world[-1], **change)


@pytest.mark.parametrize("comparison, expected", [
    (_comparison(0.02, 0.01, 0.03, 0.001), True),
    (_comparison(-0.02, -0.03, -0.01, 0.001), False),
    (_comparison(0.01, -0.01, 0.03, 0.3), False),
    (_comparison(0.02, 0.01, 0.03, 0.001, n=5), None),
    (None, None)])
def test_g1_follows_its_rule(world, comparison, expected):
    g1 = cd.evaluate_hypotheses(_res(world, comparison=comparison))[0]
    assert g1.name == "G1" and g1.supported is expected
    covers = comparison is not None and comparison.lo <= 0 <= comparison.hi
    assert ("within noise" in g1.statistic) is covers


@pytest.mark.parametrize("lo, expected", [(0.2, True), (-0.1, False), (float("nan"), None)])
def test_g2_g3_follow_their_rule(world, lo, expected):
    p = Predictor("layer index", "single layers", 0.6, lo, 0.9, 18)
    g = cd.evaluate_hypotheses(_res(world, depth=p, entropy=p))
    assert [h.name for h in g] == ["G1", "G2", "G3"] and g[1].supported is expected and g[2].supported is expected
    assert ("within noise" in g[1].statistic) is (lo <= 0)
    assert cd.evaluate_hypotheses(_res(world, depth=None))[1].supported is None


def test_peak_relative_depth():
    assert cd.peak_relative_depth([1, 2, 3, 4], [1.1, 1.3, np.nan, 1.2], 4) == 0.5


# ---------------------------------------------------------------- the pages' values, planted results
def _triple(name, per_prompt, layers=(2, 9, 15)):
    y = np.array(per_prompt, float)
    return cd.SingleLayerTau(name, layers, 2, float(y.mean()), float(y.min()), float(y.max()), tuple(per_prompt))


@pytest.mark.parametrize("comparison, default_tau, word, glance", [
    (_comparison(0.02, 0.01, 0.03, 0.001), 1.2, "higher", "supported"),
    (_comparison(-0.02, -0.03, -0.01, 0.001), 1.2, "lower", "not supported"),
    (_comparison(0.01, -0.01, 0.03, 0.3), 1.2, "within noise", "within noise"),
    (_comparison(0.02, 0.01, 0.03, 0.001, n=5), 1.2, "not testable", "not testable"),
    # a default drafter that accepts nothing (tau 1 on every prompt): no verdict, whatever p says
    (_comparison(0.006, 0.004, 0.008, 0.0002), 1.0, "not testable", "not testable"),
    (None, 1.2, "not testable", "not testable")])
def test_page_values_word_g1_in_one_vocabulary(world, comparison, default_tau, word, glance):
    sets = (_triple("eagle3-default", [default_tau] * 12), _triple("combined", [1.25] * 12, (4, 12, 18)))
    v = cd.page_values(_res(world, comparison=comparison, sets=sets, n_responses=40, responses_at_limit=30), 2,
                       prefix="qd")
    from activation_wave.study.findings import word as record_word

    g1 = cd.evaluate_hypotheses(_res(world, comparison=comparison, sets=sets))[0] if comparison else None
    assert v["qd_delta_word"] == word and (record_word(g1) if g1 else "not testable") == glance
    assert not any(k.endswith(("_glance", "_g1_word")) for k in v)  # registered words come from the record only
    assert v["qd_default_live"] == (0 if default_tau == 1.0 else 12) and v["qd_at_limit_pct"] == 75.0
    assert v["qd_rule_set"] == "[4, 12, 18]" and v["qd_n_singles"] == 0 and np.isnan(v["qd_best_tau"])


@pytest.mark.parametrize("lo, glance", [(0.2, "supported"), (-0.1, "within noise"), (float("nan"), "not testable")])
def test_page_values_word_g2_g3(world, lo, glance):
    p = Predictor("layer index", "single layers", 0.6, lo, 0.9, 18)
    from activation_wave.study.findings import word

    v = cd.page_values(_res(world, depth=p, entropy=p), 2)
    _, g2, g3 = cd.evaluate_hypotheses(_res(world, depth=p, entropy=p))
    assert word(g2) == glance == word(g3) and v["xd_rho_depth_n"] == 18
    _, below, _ = cd.evaluate_hypotheses(_res(world, depth=Predictor("layer index", "single layers", -0.6, -0.9, -0.2,
                                                                        18)))
    assert word(below) == "not supported"
    assert v["xd_best_layer"] == max(world[-1].singles(), key=lambda s: s.tau).layers[0]


def test_page_values_without_drafters_render_every_name(world):
    full, empty = cd.page_values(world[-1], 2, prefix="qd"), cd.page_values(None, 1, prefix="qd")
    assert set(full) == set(empty)
    assert empty["qd_delta_word"] == "not testable" and empty["qd_eval_prompts"] == 0 and empty["qd_model"] == "none"


def test_load_or_run_reads_a_results_file_of_the_same_design_only(world, tmp_path, monkeypatch):
    cfg = load_config("default")
    singles = tuple(cd.SingleLayerTau(f"single-{i}", (i,), 1, 1.1, 1.0, 1.2, (1.1,)) for i in range(1, 19))
    res = _res(world, model=cfg.cross.model, n_layers=18, n_drafters=22,
               sets=(_triple("eagle3-default", [1.2] * 3), _triple("combined", [1.25] * 3, (4, 12, 18)), *singles))
    save_result(cd.NAME, res, cfg, root=tmp_path)
    ran = []
    monkeypatch.setattr(cd, "run", lambda *a, **k: ran.append(a) or res)
    sets = {"eagle3-default": [2, 9, 15], "combined": [4, 12, 18]}
    assert cd.load_or_run(cfg, sets, "combined", tmp_path) == res and not ran
    cd.load_or_run(cfg, {**sets, "combined": [4, 12, 17]}, "combined", tmp_path)  # another rule's set: trains
    cd.load_or_run(cfg, sets, "combined", tmp_path / "empty")  # no file: trains
    assert len(ran) == 2
