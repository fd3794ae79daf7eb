"""The recipe benchmark (issue 25): its arm table, statistics, combined-arm rule, a resumable
run on a tiny target, the results file, and its figures."""

import dataclasses
import io
import json

import numpy as np
import pytest

from activation_wave.benchmarks import recipe
from activation_wave.core.config import (RECIPE_ARMS, BenchConfig, CaptureConfig, ConfigError, DraftConfig,
                                         StudyConfig, load_config)
from activation_wave.core.stats import holm, paired_bootstrap
from activation_wave.models.capture import capture
from activation_wave.models.prompts import SAMPLE_MARK


# ----------------------------------------------------------------------------- the arm table


def test_arm_table_covers_the_configs_arms_in_order():
    assert tuple(recipe.ARMS) + (recipe.COMBINED,) == RECIPE_ARMS
    assert "vocab-4k" not in BenchConfig().recipe_arms  # the default profile's base vocabulary
    assert BenchConfig().recipe_arms[-1] == recipe.COMBINED


@pytest.mark.parametrize("profile", ["smoke", "default"])
def test_every_arm_builds_a_valid_config(profile):
    cfg = load_config(profile)
    base = recipe.base_recipe(cfg)
    assert base.samples_per_prompt == 0 and base.draft.eval_depth == cfg.bench.depth
    assert base.draft.epochs == (cfg.bench.recipe_epochs or cfg.bench.draft_epochs)
    vocab = 49152
    for name, overrides in recipe.ARMS.items():
        r = recipe.apply(name, recipe.resolve(overrides, base, vocab), base)  # DraftConfig validates itself
        assert isinstance(r.draft, DraftConfig)
        changed = {f.name for f in dataclasses.fields(DraftConfig)
                   if getattr(r.draft, f.name) != getattr(base.draft, f.name)}
        assert changed <= set(overrides), name  # one factor at a time
    lr = recipe.apply("lr-high", recipe.resolve(recipe.ARMS["lr-high"], base, vocab), base).draft.lr
    assert lr == pytest.approx(3 * base.draft.lr)
    assert recipe.resolve(recipe.ARMS["vocab-full"], base, vocab) == {"draft_vocab": vocab}
    assert recipe.apply("samples-1", recipe.ARMS["samples-1"], base).samples_per_prompt == 1


def test_an_arm_equal_to_the_base_is_skipped_and_said():
    cfg = load_config("default", {"bench.recipe_arms": "vocab-4k,vocab-1k"})
    recipes, skipped = recipe.plan(cfg.bench.recipe_arms, recipe.base_recipe(cfg), 49152)
    assert [r.name for r in recipes] == ["vocab-1k"]
    assert skipped[0]["name"] == "vocab-4k" and "same as the base" in skipped[0]["why"]


def test_bad_arms_and_overrides_are_rejected():
    with pytest.raises(ConfigError, match="bench.recipe_arms.*head-target"):
        load_config("smoke", {"bench.recipe_arms": "head-target,bogus"})
    with pytest.raises(ConfigError, match="repeated"):
        load_config("smoke", {"bench.recipe_arms": "hard,hard"})
    with pytest.raises(ConfigError, match="recipe_base"):
        load_config("smoke", {"bench.recipe_base": "full"})
    base = recipe.base_recipe(load_config("smoke"))
    with pytest.raises(ConfigError, match="unknown field"):
        recipe.apply("x", {"learning_rate": 1.0}, base)
    with pytest.raises(ConfigError, match="draft.head_init"):
        recipe.apply("x", {"head_init": "bogus"}, base)


# ----------------------------------------------------------------------------- statistics


def test_paired_deltas_and_holm_on_synthetic_taus():
    rng = np.random.default_rng(0)
    base = 1.5 + 0.2 * rng.standard_normal((2, 40))
    arms = {"up": base + 0.1 + 0.01 * rng.standard_normal((2, 40)), "same": base.copy(),
            "down": base - 0.05}
    arms["same"][1] = base[0]  # seed 2 differs; the seed mean is what is compared
    rows = recipe.compare(base, arms, n_boot=2000)
    by = {r["name"]: r for r in rows}
    assert by["up"]["delta"] == pytest.approx(float((arms["up"].mean(0) - base.mean(0)).mean()))
    assert by["up"]["delta_lo"] > 0 and by["down"]["delta_hi"] < 0
    assert by["up"]["tau"] == pytest.approx(float(arms["up"].mean()))
    assert by["up"]["lo"] < by["up"]["tau"] < by["up"]["hi"]
    ref = paired_bootstrap(arms["same"], base, n_boot=2000)
    assert (by["same"]["delta"], by["same"]["delta_lo"], by["same"]["p"]) == (ref.mean, ref.lo, ref.p)
    assert [r["p_holm"] for r in rows] == list(holm([r["p"] for r in rows]))
    assert all(r["n_seeds"] == 2 and r["n_prompts"] == 40 and len(r["per_prompt_tau"]) == 40 for r in rows)


