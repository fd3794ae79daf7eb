"""``wave select`` and its backend ``select_for_cli`` on tiny random models; and the helpers
the chapters 1-5 share with it (stats from a cache, bootstrap of several rules, rankings)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import captured

from activation_wave import cli
from activation_wave.study.chapters.cka_compartments import compartment_rows
from activation_wave.core.config import load_config
from activation_wave.core.paths import REPO_ROOT
from activation_wave.measure.layer_stats import LayerStats, stats_from_cache
from activation_wave.core.layers import span_of, to_convention
from activation_wave.study.steps import Captured
from activation_wave.select.report import format_report, select_for_cli
from activation_wave.select.selection import lambda_choice, method_sets, rank_among_all, select_layers, sweep_lambda
from activation_wave.select.stability import bootstrap_methods, paired_difference


@pytest.fixture()
def cap4(tiny_target, tmp_path):
    """A capture of the 4-block tiny Llama: too shallow for the EAGLE-3 default."""
    return captured(tiny_target, tmp_path, "tiny-llama")


def _with(cap: Captured, **select) -> tuple[Captured, object]:
    cfg = load_config("smoke", {"metrics.token_budget": 96, "select.n_random": 2,
                                **{f"select.{k}": v for k, v in select.items()}}, model=cap.cfg.model)
    return cap, cfg


# ---------------------------------------------------------------- select_for_cli
def test_happy_path_on_an_8_block_model(cap8):
    out = select_for_cli(*_with(cap8))
    json.dumps(out)  # JSON-ready as it is
    assert out["model"] == "tiny-llama8" and out["n_layers"] == 8 and out["method"] == "combined" and out["k"] == 3
    assert len(out["selected"]) == 3 and all(1 <= i <= 8 for i in out["selected"])
    assert out["default"] == [2, 4, 5] and out["default_note"] is None
    for key in ("selected", "default"):
        assert {"renyi2", "renyi2_gain", "mean_cka", "max_cka", "rank", "percentile"} <= set(out["scores"][key])
    assert out["scores"]["selected"]["n_sets"] == 56  # C(8, 3) candidate triples
    # the snippets are the recommended set's (no drafters of this model: the default), each in
    # its engine's own convention, saying which
    ids = out["exports_ids"]
    assert ids == out["recommended"] == [2, 4, 5] and out["exports_for"] == "recommended"
    assert str(ids) in out["exports"]["vllm"]
    assert str(to_convention(ids, "specforge")) in out["exports"]["specforge"]
    assert "+1" in out["exports"]["sglang"] and "convention" in out["exports"]["specforge"]
    assert out["exports_detail"]["specforge"]["ids"] == [i - 1 for i in ids]
    # engines that cannot load a drafter on the exported set say so (SGLang never captures index N = 8)
    from activation_wave.engines.conventions import export_warnings

    assert out["engine_warnings"] == export_warnings(ids, 8) == []
    k2 = select_for_cli(*_with(cap8, k=2, method="last-k"))  # nothing recommended: the candidate, [7, 8]
    assert k2["exports_ids"] == k2["selected"] == [7, 8] and k2["exports_for"] == "candidate"
    assert any(w.startswith("sglang:") for w in k2["engine_warnings"])
    # the table ranks every rule, default included, and names the token filter
    assert "eagle3-default" in out["table"] and "combined" in out["table"] and "quantile" in out["table"]
    assert out["filtered"] is True and 0 < out["n_tokens"] < 96
    assert [r["rank"] for r in out["ranking"]] == list(range(1, len(out["ranking"]) + 1))


def test_options_reach_the_selection(cap8):
    out = select_for_cli(*_with(cap8, method="exhaustive", k=2, filtered=False))
    assert out["k"] == 2 and len(out["selected"]) == 2 and out["filtered"] is False and out["n_tokens"] == 96
    assert out["default"] is None and "3 layers" in out["default_note"]
    assert out["scores"]["selected"]["rank"] == 1  # exhaustive = the best pair by S2
    d = select_for_cli(*_with(cap8, method="eagle3-default"))
    assert d["selected"] == d["default"] == [2, 4, 5]


def test_shallow_model_default_undefined(cap4):
    with pytest.raises(ValueError, match=r"undefined for N=4"):
        select_for_cli(*_with(cap4, method="eagle3-default"))
    out = select_for_cli(*_with(cap4, method="entropy-greedy"))  # other rules still answer
    assert out["default"] is None and "undefined" in out["default_note"] and out["scores"]["default"] is None


@pytest.mark.parametrize("select, match", [
    ({"k": 4}, r"k=4 \(--k\) would take all 4 candidate layers \(1..4\), which leaves nothing to choose: "
               r"choose 1 <= k <= 3"),
    ({"k": 5}, r"k=5 \(--k\) but there are only 4 candidate layers \(1..4\): choose 1 <= k <= 3"),
    ({"k": 0}, r"select.k = 0 is out of range: it must be >= 1"),  # rejected by SelectConfig itself
    ({"method": "magic"}, r"unknown selection method 'magic'.*entropy-greedy"),
])
def test_errors_name_the_fix(cap4, select, match):
    with pytest.raises(ValueError, match=match):
        select_for_cli(*_with(cap4, **select))


# --------------------------------------------------------------------- the CLI
@pytest.fixture()
def patched(monkeypatch, tmp_path):
    """Make `wave select` use a given capture instead of loading a model by name, with the
    study's results read from an empty folder (tests that need some write them there)."""
    monkeypatch.setenv("WAVE_RESULTS", str(tmp_path / "results"))

    def use(cap: Captured) -> None:
        monkeypatch.setattr("activation_wave.study.steps.run_capture", lambda cfg, **kw: cap)
    return use


