"""Drafters trained on thousands of distinct prompts: the analysis of the data-scale design
(pre-registered in ``book/lab/data_scale.md``; the drafters come from
:func:`activation_wave.benchmarks.data_scale.run`).

Input: per-prompt outcome tau ``[seeds, prompts]`` per label ``<set>@<multiple>@<budget>``
and each drafter's train log. Output, the ``data_scale`` results document:

* ``points``: the default triple's curve (distinct prompts, training tokens, training
  CPU-seconds, outcome tau with its interval over prompts);
* ``sets``: H7, each set against the default at the H7 point (paired bootstrap over prompts,
  seeds averaged per prompt, Holm across the sets) with its wording and the design's
  smallest detectable effect;
* ``interaction``: H5's statistic with the strength page's top budget as the lower budget;
* ``d1``: the 16x@B1 point against 1x@B1, paired over prompts (one seed against three);
* ``target``: whether the default's best outcome tau reached 2.0;
* ``drafters``: per label, the per-seed per-prompt tau and the mean training CPU-seconds
  (what the strength page reads for its third budget, :func:`strength_budget`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from activation_wave.core.stats import finite_values, mean_ci, min_detectable_delta, paired_bootstrap, seed_mean
from activation_wave.study.training_costs import data_multiple, duration_text, log2_fit, train_cpu_min
from activation_wave.study.chapters.drafter_strength import (MIN_PROMPTS, N_BOOT, N_BOOT_SEEDS, REFERENCE, comparisons,
                                                             interaction, sensitivity_rows,
                                                             verdict)

NAME = "data_scale"
#: Data sizes as multiples of the base train prompts (nested prefixes; pre-registered).
MULTIPLES = {"1x": 1, "4x": 4, "16x": 16}
#: What the page's figures say while the design has not run to the end.
NOT_RUN = "not measured yet: the data-scale design has not run to the end"
#: The issue's target for the default triple's outcome tau at the largest data size.
TARGET_TAU = 2.0

__all__ = ["NAME", "MULTIPLES", "NOT_RUN", "TARGET_TAU", "analyse", "projection", "bench_entry", "h7_rows", "h7_table",
           "hypotheses", "label", "split_label", "strength_budget", "time_split", "page_values", "curve_rows"]


def label(name: str, multiple: str, budget: str) -> str:
    """``eagle3-default@16x@B2``: how a drafter group is named in the per-prompt taus."""
    return f"{name}@{multiple}@{budget}"


def split_label(lab: str) -> tuple[str, str, str]:
    """The inverse of :func:`label`."""
    name, multiple, budget = lab.rsplit("@", 2)
    return name, multiple, budget


def _cpu_s(log: Mapping[str, Any]) -> float:
    """Training CPU-seconds of one drafter, from the study's one cost function."""
    return 60 * train_cpu_min(log["train_wall_s"], log.get("threads"))


def _tokens_trained(log: Mapping[str, Any]) -> int:
    """Training tokens summed over optimiser steps (logs from before token budgets: tokens x epochs)."""
    return int(log.get("tokens_trained") or log["n_tokens"] * len(log["epochs"]))