def test_combined_arm_takes_the_best_of_exclusive_winners():
    # "helps" is R1's verdict: delta > 0 at Holm p < 0.05 (an unadjusted interval above 0 is not enough)
    rows = [{"name": "head-target", "overrides": {"head_init": "target"}, "delta": 0.10, "p_holm": 0.01},
            {"name": "head-frozen", "overrides": {"head_init": "target_frozen"}, "delta": 0.15, "p_holm": 0.001},
            {"name": "vocab-1k", "overrides": {"draft_vocab": 1024}, "delta": 0.05, "p_holm": 0.03},
            {"name": "vocab-16k", "overrides": {"draft_vocab": 16384}, "delta": 0.04, "p_holm": 0.04},
            {"name": "hard", "overrides": {"soft_targets": False}, "delta": 0.03, "delta_lo": 0.001, "p_holm": 0.2},
            {"name": "lr-constant", "overrides": {"lr_schedule": "constant"}, "delta": 0.2, "p_holm": 0.3}]
    overrides, names = recipe.combine(rows)
    assert names == ["head-frozen", "vocab-1k"]
    assert overrides == {"head_init": "target_frozen", "draft_vocab": 1024}
    assert recipe.combine(rows[-1:]) == ({}, [])


def test_stage_two_recipes_and_the_r3_reading():
    cfg = _tiny_config(("head-target", "samples-1", "combined"))
    today, comb = recipe.confirm_recipes(cfg, {"head_init": "target", "samples_per_prompt": 1})
    assert today.samples_per_prompt == comb.samples_per_prompt == cfg.bench.samples_per_prompt
    assert today.draft.eval_threshold == 0.0 and today.draft.epochs == cfg.bench.draft_epochs
    assert comb.draft == dataclasses.replace(today.draft, head_init="target") and "samples_per_prompt" not in comb.overrides
    curve = [{"cpu_s": 60.0, "tau_offline": 1.5}, {"cpu_s": 180.0, "tau_offline": 1.8}]
    assert recipe.cpu_minutes_to(curve, 1.74) == pytest.approx(2.6)
    assert recipe.cpu_minutes_to(curve, 1.4) == 1.0 and recipe.cpu_minutes_to(curve, 1.9) is None
    fit = recipe.curve_fit([{"cpu_s": 60.0 * 2 ** i, "tau_offline": 1.2 + 0.1 * i} for i in range(4)])
    assert fit["a"] == pytest.approx(1.2) and fit["b"] == pytest.approx(0.1)


def test_cpu_seconds_and_learning_curve():
    logs = [{"threads": 2, "train_wall_s": 30.0, "eval": {"tau_offline": 1.6},
             "epochs": [{"epoch": 0, "wall_s": 10.0, "eval_tau_offline": 1.2},
                        {"epoch": 1, "wall_s": 10.0}, {"epoch": 2, "wall_s": 10.0}]},
            {"threads": 2, "train_wall_s": 36.0, "eval": {"tau_offline": 1.8},
             "epochs": [{"epoch": 0, "wall_s": 12.0, "eval_tau_offline": 1.4},
                        {"epoch": 1, "wall_s": 12.0}, {"epoch": 2, "wall_s": 12.0}]}]
    assert recipe.train_cpu_s(logs[0]) == 60.0
    assert recipe.learning_curve(logs) == [{"epoch": 1, "cpu_s": 22.0, "tau_offline": 1.3},
                                           {"epoch": 3, "cpu_s": 66.0, "tau_offline": 1.7}]


# ----------------------------------------------------------------------------- a run on a tiny target