def _select(capsys, *argv: str) -> tuple[int, str, str]:
    rc = cli.main(["select", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


#: (argv, the one stderr line's text) on the 4-block tiny Llama: N = 4, candidates 1..4.
CLI_ERRORS = [
    (["--method", "magic"], "unknown selection method 'magic'"),
    (["--k", "0"], "--k 0: must be >= 1 (select.k)"),
    (["--k", "4"], "k=4 (--k) would take all 4 candidate layers (1..4), which leaves nothing to choose: "
                   "choose 1 <= k <= 3"),
    (["--k", "9"], "k=9 (--k) but there are only 4 candidate layers (1..4): choose 1 <= k <= 3"),
    (["--method", "eagle3-default"], "undefined for N=4"),
]


@pytest.mark.parametrize("json_flag", [["--json"], []], ids=["json", "text"])
@pytest.mark.parametrize("argv, match", CLI_ERRORS, ids=[" ".join(a) for a, _ in CLI_ERRORS])
def test_cli_errors_exit_2_with_one_line(cap4, patched, capsys, argv, match, json_flag):
    patched(cap4)
    rc, out, err = _select(capsys, *json_flag, "--model", "tiny-llama", *argv)
    assert rc == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("wave select: error:") and match in err


@pytest.mark.parametrize("argv, match", [
    (["--k", "3"], "k=3 (--k): scoring all 56 3-layer sets of 8 candidates would take about 112 s (2 pass(es), "
                   "limit 60 s): choose k <= 2 (or k >= 6)"),
    (["--k", "2", "--method", "exhaustive"], "choose k <= 1 (or k >= 7)"),
])
def test_cli_refuses_a_k_whose_scans_take_too_long_before_any_statistic(cap8, patched, capsys, monkeypatch, argv,
                                                                       match):
    patched(cap8)
    monkeypatch.setattr("activation_wave.select.selection._SECONDS_PER_SET", 1.0)  # as if each 8-layer set cost 1 s

    def never(*a, **kw):
        raise AssertionError("statistics computed before the scan's estimate refused k")
    monkeypatch.setattr("activation_wave.select.report.stats_from_cache", never)
    rc, out, err = _select(capsys, "--json", "--model", "tiny-llama8", *argv)
    assert rc == 2 and out == "" and err.count("\n") == 1 and match in err, err


def test_cli_json_stays_pure_when_the_cache_rebuilds(cap8, monkeypatch, capsys, tmp_path):
    from activation_wave.models.capture import capture
    from activation_wave.core.config import CaptureConfig

    ccfg = CaptureConfig(batch_size=8, records_per_shard=4, topk=4)  # as helpers.captured
    shard = cap8.cache.path / cap8.cache.manifest["shards"][0]["file"]
    good = shard.read_bytes()
    shard.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # corrupted: the next capture rebuilds it
    capture(cap8.target, cap8.responses, ccfg, out_dir=cap8.cache.path, progress=False)
    out, err = capsys.readouterr()
    assert out == "" and "rebuilding the affected shards" in err  # capture itself says it on stderr
    shard.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))

    def run_capture(cfg, **kw):
        print("a stray message")  # whatever a step prints on the way goes to stderr with --json
        cache = capture(cap8.target, cap8.responses, ccfg, out_dir=cap8.cache.path, progress=False)
        return Captured(cfg=cfg, target=cap8.target, responses=cap8.responses, cache=cache,
                        responses_path=cap8.responses_path)
    monkeypatch.setattr("activation_wave.study.steps.run_capture", run_capture)
    monkeypatch.setenv("WAVE_RESULTS", str(tmp_path / "results"))
    rc, out, err = _select(capsys, "--json", "--model", "tiny-llama8")
    assert rc == 0 and json.loads(out)["recommended"] == [2, 4, 5]
    assert "rebuilding the affected shards" in err and "a stray message" in err