def analyse(ids: Sequence[str], taus: Mapping[str, np.ndarray], logs: Mapping[str, Sequence[Mapping[str, Any]]],
            layers: Mapping[str, Sequence[int]], *, strength: Mapping[str, Any] | None, n_base: int, n_corpus: int,
            base_tokens: int, h7_point: tuple[str, str] = ("16x", "B2"), multiples: Mapping[str, int] | None = None,
            n_boot: int = N_BOOT, n_boot_seeds: int = N_BOOT_SEEDS) -> dict[str, Any]:
    """The results document (see the module docstring). ``taus``/``logs`` by :func:`label`;
    ``strength``: the ``06_strength`` document (its top budget is H5's lower budget here).
    ``seed_sensitivity``: H7 again with each set's seeds resampled before the prompts (the
    strength page's labelled sensitivity analysis, ``n_boot_seeds`` resamples)."""
    multiples = dict(multiples or MULTIPLES)
    points = []
    for lab, tau in taus.items():
        name, m, bud = split_label(lab)
        if name != REFERENCE:
            continue
        t, lo, hi = mean_ci(finite_values(seed_mean(tau)))
        lg = logs[lab]
        points.append({"label": lab, "multiple": m, "budget": bud, "n_prompts": multiples[m] * n_base,
                       "n_positions": float(np.mean([_tokens_trained(g) for g in lg])),
                       "cpu_s": float(np.mean([_cpu_s(g) for g in lg])),
                       "tokens_per_s": float(np.mean([_tokens_trained(g) / g["train_wall_s"] for g in lg])),
                       "tau": t, "lo": lo, "hi": hi, "n_seeds": int(np.atleast_2d(tau).shape[0]),
                       "per_prompt": finite_values(seed_mean(tau))})
    points.sort(key=lambda p: (p["cpu_s"], p["n_prompts"]))
    at = {split_label(k)[0]: v for k, v in taus.items() if split_label(k)[1:] == h7_point}
    sets = []
    if REFERENCE in at and len(at) > 1:
        rows = comparisons(at, n_boot=n_boot)
        m = len(rows)
        for r in rows:
            r.update({"layers": list(layers[r["set"]]), "n_seeds": int(np.atleast_2d(at[r["set"]]).shape[0]),
                      "verdict": verdict(r),
                      "mde": (min_detectable_delta(r["sd"], r["n"], alpha=0.05 / m) if r["n"] >= MIN_PROMPTS
                              else None)})
        sets = rows
    sens = (sensitivity_rows("H7", {n: [(1.0, np.atleast_2d(at[n])), (-1.0, np.atleast_2d(at[REFERENCE]))]
                                    for n in at if n != REFERENCE}, sets, n_boot_seeds, 0) if sets else [])
    inter: list[dict[str, Any]] = []
    top = _strength_top(strength, ids)
    if top and REFERENCE in at:
        inter = [{**r, "verdict": verdict(r)} for r in interaction(at, top, n_boot=n_boot)]
    d1 = None
    one, sixteen = label(REFERENCE, "1x", "B1"), label(REFERENCE, "16x", "B1")
    if one in taus and sixteen in taus:
        d = paired_bootstrap(taus[sixteen], taus[one], n_boot=n_boot)
        d1 = {"delta": d.mean, "lo": d.lo, "hi": d.hi, "p": d.p, "n": d.n, "sd": d.sd, "p_mcse": d.p_mcse,
              "n_seeds": [int(np.atleast_2d(taus[sixteen]).shape[0]), int(np.atleast_2d(taus[one]).shape[0])],
              "one_x_seed_spread": _seed_spread(taus[one])}
    per_label = {lab: {"per_seed": [finite_values(r) for r in np.atleast_2d(tau)],
                       "cpu_s": float(np.mean([_cpu_s(g) for g in logs[lab]])),
                       "time_split": time_split(logs[lab])} for lab, tau in taus.items()}
    largest = [p for p in points if p["multiple"] == max(multiples, key=multiples.get)]
    best = max(largest or points, key=lambda p: p["tau"], default=None)
    target = {"tau": TARGET_TAU, "best": best and {k: best[k] for k in ("label", "tau", "lo", "hi")},
              "reached": bool(best and best["tau"] >= TARGET_TAU), "projection": projection(largest)}
    return {"prompt_ids": list(ids), "n_base_prompts": n_base, "n_corpus_prompts": n_corpus,
            "base_tokens_per_epoch": base_tokens, "h7_point": "@".join(h7_point), "points": points, "sets": sets,
            "interaction": inter, "seed_sensitivity": sens, "d1": d1, "drafters": per_label,
            "target": target}


