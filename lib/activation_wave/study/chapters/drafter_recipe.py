"""The drafter-recipe page (``notebooks/10_drafter_recipe.py``): what it shows of the recipe
study's results file (``recipe.json``, written by ``wave bench --only recipe``) and of the
llama.cpp agreement check (``llamacpp_agreement.json``).

The page renders whether or not the study has run: without a results file it says so and
shows only the pre-registered design.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from activation_wave.core.config import StudyConfig
from activation_wave.core.results import load_optional
from activation_wave.core.stats import near_line
from activation_wave.study import training_costs as costs

#: Fewest eval prompts for an R1 verdict: below it a bootstrap over prompts takes a handful of
#: distinct values and its p means little (the smoke profile scores 2).
MIN_PROMPTS = 10

__all__ = ["MIN_PROMPTS", "planned_arms", "verdict", "arm_rows", "status_text", "headline", "seed_sensitivity_text",
           "power_text", "p_error_text", "hypotheses",
           "screen_headline", "confirm_text",
           "not_run_figure", "agreement_values", "break_even_taus", "TARGETS", "data_projection",
           "projection_marks", "projection_rows", "projection_text", "best_reached",
           "efficiency_text", "equal_cost_text", "reach_text", "curve_fit"]

#: The recipe issue's targets for the benchmark drafter's online tau at T = 0 (must reach, goal).
TARGETS = {"the issue's target": 1.9, "the issue's goal": 2.3}


def planned_arms(cfg: StudyConfig) -> int:
    """How many arms the profile's screen registers (``bench.recipe_arms`` less ``combined``)."""
    return len([a for a in cfg.bench.recipe_arms if a != "combined"])


def verdict(arm: Mapping[str, Any], alpha: float = 0.05) -> str:
    """R1's wording for one arm: helps / hurts at Holm p < ``alpha``, else within noise; the
    post-hoc combined arm is labelled as such (it is outside the Holm family).

    >>> verdict({"delta": 0.05, "p_holm": 0.01}), verdict({"delta": -0.02, "p_holm": 0.2})
    ('helps', 'within noise')
    >>> verdict({"delta": 0.05, "p_holm": None, "post_hoc": True})
    'post hoc (no test)'
    >>> verdict({"delta": 0.05, "p_holm": 0.01, "n_prompts": 2})
    'no verdict (n = 2 prompts)'
    >>> verdict({"delta": -0.02, "p_holm": 0.052})
    'close to the line'
    """
    if arm.get("post_hoc") or arm.get("p_holm") is None:
        return "post hoc (no test)"
    if arm.get("n_prompts", MIN_PROMPTS) < MIN_PROMPTS:
        return f"no verdict (n = {arm['n_prompts']} prompts)"
    if near_line(arm["p_holm"], alpha):
        return "close to the line"
    if arm["p_holm"] < alpha:
        return "helps" if arm["delta"] > 0 else "hurts"
    return "within noise"


def arm_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One table row per arm, in the order of the results file: the outcome with its interval,
    the paired delta against the base with its interval, Holm p, R1's verdict, the realised
    minimum detectable delta at 80% power and the strictest Holm level, and (labelled
    secondary) training CPU-minutes and delta per CPU-minute over the base's cost."""
    base_cpu = float(doc["base"]["cpu_s"]) / 60
    rows = []
    for a in doc["arms"]:
        cpu = float(a["cpu_s"]) / 60
        extra = cpu - base_cpu
        rows.append({
            "arm": a["name"], "change": ", ".join(f"{k}={v}" for k, v in a.get("overrides", {}).items()),
            "tau": a["tau"], "tau 95% CI": _ci(a.get("lo"), a.get("hi")),
            "delta": a["delta"], "delta 95% CI": _ci(a.get("delta_lo"), a.get("delta_hi")),
            "p (Holm)": a.get("p_holm"), "R1": verdict(a),
            "MDE (Holm)": None if a.get("mde_holm") is None else round(float(a["mde_holm"]), 3),
            "seeds": a["n_seeds"],
            "train CPU-min (secondary)": round(cpu, 1),
            "extra CPU-min vs base (secondary)": round(extra, 1)})
    return rows


