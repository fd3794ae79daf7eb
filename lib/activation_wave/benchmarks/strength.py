"""The drafter-strength page's drafters (``notebooks/06b_drafter_strength.py``, pre-registered
there): chapter 6's layer sets retrained with the recipe benchmark's screen recipe
(:mod:`activation_wave.benchmarks.recipe`), scored on chapter 6's outcome and analysed by
:mod:`activation_wave.study.chapters.drafter_strength`.

It lives beside the recipe benchmark because it reuses that benchmark's recipes (so the
screen's base drafters on the default triple are found in the drafter cache and the
ledger); the page calls :func:`run` and saves its document as ``06_strength``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from activation_wave.benchmarks import recipe
from activation_wave.core.config import ConfigError, DraftConfig, StudyConfig
from activation_wave.study.chapters.drafter_strength import (BOTTOM, CORPUS, MIDDLE, NORM, PRE_REGISTRATION, REFERENCE,
                                                             TOP, analyse)

__all__ = ["budget_recipes", "design", "run", "training_cpus", "AVX2_TOKENS_PER_S"]

#: Fp32 training speed (training tokens/s, one thread) below which a top-budget drafter trained
#: on the AVX2-only CPU: 120-180 there against 330-510 on the AVX-512 one (train logs of the
#: page's 21 drafters; the ledger recorded no CPU when they trained).
AVX2_TOKENS_PER_S = 250.0


# ----------------------------------------------------------------------------- the design


def budget_recipes(cfg: StudyConfig) -> dict[str, DraftConfig]:
    """The trained budgets' recipes: ``top`` (the recipe screen's base) and, with
    ``strength.middle``, ``middle`` (its epochs-5 arm); the same configs as the screen's, so
    its drafters on the default triple are found in the cache and the ledger."""
    base = recipe.base_recipe(cfg)
    out = {TOP: base.draft}
    if cfg.strength.middle:
        out[MIDDLE] = recipe.apply("epochs-5", recipe.resolve(recipe.ARMS["epochs-5"], base, 0), base).draft
    return out


def design(cfg: StudyConfig, layers: Mapping[str, Sequence[int]]) -> list[tuple[str, str, tuple[int, ...], DraftConfig]]:
    """Every drafter to train: ``(budget, set name, layers, config with seed)``. ``layers``
    maps chapter 6's set names to their layers; a configured set that chapter 6 lacks raises
    :class:`~activation_wave.core.config.ConfigError` naming the sets it has (the study exits 2)."""
    s = cfg.strength
    names = [REFERENCE, *s.sets]
    missing = [n for n in [*names, *s.norm_sets] if n not in layers]
    if missing:
        raise ConfigError(f"strength sets {missing} are not among chapter 6's sets {sorted(layers)}; "
                          "check strength.sets / strength.norm_sets (e.g. --set strength.sets=combined,last-k) "
                          "or re-run the drafters page (06_eagle3_speedup)", key="strength.sets", expected=f"names among {sorted(layers)}")
    recipes = budget_recipes(cfg)
    out = []
    for budget, draft in recipes.items():
        n = s.seeds if budget == TOP else s.middle_seeds
        sets = [(n_, tuple(layers[n_])) for n_ in names]
        if budget == TOP:
            sets += [(f"single-{i}", (i,)) for i in s.singles]
        for name, ids in sets:
            seeds = s.middle_seeds if name.startswith("single-") else n
            out += [(budget, name, ids, dataclasses.replace(draft, seed=draft.seed + k)) for k in range(seeds)]
    top = recipes[TOP]
    for name in s.norm_sets:
        out += [(TOP, name + NORM, tuple(layers[name]), dataclasses.replace(top, seed=top.seed + k, fused_norm=True))
                for k in range(s.seeds)]
    return out


# ----------------------------------------------------------------------------- the run


def training_cpus(speeds: Sequence[tuple[str, float | None]]) -> dict[str, dict[str, int]]:
    """Per set, how many of its drafters trained on each CPU, read from their training speed
    (:data:`AVX2_TOKENS_PER_S`): the confound of H6 (the norm arm trained on the slower CPU).

    >>> training_cpus([("a", 450.0), ("a", 130.0), ("a+norm", 120.0)])
    {'a': {'AVX-512': 1, 'AVX2': 1}, 'a+norm': {'AVX-512': 0, 'AVX2': 1}}
    """
    out: dict[str, dict[str, int]] = {}
    for name, tps in speeds:
        row = out.setdefault(name, {"AVX-512": 0, "AVX2": 0})
        if tps is not None:
            row["AVX2" if tps < AVX2_TOKENS_PER_S else "AVX-512"] += 1
    return out


def _bottom(pred: Mapping[str, Any], names: Sequence[str]) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
    """Chapter 6's per-seed per-prompt tau ``[seeds, prompts]`` of ``names`` (``06_predictors``;
    its seed-averaged ``per_prompt`` where a file predates ``per_seed``)."""
    by = {s["set"]: s for s in pred["sets"]}
    return tuple(pred["prompt_ids"]), {n: np.array([[np.nan if v is None else v for v in row]
                                                    for row in by[n].get("per_seed") or [by[n]["per_prompt"]]])
                                       for n in names if n in by}


def run(cfg: StudyConfig, *, root: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Train (or read from the ledger) the page's drafters, score them on the outcome and
    analyse (see the module docstring); the results document for ``06_strength``.

    The bottom budget is chapter 6's ``06_predictors``; its prompts must be the eval prompts
    the top budget is scored on (the same greedy capture), else ``ValueError``."""
    from activation_wave.benchmarks.speedup import _overrides, _study_drafters, bench_config
    from activation_wave.draft.experiment import ScoreOnTrain, run_jobs
    from activation_wave.study.chapters.drafter_predictors import FoundDrafter, per_prompt_tau
    from activation_wave.study.steps import load_results, run_capture

    t0 = time.time()
    s, b = cfg.strength, cfg.bench
    pred = load_results("06_predictors", cfg, root)
    layers = {x["set"]: tuple(x["layers"]) for x in pred["sets"]}
    jobs = design(cfg, layers)
    layers |= {f"single-{i}": (i,) for i in s.singles}
    cap = run_capture(bench_config(cfg.profile, recipe.base_recipe(cfg).samples_per_prompt, _overrides(cfg)),
                      progress=progress)
    score = ScoreOnTrain(str(cap.cache.path), b.depth, b.draft_threshold, b.threads)
    rows = run_jobs(cap.target, cap.cache, [(name, ids, c) for _, name, ids, c in jobs], cfg.draft.workers,
                    progress=progress, score=score)
    by_budget: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for (budget, *_), row in zip(jobs, rows):
        by_budget.setdefault(budget, []).append((row, row["set"]))
    taus: dict[str, dict[str, np.ndarray]] = {}
    cpu: dict[str, float] = {}
    ids: tuple[str, ...] = ()
    for budget, items in by_budget.items():
        found = [FoundDrafter(name, tuple(row["layers"]), int(row["seed"]), row["path"]) for row, name in items]
        ids, taus[budget], _ = per_prompt_tau(cap.target, cap.cache, found, depth=b.depth, threshold=b.draft_threshold,
                                              workers=cfg.draft.workers, threads=b.threads, ledger=cfg.draft.ledger,
                                              progress=progress)
        cpu[budget] = float(np.mean([recipe.train_cpu_s(row["train_log"]) for row, _ in items]))
    bottom_ids, taus[BOTTOM] = _bottom(pred, [REFERENCE, *s.sets])
    if tuple(bottom_ids) != tuple(ids):
        raise ValueError(f"chapter 6 scored {len(bottom_ids)} eval prompts and this page {len(ids)}, not the same "
                         "ones in the same order: re-run the drafters page (06_eagle3_speedup) on the same capture before this page")
    from activation_wave.study import training_costs as costs
    from activation_wave.core.results import load_benchmarks, load_optional
    from activation_wave.study.chapters import drafter_data_scale

    # the third budget: the data-scale design's H7 drafters, as its results file scored them (same eval prompts)
    corpus, corpus_cpu = drafter_data_scale.strength_budget(load_optional(drafter_data_scale.NAME, cfg, root), ids)
    if corpus:
        taus[CORPUS] = corpus
        if corpus_cpu is not None:
            cpu[CORPUS] = corpus_cpu

    # one cost per budget (benchmarks/costs): chapter 6's drafters and the screen base, the top budget's recipe
    budget_costs = costs.budget_cpu_min(load_benchmarks(), load_optional("recipe", cfg, root))
    cpu_s = {b_: budget_costs[k]["cpu_min"] * 60 for b_, k in ((BOTTOM, costs.CHAPTER6), (TOP, costs.SCREEN))
             if k in budget_costs}
    doc = analyse(taus, layers, s.norm_sets, cpu_s={**cpu, **cpu_s},
                  n_seeds={BOTTOM: {x["set"]: len(x["seeds"]) for x in pred["sets"]}})
    curves = {name: recipe.learning_curve([row["train_log"] for row, n in items if n == name])
              for name in dict.fromkeys(n for _, n in by_budget.get(TOP, []))}
    return {"model": cfg.model, "profile": cfg.profile, "pre_registration": PRE_REGISTRATION,
            "outcome": (f"per-prompt offline tau on the {len(ids)} eval prompts at chain depth {b.depth} and draft "
                        f"threshold {b.draft_threshold:g}, seeds averaged per prompt (chapter 6's)"),
            "recipes": {BOTTOM: "the drafters page's drafters (06_predictors)",
                        **({CORPUS: "the data-scale design's H7 point (data_scale.json; book/"
                                    "data_scale_preregistration.md)"} if corpus else {}),
                        **{k: dataclasses.asdict(v) for k, v in budget_recipes(cfg).items()}},
            "design": {"sets": [REFERENCE, *s.sets], "norm_sets": list(s.norm_sets), "seeds_top": s.seeds,
                       "middle": s.middle, "singles": list(s.singles),
                       "shrunk": [x for x, on in (("second architecture", False), ("single layers", bool(s.singles)),
                                                  ("middle budget", s.middle)) if not on],
                       "exploratory": [x for x, on in (("single layers", bool(s.singles)),
                                                       ("middle budget", s.middle)) if on]},
            "prompt_ids": list(ids), **doc, "curves": curves, "n_drafters": len(rows),
            "training": {"train_wall_s": [row["train_s"] for row in rows],
                         "tokens_per_s": [row["tokens_per_s"] for row in rows]},
            "budget_costs": budget_costs,
            "training_cpus": training_cpus([(row["set"], row["tokens_per_s"]) for row in rows]),
            "drafters": [row["path"] for row in rows], "seconds": round(time.time() - t0, 1)}
