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

from activation_wave.core.config import StudyConfig
from activation_wave.core.results import load_result

#: Fewest eval prompts for an R1 verdict: below it a bootstrap over prompts takes a handful of
#: distinct values and its p means little (the smoke profile scores 2).
MIN_PROMPTS = 10

__all__ = ["MIN_PROMPTS", "load_optional", "planned_arms", "verdict", "arm_rows", "status_text", "headline",
           "screen_headline", "confirm_text",
           "not_run_figure", "agreement_values", "break_even_taus"]


def load_optional(name: str, cfg: StudyConfig, root: str | Path | None = None) -> dict[str, Any] | None:
    """The results file ``name`` of ``cfg``'s profile and model (:func:`~activation_wave.core.results.load_result`),
    or None when it was not written."""
    try:
        return load_result(name, cfg, root)
    except FileNotFoundError:
        return None


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
    """
    if arm.get("post_hoc") or arm.get("p_holm") is None:
        return "post hoc (no test)"
    if arm.get("n_prompts", MIN_PROMPTS) < MIN_PROMPTS:
        return f"no verdict (n = {arm['n_prompts']} prompts)"
    if arm["p_holm"] < alpha:
        return "helps" if arm["delta"] > 0 else "hurts"
    return "within noise"


def arm_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One table row per arm, in the order of the results file: the outcome with its interval,
    the paired delta against the base with its interval, Holm p, R1's verdict, and (labelled
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
            "p (Holm)": a.get("p_holm"), "R1": verdict(a), "seeds": a["n_seeds"],
            "train CPU-min (secondary)": round(cpu, 1),
            "extra CPU-min vs base (secondary)": round(extra, 1)})
    return rows


def _ci(lo: float | None, hi: float | None) -> str:
    return "n/a" if lo is None or hi is None else f"[{lo:+.3f}, {hi:+.3f}]" if lo < 0 else f"[{lo:.3f}, {hi:.3f}]"


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
              f"stage 2's R2 is {c['r2']['verdict']}" if c.get("run") else "no recipe is adopted")
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
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 1.2))
    ax.text(0.5, 0.5, "not measured yet: wave bench --only recipe", ha="center", va="center")
    ax.set_axis_off()
    return fig


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
    """The tau at which each engine's speculation breaks even with its own plain decoding, from
    ``benchmarks.json`` (chapter 9's cost models): our PyTorch loop (``speculative_decoding``)
    and llama.cpp on 1 thread (``llamacpp``); an engine not measured is left out."""
    from activation_wave.core.results import load_benchmarks

    bench = load_benchmarks() if bench is None else bench
    out = {}
    try:
        out["our PyTorch loop"] = float(bench["speculative_decoding"]["cost_model"]["predicted_chain_t0"]["break_even_tau"])
    except (KeyError, TypeError):
        pass
    try:
        out["llama.cpp, 1 thread"] = float(bench["llamacpp"]["by_threads"]["1"]["eagle3"]["round_costs"]["tau_needed"]["1x"])
    except (KeyError, TypeError):
        pass
    return out