def projection(points: Sequence[Mapping[str, Any]], tau: float = TARGET_TAU) -> dict[str, Any] | None:
    """What the fit says reaching ``tau`` would take (fixed before any tau was read): the default
    triple's points at the largest data size (the same prompts, budgets B1, B2, B4), fitted as
    tau = a + b log2(training CPU-minutes) with the slope's 95% t interval
    (:func:`~activation_wave.study.training_costs.log2_fit`), pivoting on the fit at the dearest
    point; the CPU-minutes needed, with the interval from the slope's (an end is None where the
    slope is not positive). An extrapolation, not a test. None with fewer than 3 points.

    >>> pts = [{"label": f"d@16x@B{k}", "cpu_s": 600.0 * k, "tau": 1.4 + 0.1 * np.log2(k) + e}
    ...        for k, e in ((1, 0.0), (2, 0.01), (4, 0.0))]
    >>> p = projection(pts, 1.8)
    >>> p["from"], round(p["cpu_min"]), p["reached"]
    ('d@16x@B4', 156, False)
    """
    pts = sorted((p for p in points if p["cpu_s"] > 0), key=lambda p: p["cpu_s"])
    if len(pts) < 3:
        return None
    fit = log2_fit([p["cpu_s"] / 60 for p in pts], [p["tau"] for p in pts])
    last = pts[-1]
    minutes = last["cpu_s"] / 60
    m = data_multiple({**fit, "today": {"tau_fit": fit["a"] + fit["b"] * float(np.log2(minutes)),
                                        "tau_offline": last["tau"]}}, tau)
    at = lambda k: None if k is None else round(k * minutes, 1)  # noqa: E731
    return {"fit": fit, "from": last["label"], "from_cpu_min": round(minutes, 1), "tau": tau,
            "cpu_min": at(m["multiple"]), "cpu_min_lo": at(m["lo"]), "cpu_min_hi": at(m["hi"]),
            "reached": bool(m["reached"]), "points": [p["label"] for p in pts]}