def test_cli_json_and_text(cap8, patched, capsys):
    patched(cap8)
    rc, out, _ = _select(capsys, "--json", "--model", "tiny-llama8", "--k", "3", "--method", "entropy-greedy")
    out = json.loads(out)
    assert rc == 0 and out["method"] == "entropy-greedy" and out["default"] == [2, 4, 5]
    rc, text, _ = _select(capsys, "--model", "tiny-llama8")
    assert rc == 0 and "EAGLE-3 default: [2, 4, 5]" in text and "specforge" in text
    assert "recommended: [2, 4, 5]   (basis: studied models)" in text and "candidates to test" in text
    assert "engine configs for the recommended set [2, 4, 5]:" in text


# ------------------------------------------------------- the recommendation and its evidence
def _comparison(name, layers, delta, lo, hi, p, *, n=96, family="rules"):
    return {"set": name, "layers": layers, "family": family, "delta": delta, "lo": lo, "hi": hi, "p": p,
            "p_holm_rules": p if family == "rules" else None, "p_holm_all": p, "n": n}


def _write_ch6(root, model, comparisons, *, reference=(2, 4, 5), profile="default", predictors=()):
    folder = root / profile / model
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"name": "06_predictors", "config": {"model": model, "profile": profile}, "reference": "eagle3-default",
           "sets": [{"set": "eagle3-default", "layers": list(reference)}], "comparisons": comparisons,
           "predictors": list(predictors)}
    (folder / "06_predictors.json").write_text(json.dumps(doc))


S2_RHO = {"name": "renyi2", "units": "triples", "rho": -0.6, "lo": -0.869, "hi": 0.0566, "n": 10}


def test_recommendation_follows_the_models_own_results(cap8, tmp_path):
    root = tmp_path / "results"
    _write_ch6(root, "tiny-llama8", [_comparison("combined", [1, 3, 8], -0.011639, -0.017863, -0.005428, 0.0007999),
                                     _comparison("random-0", [3, 5, 7], 0.006186, 0.00024, 0.012162, 0.1284,
                                                 family="other")], predictors=[S2_RHO])
    out = select_for_cli(*_with(cap8), results_root=root)
    assert out["recommended"] == [2, 4, 5] and out["basis"] == "study" and out["exports_for"] == "recommended"
    assert "no tested set beat the EAGLE-3 default [2, 4, 5]" in out["reason"]
    assert "combined [1, 3, 8]: delta tau -0.012 [-0.018, -0.005], Holm p 0.0008, n = 96 prompts" in out["reason"]
    assert "random-0 [3, 5, 7]: delta tau +0.006 [+0.000, +0.012], Holm p 0.13, n = 96 prompts" in out["reason"]
    assert "rho(S2 of the set, tau) = -0.60 [-0.87, +0.06], n = 10 triples, within noise" in out["reason"]
    ev = {r["set"]: r for r in out["evidence"] if r["kind"].startswith("paired")}
    assert {k: ev["combined"][k] for k in ("delta", "lo", "hi", "p", "n")} == {
        "delta": -0.011639, "lo": -0.017863, "hi": -0.005428, "p": 0.0007999, "n": 96}
    assert ev["combined"]["within_noise"] is False and ev["random-0"]["p_adjust"] == "Holm over all sets"
    # the engine configs are the recommendation's, whatever the rule picked
    assert out["exports_ids"] == [2, 4, 5] and "[2, 4, 5]" in out["exports"]["vllm"]
    assert out["engine_warnings"] == [] and [c["name"] for c in out["candidates"]] == [r["name"] for r in out["ranking"]]
    # k != 3: the study tested triples only, so nothing is recommended; the configs are the candidate's, labelled
    k2 = select_for_cli(*_with(cap8, k=2), results_root=root)
    assert k2["recommended"] is None and k2["basis"] == "none" and "3-layer sets only" in k2["reason"]
    assert k2["exports_for"] == "candidate" and k2["exports_ids"] == k2["selected"]
    assert "the candidate to test (not a recommendation)" in format_report(k2)