def _ci(lo: float | None, hi: float | None) -> str:
    return "n/a" if lo is None or hi is None else f"[{lo:+.3f}, {hi:+.3f}]" if lo < 0 else f"[{lo:.3f}, {hi:.3f}]"


def seed_sensitivity_text(doc: Mapping[str, Any] | None) -> str:
    """The page's sentence on the seed-sensitivity analysis (``seed_sensitivity``): which R1
    verdicts it changes.

    >>> seed_sensitivity_text({"seed_sensitivity": [{"name": "a", "changed": True, "verdict": "within noise",
    ...     "registered_verdict": "hurts", "delta": -0.05, "delta_lo": -0.11, "delta_hi": 0.0, "p_holm": 0.32,
    ...     "n_boot": 1000}, {"name": "b", "changed": False}]}).split(": ")[1].split(". ")[0]
    'a from hurts to within noise (delta -0.050 [-0.110, +0.000], Holm p 0.32)'
    """
    rows = (doc or {}).get("seed_sensitivity") or []
    if not rows:
        return "The seed-sensitivity analysis has not run on this results file."
    moved = [r for r in rows if r["changed"]]
    head = (f"Resampling each arm's and the base's seeds as well as the prompts (a hierarchical bootstrap, "
            f"{rows[0]['n_boot']:,} resamples, the seeds spread to their unbiased variance; a sensitivity analysis "
            f"beside R1, not a test of its own) changes {len(moved)} of {len(rows)} verdicts")
    if not moved:
        return head + ": every R1 verdict survives it."
    return (head + ": " + "; ".join(f"{r['name']} from {r['registered_verdict']} to {r['verdict']} (delta "
                                   f"{r['delta']:+.3f} {_ci(r['delta_lo'], r['delta_hi'])}, Holm p {r['p_holm']:.2f})"
                                   for r in moved)
            + f". With {((doc or {}).get('base') or {}).get('n_seeds', 'few')} seeds per arm the seeds' spread is "
              "itself poorly known, so this is a sensitivity check, not a better test")


def power_text(doc: Mapping[str, Any] | None) -> str:
    """The arms that R1 finds within noise although their delta is at least half their realised
    MDE (Holm level): within noise because the screen is underpowered for them, not shown to be
    without effect.

    >>> power_text({"arms": [{"name": "v", "delta": 0.014, "p_holm": 0.08, "mde_holm": 0.020, "mde": 0.015},
    ...                      {"name": "w", "delta": 0.001, "p_holm": 0.9, "mde_holm": 0.02, "mde": 0.015}]})[:60]
    'Within noise but not shown absent, the screen being underpow'
    """
    arms = [a for a in (doc or {}).get("arms", []) if a.get("mde_holm") is not None and not a.get("post_hoc")]
    if not arms:
        return ""
    weak = [a for a in arms if verdict(a) == "within noise" and abs(a["delta"]) >= a["mde_holm"] / 2]
    lo, hi = min(a["mde_holm"] for a in arms), max(a["mde_holm"] for a in arms)
    text = (f"The realised minimum detectable delta at 80% power and the strictest Holm level ranges from {lo:.3f} to "
            f"{hi:.3f} over the arms (the MDE column)")
    if not weak:
        return text + "."
    return ("Within noise but not shown absent, the screen being underpowered for them: " + "; ".join(
        f"{a['name']} ({a['delta']:+.3f} against an MDE of {a['mde_holm']:.3f}, {a['mde']:.3f} unadjusted)"
        for a in weak) + ". " + text + ".")


def p_error_text(doc: Mapping[str, Any] | None) -> str:
    """How many resamples R1's p-values rest on and their largest Monte Carlo error (:func:`~activation_wave.study.hypotheses.p_error_text`)."""
    from activation_wave.study.hypotheses import p_error_text as text

    return text([a for a in (doc or {}).get("arms", []) if not a.get("post_hoc")], "name")


