"""One source for every training cost per budget and every data multiple the book states.

Each page that quotes what a drafter costs, or how much more data a tau would need, reads one
of these functions (a test greps the executed pages for typed figures):

* :func:`budget_cpu_min`: training CPU-minutes per drafter of each budget the study names
  (chapter 6's one epoch, the recipe screen's base = the strength page's top budget, today's
  benchmark recipe), each with the run it was measured on;
* :func:`data_curve` and :func:`data_multiple`: chapter 9's data-scaling drafters of today's
  recipe (all train prompts, 0 to 6 sampled responses each), their fit
  tau = a + b log2(positions) with the slope's 95% interval, and the multiple of today's data
  a given offline tau needs (an extrapolation, with its interval from the slope's);
* :func:`log2_fit`: the least-squares line y = a + b log2(x) with the slope's 95% t interval,
  the form of every projection in the book (chapter 10's, the data-scale page's);
* :func:`duration_text`: CPU-minutes in the largest sensible unit;
* :func:`offline_mark`: an online tau (the decoding benchmark's 16 prompts) put on the offline
  scale of the curve (96 eval prompts) by the benchmark drafter's own ratio of the two.

Training time grows in proportion to the positions at a fixed number of epochs, so a data
multiple times today's cost is the training time a mark would take (generation not counted).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["train_cpu_min", "budget_cpu_min", "log2_fit", "data_curve", "data_multiple", "offline_mark",
           "duration_text", "TODAY", "SCREEN", "CHAPTER6"]

CHAPTER6, SCREEN, TODAY = "chapter 6 (one epoch)", "recipe screen base", "today's benchmark recipe"


def train_cpu_min(train_wall_s: float | None, threads: int | None) -> float | None:
    """Training CPU-minutes of one drafter: optimisation wall time x torch threads / 60.

    >>> train_cpu_min(1206.54, 2)
    40.218
    """
    if not train_wall_s:
        return None
    return round(float(train_wall_s) * int(threads or 1) / 60, 3)


def budget_cpu_min(bench: Mapping[str, Any] | None, recipe_doc: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Training CPU-minutes per drafter of each named budget, with what they were measured on:

    * chapter 6's one-epoch drafters (``speculative_decoding.study_drafters``: mean over them, 1 thread);
    * the recipe screen's base (``recipe.json`` ``base.cpu_s``: its 2 seeds, fp32, 1 thread): the
      strength page's top budget is the same recipe, so it is quoted at this cost;
    * today's benchmark recipe (the decoding benchmark's drafter, ``drafter_training``).

    A budget not measured is left out.

    >>> b = {"speculative_decoding": {"drafter_training": {"train_wall_s": 1206.54, "threads": 2},
    ...      "drafter_config": {"dtype": "bf16"}, "study_drafters": {"train_s_per_drafter_mean": 196.26}}}
    >>> {k: v["cpu_min"] for k, v in budget_cpu_min(b, {"base": {"cpu_s": 888.53, "n_seeds": 2}}).items()}
    {'chapter 6 (one epoch)': 3.271, 'recipe screen base': 14.809, "today's benchmark recipe": 40.218}
    """
    out: dict[str, dict[str, Any]] = {}
    spec = (bench or {}).get("speculative_decoding") or {}
    ch6 = (spec.get("study_drafters") or {}).get("train_s_per_drafter_mean")
    if ch6:
        out[CHAPTER6] = {"cpu_min": train_cpu_min(ch6, 1), "measured": "mean over chapter 6's drafters, 1 thread, fp32"}
    base = (recipe_doc or {}).get("base") or {}
    if base.get("cpu_s"):
        out[SCREEN] = {"cpu_min": train_cpu_min(base["cpu_s"], 1),
                       "measured": f"mean over the screen base's {base.get('n_seeds', '?')} seeds, 1 thread, fp32"}
    tr = spec.get("drafter_training") or {}
    if tr.get("train_wall_s"):
        dtype = (spec.get("drafter_config") or {}).get("dtype") or "unrecorded dtype"
        out[TODAY] = {"cpu_min": train_cpu_min(tr["train_wall_s"], tr.get("threads")),
                      "measured": (f"the decoding benchmark's drafter, {tr.get('threads') or 1} threads, {dtype} on a "
                                   "CPU with bf16 units")}
    return out


def log2_fit(x: Any, y: Any) -> dict[str, Any]:
    """Least squares y = a + b log2(x) with the slope's 95% Student-t interval (n - 2 degrees of
    freedom: wide with few points, as it should be). Needs at least 3 points.

    >>> f = log2_fit([1, 2, 4, 8], [1.0, 1.11, 1.19, 1.3])
    >>> round(f["b"], 3), f["b_lo"] < f["b"] < f["b_hi"], f["n"]
    (0.098, True, 4)
    """
    from scipy.stats import t as student

    xs, ys = np.log2(np.asarray(x, dtype=float)), np.asarray(y, dtype=float)
    if len(xs) < 3:
        raise ValueError(f"a fit with a slope interval needs at least 3 points, got {len(xs)}")
    b, a = np.polyfit(xs, ys, 1)
    resid = ys - (a + b * xs)
    se = float(np.sqrt(resid @ resid / (len(xs) - 2) / ((xs - xs.mean()) @ (xs - xs.mean()))))
    half = float(student.ppf(0.975, len(xs) - 2)) * se
    return {"a": float(a), "b": float(b), "b_lo": float(b) - half, "b_hi": float(b) + half, "n": len(xs)}