def test_a_set_that_passed_its_test_is_recommended(cap8, tmp_path):
    root = tmp_path / "results"
    _write_ch6(root, "tiny-llama8", [_comparison("combined", [1, 3, 8], 0.02, 0.01, 0.03, 0.001),
                                     _comparison("exhaustive", [1, 6, 8], 0.03, -0.01, 0.07, 0.2)])
    out = select_for_cli(*_with(cap8), results_root=root)
    assert out["recommended"] == [1, 3, 8] == out["exports_ids"] and out["basis"] == "study"
    assert "this set beat the default: combined [1, 3, 8]: delta tau +0.020 [+0.010, +0.030]" in out["reason"]


@pytest.mark.parametrize("case", ["absent", "too few prompts", "another N"])
def test_without_own_results_the_rules_sets_are_candidates(cap8, tmp_path, case):
    root = tmp_path / "results"
    if case == "too few prompts":  # the smoke profile's pipeline check: 2 prompts test nothing
        _write_ch6(root, "tiny-llama8", [_comparison("combined", [1, 3, 8], 0.5, 0.1, 0.9, 0.001, n=2)])
    elif case == "another N":
        _write_ch6(root, "tiny-llama8", [_comparison("combined", [1, 3, 8], 0.5, 0.1, 0.9, 0.001)],
                   reference=(2, 15, 27))
    out = select_for_cli(*_with(cap8), results_root=root)
    assert out["recommended"] == [2, 4, 5] and out["basis"] == "studied models"
    assert "no drafters were trained for this model" in out["reason"] and "candidates to test" in out["reason"]
    if case != "another N":  # that file's model is a studied model of its own (another N): quoted, not used
        assert "results files were not found" in out["reason"] and out["evidence"] == []


def _committed(name):
    return json.loads((REPO_ROOT / "data" / "results" / "default" / "smollm2-135m" / f"{name}.json").read_text())


def _quoted(c, p, adjust):
    """How a comparison of a committed results file reads in wave select's reason."""
    return (f"{c['set']} {c['layers']}: delta tau {c['delta']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}], "
            f"{adjust} {p:.2g}, n = {c['n']} prompts")


def test_the_committed_results_are_the_evidence(cap8, monkeypatch):
    """The study's own files: SmolLM2 (chapter 6) and Gemma-3-270M (chapter 7), quoted with
    the numbers the files hold (a re-execution may move them)."""
    from activation_wave.measure.layer_stats import LayerStats
    from activation_wave.select.report import select_from_stats

    six, seven = _committed("06_predictors"), _committed("07_cross_drafters")
    smol = next(c for c in six["comparisons"] if c["set"] == "combined")
    gemma = seven["comparison"]
    s2 = next(p for p in six["predictors"] if p["name"] == "renyi2" and p["units"] == "triples")
    assert smol["delta"] < 0 and gemma["set"] == "combined"  # what the study found: no rule beat the default
    smol_text = _quoted(smol, smol["p_holm_rules"], "Holm p")
    gemma_text = _quoted(gemma, gemma["p"], "p") + (", within noise" if gemma["lo"] <= 0 <= gemma["hi"] else "")
    monkeypatch.delenv("WAVE_RESULTS", raising=False)
    out = select_for_cli(*_with(cap8))  # a model the study did not train drafters for
    assert out["basis"] == "studied models" and out["recommended"] == [2, 4, 5]
    from activation_wave.core.config import load_config
    from activation_wave.study import findings

    F = findings.load(load_config("default"))  # the registered tests' words: the record's, quoted
    assert f"smollm2-135m (drafters page; H1 (registered): {F['H1'].label}): best rule {smol_text}" in out["reason"]
    assert f"gemma3-270m (Gemma page; G1 (registered): {F['G1'].label}): best rule {gemma_text}" in out["reason"]
    assert "chapter" not in out["reason"]
    assert (f"rho(S2 of the set, tau) = {s2['rho']:+.2f} [{s2['lo']:+.2f}, {s2['hi']:+.2f}], n = {s2['n']} triples"
            in out["reason"])
    rng = np.random.default_rng(0)
    reasons = {}
    for model, N, default in (("smollm2-135m", 30, [2, 15, 27]), ("gemma3-270m", 18, [2, 9, 15])):
        A = rng.normal(size=(N + 1, 3 * N))  # synthetic statistics: the evidence does not depend on them
        M = A @ A.T
        d = np.sqrt(np.diag(M))
        stats = LayerStats.from_products(range(N + 1), M=M, t=d, cka=M / np.outer(d, d), n_blocks=N)
        res = select_from_stats(stats, load_config("smoke", {"select.n_random": 2}, model=model), N)
        assert res["recommended"] == default == res["exports_ids"] and res["basis"] == "study", res["reason"]
        assert f"no tested set beat the EAGLE-3 default {default}" in res["reason"]
        reasons[model] = res["reason"]
    assert smol_text in reasons["smollm2-135m"] and gemma_text in reasons["gemma3-270m"]


