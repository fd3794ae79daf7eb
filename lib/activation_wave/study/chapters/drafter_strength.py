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

:func:`activation_wave.benchmarks.strength.run` trains (or reads from the ledger) and scores
the drafters; :func:`analyse` (here) computes the results document that the page saves as
``06_strength``, and the rest of this module words it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from activation_wave.core.stats import (N_BOOT, finite_values, hierarchical_bootstrap, holm, mean_ci, near_line,
                                       paired_bootstrap, seed_mean, within_noise)
from activation_wave.study.hypotheses import Hypothesis

NAME = "06_strength"
REFERENCE = "eagle3-default"
NORM = "+norm"
BOTTOM, MIDDLE, TOP = "bottom", "middle", "top"
#: The third budget: the data-scale design's H7 point (16x the distinct prompts, twice the top
#: budget's training tokens; pre-registered in ``book/lab/data_scale.md``).
CORPUS = "corpus"
#: The seed-sensitivity families of H5 (top minus bottom), H5's third budget (corpus minus top) and H6.
H5_TOP, H5_CORPUS, H6_NORM = "H5 interaction", "H5 interaction, corpus - top", "H6 norm arm"
#: The commit that registered H5 and H6 (``sec-strength-prereg``), before any drafter of the page trained.
PRE_REGISTRATION = {"commit": "e099d4396d428d36dc644ac8eb01869f0638df68",
                    "page": "book/chapters/06b_drafter_strength (sec-strength-prereg)"}
#: Resamples of the seed-sensitivity bootstrap (two levels: seeds within each set, then prompts).
N_BOOT_SEEDS = 50_000
#: Fewer paired prompts than this give no verdict (the smoke profile's handful).
MIN_PROMPTS = 10

__all__ = ["NAME", "REFERENCE", "CORPUS", "H5_CORPUS", "seed_sensitivity", "sensitivity_rows", "comparisons",
           "interaction", "norm_effects", "analyse", "verdict", "tau_rows", "interaction_rows", "interaction_corpus_rows",
           "norm_rows", "sensitivity_table", "seed_resampled", "tau_default", "page_values", "bench_training_tau",
           "bench_outcome_tau", "hypotheses", "not_run_figure", "epoch_deltas"]


# ----------------------------------------------------------------------------- statistics


def _row(name: str, d: Any, p_holm: float | None = None) -> dict[str, Any]:
    """One comparison's fields; ``p_holm_mcse``: the Monte Carlo error of the Holm p (the raw
    p's times its Holm factor)."""
    factor = 1.0 if p_holm is None or not d.p else min(p_holm, 1.0) / d.p
    return {"set": name, "delta": d.mean, "lo": d.lo, "hi": d.hi, "p": d.p, "p_holm": p_holm, "n": d.n, "sd": d.sd,
            "n_boot": d.n_boot, "p_mcse": d.p_mcse, "p_holm_mcse": d.p_mcse * factor}


def comparisons(taus: Mapping[str, np.ndarray], reference: str = REFERENCE, *, n_boot: int = N_BOOT,
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
                n_boot: int = N_BOOT, seed: int = 0) -> list[dict[str, Any]]:
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