def time_split(logs: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """Where the drafters' optimisation time went, as shares of its sum over ``logs`` (train logs, or
    the results document's per-label ``drafters`` entries: anything carrying a
    ``time_split``: batch reading, forward, backward, optimiser); None when no log records it
    (drafters trained before it was logged).

    >>> time_split([{"time_split": {"data_s": 1.0, "forward_s": 3.0}}, {"time_split": {"data_s": 1.0, "forward_s": 5.0}}])
    {'data_s': 0.2, 'forward_s': 0.8}
    >>> time_split([{}]) is None
    True
    """
    parts = [g["time_split"] for g in logs if g.get("time_split")]
    if not parts:
        return None
    total = {k: sum(p.get(k, 0.0) for p in parts) for k in parts[0]}
    whole = sum(total.values()) or 1.0
    return {k: round(v / whole, 4) for k, v in total.items()}


def _seed_spread(tau: np.ndarray) -> float | None:
    """Largest minus smallest seed's mean tau (None for one seed)."""
    a = np.atleast_2d(tau)
    if a.shape[0] < 2:
        return None
    means = np.nanmean(a, axis=1)
    return float(means.max() - means.min())


def _strength_top(strength: Mapping[str, Any] | None, ids: Sequence[str]) -> dict[str, np.ndarray]:
    """The strength page's top-budget per-prompt tau by set (seed-averaged), on ``ids``' prompts."""
    if not strength:
        return {}
    top = next((b for b in strength.get("budgets", []) if b["name"] == "top"), None)
    if top is None or list(strength.get("prompt_ids", [])) != list(ids):
        return {}
    return {s["set"]: np.array([np.nan if v is None else v for v in s["per_prompt"]], float) for s in top["sets"]}


def strength_budget(doc: Mapping[str, Any] | None, ids: Sequence[str]) -> tuple[dict[str, np.ndarray], float | None]:
    """The H7 point's drafters as the strength page's third budget: per set, the per-seed
    per-prompt tau ``[seeds, prompts]`` on ``ids`` (the strength page's eval prompts, which must
    be the design's, in order) and the mean training CPU-seconds of the default's drafters
    there. Empty (and None) when the design has not run or scored other prompts.

    >>> doc = {"prompt_ids": ["a", "b"], "h7_point": "16x@B2", "drafters": {
    ...     "eagle3-default@16x@B2": {"per_seed": [[1.5, None]], "cpu_s": 60.0},
    ...     "eagle3-default@16x@B1": {"per_seed": [[1.4, 1.2]], "cpu_s": 30.0}}}
    >>> taus, cpu = strength_budget(doc, ["a", "b"])
    >>> list(taus), taus["eagle3-default"].tolist(), cpu
    (['eagle3-default'], [[1.5, nan]], 60.0)
    """
    if not doc or "drafters" not in doc or list(doc.get("prompt_ids", [])) != list(ids):
        return {}, None
    point = tuple(doc["h7_point"].split("@"))
    at = {split_label(lab)[0]: d for lab, d in doc["drafters"].items() if split_label(lab)[1:] == point}
    taus = {name: np.array([[np.nan if v is None else v for v in row] for row in d["per_seed"]], float)
            for name, d in at.items()}
    return taus, (at[REFERENCE]["cpu_s"] if REFERENCE in at else None)


def bench_entry(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The ``data_scale`` entry of ``benchmarks.json``: the curve, H7 and the throughputs."""
    cap = doc.get("capture", {})
    return {"what": "drafters of the default triple on nested prefixes of distinct prompts and token budgets, and "
                    "H7 (the drafters page's sets at the largest data size); outcome: per-prompt offline tau on the 96 eval "
                    "prompts", "pre_registration": doc.get("pre_registration"),
            "points": [{k: p[k] for k in ("label", "n_prompts", "n_positions", "cpu_s", "tau", "lo", "hi",
                                         "n_seeds", "tokens_per_s")} for p in doc["points"]],
            "sets": [{k: r.get(k) for k in ("set", "layers", "delta", "lo", "hi", "p", "p_holm", "p_holm_mcse",
                                            "n_seeds", "n", "verdict", "mde")} for r in doc["sets"]],
            "target": doc["target"],
            "capture_tokens_per_s": (cap["tokens"] / cap["seconds_this_run"]
                                     if cap.get("seconds_this_run") else None),
            "capture": cap,
            "training_time_split": time_split(list(doc.get("drafters", {}).values()))}


# ----------------------------------------------------------------------------- words


def _ci(lo: float, hi: float) -> str:
    return f"[{lo:+.3f}, {hi:+.3f}]"


def page_values(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """Every value the robustness page glues about the data-scale design, numbers and verdict
    words only (NaN, 0 or "not measured" before the design has run): the largest data size in
    distinct prompts and the number of sets compared (H7's words, counts and the set closest to
    the default are its findings record's, :mod:`activation_wave.study.findings`); the design's MDE; the same-budget comparison of 16x against 1x distinct prompts (``scale_d1_*``)
    with the two seed spreads that bear on it, each named (``scale_spread_1x``: the three 1x
    seeds at the base budget; ``scale_spread_16x_mid``: the default's two seeds at the largest
    data size and the middle budget); the best default drafter at the largest data size and the
    slope of tau per doubling of training CPU-minutes there.

    >>> page_values(None)["scale_ran"]
    'not measured'
    """
    nan = float("nan")
    out: dict[str, Any] = {"scale_ran": "not measured", "scale_prompts": 0, "scale_n_sets": 0, "scale_mde": nan, "scale_d1_delta": nan,
                           "scale_d1_lo": nan, "scale_d1_hi": nan, "scale_d1_p": nan, "scale_d1_n": 0,
                           "scale_d1_word": "not testable", "scale_spread_1x": nan, "scale_spread_16x_mid": nan,
                           "scale_top_tau": nan, "scale_top_lo": nan, "scale_top_hi": nan, "scale_slope": nan,
                           "scale_slope_lo": nan, "scale_slope_hi": nan, "scale_slope_n": 0, "scale_train_tok_s": nan,
                           "scale_sens_n": 0, "scale_sens_changed": 0, "scale_eval_prompts": 0}
    if doc is None or not doc.get("points"):
        return out
    sets = doc.get("sets") or []
    out.update(scale_ran="measured", scale_prompts=max(p["n_prompts"] for p in doc["points"]),
               scale_n_sets=len(sets), scale_eval_prompts=len(doc.get("prompt_ids") or []))
    mdes = [r["mde"] for r in sets if r.get("mde") is not None]
    if mdes:
        out.update(scale_mde=max(mdes))
    d1 = doc.get("d1")
    if d1:
        out.update(scale_d1_delta=d1["delta"], scale_d1_lo=d1["lo"], scale_d1_hi=d1["hi"], scale_d1_p=d1["p"],
                   scale_d1_n=d1["n"],
                   scale_d1_word="higher" if d1["lo"] > 0 else "lower" if d1["hi"] < 0 else "within noise")
    drafters = doc.get("drafters") or {}
    one = drafters.get(label(REFERENCE, "1x", "B1"))
    mid = drafters.get(label(REFERENCE, *doc.get("h7_point", "16x@B2").split("@")))
    arr = lambda d: np.array([[np.nan if v is None else v for v in row] for row in d["per_seed"]], float)  # noqa: E731
    s1, s16 = (_seed_spread(arr(d)) if d else None for d in (one, mid))
    out.update(scale_spread_1x=nan if s1 is None else s1, scale_spread_16x_mid=nan if s16 is None else s16)
    t = doc.get("target") or {}
    if t.get("best"):
        out.update(scale_top_tau=t["best"]["tau"], scale_top_lo=t["best"]["lo"], scale_top_hi=t["best"]["hi"])
    fit = (t.get("projection") or {}).get("fit") or {}
    if fit:
        out.update(scale_slope=fit["b"], scale_slope_lo=fit["b_lo"], scale_slope_hi=fit["b_hi"], scale_slope_n=fit["n"])
    speeds = [p["tokens_per_s"] for p in doc["points"] if p.get("tokens_per_s")]
    out["scale_train_tok_s"] = float(np.mean(speeds)) if speeds else nan
    sens = doc.get("seed_sensitivity") or []
    out.update(scale_sens_n=len(sens), scale_sens_changed=sum(r["changed"] for r in sens))
    return out


def curve_rows(doc: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The default triple's data curve as a table: distinct train prompts (count and multiple of
    the study's own), the budget of training tokens (the base, twice, four times), training
    CPU-minutes and the outcome tau with its interval over prompts."""
    budgets = {"B1": "base", "B2": "twice the base", "B4": "four times the base"}
    rows = []
    for p in (doc or {}).get("points", []):
        _, multiple, budget = split_label(p["label"])
        rows.append({"distinct prompts": f"{p['n_prompts']:,} ({multiple})",
                     "training tokens": budgets.get(budget, budget), "CPU-minutes": round(p["cpu_s"] / 60, 1),
                     "tau": p["tau"], "95% CI": f"[{p['lo']:.3f}, {p['hi']:.3f}]", "seeds": p.get("n_seeds")})
    return sorted(rows, key=lambda r: (r["CPU-minutes"]))


def h7_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """H7's table rows."""
    return [{"set": r["set"], "layers": str(r["layers"]), "seeds": r["n_seeds"], "delta": f"{r['delta']:+.3f}",
             "95% CI": _ci(r["lo"], r["hi"]), "Holm p": f"{r['p_holm']:.3g}",
             "MDE": "-" if r["mde"] is None else f"{r['mde']:.3f}",
             "verdict": r["verdict"]} for r in doc["sets"]]


def h7_table(doc: Mapping[str, Any] | None) -> Any:
    """H7's table as the page shows it (None before the design has run)."""
    import pandas as pd

    from activation_wave.core.tables import format_table

    return format_table(pd.DataFrame(h7_rows(doc))) if doc and doc["sets"] else None


def hypotheses(doc: Mapping[str, Any] | None) -> list[Any]:
    """H7 per set, for chapter 8's table (empty before the design has run; ``supported`` None
    where the prompts are too few or the Holm p is too close to the line for a verdict).
    H7 predicts that no set beats the default: supported for a set unless it is "higher"."""
    from activation_wave.core.stats import within_noise
    from activation_wave.study.hypotheses import Hypothesis

    if doc is None:
        return []
    out = []
    base = next((p["tau"] for p in doc.get("points") or [] if p["label"] == f"eagle3-default@{doc['h7_point']}"), None)
    for r in doc["sets"]:
        v = r["verdict"]
        ok = None if v.startswith("no verdict") or v == "close to the line" else v != "higher"
        out.append(Hypothesis(f"H7 ({r['set']})", f"at {doc['h7_point']} it does not beat the default",
                              f"delta = {r['delta']:+.3f} {_ci(r['lo'], r['hi'])}, Holm p = {r['p_holm']:.3g}, "
                              f"n = {r['n']} prompts, {r['n_seeds']} seeds{within_noise(r['lo'], r['hi'])}", ok,
                              "set minus default, paired over prompts, Holm across the sets (the robustness page)",
                              (r["lo"], r["hi"]), value=r["delta"], p=r["p_holm"], n=r["n"], base=base,
                              mde=r.get("mde")))
    return out