# ------------------------------------------------------- shared chapter helpers
def test_stats_from_cache_filters_by_quantile(cap8):
    cfg = cap8.cfg
    f = stats_from_cache(cap8.cache, cfg, filtered=True)
    u = stats_from_cache(cap8.cache, cfg, filtered=False, sample=f.sample)
    assert u.n_tokens == 96 and f.n_tokens == int((f.sample.next_entropy >= f.threshold).sum()) < 96
    assert f.hidden.shape == (9, f.n_tokens, 32) and len(f.groups) == f.n_tokens
    assert f.stats.ids == tuple(range(9)) and f.stats.n_blocks == 8


def test_method_sets_lambda_and_ranking(cap8):
    stats = stats_from_cache(cap8.cache, cap8.cfg, filtered=False).stats
    sets = method_sets(stats, 3, lam=0.5, n_random=2)
    assert sets["combined"] == select_layers(stats, 3, "combined", lam=0.5).ids
    assert sets["exhaustive"] == select_layers(stats, 3, "exhaustive").ids  # lam not applied to exhaustive
    assert {"eagle3-default", "random-0", "random-1"} <= set(sets)
    best = rank_among_all(stats, sets["exhaustive"])
    assert best["rank"] == 1 and best["n_sets"] == 56
    sweep = sweep_lambda(stats, 3, (0.0, 0.5, 4.0), search="exhaustive")
    ch = lambda_choice(sweep, 0.5)
    assert ch["ids"] == list(sweep.iloc[1]["ids"]) and ch["ids_at_zero"] == list(sets["exhaustive"])
    assert ch["entropy_cost"] >= -1e-12 and ch["lam_lo"] <= 0.5 <= ch["lam_hi"]


def test_bootstrap_methods_share_replicates():
    rng = np.random.default_rng(0)
    H = rng.normal(size=(7, 80, 6)).cumsum(0)
    groups = np.repeat(np.arange(10), 8)
    recs: list = []
    out = bootstrap_methods(H, groups, ["entropy-greedy", "exhaustive"], 2, n_boot=4, seed=0, n_blocks=6,
                            track={"fixed": [1, 6]}, scores_out=recs, max_tokens=60)
    assert set(out) == {"entropy-greedy", "exhaustive"} and len(recs) == 4
    assert out["exhaustive"].sets["count"].sum() == 4
    assert {"fixed", "chosen:exhaustive"} <= set(recs[0])
    # on every replicate the replicate's own exhaustive choice scores at least as high as a fixed set
    assert all(r["chosen:exhaustive"] >= r["fixed"] - 1e-12 for r in recs)
    pdiff = paired_difference(recs, "chosen:exhaustive", "fixed")
    assert pdiff["lo"] >= -1e-12 and pdiff["n_boot"] == 4


def test_compartment_helpers():
    C = np.kron(np.eye(2), np.ones((3, 3))) * 0.8 + 0.2
    stats = LayerStats.from_products(range(6), M=C * 100, t=np.full(6, 10.0), cka=C)
    comps = [(0, 2), (3, 5)]
    assert span_of([1, 4, 5], comps) == [1, 2, 2]
    with pytest.raises(ValueError, match="none of the spans"):
        span_of([7], comps)
    rows = compartment_rows(stats, comps, mark={"default": [2, 4]})
    assert [r.size for r in rows] == [3, 3] and [r.marks["default"] for r in rows] == [[2], [4]]
    assert np.allclose([r.mean_cka_inside for r in rows], 1.0)
    assert np.allclose([r.mean_cka_neighbours for r in rows], 0.2)