def _tiny_config(arms):
    return StudyConfig(
        profile="smoke", model="perm-llama",
        draft=DraftConfig(draft_vocab=64, lr=1e-2, threads=1, workers=1),
        bench=BenchConfig(draft_epochs=2, draft_ttt_steps=2, draft_batch_tokens=256, depth=2, draft_threshold=0.0,
                          threads=1, recipe_arms=arms, recipe_seeds=2, samples_per_prompt=1))


def _world8(tokenizer, out_dir, n=20, max_new=16):
    """test_training's world on an 8-block permutation target (EAGLE-3 default [2, 4, 5])."""
    from helpers import greedy_world, permutation_target

    target = permutation_target(tokenizer, n_layers=8)
    return (target, *greedy_world(target, out_dir, n=n, max_new=max_new, eval_every=4))


@pytest.fixture(scope="module")
def tiny_caches(tiny_tokenizer, tmp_path_factory):
    """The permutation target, its capture (greedy) and one with an added copy of every
    train response (a stand-in for one sampled response per train prompt)."""
    root = tmp_path_factory.mktemp("recipe")
    mp = pytest.MonkeyPatch()
    mp.setenv("WAVE_CACHE", str(root / "cache"))
    target, responses, cache = _world8(tiny_tokenizer, root / "cap0")
    extra = [dataclasses.replace(r, id=f"{r.id}{SAMPLE_MARK}1") for r in responses if r.split == "train"]
    more = capture(target, responses + extra, CaptureConfig(**cache.manifest["params"]), out_dir=root / "cap1",
                   progress=False)
    yield target, responses, {0: cache, 1: more}
    mp.undo()


def test_run_is_resumable_and_writes_the_results_file(tiny_caches, tmp_path, monkeypatch):
    from activation_wave.draft import training
    from activation_wave.study import steps

    target, responses, caches = tiny_caches
    monkeypatch.setenv("WAVE_RESULTS", str(tmp_path / "results"))
    cfg = _tiny_config(("head-target", "lr-constant", "samples-1", "combined"))
    calls = []

    def fake_capture(c, progress=True):
        calls.append(c.data.samples_per_prompt)
        return steps.Captured(cfg=c, target=target, responses=responses, cache=caches[c.data.samples_per_prompt],
                              responses_path=tmp_path / "r.jsonl")

    monkeypatch.setattr(steps, "run_capture", fake_capture)
    # the combined arm runs whatever the tiny screen finds: two winners that set different fields
    monkeypatch.setattr(recipe, "combine", lambda rows: ({"head_init": "target", "lr_schedule": "constant"},
                                                         ["head-target", "lr-constant"]))
    summary = recipe.run(cfg, progress=False)
    assert sorted(set(calls)) == [0, 1]
    path = tmp_path / "results" / "smoke" / "perm-llama" / "recipe.json"
    doc = json.loads(path.read_text())
    assert {"name", "config", "written", "git_commit", "base", "arms", "outcome", "pre_registration",
            "prompt_ids", "combined"} <= set(doc)
    assert doc["name"] == "recipe" and doc["pre_registration"]["page"].startswith("book/chapters/10_drafter_recipe")
    assert len(doc["pre_registration"]["commit"]) == 40
    assert [a["name"] for a in doc["arms"]] == ["head-target", "lr-constant", "samples-1", "combined"]
    n_eval = sum(r.split == "eval" for r in responses)
    for a in doc["arms"]:
        assert {"name", "overrides", "n_seeds", "tau", "lo", "hi", "delta", "delta_lo", "delta_hi", "p", "p_holm",
                "cpu_s", "cpu_s_data", "curve", "per_prompt_tau"} <= set(a)
        assert a["n_seeds"] == 2 and len(a["per_prompt_tau"]) == len(doc["prompt_ids"]) == n_eval
        assert a["cpu_s"] > 0 and [p["epoch"] for p in a["curve"]] == [1, 2]
        assert a["delta"] == pytest.approx(np.nanmean(np.array(a["per_prompt_tau"], float))
                                           - np.nanmean(np.array(doc["base"]["per_prompt_tau"], float)))
    by = {a["name"]: a for a in doc["arms"]}
    assert by["samples-1"]["cpu_s_data"] > 0 and by["head-target"]["cpu_s_data"] == 0
    assert by["combined"]["p_holm"] is None and by["combined"]["post_hoc"] is True
    assert by["combined"]["overrides"] == {"head_init": "target", "lr_schedule": "constant"}
    assert doc["base"]["config"]["eval_every"] == 1 and doc["base"]["config"]["epochs"] == 2
    assert {"name", "tau", "lo", "hi", "cpu_s", "config", "curve"} <= set(doc["base"])
    assert summary["base"]["tau"] == doc["base"]["tau"] and len(summary["arms"]) == 4
    # the final curve point is the drafter's eval at the online settings: the pooled outcome
    assert doc["base"]["curve"][-1]["tau_offline"] > 0
    # stage 2: the combined overrides against today's recipe, both on the full data (1 sample here)
    conf = doc["confirm"]
    assert conf["run"] and conf["from"] == ["head-target", "lr-constant"] and conf["n_seeds"] == 2
    today, comb = conf["arms"]["today"], conf["arms"]["combined"]
    assert today["samples_per_prompt"] == comb["samples_per_prompt"] == 1 and today["overrides"] == {}
    assert comb["overrides"] == {"head_init": "target", "lr_schedule": "constant"}
    assert len(today["drafters"]) == len(comb["drafters"]) == 2
    assert not set(today["drafters"]) & set(by["combined"]["drafters"] + doc["base"]["drafters"])
    assert conf["r2"]["delta"] == pytest.approx(np.nanmean(np.array(comb["per_prompt_tau"], float))
                                                - np.nanmean(np.array(today["per_prompt_tau"], float)))
    assert conf["r2"]["verdict"] in ("supported", "not supported") and conf["r2"]["n_prompts"] == n_eval
    assert [p["epoch"] for p in today["curve"]] == [1, 2] and conf["r3"]["mark"] == recipe.R3_TAU

    def no_training(*a, **k):
        raise AssertionError("a finished drafter was trained again")

    monkeypatch.setattr(training, "train_drafter", no_training)
    again = json.loads(json.dumps(recipe.run_recipe(cfg, target, lambda s: caches[s], progress=False)))
    for a, b in zip(again["arms"], doc["arms"]):
        assert (a["name"], a["delta"], a["per_prompt_tau"]) == (b["name"], b["delta"], b["per_prompt_tau"])