def norm_effects(top: Mapping[str, np.ndarray], norm_sets: Sequence[str], *, n_boot: int = N_BOOT,
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
    t, lo, hi = mean_ci(finite_values(mean))
    n = int(np.atleast_2d(tau).shape[0]) if n_seeds is None else n_seeds
    return {"set": name, "layers": list(layers), "n_seeds": n, "tau": t, "lo": lo, "hi": hi,
            "per_prompt": finite_values(mean), "per_seed": [finite_values(r) for r in np.atleast_2d(tau)]}


def sensitivity_rows(kind: str, contrasts: Mapping[str, Sequence[tuple[float, np.ndarray]]],
                      registered: Sequence[Mapping[str, Any]], n_boot: int, seed: int) -> list[dict[str, Any]]:
    """One family's seed-sensitivity rows: the hierarchical bootstrap of each contrast, Holm
    across the family as registered, beside the registered row's verdict."""
    reg = {r["set"]: r for r in registered}
    names = [n for n in contrasts if n in reg]
    ds = [hierarchical_bootstrap(contrasts[n], n_boot=n_boot, seed=seed) for n in names]
    rows = []
    for n, d, p in zip(names, ds, holm([d.p for d in ds])):
        row = {"comparison": kind, **_row(n, d, p)}
        row |= {"verdict": verdict(row), "registered_verdict": verdict(reg[n]),
                "registered_p_holm": reg[n]["p_holm"]}
        rows.append(row | {"changed": row["verdict"] != row["registered_verdict"]})
    return rows


def seed_sensitivity(taus: Mapping[str, Mapping[str, np.ndarray]], doc: Mapping[str, Any], norm_sets: Sequence[str],
                     *, n_boot: int = N_BOOT_SEEDS, seed: int = 0) -> list[dict[str, Any]]:
    """A labelled sensitivity analysis beside the registered tests (not a test of its own):
    every comparison of ``doc`` (each budget's deltas, H5's interaction, H6's norm arm)
    recomputed with :func:`~activation_wave.core.stats.hierarchical_bootstrap`, which resamples
    each set's seeds before the prompts, so the between-seed spread of a set's mean counts;
    Holm within the same families. ``taus``: ``{budget: {set: [seeds, prompts]}}``. A budget
    whose taus arrive seed-averaged (one row) adds no seed variance."""
    out: list[dict[str, Any]] = []
    for bud in doc["budgets"]:
        t = taus[bud["name"]]
        out += sensitivity_rows(f"delta at the {bud['name']} budget",
                                 {n: [(1.0, t[n]), (-1.0, t[REFERENCE])] for n in t
                                  if n != REFERENCE and not n.endswith(NORM)}, bud["comparison"], n_boot, seed)
    if CORPUS in taus and TOP in taus:
        cor, top = taus[CORPUS], taus[TOP]
        out += sensitivity_rows(H5_CORPUS,
                                 {n: [(1.0, cor[n]), (-1.0, cor[REFERENCE]), (-1.0, top[n]), (1.0, top[REFERENCE])]
                                  for n in cor if n in top and n != REFERENCE}, doc.get("interaction_corpus", []),
                                 n_boot, seed)
    if TOP in taus and BOTTOM in taus:
        top, bot = taus[TOP], taus[BOTTOM]
        out += sensitivity_rows(H5_TOP, {n: [(1.0, top[n]), (-1.0, top[REFERENCE]), (-1.0, bot[n]),
                                                        (1.0, bot[REFERENCE])] for n in top if n in bot and n != REFERENCE},
                                 doc["interaction"], n_boot, seed)
        out += sensitivity_rows(H6_NORM, {n: [(1.0, top[n + NORM]), (-1.0, top[n])] for n in norm_sets
                                                 if n in top and n + NORM in top}, doc["norm_arm"], n_boot, seed)
    return out


def analyse(taus: Mapping[str, Mapping[str, np.ndarray]], layers: Mapping[str, Sequence[int]],
            norm_sets: Sequence[str], *, cpu_s: Mapping[str, float] | None = None,
            n_seeds: Mapping[str, Mapping[str, int]] | None = None, n_boot: int = N_BOOT,
            seed: int = 0, n_boot_seeds: int = N_BOOT_SEEDS) -> dict[str, Any]:
    """The results document's analysis from per-prompt taus ``{budget: {set: [seeds, prompts]}}``
    (every budget on the same prompts, in the same order): per budget the default's tau and
    each set's delta (``comparison``), H5's ``interaction`` (top - bottom) and H6's ``norm_arm``.
    ``n_seeds``: seed counts of a budget given already seed-averaged. ``seed_sensitivity``:
    every comparison again with seeds resampled too (:func:`seed_sensitivity`)."""
    budgets = []
    for name in (b for b in (BOTTOM, MIDDLE, TOP, CORPUS) if b in taus):
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
    plain_top = {k: v for k, v in taus.get(TOP, {}).items() if not k.endswith(NORM)}
    inter3 = (interaction(taus[CORPUS], plain_top, n_boot=n_boot, seed=seed) if CORPUS in taus and plain_top
              else [])
    doc = {"budgets": budgets, "interaction": inter, "interaction_corpus": inter3,
           "norm_arm": norm_effects(taus[TOP], norm_sets, n_boot=n_boot, seed=seed) if TOP in taus else []}
    return doc | {"seed_sensitivity": seed_sensitivity(taus, doc, norm_sets, n_boot=n_boot_seeds, seed=seed)}


# ----------------------------------------------------------------------------- the page's words


def verdict(row: Mapping[str, Any], alpha: float = 0.05, *, min_prompts: int = MIN_PROMPTS) -> str:
    """A comparison's wording at Holm ``alpha``: higher / lower, or within noise.

    A Holm p within :data:`~activation_wave.core.stats.NEAR_LINE` of ``alpha`` is "close to the
    line" on either side: its side is not settled by the bootstrap (its Monte Carlo error is in
    the results file) and is not worded as a verdict.

    >>> verdict({"delta": 0.03, "p_holm": 0.01, "n": 96}), verdict({"delta": -0.01, "p_holm": 0.3, "n": 96})
    ('higher', 'within noise')
    >>> verdict({"delta": -0.01, "p_holm": 0.0499, "n": 96})
    'close to the line'
    """
    if row["n"] < min_prompts:
        return f"no verdict (n = {row['n']} prompts)"
    if near_line(row["p_holm"], alpha):
        return "close to the line"
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


def _interaction_table(rows: Sequence[Mapping[str, Any]], lower: str, upper: str) -> list[dict[str, Any]]:
    """An H5 table (:func:`interaction`'s rows between budgets ``lower`` and ``upper``): per set,
    delta at each budget and the interaction with interval, Holm p, verdict."""
    return [{"set": r["set"], f"delta {lower}": r["delta_bottom"], f"delta {upper}": r["delta_top"],
             f"I = {upper} - {lower}": r["delta"], "95% CI": _ci(r["lo"], r["hi"]), "p (Holm)": r["p_holm"],
             "SD per prompt": r["sd"], "n": r["n"],
             "H5": {"higher": "supported (gains with budget)", "lower": "supported (falls behind with budget)"}.get(
                 verdict(r), verdict(r))} for r in rows]


def interaction_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """H5's table, top against bottom budget."""
    return _interaction_table(doc["interaction"], BOTTOM, TOP)


def interaction_corpus_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """H5's third-budget table, corpus against top budget."""
    return _interaction_table(doc.get("interaction_corpus") or [], TOP, CORPUS)


def norm_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """H6's table: per triple, tau without and with the per-layer norm, the delta, Holm p, verdict."""
    return [{"triple": r["set"], "tau, no norm": r["tau_plain"], "tau, per-layer norm": r["tau_norm"],
             "delta": r["delta"], "95% CI": _ci(r["lo"], r["hi"]), "p (Holm)": r["p_holm"], "n": r["n"],
             "H6": "supported" if verdict(r) == "higher" else ("not supported: the norm hurts" if verdict(r) == "lower"
                                                              else "not supported (" + verdict(r) + ")")}
            for r in doc["norm_arm"]]


def _budget(doc: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """The results document's entry for budget ``name`` (None when it was not measured)."""
    return next((b for b in doc["budgets"] if b["name"] == name), None)


def _n_prompts(budget: Mapping[str, Any]) -> int:
    """How many paired prompts a budget's comparisons rest on."""
    return max((c["n"] for c in budget["comparison"]), default=0)


def _verdicts(doc: Mapping[str, Any], budget: str) -> dict[str, str]:
    return {c["set"]: verdict(c) for c in (_budget(doc, budget) or {"comparison": []})["comparison"]}


def hypotheses(doc: Mapping[str, Any] | None) -> list[Hypothesis]:
    """H5 per set and H6 per triple by the page's verdict rules, for chapter 8's table (empty
    when the page has not run; None where fewer than ``MIN_PROMPTS`` prompts allow no verdict)."""
    if doc is None:
        return []

    def ok(r: Mapping[str, Any], word: str | None) -> bool | None:
        v = verdict(r)
        return None if v.startswith("no verdict") or v == "close to the line" else (v in ("higher", "lower") if word is None else v == word)

    def stat(r: Mapping[str, Any], name: str) -> str:
        return (f"{name} = {r['delta']:+.3f} {_ci(r['lo'], r['hi'])}, Holm p = {r['p_holm']:.3g}, n = {r['n']} prompts"
                f"{within_noise(r['lo'], r['hi'])}")

    seeds = {(r["comparison"], r["set"]): r for r in doc.get("seed_sensitivity") or []}

    def survives(kind: str, r: Mapping[str, Any]) -> str:
        s_ = seeds.get((kind, r["set"]))
        return ("" if s_ is None else f"; resampling seeds too (sensitivity analysis): {s_['verdict']}, Holm p "
                f"{s_['p_holm']:.2f}")

    def structured(kind: str, r: Mapping[str, Any]) -> dict[str, Any]:
        s_ = seeds.get((kind, r["set"]))
        return {"value": r["delta"], "p": r["p_holm"], "n": r["n"], "seeds": s_["verdict"] if s_ else None}

    return ([Hypothesis(f"H5 ({r['set']})", "its delta against the default changes from chapter 6's budget to the "
                        "stronger one", stat(r, "I"), ok(r, None),
                        "top minus bottom delta, paired over prompts, Holm across the sets (the stronger-drafters page; "
                        "its seed-sensitivity analysis is beside it there)" + survives(H5_TOP, r), (r["lo"], r["hi"]),
                        **structured(H5_TOP, r))
             for r in doc["interaction"]]
            + [Hypothesis(f"H5, third budget ({r['set']})", "its delta against the default changes from the stronger "
                          "budget to the corpus budget (16x the distinct prompts, twice the tokens)", stat(r, "I"),
                          ok(r, None), "corpus minus top delta, paired over prompts, Holm across the sets (registered "
                          "with the data-scale design)" + survives(H5_CORPUS, r), (r["lo"], r["hi"]),
                          **structured(H5_CORPUS, r))
               for r in doc.get("interaction_corpus") or []]
            + [Hypothesis(f"H6 ({r['set']})", "the per-layer norm before fc helps at the stronger budget",
                          stat(r, "delta tau"), ok(r, "higher"),
                          "norm minus no norm, 3 seeds each, Holm across the triples; the norm arm trained on "
                          "another CPU than the plain drafters (the page's confound)" + survives(H6_NORM, r),
                          (r["lo"], r["hi"]), **structured(H6_NORM, r))
               for r in doc["norm_arm"]])


def not_run_figure() -> Any:
    """A small figure that says the page's drafters have not been trained (glued in place of
    the results figure, so the book builds without them)."""
    from activation_wave.plots import plot_not_run

    return plot_not_run("not measured yet: strength.seeds is 0 in this profile")


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


def tau_default(doc: Mapping[str, Any] | None, budget: str) -> float:
    """The default's outcome tau at ``budget`` (NaN when not measured)."""
    b = _budget(doc, budget) if doc else None
    return float("nan") if b is None else float(b["tau_default"]["tau"])


def bench_outcome_tau(bench: Mapping[str, Any] | None) -> float:
    """The decoding benchmark drafter's tau on the pre-registered outcome (offline, depth 3,
    draft threshold 0.15, mean over the eval prompts), NaN when not recorded."""
    spec = (bench or {}).get("speculative_decoding") or {}
    v = (spec.get("drafter_outcome") or {}).get("tau")
    return float("nan") if v is None else float(v)


def bench_training_tau(bench: Mapping[str, Any] | None) -> float:
    """The decoding benchmark drafter's training-time offline tau (eval split, depth 3, no draft
    threshold: not the outcome's scale), NaN when not measured."""
    v = (((bench or {}).get("speculative_decoding") or {}).get("drafter_eval_offline") or {}).get("tau_offline")
    return float("nan") if v is None else float(v)


def sensitivity_table(doc: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The seed-sensitivity rows whose verdict the hierarchical bootstrap changes (resampling
    seeds as well as prompts), beside the registered verdict."""
    return [{"comparison": r["comparison"], "set": r["set"], "registered": r["registered_verdict"],
             "registered Holm p": r["registered_p_holm"], "seeds resampled": r["verdict"], "delta": r["delta"],
             "95% CI": _ci(r["lo"], r["hi"]), "Holm p": r["p_holm"]}
            for r in (doc or {}).get("seed_sensitivity") or [] if r["changed"]]


def seed_resampled(doc: Mapping[str, Any] | None, kind: str, name: str) -> dict[str, Any]:
    """One comparison with seeds resampled too (:func:`seed_sensitivity`'s row: ``kind`` e.g.
    "delta at the bottom budget", set ``name``): delta, interval, Holm p and verdict word, beside
    the registered ones (NaN and "not testable" when the analysis holds no such row). The value
    to quote wherever the comparison is stated: chapter 6's random-0 against the default is
    "lower" on prompts alone (Holm p 0.032) and "within noise" with its seeds resampled (0.18)."""
    nan = float("nan")
    r = next((x for x in (doc or {}).get("seed_sensitivity") or [] if x["comparison"] == kind and x["set"] == name),
             None)
    if r is None:
        return {"delta": nan, "lo": nan, "hi": nan, "p_holm": nan, "verdict": "not testable",
                "registered_verdict": "not testable", "registered_p_holm": nan}
    return {"delta": r["delta"], "lo": r["lo"], "hi": r["hi"], "p_holm": r["p_holm"], "verdict": r["verdict"],
            "registered_verdict": r["registered_verdict"], "registered_p_holm": r["registered_p_holm"]}


def _count(rows: Sequence[Mapping[str, Any]], word: str) -> int:
    return sum(verdict(r) == word for r in rows)


def page_values(doc: Mapping[str, Any] | None, pred: Mapping[str, Any] | None, bench: Mapping[str, Any] | None,
                recipe_doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every value the robustness page glues, numbers and verdict words only: per budget the
    default's tau and how many sets are higher / lower / within noise / close to the line against
    it; H5's and H6's counts; the seed-sensitivity counts; the Monte Carlo error of the p-values;
    the CPU confound's counts; the training costs from the book's one source
    (:func:`~activation_wave.study.training_costs.budget_cpu_min`; NaN where not measured)."""
    from activation_wave.study import training_costs as costs

    nan = float("nan")
    budget = costs.budget_cpu_min(bench, recipe_doc)
    out: dict[str, Any] = {"strength_top_min": budget.get(costs.SCREEN, {}).get("cpu_min", nan),
                           "strength_today_min": budget.get(costs.TODAY, {}).get("cpu_min", nan),
                           "strength_bench_train_tau": bench_training_tau(bench),
                           "strength_bench_outcome_tau": bench_outcome_tau(bench)}
    ch6 = [-float(c["delta"]) for c in (pred or {}).get("comparisons", []) if c.get("family") == "rules"]
    out.update(strength_ch6_tau=next((float(x["tau"]) for x in (pred or {}).get("sets", []) if x["set"] == REFERENCE),
                                     nan),
               strength_ch6_gap_min=min(ch6) if ch6 else nan, strength_ch6_gap_max=max(ch6) if ch6 else nan)
    for name in (BOTTOM, TOP, CORPUS):
        b = _budget(doc, name) if doc else None
        comp = b["comparison"] if b else []
        out.update({f"strength_{name}_tau": tau_default(doc, name),
                    f"strength_{name}_lo": b["tau_default"]["lo"] if b else nan,
                    f"strength_{name}_hi": b["tau_default"]["hi"] if b else nan,
                    f"strength_{name}_n_sets": len(comp), f"strength_{name}_higher": _count(comp, "higher"),
                    f"strength_{name}_lower": _count(comp, "lower"),
                    f"strength_{name}_noise": _count(comp, "within noise"),
                    f"strength_{name}_line": _count(comp, "close to the line")})
        if comp:
            best = max(comp, key=lambda c: c["delta"])
            out.update({f"strength_{name}_best": best["set"], f"strength_{name}_best_delta": best["delta"],
                        f"strength_{name}_best_lo": best["lo"], f"strength_{name}_best_hi": best["hi"],
                        f"strength_{name}_best_p": best["p_holm"], f"strength_{name}_best_word": verdict(best)})
    top = _budget(doc, TOP) if doc else None
    out["strength_n"] = _n_prompts(top) if top else 0
    inter, corp, norm = ((doc or {}).get(k) or [] for k in ("interaction", "interaction_corpus", "norm_arm"))
    # the counts of H5, H5c and H6 by verdict are the findings record's (the page glues them from it)
    out.update(strength_h5_line=_count(inter, "close to the line"))
    sens = (doc or {}).get("seed_sensitivity") or []
    out.update(strength_sens_n=len(sens), strength_sens_changed=sum(r["changed"] for r in sens),
               strength_sens_boot=sens[0]["n_boot"] if sens else 0)
    rows = ([c for b in (doc or {}).get("budgets", []) for c in b["comparison"]] + list(inter) + list(norm))
    rows = [r for r in rows if r.get("p_holm_mcse") is not None]
    out.update(strength_p_boot=rows[0]["n_boot"] if rows else 0,
               strength_p_mcse=max((r["p_holm_mcse"] for r in rows), default=nan))
    cpus = (doc or {}).get("training_cpus") or {}
    normc = [v for k, v in cpus.items() if k.endswith(NORM)]
    plain = [v for k, v in cpus.items() if not k.endswith(NORM)]
    out.update(strength_cpu_norm_n=sum(sum(v.values()) for v in normc),
               strength_cpu_norm_avx2=sum(v.get("AVX2", 0) for v in normc),
               strength_cpu_plain_n=sum(sum(v.values()) for v in plain),
               strength_cpu_plain_avx512=sum(v.get("AVX-512", 0) for v in plain))
    t = (doc or {}).get("training") or {}
    walls = [w for w in t.get("train_wall_s", []) if w is not None]
    speed = [v for v in t.get("tokens_per_s", []) if v is not None]
    out.update(strength_train_n=len(walls), strength_train_s_min=min(walls, default=nan),
               strength_train_s_max=max(walls, default=nan), strength_tok_s_min=min(speed, default=nan),
               strength_tok_s_max=max(speed, default=nan))
    return out