def status_text(doc: Mapping[str, Any] | None, planned: int) -> str:
    """One sentence on how far the study has run: no results, or arms measured out of planned.

    >>> status_text(None, 20)
    'The screen has not run yet (no recipe.json): this page shows the pre-registered design only, and no recipe is adopted.'
    """
    if doc is None:
        return ("The screen has not run yet (no recipe.json): this page shows the pre-registered design only, "
                "and no recipe is adopted.")
    screened = [a for a in doc["arms"] if not a.get("post_hoc")]
    helped = [a["name"] for a in screened if verdict(a) == "helps"]
    text = (f"{len(screened)} of the {planned} pre-registered arms have been measured ({doc['base']['n_seeds']} "
            f"seeds each, {len(doc['prompt_ids'])} eval prompts); ")
    text += (f"the arms that help under R1: {', '.join(helped)}." if helped
             else "no arm helps under R1 so far (every interval covers 0 or lies below it at the Holm level).")
    if doc.get("shrunk"):
        text += (f" The screen was shrunk by the pre-registered order ({len(doc['shrunk'])} arms dropped: "
                 f"{', '.join(doc['shrunk'])}).")
    if len(screened) < planned:
        text += (f" These verdicts are interim: Holm runs over the {len(screened)} arms measured so far, and each "
                 "arm still to come can only raise the adjusted p-values. The rest of the screen, the combination "
                 "(R2) and the adoption are still to run.")
    elif (doc.get("confirm") or {}).get("pending"):
        text += " The combination (R2) and the adoption are still to run."
    return text


def headline(doc: Mapping[str, Any] | None, planned: int | None = None) -> str:
    """The screen's R1 result in one sentence, for the landing page and chapter 8: the arms that
    help or hurt with their paired delta and interval, the rest within noise; marked interim
    when fewer than ``planned`` arms are in.

    >>> headline(None)
    'nothing has been measured yet'
    >>> text = headline({"base": {"tau": 1.5, "n_seeds": 2}, "prompt_ids": [0] * 96, "arms": [
    ...     {"name": "a", "delta": 0.031, "delta_lo": 0.01, "delta_hi": 0.05, "p_holm": 0.01},
    ...     {"name": "b", "delta": -0.004, "delta_lo": -0.02, "delta_hi": 0.01, "p_holm": 0.7}]})
    >>> text.split("), ")[1].split("; ")
    ['a (delta +0.031 [0.010, 0.050]) helps', 'the other is within noise', 'the combined recipe (stage 2) and its \
adoption are still to run']
    """
    if doc is None:
        return "nothing has been measured yet"
    screened = [a for a in doc["arms"] if not a.get("post_hoc")]
    parts = []
    for word in ("helps", "hurts"):
        named = [f"{a['name']} (delta {a['delta']:+.3f} {_ci(a['delta_lo'], a['delta_hi'])})"
                 for a in screened if verdict(a) == word]
        if named:
            parts.append(f"{', '.join(named)} {word if len(named) == 1 else word[:-1]}")
    rest = len(screened) - sum(verdict(a) in ("helps", "hurts") for a in screened)
    if rest:
        parts.append(("the other is" if rest == 1 else f"the other {rest} are") + " within noise"
                     if parts else ("it is" if rest == 1 else f"all {rest} are") + " within noise")
    b = doc["base"]
    c = doc.get("confirm") or {}
    stage2 = ("the combined recipe (stage 2) and its adoption are still to run" if c.get("pending") or not c else
              f"stage 2's R2 is {c['r2']['verdict']}" if c.get("run") else
              "so stage 2 did not run and today's recipe stays")
    if planned is not None and len(screened) < planned:
        left = planned - len(screened)
        stage2 = (f"interim: {left} of the {planned} pre-registered arms {'is' if left == 1 else 'are'} still to run, "
                  "then the combined recipe (stage 2)")
    return (f"of {len(screened)} one-factor changes to the base recipe (tau {b['tau']:.3f}; {b['n_seeds']} seeds "
            f"each, paired over {len(doc['prompt_ids'])} eval prompts, Holm), " + "; ".join(parts) + f"; {stage2}")


def screen_headline(cfg: StudyConfig, root: str | Path | None = None) -> str:
    """:func:`headline` of ``cfg``'s results file against its registered arms (landing page, chapter 8)."""
    return headline(load_optional("recipe", cfg, root), planned=planned_arms(cfg))