def test_an_interrupted_run_trains_only_the_unfinished_drafters(tiny_caches, monkeypatch):
    from pathlib import Path

    from activation_wave.draft import training

    target, _, caches = tiny_caches
    cfg = _tiny_config(("hard",))
    first = recipe.run_recipe(cfg, target, lambda s: caches[s], progress=False)
    victim = Path(first["arms"][0]["drafters"][1])
    (victim / "train_log.json").unlink()  # as if killed before the log was written
    trained = []
    real = training.train_drafter

    def counting(target, cache, layers, c, out, **k):
        trained.append(c.seed)
        return real(target, cache, layers, c, out, **k)

    monkeypatch.setattr(training, "train_drafter", counting)
    again = recipe.run_recipe(cfg, target, lambda s: caches[s], progress=False)
    assert trained == [cfg.draft.seed + 1]
    assert again["arms"][0]["per_prompt_tau"] == first["arms"][0]["per_prompt_tau"]  # deterministic retraining


def test_a_drafter_trained_again_for_scoring_reports_its_new_cost(tiny_caches, tmp_path):
    """Weights lost with a machine, no score in the ledger: scoring trains the drafter again,
    and when the ledger then describes other weights, the cost is that training's."""
    import shutil
    from pathlib import Path

    from activation_wave.draft import ledger

    target, _, caches = tiny_caches
    cfg = dataclasses.replace(_tiny_config(("hard",)),
                              draft=DraftConfig(draft_vocab=64, lr=1e-2, threads=1, workers=1,
                                                ledger=str(tmp_path / "ledger")))
    first = recipe.run_recipe(cfg, target, lambda s: caches[s], progress=False)
    victim = Path(first["arms"][0]["drafters"][0])
    entry_path = ledger.ledger_file(cfg.draft.ledger, victim)
    entry = json.loads(entry_path.read_text())
    # as if trained on another CPU (other weights, slower) and never scored there
    entry.update(scores={}, weights_digest="0" * 64)
    entry["train_log"].update(train_wall_s=1e6, epochs=[{**e, "wall_s": 1e6} for e in entry["train_log"]["epochs"]])
    entry_path.write_text(json.dumps(entry))
    shutil.rmtree(victim)
    with pytest.warns(UserWarning, match="other weights than the ledger's"):
        again = recipe.run_recipe(cfg, target, lambda s: caches[s], progress=False)
    assert (victim / "train_log.json").exists()  # trained again to be scored
    assert again["arms"][0]["cpu_s"] < 1e5 and again["arms"][0]["curve"][-1]["cpu_s"] < 1e5  # not the 1e6 s log
    assert again["arms"][0]["per_prompt_tau"] == first["arms"][0]["per_prompt_tau"]