def test_outlier_helpers_on_a_planted_sink():
    from activation_wave.measure.entropy import profile_summary
    from activation_wave.measure.filtering import compare_conditions, outlier_conditions, response_offsets, token_norms

    rng = np.random.default_rng(0)
    H = rng.normal(size=(4, 60, 8))
    pos = np.tile(np.arange(6), 10)
    H[2:, pos == 0] *= 300.0  # a sink on every sequence's first token from layer 2 on
    conds = outlier_conditions(pos, token_norms(H), drop_first=1, massive_factor=20)
    assert list(conds)[1] == "without the first position" and conds[list(conds)[3]][1] == "median"
    res = compare_conditions(H, conds, alpha=1.0)
    ref = profile_summary(res[list(res)[0]]["entropy"])
    assert ref["drop_to"] == 2 and ref["drop"] > 1.0  # the planted cliff
    for lab in list(res)[1:]:
        assert profile_summary(res[lab]["entropy"])["drop"] < 0.5 * ref["drop"]
    assert res[list(res)[3]]["cka"] is None and res[list(res)[1]]["cka"].shape == (4, 4)
    recs = [{"prompt_len": 3}, {"prompt_len": 5}]
    assert response_offsets([2, 3, 4, 4], [0, 0, 1, 1], recs).tolist() == [0, 1, 0, 0]


def test_token_count_stability_shapes():
    from activation_wave.measure.filtering import token_count_stability

    H = np.random.default_rng(1).normal(size=(5, 64, 6)).cumsum(0)
    st = token_count_stability(H, [8, 16, 64, 1000], n_rep=2, seed=0)
    assert st["sizes"].tolist() == [8, 16, 64] and st["profile_corr"].shape == (3, 2)
    assert np.allclose(st["cka_mad"][-1], 0.0) and np.allclose(st["profile_corr"][-1], 1.0)
    with pytest.raises(ValueError, match="no size"):
        token_count_stability(H, [2, 500])


def test_chapter_plot_helpers_return_labelled_figures():
    import matplotlib.pyplot as plt

    from activation_wave import plots

    ids = list(range(4))
    C = np.eye(4)
    figs = [plots.plot_entropy_normalisations(ids, {"a": np.arange(4.0) + 1}, d=8, n=16),
            plots.plot_cka_grid(ids, {"x": C, "y": C}, compartments={"x": [(0, 1), (2, 3)]}),
            plots.plot_token_entropy_hist(np.linspace(0, 3, 50), 1.0),
            plots.plot_norm_ratio(ids, {"first": [1, 5, 100, 2]}),
            plots.plot_layer_frequency(ids[1:], {"m": {1: 0.5, 3: 1.0}}, selected={"m": [3]})]
    assert len(figs[0].axes) == 4 and len([a for a in figs[1].axes if a.get_title()]) == 2
    for fig in figs:
        assert all(ax.get_xlabel() for ax in fig.axes if ax.get_title())
        plt.close(fig)


def test_select_prints_the_compartments_next_to_each_rules_set(cap8, patched, capsys):
    """The CKA page's "Try it" line: `wave select --json` prints the compartments of the capture (as
    the CKA page segments them: every sampled position, unfiltered) next to each rule's set."""
    from activation_wave.study.chapters import cka_compartments

    cap, cfg = _with(cap8)
    out = select_for_cli(cap, cfg)
    assert out["filtered"] is True  # the ranking's statistics are filtered; the compartments are not
    chapter = cka_compartments.run(cfg, cap).compartments
    assert out["compartments"] == [list(c) for c in chapter]
    spans = out["compartments"]
    assert spans[0][0] == 0 and spans[-1][1] == 8 and all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:]))
    for c in out["candidates"]:
        assert c["compartments"] == span_of(c["ids"], spans)
    assert out["default_compartments"] == span_of([2, 4, 5], spans)
    assert out["selected_compartments"] == span_of(out["selected"], spans)
    patched(cap8)
    rc, text, _ = _select(capsys, "--model", "tiny-llama8")
    assert rc == 0 and "CKA compartments: " in text and "eagle3-default [" in text