def confirm_text(doc: Mapping[str, Any] | None) -> str:
    """Stage 2's outcome in words: R2 with its interval and n, and R3's CPU-minutes, or why it did not run.

    >>> confirm_text({"confirm": {"run": False, "why": "no arm helps under R1: today's recipe stays"}})
    "Stage 2 did not run: no arm helps under R1: today's recipe stays."
    """
    c = (doc or {}).get("confirm")
    if not c:
        return "Stage 2 has not run: it follows a complete screen."
    if c.get("pending"):
        return ("Stage 2 has not run yet: the screen ran without the combined arm. "
                "`wave bench --profile default --only recipe` runs it next, reading the screen's drafters "
                "and scores from the ledger.")
    if not c["run"]:
        return f"Stage 2 did not run: {c['why']}."
    r2, r3, arms = c["r2"], c["r3"], c["arms"]
    minutes = lambda v: "never, within the curve measured" if v is None else f"{v:.0f} CPU-minutes"  # noqa: E731
    return (f"R2 ({r2['verdict']}): the combined recipe ({', '.join(c['from'])}) reaches tau "
            f"{arms['combined']['tau']:.3f} against today's {arms['today']['tau']:.3f} on the full data, "
            f"delta {r2['delta']:+.3f} {_ci(r2['delta_lo'], r2['delta_hi'])}, p {r2['p']:.3g}, n = {r2['n_prompts']} "
            f"prompts, {c['n_seeds']} seeds each. R3 (descriptive): today's curve reaches tau {r3['mark']} after "
            f"{minutes(r3['today_cpu_min'])}, the combined one after {minutes(r3['combined_cpu_min'])}"
            + ("" if r3["half_of_today"] is None else
               f": {'at most' if r3['half_of_today'] else 'more than'} half of today's") + ".")


def not_run_figure() -> Any:
    """A small figure that says the recipe screen has not run (the page glues it in place of
    the results figures, so the book builds before the study has run)."""
    from activation_wave.plots import plot_not_run

    return plot_not_run("not measured yet: wave bench --only recipe")


def strength_values(pred: Mapping[str, Any] | None, bench: Mapping[str, Any]) -> dict[str, float]:
    """Where today's drafters stand, for the page's opening: chapter 6's default triple on its
    pre-registered outcome (``06_predictors``) and the benchmark drafter's training-time
    offline tau (``speculative_decoding`` in benchmarks.json); NaN where not measured.

    >>> strength_values({"reference": "d", "sets": [{"set": "d", "tau": 1.32}]},
    ...                 {"speculative_decoding": {"drafter_eval_offline": {"tau_offline": 1.74}}})
    {'ch6_tau': 1.32, 'bench_tau': 1.74}
    """
    ref = (pred or {}).get("reference", "eagle3-default")
    ch6 = next((s.get("tau") for s in (pred or {}).get("sets", []) if s.get("set") == ref), None)
    spec = (bench.get("speculative_decoding") or {}).get("drafter_eval_offline") or {}
    nan = float("nan")
    return {"ch6_tau": nan if ch6 is None else float(ch6),
            "bench_tau": nan if spec.get("tau_offline") is None else float(spec["tau_offline"])}


def agreement_values(ag: Mapping[str, Any] | None) -> dict[str, Any]:
    """Glue values of the llama.cpp greedy-agreement check (``llamacpp_agreement.json``)."""
    if ag is None:
        return {"ag_identical": 0, "ag_compared": 0, "ag_prefix": float("nan"), "ag_f32_identical": 0,
                "ag_f32_compared": 0, "ag_f32_prefix": float("nan"), "ag_second": 0, "ag_div_n": 0,
                "ag_gap_median": float("nan"), "ag_engine": "not measured"}
    a, f, d = ag["agreement"], ag["like_with_like_f32"], ag["divergence"]
    fv = f["vs_pytorch"]
    return {"ag_identical": a["identical"], "ag_compared": a["compared"], "ag_prefix": a["mean_prefix_share"],
            "ag_f32_identical": fv["identical"], "ag_f32_compared": fv["compared"],
            "ag_f32_prefix": fv["mean_prefix_share"], "ag_second": d["llamacpp_token_is_pytorch_second"],
            "ag_div_n": d["n"], "ag_gap_median": d["gap_median"], "ag_engine": ag["llamacpp"]["engine"]}