# ----------------------------------------------------------------------------- figures


def _synthetic_doc():
    arms = [{"name": n, "delta": d, "delta_lo": d - 0.05, "delta_hi": d + 0.05, "p_holm": p,
             "curve": [{"epoch": e, "cpu_s": 60.0 * e, "tau_offline": 1.2 + 0.1 * e + d} for e in (1, 2, 3)]}
            for n, d, p in (("head-target", 0.12, 0.01), ("hard", -0.08, 0.02), ("ttt-5", 0.01, 0.9))]
    arms.append({**arms[0], "name": "combined", "delta": 0.2, "delta_lo": 0.1, "delta_hi": 0.3, "p_holm": None,
                 "post_hoc": True})
    return {"base": {"name": "screen", "tau": 1.5, "curve": [{"epoch": e, "cpu_s": 60.0 * e,
                                                            "tau_offline": 1.2 + 0.1 * e} for e in (1, 2, 3)]},
            "arms": arms, "best": "combined"}


def test_forest_plot_sorts_arms_and_draws_zero():
    import matplotlib

    matplotlib.use("Agg")
    from activation_wave.plots import plot_recipe_forest

    fig = plot_recipe_forest(_synthetic_doc())
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["combined (post hoc)", "head-target", "ttt-5", "hard"]
    assert any(list(line.get_xdata()) == [0.0, 0.0] for line in ax.get_lines())
    assert "arm" in ax.get_xlabel() and "95%" in ax.get_xlabel()
    fig.savefig(io.BytesIO(), format="png")


def test_learning_curves_of_base_and_best():
    import matplotlib

    matplotlib.use("Agg")
    from activation_wave.plots import plot_recipe_curves

    fig = plot_recipe_curves(_synthetic_doc(), break_even={"PyTorch loop": 1.4})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["base", "combined", "break-even: PyTorch loop"]
    assert list(ax.get_lines()[0].get_xdata()) == [1.0, 2.0, 3.0]  # CPU-minutes
    assert "CPU-minutes" in ax.get_xlabel()
    fig.savefig(io.BytesIO(), format="png")
    with pytest.raises(KeyError, match="not in the results"):
        plot_recipe_curves(_synthetic_doc(), ["nope"])


def test_default_screen_is_shrunk_by_the_whole_registered_order():
    from activation_wave.core.config import DEFAULT_RECIPE_ARMS, RECIPE_ARMS, RECIPE_SHRINK_ORDER

    screen = [a for a in DEFAULT_RECIPE_ARMS if a != "combined"]
    assert DEFAULT_RECIPE_ARMS[-1] == "combined" and "vocab-4k" not in screen
    assert not set(screen) & set(RECIPE_SHRINK_ORDER)  # the 2026-12-03 amendment drops all nine
    assert len(screen) == len(RECIPE_ARMS) - 2 - len(RECIPE_SHRINK_ORDER) == 11
    assert screen == [a for a in RECIPE_ARMS if a in screen]  # run order = the registered order


def test_stage_two_does_not_run_when_only_the_data_arm_helps(tiny_caches, monkeypatch):
    """Stage 2's data is today's, so a combination of the data arm alone is today's recipe:
    it is not trained against itself, and the results say why."""
    target, _, caches = tiny_caches
    cfg = _tiny_config(("samples-1", "combined"))
    monkeypatch.setattr(recipe, "combine", lambda rows: ({"samples_per_prompt": 1}, ["samples-1"]))

    def no_stage_two(*a, **k):
        raise AssertionError("stage 2 ran on a data-only combination")

    monkeypatch.setattr(recipe, "run_confirm", no_stage_two)
    doc = recipe.run_recipe(cfg, target, lambda s: caches[s], progress=False)
    assert not doc["confirm"]["run"] and doc["confirm"]["why"].startswith("only the data arm helps under R1 (samples-1)")
    assert not doc["combined"]["run"]
