"""The drafter-recipe page (``notebooks/10_drafter_recipe.py``): what it shows of the recipe
study's results file (``recipe.json``, written by ``wave bench --only recipe``) and of the
llama.cpp agreement check (``llamacpp_agreement.json``).

The page renders whether or not the study has run: without a results file it says so and
shows only the pre-registered design.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from activation_wave.core.config import StudyConfig
from activation_wave.core.stats import near_line
from activation_wave.study import training_costs as costs

#: Fewest eval prompts for an R1 verdict: below it a bootstrap over prompts takes a handful of
#: distinct values and its p means little (the smoke profile scores 2).
MIN_PROMPTS = 10

__all__ = ["MIN_PROMPTS", "planned_arms", "verdict", "arm_rows", "hypotheses",
           "not_run_figure", "agreement_values", "strength_values", "break_even_taus", "data_projection",
           "projection_marks", "projection_rows", "curve_fit", "screen_values", "power_rows",
           "mde_range", "seed_rows", "seed_values", "equal_cost_values", "efficiency_values", "projection_values"]


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
            "delta": a["delta"], "delta 95% CI (unadjusted)": _ci(a.get("delta_lo"), a.get("delta_hi")),
            "p (Holm)": a.get("p_holm"), "R1 (by the Holm p)": verdict(a),
            "MDE (Holm)": None if a.get("mde_holm") is None else round(float(a["mde_holm"]), 3),
            "seeds": a["n_seeds"],
            "train CPU-min (secondary)": round(cpu, 1),
            "extra CPU-min vs base (secondary)": round(extra, 1)})
    return rows


def _ci(lo: float | None, hi: float | None) -> str:
    return "n/a" if lo is None or hi is None else f"[{lo:+.3f}, {hi:+.3f}]" if lo < 0 else f"[{lo:.3f}, {hi:.3f}]"


def not_run_figure() -> Any:
    """A small figure that says the recipe screen has not run (the page glues it in place of
    the results figures, so the book builds before the study has run)."""
    from activation_wave.plots import plot_not_run

    return plot_not_run("not measured yet: wave bench --only recipe")


def strength_values(pred: Mapping[str, Any] | None, bench: Mapping[str, Any]) -> dict[str, float]:
    """Where today's drafters stand, for the page's opening, both on the pre-registered outcome
    (offline tau per eval prompt at depth 3 and the draft threshold, mean over prompts): the
    EAGLE-3 default's drafter of the layer study (``06_predictors``) and the decoding benchmark's
    drafter (``speculative_decoding``'s ``drafter_outcome`` in benchmarks.json); NaN where not
    measured.

    >>> strength_values({"reference": "d", "sets": [{"set": "d", "tau": 1.32}]},
    ...                 {"speculative_decoding": {"drafter_outcome": {"tau": 1.78}}})
    {'ch6_tau': 1.32, 'bench_tau': 1.78}
    """
    ref = (pred or {}).get("reference", "eagle3-default")
    ch6 = next((s.get("tau") for s in (pred or {}).get("sets", []) if s.get("set") == ref), None)
    out = (bench.get("speculative_decoding") or {}).get("drafter_outcome") or {}
    nan = float("nan")
    return {"ch6_tau": nan if ch6 is None else float(ch6),
            "bench_tau": nan if out.get("tau") is None else float(out["tau"])}


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
    on the 135M target at depth 3, the same numbers the cost page gives (one number per
    quantity): our PyTorch loop, its round as the decoding benchmark's timed run measured it
    (``speculative_decoding``; :func:`~activation_wave.study.chapters.performance.observed_break_even`),
    and llama.cpp on 1 thread, the ceiling run's measured depth-3 round (``llamacpp_ceiling``;
    :func:`~activation_wave.study.chapters.cpu_payoff.ceiling_values`); an engine not measured is
    left out. A value above the depth's tau_max cannot be reached."""
    import math

    from activation_wave.core.results import load_benchmarks
    from activation_wave.study.chapters.cpu_payoff import CEILING, ceiling_values
    from activation_wave.study.chapters.performance import observed_break_even

    bench = load_benchmarks() if bench is None else bench
    out = {}
    spec = bench.get("speculative_decoding") or {}
    if spec.get("tau_t0") and spec.get("speedup_vs_plain_t0"):
        out["our PyTorch loop"] = round(observed_break_even(spec), 4)
    if bench.get(CEILING):
        be = ceiling_values(bench[CEILING])["be_small_1"]
        if math.isfinite(be):
            out["llama.cpp, 1 thread"] = be
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
    """The marks a projection aims at (online taus): each engine's break-even (:func:`break_even_taus`)."""
    return {f"break-even, {k}": v for k, v in break_even_taus(bench).items()}


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
    best = max(arms, key=lambda a: a["delta"])  # its interval stands for the screen in the glance table
    return [Hypothesis("R1", "a one-factor change of the base recipe helps (per arm, recipe screen)", stat,
                       bool(helps) if all(not w.startswith("no verdict") for w in words.values()) else None,
                       f"paired bootstrap per arm, Holm across the {len(arms)} screened arms (the recipe page)",
                       (best["delta_lo"], best["delta_hi"]), value=best["delta"], p=best["p_holm"],
                       n=best["n_prompts"], base=best["tau"] - best["delta"] if "tau" in best else None, mde=best.get("mde_holm"),
                       compared=best["name"])]


# ----------------------------------------------------------------------------- values the page glues
# The page's sentences live in its markdown (notebooks/10_drafter_recipe.py); these give the numbers,
# names and words (from R1's vocabulary, :func:`verdict`) that fill them, never a sentence.

NAN = float("nan")


def screen_values(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """The screen's numbers for the page: arms screened, seeds, eval prompts, how many help /
    hurt / are within noise under R1 (``verdict``), the arms that help (names joined as a list;
    "none" when none does) and the first helping arm's delta with its interval (NaN without
    one), the base's tau, the arms dropped by the registered shrink, whether stage 2 ran, and the
    largest Monte Carlo error of a Holm p with the resamples behind it.

    >>> v = screen_values({"base": {"tau": 1.5, "n_seeds": 2}, "prompt_ids": [0] * 96, "shrunk": ["x"], "arms": [
    ...     {"name": "a", "delta": 0.03, "delta_lo": 0.01, "delta_hi": 0.05, "p_holm": 0.01, "n_boot": 1000},
    ...     {"name": "b", "delta": -0.004, "delta_lo": -0.02, "delta_hi": 0.01, "p_holm": 0.7}],
    ...     "confirm": {"run": False}})
    >>> v["n_arms"], v["n_helps"], v["n_noise"], v["helps_names"], v["help_delta"], v["stage2_word"]
    (2, 1, 1, 'a', 0.03, 'did not run')
    """
    if doc is None:
        return {"n_arms": 0, "n_seeds": 0, "n_prompts": 0, "n_helps": 0, "n_hurts": 0, "n_noise": 0,
                "helps_names": "none", "help_delta": NAN, "help_lo": NAN, "help_hi": NAN, "base_tau": NAN,
                "n_shrunk": 0, "stage2_word": "did not run", "p_mcse_max": NAN, "n_boot": 0}
    arms = [a for a in doc["arms"] if not a.get("post_hoc")]
    words = [verdict(a) for a in arms]
    helps = [a for a, w in zip(arms, words) if w == "helps"]
    first = helps[0] if helps else {}
    mcse = [a["p_holm_mcse"] for a in arms if a.get("p_holm_mcse") is not None]
    c = doc.get("confirm") or {}
    return {"n_arms": len(arms), "n_seeds": doc["base"]["n_seeds"], "n_prompts": len(doc["prompt_ids"]),
            "n_helps": len(helps), "n_hurts": words.count("hurts"),
            "n_noise": len(arms) - len(helps) - words.count("hurts"),
            "helps_names": ", ".join(a["name"] for a in helps) or "none", "help_delta": first.get("delta", NAN),
            "help_lo": first.get("delta_lo", NAN), "help_hi": first.get("delta_hi", NAN),
            "base_tau": doc["base"]["tau"], "n_shrunk": len(doc.get("shrunk") or []),
            "stage2_word": "ran" if c.get("run") else "did not run",
            "p_mcse_max": max(mcse) if mcse else NAN, "n_boot": max((a.get("n_boot") or 0 for a in arms), default=0)}


def power_rows(doc: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The arms R1 finds within noise although their delta is at least half their realised MDE
    at the strictest Holm level: within noise because the screen is underpowered for them, not
    shown to be without effect (a table: arm, delta, MDE Holm, MDE unadjusted)."""
    arms = [a for a in (doc or {}).get("arms", []) if a.get("mde_holm") is not None and not a.get("post_hoc")]
    return [{"arm": a["name"], "delta": round(a["delta"], 3), "MDE (Holm)": round(a["mde_holm"], 3),
             "MDE (unadjusted)": round(a["mde"], 3)}
            for a in arms if verdict(a) == "within noise" and abs(a["delta"]) >= a["mde_holm"] / 2]


def mde_range(doc: Mapping[str, Any] | None) -> tuple[float, float]:
    """The smallest and largest realised MDE at the strictest Holm level over the screened arms."""
    m = [a["mde_holm"] for a in (doc or {}).get("arms", []) if a.get("mde_holm") is not None and not a.get("post_hoc")]
    return (min(m), max(m)) if m else (NAN, NAN)


def seed_rows(doc: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The verdicts that resampling the seeds as well as the prompts changes (the results file's
    ``seed_sensitivity``): arm, registered verdict, verdict with seeds resampled, delta, interval,
    Holm p."""
    return [{"arm": r["name"], "R1": r["registered_verdict"], "seeds resampled": r["verdict"],
             "delta": round(r["delta"], 3), "95% CI": _ci(r["delta_lo"], r["delta_hi"]), "p (Holm)": round(r["p_holm"], 2)}
            for r in (doc or {}).get("seed_sensitivity") or [] if r["changed"]]


def seed_values(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """How many of the seed-sensitivity analysis's verdicts change, out of how many, on how many resamples."""
    rows = (doc or {}).get("seed_sensitivity") or []
    return {"seed_changed": sum(bool(r["changed"]) for r in rows), "seed_n": len(rows),
            "seed_n_boot": rows[0]["n_boot"] if rows else 0}


def equal_cost_values(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """The first arm that helps under R1, read at the base's training cost: its learning curve's
    tau (linear between evaluated epochs) at the base's final CPU-minutes (``eq_arm_tau``), the
    base's final tau (``eq_base_tau``), and where the arm stands against it (``eq_word``: "above",
    "below" or "level with"); NaN and "-" when there is no such arm or curve."""
    out = {"eq_minutes": NAN, "eq_arm": "-", "eq_arm_tau": NAN, "eq_base_tau": NAN, "eq_word": "-"}
    base = ((doc or {}).get("base") or {}).get("curve") or []
    if not base:
        return out
    x, tau = float(base[-1]["cpu_s"]), float(base[-1]["tau_offline"])
    for a in doc["arms"]:
        if a.get("post_hoc") or verdict(a) != "helps" or not a.get("curve"):
            continue
        pts = [(float(p["cpu_s"]), float(p["tau_offline"])) for p in a["curve"]]
        if pts[0][0] <= x <= pts[-1][0]:
            at = float(np.interp(x, [c for c, _ in pts], [t for _, t in pts]))
            word = "above" if at > tau + 5e-4 else "below" if at < tau - 5e-4 else "level with"
            return {"eq_minutes": x / 60, "eq_arm": a["name"], "eq_arm_tau": at, "eq_base_tau": tau, "eq_word": word}
    return out


def efficiency_values(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """The cheapest arm that R1 does not find worse than the base, and its training CPU-seconds
    as a share of the base's (a secondary measure)."""
    ok = [a for a in (doc or {}).get("arms", []) if not a.get("post_hoc") and verdict(a) != "hurts"]
    if not ok:
        return {"eff_arm": "-", "eff_share": NAN}
    a = min(ok, key=lambda x: float(x["cpu_s"]))
    return {"eff_arm": a["name"], "eff_share": float(a["cpu_s"]) / float(doc["base"]["cpu_s"])}


def projection_values(proj: Mapping[str, Any] | None) -> dict[str, Any]:
    """The data curve's fit for the page: offline tau gained per doubling of the data with its 95%
    interval, how many drafters it rests on, the most sampled responses per prompt among them,
    today's measured training cost per drafter, and the chain's most tokens per round."""
    if proj is None:
        return {"proj_b": NAN, "proj_b_lo": NAN, "proj_b_hi": NAN, "proj_n": 0, "proj_samples": 0, "proj_cpu_min": NAN,
                "proj_tau_max": 0}
    f = proj["fit"]
    return {"proj_b": f["b"], "proj_b_lo": f["b_lo"], "proj_b_hi": f["b_hi"], "proj_n": proj["n_points"],
            "proj_samples": proj["last"]["samples_per_prompt"], "proj_cpu_min": proj["today_cost"]["cpu_min"],
            "proj_tau_max": proj["tau_max"] or 0}
