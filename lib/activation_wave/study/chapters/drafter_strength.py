"""Drafter strength (the page after chapter 6, ``notebooks/06b_drafter_strength.py``): does
chapter 6's layer answer hold for stronger drafters?

Pre-registered on that page (``sec-strength-prereg``, committed before training):

* **bottom** budget: chapter 6's one-epoch drafters, read from ``06_predictors`` (their
  seed-averaged per-prompt tau);
* **top** budget: the recipe screen's base (:func:`~activation_wave.benchmarks.recipe.base_recipe`,
  on the greedy responses), ``strength.seeds`` seeds per set, trained here through the
  drafter ledger; the screen's own base drafters are the default's first seeds;
* **middle** (exploratory, ``strength.middle``): the screen's epochs-5 arm;
* the **norm arm** (``strength.norm_sets``) at the top budget, with a per-layer RMSNorm
  before ``fc`` (``DraftConfig.fused_norm``).

Every drafter is scored on the pre-registered outcome (chapter 6's: per-prompt offline tau
at ``bench.depth`` and ``bench.draft_threshold`` on the greedy capture's eval split).

* H5, per set: the interaction I = delta_top - delta_bottom (delta = set - default, seeds
  averaged per prompt), paired bootstrap over prompts, Holm across the sets (:func:`interaction`);
* H6, per norm triple: (triple + norm) - triple at the top budget, Holm across the triples.

:func:`run` trains (or reads from the ledger), scores and returns the results document that
the page saves as ``06_strength``; :func:`analyse` is its pure part.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from activation_wave.core.config import DraftConfig, StudyConfig
from activation_wave.core.stats import holm, mean_ci, paired_bootstrap, seed_mean

NAME = "06_strength"
REFERENCE = "eagle3-default"
NORM = "+norm"
BOTTOM, MIDDLE, TOP = "bottom", "middle", "top"
PRE_REGISTRATION = "book/chapters/06b_drafter_strength (committed before training)"

__all__ = ["NAME", "REFERENCE", "budget_recipes", "design", "comparisons", "interaction", "norm_effects",
           "analyse", "run", "verdict", "tau_rows", "interaction_rows", "norm_rows", "answer_text",
           "not_run_figure", "epoch_deltas"]


# ----------------------------------------------------------------------------- the design


def budget_recipes(cfg: StudyConfig) -> dict[str, DraftConfig]:
    """The trained budgets' recipes: ``top`` (the recipe screen's base) and, with
    ``strength.middle``, ``middle`` (its epochs-5 arm); the same configs as the screen's, so
    its drafters on the default triple are found in the cache and the ledger."""
    from activation_wave.benchmarks import recipe

    base = recipe.base_recipe(cfg)
    out = {TOP: base.draft}
    if cfg.strength.middle:
        out[MIDDLE] = recipe.apply("epochs-5", recipe.resolve(recipe.ARMS["epochs-5"], base, 0), base).draft
    return out


def design(cfg: StudyConfig, layers: Mapping[str, Sequence[int]]) -> list[tuple[str, str, tuple[int, ...], DraftConfig]]:
    """Every drafter to train: ``(budget, set name, layers, config with seed)``. ``layers``
    maps chapter 6's set names to their layers; a configured set that chapter 6 lacks raises
    ``KeyError`` naming the sets it has."""
    s = cfg.strength
    names = [REFERENCE, *s.sets]
    missing = [n for n in [*names, *s.norm_sets] if n not in layers]
    if missing:
        raise KeyError(f"strength sets {missing} are not among chapter 6's sets {sorted(layers)}; "
                       "check strength.sets / strength.norm_sets or re-run chapter 6")
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


# ----------------------------------------------------------------------------- statistics


def _row(name: str, d: Any, p_holm: float | None = None) -> dict[str, Any]:
    return {"set": name, "delta": d.mean, "lo": d.lo, "hi": d.hi, "p": d.p, "p_holm": p_holm, "n": d.n, "sd": d.sd}


def comparisons(taus: Mapping[str, np.ndarray], reference: str = REFERENCE, *, n_boot: int = 10_000,
                seed: int = 0) -> list[dict[str, Any]]:
    """Each set against ``reference`` at one budget: paired bootstrap of the per-prompt
    delta (seeds averaged), Holm across the sets given.

    >>> ref = np.array([1.0, 1.2, 1.4, 1.1, 1.3])
    >>> [r["set"] for r in comparisons({"eagle3-default": ref, "a": ref + 0.1, "b": ref - 0.05}, n_boot=200)]
    ['a', 'b']
    """
    names = [n for n in taus if n != reference]
    ds = [paired_bootstrap(taus[n], taus[reference], n_boot=n_boot, seed=seed) for n in names]
    return [_row(n, d, p) for n, d, p in zip(names, ds, holm([d.p for d in ds]))]


def interaction(top: Mapping[str, np.ndarray], bottom: Mapping[str, np.ndarray], reference: str = REFERENCE, *,
                n_boot: int = 10_000, seed: int = 0) -> list[dict[str, Any]]:
    """H5's statistic per set shared by both budgets: I = delta_top - delta_bottom, the mean
    over prompts of (set - reference at the top) - (set - reference at the bottom), seeds
    averaged per prompt; paired bootstrap over prompts (one draw resamples a prompt at both
    budgets), two-sided p, Holm across the sets.

    >>> ref = np.array([1.0, 1.2, 1.4, 1.1, 1.3, 1.25])
    >>> rows = interaction({"eagle3-default": ref + 0.2, "a": ref + 0.25}, {"eagle3-default": ref, "a": ref - 0.02},
    ...                    n_boot=500)
    >>> rows[0]["set"], round(rows[0]["delta"], 3), rows[0]["delta_top"] > rows[0]["delta_bottom"]
    ('a', 0.07, True)
    """
    names = [n for n in top if n != reference and n in bottom]
    diffs = {n: (seed_mean(top[n]) - seed_mean(top[reference]), seed_mean(bottom[n]) - seed_mean(bottom[reference]))
             for n in names}
    ds = [paired_bootstrap(a, b, n_boot=n_boot, seed=seed) for a, b in diffs.values()]
    return [{**_row(n, d, p), "delta_top": float(np.nanmean(diffs[n][0])), "delta_bottom": float(np.nanmean(diffs[n][1]))}
            for n, d, p in zip(names, ds, holm([d.p for d in ds]))]


def norm_effects(top: Mapping[str, np.ndarray], norm_sets: Sequence[str], *, n_boot: int = 10_000,
                 seed: int = 0) -> list[dict[str, Any]]:
    """H6 per triple: (triple with the per-layer norm) - (triple without) at the top budget,
    paired bootstrap, Holm across the triples that have both arms."""
    names = [n for n in norm_sets if n in top and n + NORM in top]
    ds = [paired_bootstrap(top[n + NORM], top[n], n_boot=n_boot, seed=seed) for n in names]
    return [{**_row(n, d, p), "tau_plain": float(np.nanmean(seed_mean(top[n]))),
             "tau_norm": float(np.nanmean(seed_mean(top[n + NORM])))}
            for n, d, p in zip(names, ds, holm([d.p for d in ds]))]


def _tau_summary(name: str, tau: np.ndarray, layers: Sequence[int], n_seeds: int | None = None) -> dict[str, Any]:
    mean = seed_mean(tau)
    t, lo, hi = mean_ci([None if not np.isfinite(v) else float(v) for v in mean])
    n = int(np.atleast_2d(tau).shape[0]) if n_seeds is None else n_seeds
    return {"set": name, "layers": list(layers), "n_seeds": n, "tau": t, "lo": lo,
            "hi": hi, "per_prompt": [None if not np.isfinite(v) else float(v) for v in mean]}


def analyse(taus: Mapping[str, Mapping[str, np.ndarray]], layers: Mapping[str, Sequence[int]],
            norm_sets: Sequence[str], *, cpu_s: Mapping[str, float] | None = None,
            n_seeds: Mapping[str, Mapping[str, int]] | None = None, n_boot: int = 10_000,
            seed: int = 0) -> dict[str, Any]:
    """The results document's analysis from per-prompt taus ``{budget: {set: [seeds, prompts]}}``
    (every budget on the same prompts, in the same order): per budget the default's tau and
    each set's delta (``comparison``), H5's ``interaction`` (top - bottom) and H6's ``norm_arm``.
    ``n_seeds``: seed counts of a budget given already seed-averaged (chapter 6's)."""
    budgets = []
    for name in (b for b in (BOTTOM, MIDDLE, TOP) if b in taus):
        t = {k: v for k, v in taus[name].items() if not k.endswith(NORM)}
        if REFERENCE not in t:
            continue
        seeds = (n_seeds or {}).get(name, {})
        sets = [_tau_summary(k, v, layers[k.removesuffix(NORM)], seeds.get(k)) for k, v in taus[name].items()]
        ref = next(x for x in sets if x["set"] == REFERENCE)
        budgets.append({"name": name, "cpu_s_per_drafter": (cpu_s or {}).get(name),
                        "tau_default": {k: ref[k] for k in ("tau", "lo", "hi", "n_seeds")}, "sets": sets,
                        "comparison": comparisons(t, n_boot=n_boot, seed=seed)})
    inter = (interaction({k: v for k, v in taus[TOP].items() if not k.endswith(NORM)}, taus[BOTTOM],
                         n_boot=n_boot, seed=seed) if TOP in taus and BOTTOM in taus else [])
    return {"budgets": budgets, "interaction": inter,
            "norm_arm": norm_effects(taus[TOP], norm_sets, n_boot=n_boot, seed=seed) if TOP in taus else []}


# ----------------------------------------------------------------------------- the run


def _bottom(pred: Mapping[str, Any], names: Sequence[str]) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
    """Chapter 6's seed-averaged per-prompt tau of ``names`` (``06_predictors``)."""
    by = {s["set"]: s for s in pred["sets"]}
    return tuple(pred["prompt_ids"]), {n: np.array([np.nan if v is None else v for v in by[n]["per_prompt"]])
                                       for n in names if n in by}


def run(cfg: StudyConfig, *, root: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Train (or read from the ledger) the page's drafters, score them on the outcome and
    analyse (see the module docstring); the results document for ``06_strength``.

    The bottom budget is chapter 6's ``06_predictors``; its prompts must be the eval prompts
    the top budget is scored on (the same greedy capture), else ``ValueError``."""
    from activation_wave.benchmarks import recipe
    from activation_wave.benchmarks.speedup import _overrides, bench_config
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
                         "ones in the same order: re-run chapter 6 on the same capture before this page")
    doc = analyse(taus, layers, s.norm_sets, cpu_s={BOTTOM: _bottom_cpu_s(cfg, root), **cpu},
                  n_seeds={BOTTOM: {x["set"]: len(x["seeds"]) for x in pred["sets"]}})
    curves = {name: recipe.learning_curve([row["train_log"] for row, n in items if n == name])
              for name in dict.fromkeys(n for _, n in by_budget.get(TOP, []))}
    return {"model": cfg.model, "profile": cfg.profile, "pre_registration": PRE_REGISTRATION,
            "outcome": (f"per-prompt offline tau on the {len(ids)} eval prompts at chain depth {b.depth} and draft "
                        f"threshold {b.draft_threshold:g}, seeds averaged per prompt (chapter 6's)"),
            "recipes": {BOTTOM: "chapter 6's drafters (06_predictors)",
                        **{k: dataclasses.asdict(v) for k, v in budget_recipes(cfg).items()}},
            "design": {"sets": [REFERENCE, *s.sets], "norm_sets": list(s.norm_sets), "seeds_top": s.seeds,
                       "middle": s.middle, "singles": list(s.singles),
                       "shrunk": [x for x, on in (("second architecture", False), ("single layers", bool(s.singles)),
                                                  ("middle budget", s.middle)) if not on],
                       "exploratory": [x for x, on in (("single layers", bool(s.singles)),
                                                       ("middle budget", s.middle)) if on]},
            "prompt_ids": list(ids), **doc, "curves": curves, "n_drafters_trained_here": len(rows),
            "drafters": [row["path"] for row in rows], "seconds": round(time.time() - t0, 1)}


def _bottom_cpu_s(cfg: StudyConfig, root: str | None) -> float | None:
    """Chapter 6's mean training seconds per drafter (its drafters train on one thread)."""
    from activation_wave.study.steps import load_results

    try:
        runs = load_results("06_eagle3_speedup", cfg, root)["runs"]
    except (FileNotFoundError, KeyError):
        return None
    secs = [r["train_s"] for r in runs if r.get("train_s")]
    return float(np.mean(secs)) if secs else None


# ----------------------------------------------------------------------------- the page's words


def verdict(row: Mapping[str, Any], alpha: float = 0.05, *, min_prompts: int = 10) -> str:
    """A comparison's wording at Holm ``alpha``: higher / lower, or within noise.

    >>> verdict({"delta": 0.03, "p_holm": 0.01, "n": 96}), verdict({"delta": -0.01, "p_holm": 0.3, "n": 96})
    ('higher', 'within noise')
    """
    if row["n"] < min_prompts:
        return f"no verdict (n = {row['n']} prompts)"
    if row["p_holm"] is not None and row["p_holm"] < alpha:
        return "higher" if row["delta"] > 0 else "lower"
    return "within noise"


def _ci(lo: float, hi: float) -> str:
    return f"[{lo:+.3f}, {hi:+.3f}]"


def tau_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per budget and set: tau with its interval, and the delta against the default (Holm within the budget)."""
    rows = []
    for bud in doc["budgets"]:
        comp = {c["set"]: c for c in bud["comparison"]}
        for s in bud["sets"]:
            c = comp.get(s["set"])
            rows.append({"budget": bud["name"], "set": s["set"], "layers": str(s["layers"]), "seeds": s["n_seeds"],
                         "tau": s["tau"], "tau 95% CI": _ci(s["lo"], s["hi"]).replace("+", ""),
                         "delta vs default": None if c is None else c["delta"],
                         "delta 95% CI": "" if c is None else _ci(c["lo"], c["hi"]),
                         "p (Holm)": None if c is None else c["p_holm"], "": "" if c is None else verdict(c)})
    return rows


def interaction_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """H5's table: per set, delta at each budget and the interaction with interval, Holm p, verdict."""
    return [{"set": r["set"], "delta bottom": r["delta_bottom"], "delta top": r["delta_top"],
             "I = top - bottom": r["delta"], "95% CI": _ci(r["lo"], r["hi"]), "p (Holm)": r["p_holm"],
             "SD per prompt": r["sd"], "n": r["n"],
             "H5": {"higher": "supported (gains with budget)", "lower": "supported (falls behind with budget)"}.get(
                 verdict(r), verdict(r))} for r in doc["interaction"]]


def norm_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """H6's table: per triple, tau without and with the per-layer norm, the delta, Holm p, verdict."""
    return [{"triple": r["set"], "tau, no norm": r["tau_plain"], "tau, per-layer norm": r["tau_norm"],
             "delta": r["delta"], "95% CI": _ci(r["lo"], r["hi"]), "p (Holm)": r["p_holm"], "n": r["n"],
             "H6": "supported" if verdict(r) == "higher" else ("not supported: the norm hurts" if verdict(r) == "lower"
                                                              else "not supported (" + verdict(r) + ")")}
            for r in doc["norm_arm"]]


def answer_text(doc: Mapping[str, Any] | None) -> str:
    """The page's answer in one paragraph, for the page itself, chapter 8 and the landing page."""
    if doc is None:
        return "not measured yet: the stronger drafters of this page have not been trained"
    by = {b["name"]: b for b in doc["budgets"]}
    top, bottom = by.get(TOP), by.get(BOTTOM)
    if top is None or bottom is None:
        return "not measured yet: a budget is missing"
    n = max((c["n"] for c in top["comparison"]), default=0)
    lead = [c for c in top["comparison"] if verdict(c) == "higher"]
    behind = [c for c in top["comparison"] if verdict(c) == "lower"]
    parts = [f"At the stronger budget (the default's tau {top['tau_default']['tau']:.3f} against "
             f"{bottom['tau_default']['tau']:.3f} after one epoch; {n} prompts, Holm within the budget)"]
    if lead:
        parts.append(", ".join(f"{c['set']} beats the default by {c['delta']:+.3f} {_ci(c['lo'], c['hi'])}"
                               for c in lead))
    if behind:
        parts.append(", ".join(f"{c['set']} trails it by {c['delta']:+.3f} {_ci(c['lo'], c['hi'])}" for c in behind))
    rest = [c["set"] for c in top["comparison"] if verdict(c) == "within noise"]
    if rest:
        parts.append(f"{', '.join(rest)} {'is' if len(rest) == 1 else 'are'} within noise of it")
    changed = [r for r in doc["interaction"] if verdict(r) in ("higher", "lower")]
    h5 = ("H5 is supported for " + ", ".join(f"{r['set']} (I {r['delta']:+.3f} {_ci(r['lo'], r['hi'])})" for r in changed)
          if changed else "no set's delta changed beyond noise between the budgets (H5 not supported for any set)")
    helps = [r for r in doc["norm_arm"] if verdict(r) == "higher"]
    hurts = [r for r in doc["norm_arm"] if verdict(r) == "lower"]
    h6 = ("the per-layer norm helps " + ", ".join(r["set"] for r in helps) if helps else
          "the per-layer norm still hurts " + ", ".join(f"{r['set']} ({r['delta']:+.3f} {_ci(r['lo'], r['hi'])})"
                                                         for r in hurts) if hurts else
          "the per-layer norm is within noise" if doc["norm_arm"] else "the norm arm has not run")
    return "; ".join(parts) + f". {h5}; {h6} (H6)."


def not_run_figure() -> Any:
    """A small figure that says the page's drafters have not been trained (glued in place of
    the results figure, so the book builds without them)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 1.2))
    ax.text(0.5, 0.5, "not measured yet: strength.seeds is 0 in this profile", ha="center", va="center")
    ax.set_axis_off()
    return fig


def epoch_deltas(doc: Mapping[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """A secondary, descriptive view of the top budget (not a pre-registered test): each
    set's eval tau minus the default's after every epoch of training, from the drafters'
    learning curves (tau pooled over eval records, seeds averaged; no interval).

    >>> epoch_deltas({"curves": {"eagle3-default": [{"epoch": 1, "tau_offline": 1.2}],
    ...                          "a": [{"epoch": 1, "tau_offline": 1.25}]}})
    {'a': [(1, 0.05)]}
    """
    curves = doc.get("curves") or {}
    ref = {p["epoch"]: p["tau_offline"] for p in curves.get(REFERENCE, [])}
    return {name: [(p["epoch"], round(p["tau_offline"] - ref[p["epoch"]], 4)) for p in pts if p["epoch"] in ref]
            for name, pts in curves.items() if name != REFERENCE}