def break_even_taus(bench: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The online tau at which each engine's speculation breaks even with its own plain decoding
    at the benchmark's depth, from measured rounds (``benchmarks.json``): our PyTorch loop, the
    decoding benchmark's measured round (tau / speedup, in plain steps; chapter 9), and llama.cpp
    on 1 thread, chapter 11's round of the 135M target (``llamacpp_1.5b``, the newer run); an
    engine not measured is left out. A value above the depth's tau_max cannot be reached."""
    from activation_wave.core.results import load_benchmarks

    bench = load_benchmarks() if bench is None else bench
    out = {}
    spec = bench.get("speculative_decoding") or {}
    if spec.get("tau_t0") and spec.get("speedup_vs_plain_t0"):
        out["our PyTorch loop"] = round(float(spec["tau_t0"]) / float(spec["speedup_vs_plain_t0"]), 4)
    try:
        rc = bench["llamacpp_1.5b"]["small"]["by_threads"]["1"]["eagle3"]["round_costs"]
        out["llama.cpp, 1 thread"] = float(rc["round_in_plain_steps"])
    except (KeyError, TypeError):
        pass
    return out


def tau_max(bench: Mapping[str, Any]) -> int | None:
    """The most tokens a chain round can yield at the decoding benchmark's depth (depth + 1)."""
    depth = ((bench.get("speculative_decoding") or {}).get("spec") or {}).get("depth")
    return None if depth is None else int(depth) + 1


def curve_fit(curve: Sequence[Mapping[str, float]]) -> dict[str, float] | None:
    """Least-squares fit tau = a + b log2(CPU-minutes) over a curve's points (None for fewer than 2)."""
    pts = [(float(p["cpu_s"]) / 60, float(p["tau_offline"])) for p in curve if p["cpu_s"] > 0]
    if len(pts) < 2:
        return None
    x, y = np.log2([m for m, _ in pts]), np.array([t for _, t in pts])
    b, a = np.polyfit(x, y, 1)
    return {"a": float(a), "b": float(b)}


def data_projection(bench: Mapping[str, Any], marks: Mapping[str, float]) -> dict[str, Any] | None:
    """What more data would take for today's recipe to reach each of ``marks`` (online taus), all
    from :mod:`activation_wave.study.training_costs`, the book's one source: chapter 9's data curve
    and its fit tau = a + b log2(positions) with the slope's 95% interval
    (:func:`~activation_wave.study.training_costs.data_curve`); each mark put on the curve's offline
    scale (:func:`~activation_wave.study.training_costs.offline_mark`); the multiple of today's data
    it needs, with its interval (:func:`~activation_wave.study.training_costs.data_multiple`); and
    the training time = multiple x today's measured cost per drafter (training time grows with
    the positions at fixed epochs; generation not counted). A mark above the depth's tau_max
    cannot be reached by any drafter at that depth and gets no time. None when not measured.
    """
    curve = costs.data_curve(bench)
    today = costs.budget_cpu_min(bench, None).get(costs.TODAY)
    if curve is None or today is None:
        return None
    per_position = today["cpu_min"] / curve["today"]["positions"]
    points = [{**p, "cpu_s": p["positions"] * per_position * 60} for p in curve["points"]]
    shift = float(np.log2(per_position))  # log2(minutes) = log2(positions) + shift
    fit = {"a": curve["a"] - curve["b"] * shift, "b": curve["b"], "b_lo": curve["b_lo"], "b_hi": curve["b_hi"]}
    cap = tau_max(bench)
    out = []
    for label, online in marks.items():
        tau = costs.offline_mark(online, bench)
        reachable = cap is None or online <= cap
        m = costs.data_multiple(curve, tau) if reachable and tau is not None else {"multiple": None, "lo": None,
                                                                                   "hi": None, "reached": False}
        minutes = lambda k: None if k is None else k * today["cpu_min"]  # noqa: E731
        out.append({"label": label, "online_tau": float(online), "tau": tau, "reachable": reachable,
                    "data_multiple": m["multiple"], "multiple_lo": m["lo"], "multiple_hi": m["hi"],
                    "cpu_min": minutes(m["multiple"]), "cpu_min_lo": minutes(m["lo"]), "cpu_min_hi": minutes(m["hi"]),
                    "time_text": costs.duration_text(minutes(m["multiple"])) if reachable else f"unreachable at depth {cap - 1}",
                    "reached": m["reached"]})
    return {"curve": points, "fit": fit, "last": points[-1], "marks": out, "today_cost": today, "tau_max": cap,
            "n_points": curve["n"], "gain_per_doubling": curve["b"]}


def projection_marks(bench: Mapping[str, Any] | None = None) -> dict[str, float]:
    """The marks a projection aims at (online taus): the issue's target and goal, then each engine's break-even."""
    return {**TARGETS, **{f"break-even, {k}": v for k, v in break_even_taus(bench).items()}}


def _range(lo: float | None, hi: float | None, fmt: Any) -> str:
    return f"[{fmt(lo)}, {'unbounded' if hi is None else fmt(hi)}]" if lo is not None else ""


def _multiple(k: float | None) -> str:
    return "n/a" if k is None else f"{k:,.2f}x" if k < 10 else f"{k:,.0f}x" if k < 1e4 else f"{k:.1e}x"


def projection_rows(proj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One table row per mark: its online tau and the same on the curve's offline scale, the
    multiple of today's data and the training time the fit predicts, each with the interval
    from the slope's 95% interval (an extrapolation unless already reached)."""
    rows = []
    for m in proj["marks"]:
        if not m["reachable"]:
            multiple = time = f"unreachable: above tau_max = {proj['tau_max']}"
        elif m["reached"]:
            multiple = time = "reached by today's drafter"
        else:
            multiple = f"{_multiple(m['data_multiple'])} {_range(m['multiple_lo'], m['multiple_hi'], _multiple)}"
            time = f"{costs.duration_text(m['cpu_min'])} {_range(m['cpu_min_lo'], m['cpu_min_hi'], costs.duration_text)}"
        rows.append({"mark": m["label"], "online tau": m["online_tau"],
                     "offline tau (curve's scale)": m["tau"], "x today's data [95% CI]": multiple,
                     "training time (extrapolated) [95% CI]": time})
    return rows


def projection_text(proj: Mapping[str, Any] | None) -> str:
    """The paragraph under the projection: the fit, the scales, today's cost and the predicted times."""
    if proj is None:
        return "Chapter 9's data-scaling drafters have not been measured (`wave bench --only drafter_data_scaling`)."
    f, last, today = proj["fit"], proj["last"], proj["today_cost"]
    marks = "; ".join(f"{m['label']} (online tau {m['online_tau']:.2f}, offline {m['tau']:.2f}): "
                      + (m["time_text"] if not m["reachable"] else "reached" if m["reached"] else
                         f"{_multiple(m['data_multiple'])} today's data "
                         f"{_range(m['multiple_lo'], m['multiple_hi'], _multiple)}, {m['time_text']}")
                      for m in proj["marks"])
    return (f"Fit over chapter 9's {proj['n_points']} drafters of today's recipe (all train prompts, 0 to "
            f"{last['samples_per_prompt']} sampled responses each): +{f['b']:.3f} offline tau per doubling of the "
            f"training data (95% interval [{f['b_lo']:.3f}, {f['b_hi']:.3f}]). Times are multiples of today's "
            f"measured cost, {today['cpu_min']:.1f} CPU-minutes per drafter ({today['measured']}), the figure every "
            "page of this book uses. The marks are online tau (the decoding benchmark's prompts); each is put on the "
            "curve's offline scale (96 eval prompts, no threshold) by the benchmark drafter's own ratio of the two. "
            f"A chain of depth {proj['tau_max'] - 1} yields at most {proj['tau_max']} tokens per round, so a mark "
            f"above {proj['tau_max']} cannot be reached at that depth. Extrapolated: {marks}. Generating the sampled "
            "responses is not counted, and the fit assumes the gain per doubling holds far beyond the data measured, "
            "on the same 324 train prompts.")


def best_reached(bench: Mapping[str, Any]) -> str:
    """Where today's benchmark drafter stands against the issue's targets (online tau at T = 0
    of at least 1.9, a lossless speedup of at least 1.4x over the plain loop), from
    ``speculative_decoding`` in benchmarks.json.

    >>> best_reached({"speculative_decoding": {"tau_t0": 1.84, "speedup_vs_plain_t0": 1.004, "rounds": 5,
    ...     "n_prompts": 16, "round_spread": {"speedup_vs_plain_t0": {"lo": 0.975, "hi": 1.04}},
    ...     "drafter_eval_offline": {"tau_offline": 1.75}}}).split(": ")[1]
    'online tau 1.84 at T = 0 (target 1.9, not reached) and 1.00x the plain loop [0.97, 1.04] over 5 interleaved rounds on 16 prompts (target 1.4x, not reached); offline on the eval split it reaches 1.75'
    """
    s = bench.get("speculative_decoding")
    if not s:
        return "The decoding benchmark has not run (`wave bench --only speculative_decoding`)."
    spread = (s.get("round_spread") or {}).get("speedup_vs_plain_t0") or {}
    ci = f" [{spread['lo']:.2f}, {spread['hi']:.2f}]" if "lo" in spread else ""
    tau, speed = float(s["tau_t0"]), float(s["speedup_vs_plain_t0"])
    target_tau, target_speed = TARGETS["the issue's target"], 1.4
    return (f"The best drafter measured is still today's benchmark drafter: online tau {tau:.2f} at T = 0 (target "
            f"{target_tau:g}, {'reached' if tau >= target_tau else 'not reached'}) and {speed:.2f}x the plain loop{ci} "
            f"over {s.get('rounds', 1)} interleaved rounds on {s['n_prompts']} prompts (target {target_speed:g}x, "
            f"{'reached' if speed >= target_speed else 'not reached'}); offline on the eval split it reaches "
            f"{s['drafter_eval_offline']['tau_offline']:.2f}")


def efficiency_text(doc: Mapping[str, Any] | None) -> str:
    """The issue's efficiency target (today's offline tau in at most half of today's
    CPU-minutes) against the screen: the cheapest arm that R1 does not find worse than the
    base, and its training cost as a share of the base's (a secondary measure).

    >>> efficiency_text({"base": {"cpu_s": 800.0}, "arms": [
    ...     {"name": "a", "cpu_s": 300.0, "delta": -0.1, "p_holm": 0.001},
    ...     {"name": "b", "cpu_s": 600.0, "delta": 0.01, "p_holm": 0.4}]})
    'the cheapest arm not worse than the base under R1 is b, at 75% of its training CPU-seconds (a secondary measure): the efficiency target (half) is not met by any arm'
    """
    if doc is None:
        return "the screen has not run"
    base = float(doc["base"]["cpu_s"])
    ok = [a for a in doc["arms"] if not a.get("post_hoc") and verdict(a) != "hurts"]
    if not ok:
        return "every arm is worse than the base under R1"
    a = min(ok, key=lambda x: float(x["cpu_s"]))
    share = float(a["cpu_s"]) / base
    met = ("is not met by any arm" if share > 0.5 else "is met" if verdict(a) == "helps"
           else "is met only in the sense that its tau is within noise of the base's")
    return (f"the cheapest arm not worse than the base under R1 is {a['name']}, at {share:.0%} of its training "
            f"CPU-seconds (a secondary measure): the efficiency target (half) {met}")


def equal_cost_text(doc: Mapping[str, Any] | None) -> str:
    """Each arm that helps under R1, read at the base's training cost: its learning curve's
    tau (linear between evaluated epochs) at the base's final cumulative CPU-seconds against
    the base's final tau. A secondary, descriptive reading (curves pool eval records).

    >>> base = {"curve": [{"cpu_s": 60.0, "tau_offline": 1.3}, {"cpu_s": 120.0, "tau_offline": 1.4}]}
    >>> arm = {"name": "d", "delta": 0.08, "p_holm": 0.002, "curve": [{"cpu_s": 100.0, "tau_offline": 1.3},
    ...        {"cpu_s": 200.0, "tau_offline": 1.5}]}
    >>> equal_cost_text({"base": base, "arms": [arm]})
    "At the base's training cost (2.0 CPU-minutes), d's curve stands at 1.340 against the base's 1.400 (-0.060; pooled curves, a secondary reading): its gain is bought with more compute, not a better use of it."
    """
    if doc is None:
        return ""
    base = doc["base"].get("curve") or []
    if not base:
        return ""
    x, tau = float(base[-1]["cpu_s"]), float(base[-1]["tau_offline"])
    out = []
    for a in doc["arms"]:
        if a.get("post_hoc") or verdict(a) != "helps" or not a.get("curve"):
            continue
        pts = [(float(p["cpu_s"]), float(p["tau_offline"])) for p in a["curve"]]
        if x < pts[0][0] or x > pts[-1][0]:
            continue
        at = float(np.interp(x, [c for c, _ in pts], [t for _, t in pts]))
        out.append(f"{a['name']}'s curve stands at {at:.3f} against the base's {tau:.3f} ({at - tau:+.3f}; pooled "
                   "curves, a secondary reading)" + ("" if at > tau else
                                                    ": its gain is bought with more compute, not a better use of it"))
    return f"At the base's training cost ({x / 60:.1f} CPU-minutes), " + "; ".join(out) + "." if out else ""


def reach_text(bench: Mapping[str, Any], doc: Mapping[str, Any] | None = None) -> str:
    """One sentence for the landing page and chapter 8: where the benchmark drafter stands
    against the issue's targets, and the data multiple and training time the data curve's
    extrapolation puts on the first target (:func:`data_projection`, one source with chapters 9 and 10)."""
    s = bench.get("speculative_decoding")
    if not s:
        return "the decoding benchmark has not run"
    target = TARGETS["the issue's target"]
    text = (f"today's benchmark drafter reaches an online tau of {float(s['tau_t0']):.2f} and "
            f"{float(s['speedup_vs_plain_t0']):.2f}x the plain loop, against targets of {target:g} and 1.4x")
    proj = data_projection(bench, {"t": target})
    m = proj["marks"][0] if proj else None
    if m and not m["reached"] and m["cpu_min"] is not None:
        text += (f"; extrapolating chapter 9's data curve, tau {target:g} would take about "
                 f"{_multiple(m['data_multiple'])} today's data {_range(m['multiple_lo'], m['multiple_hi'], _multiple)}, "
                 f"{m['time_text']} of training at today's measured cost, generation not counted")
    return text


def hypotheses(doc: Mapping[str, Any] | None) -> list["Hypothesis"]:
    """R1 of the recipe screen as one row of chapter 8's hypotheses table: does any one-factor
    change help (per arm, Holm across the screened arms)? Empty when the screen has not run.

    >>> [h.supported for h in hypotheses({"arms": [{"name": "a", "delta": 0.08, "delta_lo": 0.06, "delta_hi": 0.1,
    ...     "p_holm": 0.001, "n_prompts": 96, "n_seeds": 2}, {"name": "b", "delta": -0.1, "delta_lo": -0.2,
    ...     "delta_hi": -0.05, "p_holm": 0.001, "n_prompts": 96, "n_seeds": 2}]})]
    [True]
    """
    from activation_wave.study.hypotheses import Hypothesis

    arms = [a for a in (doc or {}).get("arms", []) if not a.get("post_hoc")]
    if not arms:
        return []
    words = {a["name"]: verdict(a) for a in arms}
    helps = [a for a in arms if words[a["name"]] == "helps"]
    stat = "; ".join(f"{a['name']} {a['delta']:+.3f} {_ci(a['delta_lo'], a['delta_hi'])}, Holm p {a['p_holm']:.2g}"
                     for a in helps) or "no arm helps"
    hurt = [n for n, w in words.items() if w == "hurts"]
    stat += (f"; {len(hurt)} hurt ({', '.join(hurt)}); {sum(w == 'within noise' for w in words.values())} within "
             f"noise; n = {arms[0]['n_prompts']} prompts, {arms[0]['n_seeds']} seeds per arm")
    return [Hypothesis("R1", "a one-factor change of the base recipe helps (per arm, recipe screen)", stat,
                       bool(helps) if all(not w.startswith("no verdict") for w in words.values()) else None,
                       f"paired bootstrap per arm, Holm across the {len(arms)} screened arms (the recipe page)")]