def duration_text(minutes: float | None) -> str:
    """CPU-minutes in the largest sensible unit (CPU-minutes, -hours, -days, -years).

    >>> duration_text(90), duration_text(600), duration_text(None)[:5]
    ('90 CPU-minutes', '10 CPU-hours', 'never')
    """
    if minutes is None:
        return "never (the fit does not rise)"
    for unit, size in (("CPU-years", 525_600.0), ("CPU-days", 1440.0), ("CPU-hours", 60.0)):
        if minutes >= 2 * size:
            return f"{minutes / size:,.0f} {unit}" if minutes / size >= 10 else f"{minutes / size:.1f} {unit}"
    return f"{minutes:.0f} CPU-minutes"


def data_curve(bench: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Chapter 9's drafters of today's recipe on all train prompts (``drafter_data_scaling``
    points at fraction 1, 0 to k sampled responses per prompt), fitted by least squares as
    tau_offline = a + b log2(positions), with the slope's 95% t interval. ``today``: the point
    with the most positions (today's benchmark data). None with fewer than 3 points.

    >>> pts = [{"fraction": 1.0, "samples_per_prompt": k, "loss_tokens": 1000 * 2 ** k,
    ...         "tau_offline": 1.5 + 0.1 * k + (0.01 if k == 1 else 0)} for k in range(4)]
    >>> c = data_curve({"drafter_data_scaling": {"points": pts}})
    >>> round(c["b"], 2), c["b_lo"] < 0.099 < c["b_hi"], c["today"]["positions"]
    (0.1, True, 8000)
    """
    pts = sorted((p for p in ((bench or {}).get("drafter_data_scaling") or {}).get("points", [])
                  if p.get("fraction") == 1.0), key=lambda p: p["loss_tokens"])
    if len(pts) < 3:
        return None
    fit = log2_fit([float(p["loss_tokens"]) for p in pts], [float(p["tau_offline"]) for p in pts])
    a, b = fit["a"], fit["b"]
    last = pts[-1]
    return {**fit,
            "points": [{"samples_per_prompt": p.get("samples_per_prompt", 0), "positions": int(p["loss_tokens"]),
                        "tau_offline": float(p["tau_offline"])} for p in pts],
            "today": {"positions": int(last["loss_tokens"]), "tau_offline": float(last["tau_offline"]),
                      "tau_fit": float(a + b * np.log2(last["loss_tokens"]))}}


def data_multiple(curve: Mapping[str, Any] | None, tau_offline: float) -> dict[str, Any]:
    """How many times today's data the fit needs for ``tau_offline`` (offline scale, the curve's):
    ``2 ** ((tau - fit at today) / b)``, with the interval from the slope's (the line pivoting on
    its value at today's data; None for an end where the slope is not positive or the multiple
    passes 2**40: the data could not reach it). ``reached``: today's drafter already measures at least ``tau_offline``.

    >>> data_multiple({"b": 0.1, "b_lo": 0.05, "b_hi": 0.15, "today": {"tau_fit": 1.7, "tau_offline": 1.7}}, 1.9)
    {'tau_offline': 1.9, 'multiple': 4.0, 'lo': 2.52, 'hi': 16.0, 'reached': False}
    """
    if curve is None:
        return {"tau_offline": tau_offline, "multiple": None, "lo": None, "hi": None, "reached": False}
    need = float(tau_offline) - curve["today"]["tau_fit"]

    def at(b: float) -> float | None:  # None past 2**40 times the data too: no budget could reach it
        return None if b <= 0 or need / b > 40 else round(float(2 ** (need / b)), 3)

    steep, flat = at(curve["b_hi"]), at(curve["b_lo"])  # a flat slope (None: not positive) is the far end
    lo, hi = (steep, flat) if need >= 0 else (flat, steep)
    return {"tau_offline": round(float(tau_offline), 4), "multiple": at(curve["b"]), "lo": lo, "hi": hi,
            "reached": curve["today"]["tau_offline"] >= tau_offline}


def offline_mark(online_tau: float, bench: Mapping[str, Any] | None) -> float | None:
    """An online tau of the decoding benchmark (``tau_t0``, its prompts) on the offline scale of
    the data curve (eval split, depth 3, no threshold): times the benchmark drafter's own
    offline / online ratio (one drafter's ratio, assumed to hold near it). None when not measured.

    >>> offline_mark(1.9, {"speculative_decoding": {"tau_t0": 2.0, "drafter_eval_offline": {"tau_offline": 1.8}}})
    1.71
    """
    spec = (bench or {}).get("speculative_decoding") or {}
    off = (spec.get("drafter_eval_offline") or {}).get("tau_offline")
    if not off or not spec.get("tau_t0"):
        return None
    return round(float(online_tau) * float(off) / float(spec["tau_t0"]), 4)
