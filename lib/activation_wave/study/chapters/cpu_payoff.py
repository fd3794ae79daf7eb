"""Chapter 11, "Where does EAGLE-3 pay on a CPU?": the third architecture's drafters and
the llama.cpp figures at two target sizes.

Pre-registered in ``notebooks/11_cpu_payoff.py`` (``sec-cpu-prereg``). :func:`run_drafters`
trains (or reads from the ledger) the default and the best rule's triple on the third
model (``third.drafter_*``), scored like chapters 6 and 7; :func:`trained_drafters` gives
their weight folders to the ``llamacpp_1.5b`` benchmark. The rest reads that benchmark's
entry of ``data/results/benchmarks.json``: the speed rows (:func:`speed_frame`), the round
costs (:func:`round_frame`) and the two-point cost model (:func:`cost_model`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from activation_wave.core.config import StudyConfig
from activation_wave.core.results import load_result
from activation_wave.select.across_models import third_config, third_drafter_config
from activation_wave.study.chapters import cross_drafters as cd
from activation_wave.study.chapters.eagle3_speedup import DEFAULT_SET, Eagle3SpeedupResult
from activation_wave.study.glue import join_words
from activation_wave.study.hypotheses import Hypothesis

NAME = "11_cpu_drafters"
BENCH = "llamacpp_1.5b"
#: The benchmark that measures an EAGLE-3 round term by term (issue 42).
CEILING = "llamacpp_ceiling"

__all__ = ["NAME", "BENCH", "has_drafters", "drafter_sets", "run_drafters", "trained_drafters", "speed_frame",
           "round_frame", "CostModel", "cost_model", "evaluate_hypotheses", "drafters_text", "speed_text", "cost_text", "reading_text", "landing_text",
           "CEILING", "ceiling_frame", "terms_frame", "ceiling_text", "where_points", "where_text", "today_taus", "ngram_text",
           "answer_text", "ceiling_tables", "ceiling_values", "ROUND_FORMATS", "cost_inputs_frame", "LARGE",
           "LARGE_METHOD", "LARGE_TARGET", "large_drafter_text", "measured_points", "stage_fit", "stage_reach", "stage_pace", "stage_curve",
           "stage_lineage", "INDIST", "indist_text", "INDIST_ALL", "indist_all_text", "INDIST_CONT",
           "indist_cont_text", "INDIST_SAMPLES", "indist_samples_text", "INDIST_STEPS", "indist_steps_text", "OWN", "OWN_RECORDS",
           "own_drafters"]


def has_drafters(cfg: StudyConfig) -> bool:
    """Whether the profile trains third-architecture drafters (``third.model`` and ``third.drafter_seeds``)."""
    return bool(cfg.third.model and cfg.third.drafter_seeds)


def drafter_sets(cfg: StudyConfig, results_root: str | None = None) -> tuple[dict[str, list[int]], str]:
    """The third model's layer sets (its chapter 5 results, ``third/05_layer_selection``) and
    the rule chapter 6 found best by its paired delta tau (its results file)."""
    sel = load_result("05_layer_selection", third_config(cfg), results_root)
    six = load_result("06_eagle3_speedup", cfg, results_root, cls=Eagle3SpeedupResult)
    sets = {name: [int(i) for i in ids] for name, ids in sel["sets"].items()}
    sets.setdefault(DEFAULT_SET, [int(i) for i in sel["default_layers"]])
    return sets, six.best_rule.set


def _config(cfg: StudyConfig) -> StudyConfig:
    """The drafters' config: :func:`~activation_wave.select.across_models.third_drafter_config`."""
    return third_drafter_config(cfg)


def run_drafters(cfg: StudyConfig, results_root: str | None = None, *, n_boot: int = 10_000,
                 progress: bool = False) -> cd.CrossDrafterResult:
    """The pre-registered drafters of the third model end to end (responses and capture
    cached, drafters cached per set and seed, scores from the ledger where it has them)."""
    if not has_drafters(cfg):
        raise ValueError(f"the {cfg.profile} profile trains no third-architecture drafters "
                         "(third.model and third.drafter_seeds); e.g. --set third.drafter_seeds=1")
    sets, rule = drafter_sets(cfg, results_root)
    return cd.run_drafters(_config(cfg), sets, rule, seeds=cfg.third.drafter_seeds, sweep_stride=0, n_boot=n_boot,
                           progress=progress)


def trained_drafters(cfg: StudyConfig, results_root: str | None = None,
                     names: Sequence[str] = (DEFAULT_SET,), *, weights: bool = True) -> dict[str, str]:
    """Set name -> weight folder of the first seed of the pre-registered drafters of the
    sets ``names`` (trained here when the cache has no weights, e.g. on a clone whose
    ledger holds only scores; ``weights=False``: the folder as the ledger names it, nothing trained)."""
    from activation_wave.draft.experiment import train_or_load
    from activation_wave.study.steps import run_capture

    dcfg = _config(cfg)
    sets, rule = drafter_sets(cfg, results_root)
    cap = run_capture(dcfg, progress=False)
    jobs = cd.design(sets, rule, cap.cache.n_layers, dcfg.draft, seeds=1, sweep_stride=0)
    out = {}
    for job in (j for j in jobs if j.set in names):
        path, _ = train_or_load(cap.target, cap.cache, list(job.layers), job.config, weights=weights)
        out[job.set] = str(path)
    return out


def _threads(n: int | str) -> str:
    return f"{n} thread" + ("" if int(n) == 1 else "s")


#: Table labels of the methods in the ``llamacpp_1.5b`` entry (others keep their key).
METHOD_LABELS = {"plain": "plain", "plain_repack": "plain, repacked weights (llama.cpp's default)",
                 "eagle3": "EAGLE-3", "ngram": "n-gram lookup", "eagle3_corpus": "EAGLE-3, corpus drafter"}
#: The benchmark of issue 42's 1.5B drafter trained on the corpus (``benchmarks.large_drafter``), and its
#: method in the ``llamacpp_1.5b`` side by side.
LARGE, LARGE_METHOD = "large_drafter", "eagle3_corpus"
#: The eighth amendment's benchmark (``benchmarks.large_drafter.run_indist``): stage 1's recipe on
#: the base train records alone, against stage 1.
INDIST = "large_drafter_indist"
#: The ninth amendment's (``run_indist_all``): the same recipe on every train prompt of the sources,
#: and its registered prediction for the paired difference from the eighth's drafter.
INDIST_ALL, INDIST_ALL_PREDICTED = "large_drafter_indist_all", (0.02, 0.10)
#: The eleventh amendment's (``run_indist_cont``): the ninth's drafter trained on from its weights,
#: and its registered prediction for the paired difference from that drafter (its parent).
INDIST_CONT, INDIST_CONT_PREDICTED = "large_drafter_indist_cont", (0.08, 0.20)
#: The twelfth amendment's (``run_indist_samples``): the eighth's records and sampled answers to
#: their prompts, and its registered prediction for the paired difference from the eighth's drafter.
INDIST_SAMPLES, INDIST_SAMPLES_PREDICTED = "large_drafter_indist_samples", (0.04, 0.15)
#: The thirteenth amendment's (``run_indist_steps``): the twelfth's drafter with batches of 256 tokens,
#: and its registered prediction for the paired difference from the eighth's drafter.
INDIST_STEPS, INDIST_STEPS_PREDICTED = "large_drafter_indist_steps", (0.03, 0.20)
#: The amendments whose 1.5B drafters train on the target's answers to the study's own prompts, in order.
OWN = ((INDIST, "eighth"), (INDIST_ALL, "ninth"), (INDIST_CONT, "eleventh"), (INDIST_SAMPLES, "twelfth"),
       (INDIST_STEPS, "thirteenth"))
#: What the answer says each :data:`OWN` drafter trained on (``str.format`` of its entry); the
#: eleventh's continued training has a sentence of its own.
OWN_RECORDS = {"eighth": "the {train_records:,} records drawn with the eval prompts",
               "ninth": "all {train_records:,} train records of the sources",
               "twelfth": "{train_records:,} records, those 128 and sampled answers to their prompts",
               "thirteenth": "the twelfth's {train_records:,} records in batches of {recipe[batch_tokens]} tokens "
                             "instead of 2,048"}
#: The outcome tau issue 42 asks of that drafter.
LARGE_TARGET = 1.5
#: The entry's reference run under llama.cpp's default flags (``benchmarks.llamacpp_speed.FASTEST_PLAIN``).
REPACKED = "plain_repack"


def _against_repacked(r: Mapping[str, Any]) -> dict[str, Any] | None:
    """A method's speedup (and interval) over plain with repacked weights, where measured."""
    return (r.get("against") or {}).get(REPACKED)


def _server_flags(entry: Mapping[str, Any] | None) -> str:
    """The flags every server of the entry was started with ("" when none are recorded)."""
    return " ".join((entry or {}).get("server_flags") or ())


def _method_rows(size: str, model: str, threads: str, run: Mapping[str, Any]) -> list[dict[str, Any]]:
    plain = run["plain"]
    rows = [{"target": size, "model": model, "threads": int(threads), "method": METHOD_LABELS["plain"],
             "tokens/s": plain["tokens_per_s"], "speedup": 1.0, "95% interval": "", "tau": None,
             "identical": None, "vs repacked plain": ""}]
    for name, r in run.items():
        if not isinstance(r, dict) or "speedup" not in r:
            continue
        ci = r.get("speedup_ci")
        vs = _against_repacked(r)
        rows.append({"target": size, "model": model, "threads": int(threads), "method": METHOD_LABELS.get(name, name),
                     "tokens/s": r["tokens_per_s"], "speedup": r["speedup"],
                     "95% interval": f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "", "tau": r.get("tau"),
                     "identical": f"{r['identical_to_plain']}/{r['prompts']}",
                     "vs repacked plain": (f"{vs['speedup']:.2f}x [{vs['speedup_ci'][0]:.2f}, {vs['speedup_ci'][1]:.2f}]"
                                           if vs else "")})
    return rows


def speed_frame(entry: Mapping[str, Any]) -> pd.DataFrame:
    """Every method at every thread count and target size of the ``llamacpp_1.5b`` entry:
    tokens/s, pooled speedup over plain (same flags) with its paired-bootstrap interval, tau,
    identical outputs, and the speedup over plain with repacked weights where measured."""
    rows = []
    for key, label in (("small", "135M"), ("large", "1.5B")):
        part = entry.get(key) or {}
        for threads, run in (part.get("by_threads") or {}).items():
            rows += _method_rows(label, part.get("model", ""), threads, run)
    return pd.DataFrame(rows)


#: Number formats of :func:`round_frame`'s table on the page.
ROUND_FORMATS = {"plain step (ms)": "{:.1f}", "verify and rest (steps)": "{:.2f}", "drafting (steps)": "{:.2f}",
                 "round = break-even tau": "{:.2f}", "measured tau": "{:.2f}"}


def round_frame(entry: Mapping[str, Any], method: str = "eagle3") -> pd.DataFrame:
    """The round-cost decomposition of ``method`` at each size and thread count, in plain
    steps: verify and the rest, drafting, the whole round (= the break-even tau), with the
    measured tau beside it."""
    rows = []
    for key, label in (("small", "135M"), ("large", "1.5B")):
        part = entry.get(key) or {}
        for threads, run in (part.get("by_threads") or {}).items():
            r = run.get(method) or {}
            rc = r.get("round_costs") or {}
            if not rc:
                continue
            step = rc["plain_step_ms"]
            rows.append({"target": label, "threads": int(threads), "plain step (ms)": step,
                         "verify and rest (steps)": rc.get("verify_in_plain_steps"),
                         "drafting (steps)": round(rc["draft_ms_per_round"] / step, 3)
                         if rc.get("draft_ms_per_round") is not None else None,
                         "round = break-even tau": rc["round_in_plain_steps"], "measured tau": r.get("tau"),
                         "draft calls per round": round(rc["draft_calls"] / max(1, r.get("rounds") or 1), 2)
                         if rc.get("draft_calls") else None})
    return pd.DataFrame(rows)


@dataclasses.dataclass(frozen=True)
class CostModel:
    """The two-point cost model (secondary, an extrapolation). A round always costs at least
    the one plain step it replaces, so the model is on the *overhead* above it: ``b - 1``
    (``b``: the round's cost in plain steps, the break-even tau) against the target's weight
    bytes ``s`` as a line in log-log coordinates through the two measured sizes,
    ``log(b - 1) = log(b1 - 1) + slope (log s - log s1)``. A drafter of tau pays where its
    gain, ``tau - 1`` tokens per round, exceeds that overhead: :meth:`size_for` solves for
    the size. ``taus``: the measured taus to solve for, by label."""

    threads: int
    sizes_mib: tuple[float, float]
    break_even: tuple[float, float]
    slope: float
    taus: dict[str, float]
    bytes_per_param: float = 0.7  # of the larger target's GGUF (4-bit weights and their scales)

    def break_even_at(self, size_mib: float) -> float:
        """The line's break-even tau at ``size_mib``."""
        s1, b1 = self.sizes_mib[1], self.break_even[1]
        return 1.0 + math.exp(math.log(b1 - 1.0) + self.slope * (math.log(size_mib) - math.log(s1)))

    def size_for(self, tau: float) -> float | None:
        """The size (MiB) at which a drafter of ``tau`` breaks even; None when it never does
        on this line (tau <= 1, or an overhead that does not fall with size)."""
        s1, b1 = self.sizes_mib[1], self.break_even[1]
        if not tau > 1.0 or not self.slope < 0 or not b1 > 1.0:
            return None
        return math.exp(math.log(s1) + (math.log(tau - 1.0) - math.log(b1 - 1.0)) / self.slope)

    def params_for(self, tau: float) -> float | None:
        """:meth:`size_for` in billions of parameters at the larger target's bytes per parameter."""
        size = self.size_for(tau)
        return None if size is None else size * 2**20 / self.bytes_per_param / 1e9


def cost_model(entry: Mapping[str, Any], threads: str = "1", method: str = "eagle3") -> CostModel | None:
    """:class:`CostModel` at ``threads`` from the entry's two sizes (None when either is
    missing, or a round costs no more than a step at either), solving for the taus of
    both sizes' drafters as measured in llama.cpp."""
    pts = []
    for key in ("small", "large"):
        part = entry.get(key) or {}
        r = ((part.get("by_threads") or {}).get(threads) or {}).get(method) or {}
        rc = r.get("round_costs")
        if not rc or not part.get("gguf_mib") or not rc["round_in_plain_steps"] > 1.0:
            return None
        pts.append((float(part["gguf_mib"]), float(rc["round_in_plain_steps"]), r.get("tau"), part.get("params")))
    (s0, b0, tau0, _), (s1, b1, tau1, p1) = pts
    slope = (math.log(b1 - 1.0) - math.log(b0 - 1.0)) / (math.log(s1) - math.log(s0))
    taus = {label: float(t) for label, t in (("1.5B drafter", tau1), ("135M drafter", tau0)) if t}
    return CostModel(int(threads), (s0, s1), (b0, b1), slope, taus, (s1 * 2**20 / p1) if p1 else 0.7)


def cost_inputs_frame() -> pd.DataFrame:
    """What the two-point cost model reads, and which of it is measured or extrapolated."""
    return pd.DataFrame([{"input": "round cost at 135M and 1.5B (plain steps)", "source": "measured, this run"},
                         {"input": "tau of the 1.5B drafter in llama.cpp", "source": "measured, this run"},
                         {"input": "GGUF sizes", "source": "measured (file sizes)"},
                         {"input": "round cost at any other size", "source": "extrapolated: a line through two points"}])


def evaluate_hypotheses(entry: Mapping[str, Any] | None, drafters: cd.CrossDrafterResult | None,
                        alpha: float = 0.05) -> list[Hypothesis]:
    """C1 and C2 of chapter 11's pre-registration by their verdict rules (None: not testable
    with these results, e.g. no benchmark entry or no drafters)."""
    large = ((entry or {}).get("large") or {}).get("by_threads") or {}
    top = large.get(max(large, key=int)) if large else None
    e = (top or {}).get("eagle3")
    if not e or not e.get("speedup_ci"):
        c1 = Hypothesis("C1", "EAGLE-3 in llama.cpp beats plain llama.cpp at 2 threads (1.5B target)",
                        "not measured (wave bench --only llamacpp_1.5b)", None, "")
    else:
        lo, hi = e["speedup_ci"]
        c1 = Hypothesis("C1", f"EAGLE-3 in llama.cpp beats plain llama.cpp at {top['threads']} threads (1.5B target)",
                        f"pooled speedup {e['speedup']:.3f}x [{lo:.3f}, {hi:.3f}], n = {e['prompts']} prompts, "
                        f"tau {e['tau']:.2f}, identical to plain {e['identical_to_plain']}/{e['prompts']}"
                        + (f", every server {_server_flags(entry)}" if _server_flags(entry) else ""),
                        lo > 1.0, "paired bootstrap over prompts, one test")
    c1b = _c1_corpus(entry)
    if drafters is None:
        c2 = Hypothesis("C2", "the best rule's set beats the default (1.5B drafters)", "no drafters in this profile",
                        None, "")
    else:
        (g1, *_) = cd.evaluate_hypotheses(drafters, alpha)
        c2 = dataclasses.replace(g1, name="C2", claim="the best rule's set beats the default (1.5B drafters, one "
                                 "seed each)")
    return [c1, *([c1b] if c1b else []), c2]


def _corpus_run(sizes: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
    """(threads, run) of the corpus drafter at the largest thread count it was measured at."""
    large = ((sizes or {}).get("large") or {}).get("by_threads") or {}
    runs = {t: r[LARGE_METHOD] for t, r in large.items() if (r.get(LARGE_METHOD) or {}).get("speedup_ci")}
    return (t := max(runs, key=int), runs[t]) if runs else None


def _row_stage(sizes: Mapping[str, Any] | None, large: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The stage of issue 42's ``large`` drafter entry whose drafter the llama.cpp row measured,
    when that is not the entry's last stage (the row predates the later stages); else None."""
    measured = (((sizes or {}).get("large") or {}).get("drafters") or {}).get(LARGE_METHOD, {}).get("path")
    if not large or not measured or measured == large.get("drafter"):
        return None
    return next((r for r in large.get("stages") or [] if r["drafter"] == measured), {"stage": None})


def _stage_note(sizes: Mapping[str, Any] | None, large: Mapping[str, Any] | None) -> str:
    """", measured on its stage k; its last stage, n, has outcome tau t, short of the target" (or "")."""
    r = _row_stage(sizes, large)
    if r is None:
        return ""
    lo, hi = large["tau_ci"]
    return ((f", measured on its stage {r['stage']}" if r["stage"] else ", measured on an earlier drafter")
            + f"; its last stage, {large['stages'][-1]['stage']}, has outcome tau {large['figure']:.2f} [{lo:.2f}, "
            f"{hi:.2f}]" + (f", short of {LARGE_TARGET}" if large["figure"] < LARGE_TARGET else ""))


def _c1_corpus(sizes: Mapping[str, Any] | None) -> Hypothesis | None:
    """C1 re-stated for the corpus drafter (the stage its llama.cpp row measured; the second to
    seventh amendments), once it is in the side by side."""
    got = _corpus_run(sizes)
    if got is None:
        return None
    t, e = got
    lo, hi = e["speedup_ci"]
    return Hypothesis("C1 (corpus drafter)", f"EAGLE-3 in llama.cpp with the corpus drafter beats plain llama.cpp at "
                      f"{_threads(t)} (1.5B target)",
                      f"pooled speedup {e['speedup']:.3f}x [{lo:.3f}, {hi:.3f}], n = {e['prompts']} prompts, tau "
                      f"{e['tau']:.2f}, identical to plain {e['identical_to_plain']}/{e['prompts']}",
                      lo > 1.0, "paired bootstrap over prompts, one test (second amendment)")


def large_drafter_text(large: Mapping[str, Any] | None, sizes: Mapping[str, Any] | None) -> str:
    """Issue 42's 1.5B drafter in words: its data, cost and outcome tau beside the toy drafter's
    (paired over the same eval prompts), and its llama.cpp row once measured."""
    if not large:
        return ("Not trained yet. wave bench --only large_drafter generates the corpus responses (llama.cpp), "
                "captures the triple's layers and trains the drafter (hours on two cores; resumable), then "
                "wave bench --only llamacpp_1.5b puts it beside the toy drafter.")
    d, (lo, hi) = large["delta_vs_toy"], large["tau_ci"]
    reached = "reaches" if large["figure"] >= LARGE_TARGET else "does not reach"
    stages = large.get("stages") or []
    last = f" after stage {stages[-1]['stage']}" if len(stages) > 1 else ""
    out = (f"The corpus drafter{last} (the default triple {large['layers']}, {large['train_prompts']:,} distinct "
           f"train prompts, {large['budget_tokens']:,} training tokens, {large['train_cpu_min']:.0f} CPU-minutes of "
           f"training) has outcome tau {large['figure']:.2f} [{lo:.2f}, {hi:.2f}] on the n = {d['n']} eval prompts "
           f"where the toy drafter has {large['baseline']:.2f} (paired difference {d['mean']:+.2f} "
           f"[{d['lo']:+.2f}, {d['hi']:+.2f}], p {d['p']:.3g}); it {reached} the issue's {LARGE_TARGET}. ")
    if len(stages) > 1:
        out += ("Its stages (the third amendment and after), outcome tau with tokens and CPU-minutes summed "
                "along each stage's parents: " + join_words([_stage_words(r, large) for r in stages]) + ". ")
        if large.get("lr_probe"):
            out += _probe_words(large["lr_probe"])
        if large.get("all_stages_cpu_min", large["train_cpu_min"]) > large["train_cpu_min"]:
            out += f"All stages together took {large['all_stages_cpu_min']:.0f} CPU-minutes of training. "
    if large["figure"] < LARGE_TARGET and large.get("train_tokens"):
        out += (f"Its {large['budget_tokens']:,} training tokens are about {large['budget_tokens'] / large['train_tokens']:.0f} "
                f"passes over the {large['train_tokens']:,} tokens of the {large['train_prompts']:,} records "
                f"({large['loss_tokens']:,} of them response positions with a loss). ")
        line = stage_lineage(stages)
        fit = stage_fit(line)
        if fit is None:
            out += ("As registered, it is not trained further for this page, and one drafter gives no curve to "
                    "project the budget that would reach the target. ")
        else:
            reach = fit["reach"]
            out += (f"The registered stages end here. A line through stages {join_words([str(r['stage']) for r in line])} "
                    "(the last stage and what it continued) in log2 tokens "
                    f"(tau {fit['b']:+.2f} per doubling"
                    + (f", 95% interval [{fit['b_lo']:+.2f}, {fit['b_hi']:+.2f}]" if fit["b_lo"] is not None else "")
                    + ") " + (f"reaches {LARGE_TARGET} at about {reach:.0f} million tokens" if reach else
                              f"does not rise to {LARGE_TARGET}"))
            if reach and fit["b_lo"] is not None:
                near, far = stage_reach(fit, fit["b_hi"]), stage_reach(fit, fit["b_lo"])
                out += (f" (about {near:.0f} million at the steep end of the interval, "
                        + (f"{far:.0f} million at its flat end)" if far else "never at its flat end, which does not rise)"))
            out += f": an extrapolation from {fit['n']} points, whose shape nothing checks. "
            pace = stage_pace(line)
            if pace:
                gains = join_words([f"{g['mean']:+.2f}" for g in pace["gains"]])
                out += f"Read instead at the pace of the constant-lr stages (paired gains over their parents {gains}"
                if pace["stalled"]:
                    g = pace["gains"][-1]
                    out += (f"; the last, [{g['lo']:+.2f}, {g['hi']:+.2f}], is within noise of no gain): the gains "
                            f"shrank, so further passes over these {large['train_tokens']:,} tokens no longer show "
                            f"progress toward {LARGE_TARGET}; the line above assumes they keep paying, and no count of further "
                            "stages is read from them. ")
                elif pace["stages_left"]:
                    n = pace["stages_left"]
                    out += (f", mean {pace['gain']:+.2f} a stage), {LARGE_TARGET} is about {n} more stage"
                            f"{'s' if n > 1 else ''} of {large['stage_tokens'] / 1e6:g}M tokens away if the gains do "
                            "not shrink (the sixth amendment's reading). ")
                else:
                    out += f", mean {pace['gain']:+.2f} a stage), the stages do not rise toward {LARGE_TARGET}. "
    got = _corpus_run(sizes)
    if got is None:
        return out + "Its llama.cpp row is not measured yet (wave bench --only llamacpp_1.5b)."
    t, e = got
    lo, hi = e["speedup_ci"]
    row = _row_stage(sizes, large)
    if row is not None:
        was = f"stage {row['stage']}'s drafter" if row["stage"] else "an earlier drafter"
        return out + (f"It has no llama.cpp row of its own (wave bench --only llamacpp_1.5b would measure it); the row on this page "
                      f"measured {was}: {e['speedup']:.2f}x [{lo:.2f}, {hi:.2f}] of plain at {_threads(t)} (tau "
                      f"{e['tau']:.2f}, {e['identical_to_plain']}/{e['prompts']} outputs identical to plain).")
    out += (f"In llama.cpp at {_threads(t)} it runs at {e['speedup']:.2f}x [{lo:.2f}, {hi:.2f}] of plain "
            f"(tau {e['tau']:.2f}, {e['identical_to_plain']}/{e['prompts']} outputs identical to plain).")
    rnd = (e.get("round_costs") or {}).get("round_in_plain_steps")
    if rnd:
        predicted = e["tau"] / rnd
        off = predicted / e["speedup"] - 1.0
        out += (f" Its round costs {rnd:.2f} plain steps, so tau / round = {predicted:.2f}, "
                + (f"the measured speedup within {abs(off):.0%}: a better drafter moves along the cost line of its depth "
                   "(its cross in the ceiling figure), as the amendment predicted" if abs(off) <= 0.1 else
                   f"{off:+.0%} off the measured speedup, so the round's cost alone does not explain it")
                + (f"; break-even at this round needs tau {rnd:.2f}." if e["speedup"] < 1 else "."))
    return out


def _probe_words(p: Mapping[str, Any]) -> str:
    """The fifth amendment's learning-rate probe in words: both losses, their paired difference, the choice."""
    (low, high), (l_low, l_high), d = p["lrs"], p["loss_second_half"], p["delta_high_minus_low"]
    return (f"Before stage {p['from'] + 1}, a probe (fifth amendment) trained one pass of {p['tokens']:,} tokens from "
            f"stage {p['from']} at lr {low:g} and at {high:g}, on the same batches: over the pass's last "
            f"{p['batches']} batches the training loss was {l_low:.3f} and {l_high:.3f} (paired difference "
            f"{d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]), so stage {p['from'] + 1} trains at lr "
            f"{p['chosen']:g}{' (the interval lies below 0)' if p['chosen'] == high else ' (the higher lr was not lower beyond noise)'}. ")


def _stage_words(r: Mapping[str, Any], large: Mapping[str, Any]) -> str:
    """One stage in words: its tau and interval, what it continued and how, tokens and CPU-minutes."""
    how = ("" if not r.get("from") else f"stage {r['from']} plus {large['stage_tokens'] / 1e6:g}M tokens at "
           + ("the recipe's schedule again" if r.get("lr_schedule") == "cosine" else
              f"lr {r['lr']:g}, {r.get('lr_schedule', 'constant')}") + "; ")
    up = r.get("delta_vs_parent")
    vs = (f"; paired difference from stage {r['from']} {up['mean']:+.2f} [{up['lo']:+.2f}, {up['hi']:+.2f}], "
          f"p {up['p']:.2g}" if up else "")
    return (f"{r['tau']:.2f} [{r['tau_ci'][0]:.2f}, {r['tau_ci'][1]:.2f}] after stage {r['stage']} ({how}"
            f"{r['tokens'] / 1e6:g}M tokens, {r['train_cpu_min']:.0f} CPU-minutes{vs})")


def stage_lineage(stages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The last stage and the stages it continues (``from``), first to last."""
    if not stages:
        return []
    by = {r["stage"]: r for r in stages}
    chain = [stages[-1]]
    while chain[0].get("from"):
        chain.insert(0, by[chain[0]["from"]])
    return chain


def _against(entry: Mapping[str, Any], delta: Mapping[str, Any], rival: str) -> str:
    """"outcome tau F [lo, hi] against <rival>'s B on the same n = N eval prompts: paired difference
    D [lo, hi], p P (the primary test)": an amendment's registered comparison in words."""
    (lo, hi), d = entry["tau_ci"], delta
    return (f"outcome tau {entry['figure']:.2f} [{lo:.2f}, {hi:.2f}] against {rival}'s {entry['baseline']:.2f} on the "
            f"same n = {d['n']} eval prompts: paired difference {d['mean']:+.2f} [{d['lo']:+.2f}, {d['hi']:+.2f}], "
            f"p {d['p']:.2g} (the primary test)")


def indist_text(entry: Mapping[str, Any] | None, large: Mapping[str, Any] | None = None) -> str:
    """The eighth amendment's result in words: the in-distribution drafter's outcome tau beside
    stage 1's (the primary paired test and its verdict) and the toy drafter's, its cost, and (not
    a registered test) the last corpus stage of issue 42's ``large`` entry for scale."""
    if not entry:
        return ("Not trained yet: wave bench --only large_drafter_indist trains it (about 40 minutes on two cores) "
                "and scores it beside stage 1.")
    t = entry["delta_vs_toy"]
    words = {"beat": "beat the corpus records at this budget (the interval lies above 0)",
             "lose": "lose to the corpus records at this budget (the interval lies below 0)",
             "within noise": "are within noise of the corpus records at this budget (the interval covers 0; the "
                             "design detects differences of about 0.05 and more)"}
    out = (f"The in-distribution drafter (eighth amendment: stage 1's recipe, {entry['budget_tokens']:,} tokens and "
           f"seed on the {entry['train_records']:,} base train records alone, {entry['train_tokens']:,} tokens, about "
           f"{entry['budget_tokens'] / entry['train_tokens']:.0f} passes; {entry['train_cpu_min']:.0f} CPU-minutes) "
           f"has {_against(entry, entry['delta_vs_corpus'], 'stage 1')}. So the study's own records "
           f"{words[entry['verdict']]}. Against the toy drafter (the same records, two epochs) {t['mean']:+.2f} "
           f"[{t['lo']:+.2f}, {t['hi']:+.2f}]. ")
    if large and len(large.get("stages") or []) > 1:
        out += (f"For scale, not a registered test: the corpus line's last stage, {large['stages'][-1]['stage']}, has "
                f"{large['figure']:.2f} after {large['train_cpu_min']:.0f} CPU-minutes along its parents. ")
    return out + _reach(entry)


def _reach(entry: Mapping[str, Any]) -> str:
    """Whether an in-distribution drafter reaches the issue's target (and so whether C1 moves)."""
    return (f"It reaches the issue's {LARGE_TARGET}." if entry["figure"] >= LARGE_TARGET else
            f"It does not reach the issue's {LARGE_TARGET}, so C1 stays on stage 3.")


def indist_all_text(entry: Mapping[str, Any] | None) -> str:
    """The ninth amendment's result in words: the drafter on every train record of the sources
    beside the eighth amendment's (the primary paired test and its verdict) and the toy drafter's,
    what its added records cost, and whether it reaches the issue's target."""
    if not entry:
        return ("Not trained yet: wave bench --only large_drafter_indist_all answers the added prompts in llama.cpp, "
                "captures them and trains it (about an hour on two cores), and scores it beside the eighth "
                "amendment's drafter.")
    t = entry["delta_vs_toy"]
    words = {"beat": "teach the drafter more at this budget (the interval lies above 0)",
             "lose": "teach it less at this budget (the interval lies below 0)",
             "within noise": f"are within noise of the {entry['train_records'] - entry['added_prompts']:,} alone at this "
                             "budget (the interval covers 0; the design detects differences of about 0.05 and more)"}
    gen = entry.get("generation_s_this_run") or 0.0
    out = (f"On every train prompt of the sources (ninth amendment: the same recipe, {entry['budget_tokens']:,} tokens "
           f"and seed on {entry['train_records']:,} records, the {entry['train_records'] - entry['added_prompts']:,} and "
           f"{entry['added_prompts']:,} more, whose "
           f"{entry['added_response_tokens']:,} response tokens the target wrote in llama.cpp"
           + (f" in {gen / 60:.0f} minutes of two one-thread servers" if gen > 60 else "")
           + f"; {entry['train_tokens']:,} tokens, about {entry['budget_tokens'] / entry['train_tokens']:.0f} passes; "
           f"{entry['train_cpu_min']:.0f} CPU-minutes of training) the drafter has "
           f"{_against(entry, entry['delta_vs_indist'], 'the eighth amendment')}. So the added records "
           f"{words[entry['verdict']]}. Against the toy drafter {t['mean']:+.2f} [{t['lo']:+.2f}, {t['hi']:+.2f}]. ")
    return out + _reach(entry) + _indist_all_reading(entry)


#: The training batches whose mean loss says how closely a drafter fits its records at the end.
LAST_BATCHES = 50


def _loss_end(key: str | None) -> float | None:
    """A drafter's mean training loss over its last :data:`LAST_BATCHES` batches, from its
    committed ledger entry (None without one)."""
    from activation_wave.draft.ledger import committed_entry

    hist = ((committed_entry(key) or {}).get("train_log") or {}).get("history") if key else None
    return sum(hist[-LAST_BATCHES:]) / len(hist[-LAST_BATCHES:]) if hist else None


def _indist_all_reading(entry: Mapping[str, Any]) -> str:
    """The ninth amendment's result read further: its registered prediction held or not, then (not
    a registered test) how many eval prompts moved which way, by prompt source (HumanEval or not),
    and how closely each drafter fits its records at the end of training (committed ledgers)."""
    import numpy as np

    lo, hi = INDIST_ALL_PREDICTED
    held = lo <= entry["delta_vs_indist"]["mean"] <= hi
    out = f" The registered prediction (a gain of {lo:+.2f} to {hi:+.2f}) {'held' if held else 'was wrong'}."
    ids, pp = entry.get("eval_prompt_ids") or [], entry.get("per_prompt_tau") or {}
    if not ids or "indist_all" not in pp or "indist" not in pp:
        return out
    d = np.array(pp["indist_all"], dtype=float) - np.array(pp["indist"], dtype=float)
    he = np.array([i.startswith("HumanEval/") for i in ids])
    out += (f" Read further (not a registered test): {int((d < 0).sum())} of {int(np.isfinite(d).sum())} eval "
            f"prompts drop, the {int(he.sum())} HumanEval prompts by {np.nanmean(d[he]):+.2f} on average and the other "
            f"{int((~he).sum())} by {np.nanmean(d[~he]):+.2f}.")
    new, old = _loss_end(entry.get("drafter")), _loss_end(entry.get("indist_drafter"))
    if new is None or old is None:
        return out
    base = entry["train_records"] - entry["added_prompts"]
    out += (f" Its training loss over its last {LAST_BATCHES} batches is {new:.1f}, against {old:.1f} for the eighth "
            "amendment's drafter.")
    if new > old and entry["verdict"] == "lose":
        out += (f" At the same budget the {entry['train_records']:,} records are fitted less closely than the {base} "
                f"were; the eighth amendment's gain over stage 1 went with that close fit to {base} records drawn from "
                f"the same first prompts of each source as the eval prompts (the {entry['added_prompts']} added ones "
                "come from later in each source), so it is not evidence that the target's own prompts are worth more "
                "than corpus prompts in general.")
    return out


def _loss_against(entry: Mapping[str, Any], rival_key: str, rival: str) -> str:
    """The sentence comparing the entry's drafter's end-of-training loss (:func:`_loss_end`) with the
    drafter named by ``entry[rival_key]`` (called ``rival``), labelled as not a registered test;
    "" without both committed ledgers."""
    new, old = _loss_end(entry.get("drafter")), _loss_end(entry.get(rival_key))
    if new is None or old is None:
        return ""
    return (f" Its training loss over its last {LAST_BATCHES} batches is {new:.1f}, against {old:.1f} for {rival} "
            "(not a registered test).")


def _prediction(gain: float, lo: float, hi: float) -> str:
    """Whether a registered prediction of a gain between ``lo`` and ``hi`` held, and if not, how it missed."""
    if lo <= gain <= hi:
        return "held"
    return "was wrong: " + ("it lost instead" if gain < 0 else f"the gain is {'smaller' if gain < lo else 'larger'}")


def _by_rule(verdict: str, gain: float, predicted: tuple[float, float]) -> str:
    """"So <verdict>. The registered prediction (a gain of lo to hi) held" (or how it missed,
    :func:`_prediction`): an amendment's primary test read by its registered rule."""
    lo, hi = predicted
    return f"So {verdict}. The registered prediction (a gain of {lo:+.2f} to {hi:+.2f}) {_prediction(gain, lo, hi)}."


def indist_cont_text(entry: Mapping[str, Any] | None) -> str:
    """The eleventh amendment's result in words: the ninth amendment's drafter trained on, against
    its parent (the primary paired test, its verdict and the registered prediction), the eighth
    amendment's and the toy drafter's (reported, not tested), how closely each fits its records at
    the end (committed ledgers), and whether it reaches the issue's target."""
    if not entry:
        return ("Not trained yet: wave bench --only large_drafter_indist_cont trains the ninth amendment's drafter on "
                "(about 40 minutes on two cores) and scores it beside its parent.")
    c, e, t = entry["continued"], entry["delta_vs_indist"], entry["delta_vs_toy"]
    words = {"beat": "the ninth amendment's drafter stopped short: training on the same records raises its tau (the "
                     "interval lies above 0)",
             "lose": "training on lowers its tau (the interval lies below 0)",
             "within noise": "training on is within noise of stopping where the ninth amendment did (the interval "
                             "covers 0; the design detects differences of about 0.05 and more)"}
    out = (f"Trained on (eleventh amendment: the ninth amendment's drafter continued from its weights on the same "
           f"{entry['train_records']:,} records for {entry['budget_tokens']:,} more tokens, "
           f"{entry['tokens_with_parent']:,} with its parent, at a constant lr of {c['lr']:g}, seed {c['seed']}; "
           f"{entry['train_cpu_min']:.0f} CPU-minutes of training) the drafter has "
           f"{_against(entry, entry['delta_vs_parent'], 'its parent')}. "
           + _by_rule(words[entry["verdict"]], entry["delta_vs_parent"]["mean"], INDIST_CONT_PREDICTED)
           + " Reported, not tested: "
           f"against the eighth amendment's drafter ({entry['indist']:.2f}) {e['mean']:+.2f} [{e['lo']:+.2f}, "
           f"{e['hi']:+.2f}], against the toy drafter {t['mean']:+.2f} [{t['lo']:+.2f}, {t['hi']:+.2f}].")
    return out + _loss_against(entry, "parent_drafter", "its parent") + " " + _reach(entry)


def indist_samples_text(entry: Mapping[str, Any] | None) -> str:
    """The twelfth amendment's result in words: the drafter on the base records and sampled answers
    to their prompts beside the eighth amendment's (the primary paired test, its verdict and the
    registered prediction) and the toy drafter's, what its records cost, and whether it reaches the
    issue's target."""
    if not entry:
        return ("Not trained yet: wave bench --only large_drafter_indist_samples samples the answers in llama.cpp, "
                "captures them and trains it (about 75 minutes on two cores), and scores it beside the eighth "
                "amendment's drafter.")
    t, k = entry["delta_vs_toy"], entry["samples_per_prompt"]
    base = entry["train_records"] - entry["added_responses"]
    words = {"beat": "teach the drafter more than the greedy answers alone at this budget (the interval lies above 0)",
             "lose": "teach it less than the greedy answers alone at this budget (the interval lies below 0)",
             "within noise": "are within noise of the greedy answers alone at this budget (the interval covers 0; "
                             "the design detects differences of about 0.05 and more)"}
    gen = entry.get("generation_s_this_run") or 0.0
    out = (f"With {k} sampled answers of the target to each of the {base:,} base train prompts beside their greedy "
           f"ones (twelfth amendment: {entry['train_records']:,} records; the {entry['added_responses']:,} samples, "
           f"{entry['added_response_tokens']:,} response tokens at temperature {entry['sample_temperature']:g}, "
           "written by llama.cpp" + (f" in {gen / 60:.0f} minutes of two one-thread servers" if gen > 60 else "")
           + f"; stage 1's recipe, {entry['budget_tokens']:,} tokens and seed over {entry['train_tokens']:,} tokens, "
           f"about {entry['budget_tokens'] / entry['train_tokens']:.0f} passes; {entry['train_cpu_min']:.0f} "
           f"CPU-minutes of training) the drafter has {_against(entry, entry['delta_vs_indist'], 'the eighth amendment')}. "
           + _by_rule("the sampled answers " + words[entry["verdict"]], entry["delta_vs_indist"]["mean"],
                      INDIST_SAMPLES_PREDICTED)
           + f" Against the toy drafter {t['mean']:+.2f} [{t['lo']:+.2f}, {t['hi']:+.2f}].")
    return out + _loss_against(entry, "indist_drafter", "the eighth amendment's drafter") + " " + _reach(entry)


def indist_steps_text(entry: Mapping[str, Any] | None) -> str:
    """The thirteenth amendment's result in words: the twelfth amendment's drafter with small batches
    beside the eighth amendment's (the primary paired test, its verdict and the registered
    prediction), and, reported, beside the twelfth's (only the batch differs) and the toy drafter's;
    how closely it fits its records; whether it reaches the issue's target."""
    if not entry:
        return ("Not trained yet: wave bench --only large_drafter_indist_steps trains it (about 55 minutes on two "
                "cores) and scores it beside the eighth and twelfth amendments' drafters.")
    t, w = entry["delta_vs_toy"], entry["delta_vs_indist_samples"]
    words = {"beat": "with several times the optimiser steps the drafter on those records beats the eighth "
                     "amendment's (the interval lies above 0)",
             "lose": "with several times the optimiser steps it still loses to the eighth amendment's (the interval "
                     "lies below 0)",
             "within noise": "with several times the optimiser steps it is within noise of the eighth amendment's "
                             "(the interval covers 0; the design detects differences of about 0.05 and more)"}
    out = (f"With batches of about {entry['recipe']['batch_tokens']} tokens instead of 2,048 (thirteenth amendment: "
           f"the twelfth amendment's {entry['train_records']:,} records, stage 1's recipe, "
           f"{entry['budget_tokens']:,} tokens and seed; {entry['optimizer_steps']:,} optimiser steps; "
           f"{entry['train_cpu_min']:.0f} CPU-minutes of training) the drafter has "
           f"{_against(entry, entry['delta_vs_indist'], 'the eighth amendment')}. "
           + _by_rule(words[entry["verdict"]], entry["delta_vs_indist"]["mean"], INDIST_STEPS_PREDICTED)
           + " Reported, not tested: against the "
           f"twelfth amendment's drafter ({entry['indist_samples']:.2f}; the same records in batches of 2,048 tokens) "
           f"{w['mean']:+.2f} [{w['lo']:+.2f}, {w['hi']:+.2f}], against the toy drafter {t['mean']:+.2f} "
           f"[{t['lo']:+.2f}, {t['hi']:+.2f}].")
    return (out + _loss_against(entry, "indist_samples_drafter", "the twelfth amendment's drafter on the same records")
            + " " + _reach(entry))


def stage_fit(stages: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The least-squares line ``tau = a + b log2(tokens / 1e6)`` through the training stages
    (``large_drafter``'s ``stages``): :func:`~activation_wave.study.training_costs.log2_fit`'s
    dict (with the slope's 95% interval) from three stages, the line through both points with
    two (``b_lo``/``b_hi`` None), None with fewer; ``xbar`` is the mean log2 tokens (the line
    with another slope turns about ``(xbar, a + b xbar)``), ``reach`` its :func:`stage_reach`."""
    from activation_wave.study.training_costs import log2_fit

    if len(stages) < 2:
        return None
    x, y = [r["tokens"] / 1e6 for r in stages], [r["tau"] for r in stages]
    xbar = float(np.mean(np.log2(x)))
    if len(stages) >= 3:
        fit = {**log2_fit(x, y), "xbar": xbar}
    else:
        b = (y[1] - y[0]) / float(np.log2(x[1] / x[0]))
        fit = {"a": y[0] - b * float(np.log2(x[0])), "b": b, "b_lo": None, "b_hi": None, "n": 2, "xbar": xbar}
    return {**fit, "reach": stage_reach(fit)}


def stage_pace(line: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The per-stage reading of the stages along one line (:func:`stage_lineage`): the paired gains
    (``delta_vs_parent``: mean, lo, hi) of its constant-lr stages, their mean, whether the last one
    has ``stalled`` (its interval reaches 0 or below), and how many more stages would reach the
    target at the mean gain (None when stalled or not rising); None without such a stage."""
    gains = [r["delta_vs_parent"] for r in line if r.get("lr_schedule") == "constant" and r.get("delta_vs_parent")]
    if not gains:
        return None
    gain = float(np.mean([g["mean"] for g in gains]))
    stalled = gains[-1].get("lo", gains[-1]["mean"]) <= 0.0
    left = math.ceil((LARGE_TARGET - line[-1]["tau"]) / gain) if gain > 0 and not stalled else None
    return {"gains": gains, "gain": gain, "stalled": stalled, "stages_left": left}


def stage_reach(fit: Mapping[str, Any], slope: float | None = None) -> float | None:
    """Millions of training tokens at which the stages' line (or the line through their centre
    with another ``slope``, e.g. an end of the slope's interval) reaches the target; None when
    that slope does not rise."""
    b = fit["b"] if slope is None else slope
    if b is None or b <= 0:
        return None
    centre = fit["a"] + fit["b"] * fit["xbar"]
    return float(2 ** (fit["xbar"] + (LARGE_TARGET - centre) / b))


def stage_curve(large: Mapping[str, Any] | None) -> tuple[list[dict[str, Any]], float | None, float,
                                                          dict[str, Any] | None]:
    """The arguments of :func:`~activation_wave.plots.plot_drafter_stages`: the stages (one
    from an entry written before they existed), each marked ``on_line`` when it is the last
    stage or one it continued, the toy drafter's tau, the target and the fit along that line
    (only while the target is missed)."""
    if not large:
        return [], None, LARGE_TARGET, None
    stages = large.get("stages") or [{"stage": 1, "tokens": large["budget_tokens"], "tau": large["figure"],
                                      "tau_ci": large["tau_ci"], "train_cpu_min": large["train_cpu_min"]}]
    line = stage_lineage(stages)
    fit = stage_fit(line) if large["figure"] < LARGE_TARGET else None
    on = {r["stage"] for r in line}
    return [{**r, "on_line": r["stage"] in on} for r in stages], large.get("baseline"), LARGE_TARGET, fit


def drafters_text(res: cd.CrossDrafterResult | None, workers: int = 1, *, epochs: int = 1,
                  threshold: float | None = None, weak_below: float = 1.1) -> str:
    """The drafters' paragraph: data, training time, each set's tau, C2's paired difference
    and, when every set's tau is below ``weak_below``, what so weak a difference can and
    cannot say (plain text)."""
    if res is None:
        return ("This profile trains no drafters for a third architecture (its third section names no model or no "
                "drafter seeds); the figures below come from the committed benchmark file.")
    v = cd.prose_values(res, workers)
    sets = "; ".join(f"{s.set} {list(s.layers)}: tau {s.tau:.3f} [{s.lo:.3f}, {s.hi:.3f}]" for s in res.sets)
    rate = res.training_positions * epochs * res.n_drafters / res.train_s if res.train_s else float("nan")
    out = (f"{v['xd_n_drafters']} drafters of {res.model} trained on {v['xd_records']} train-split records "
           f"({v['xd_positions']:,} response positions, {epochs} epoch(s)), {res.train_s / 60:.0f} minutes of "
           f"training for all of them (each as its ledger entry records it, on the machine that trained it; about "
           f"{rate:.0f} response positions per second), scored on "
           f"{v['xd_eval_prompts']} eval prompts ({v['xd_at_limit']} of {v['xd_n_responses']} responses ran to the "
           f"token limit). Offline tau on the pre-registered outcome, mean over prompts with its 95% bootstrap "
           f"interval: {sets}.")
    c = res.comparison
    if c is not None:
        out += (f" C2, {c.set} minus the default, paired over prompts: delta tau = {c.delta:+.3f} "
                f"[{c.lo:+.3f}, {c.hi:+.3f}], p = {c.p:.2g}, n = {c.n}; the smallest difference this design detects "
                f"at 80% power is {c.mde:.3f}.")
    if res.sets and max(s.tau for s in res.sets) < weak_below:
        at = f" at the outcome's draft threshold ({threshold:g})" if threshold is not None else ""
        out += (f" Both drafters barely draft: {at.strip() + ', ' if at else ''}a draft is rarely proposed or accepted, "
                f"and tau stays within {max(s.tau for s in res.sets) - 1:.3f} tokens of 1. A difference this small "
                "says which of two nearly untrained drafters clears the threshold more often, not which layers serve "
                "a drafter one would deploy: the budget buys too few training positions at this target size.")
    return out


def speed_text(entry: Mapping[str, Any] | None) -> str:
    """The side-by-side paragraph: tokens/s and speedups of the 1.5B target at each thread count."""
    large = ((entry or {}).get("large") or {}).get("by_threads") or {}
    if not large:
        return "The llama.cpp side by side has not been measured (wave bench --only llamacpp_1.5b)."
    parts = []
    for t, r in sorted(large.items(), key=lambda kv: int(kv[0])):
        e = r["eagle3"]
        lo, hi = e["speedup_ci"]
        ngram = r.get("ngram")
        vs = _against_repacked(e)
        parts.append(f"at {_threads(t)} plain llama.cpp decodes {r['plain']['tokens_per_s']:.1f} tokens/s and EAGLE-3 "
                     f"{e['tokens_per_s']:.1f} ({e['speedup']:.2f}x [{lo:.2f}, {hi:.2f}], tau {e['tau']:.2f}, "
                     f"{e['identical_to_plain']}/{e['prompts']} identical to plain)"
                     + (f", n-gram lookup {ngram['tokens_per_s']:.1f} ({ngram['speedup']:.2f}x)" if ngram else "")
                     + (f"; plain with llama.cpp's default repacked weights {r[REPACKED]['tokens_per_s']:.1f}, against "
                        f"which EAGLE-3 runs at {vs['speedup']:.2f}x [{vs['speedup_ci'][0]:.2f}, {vs['speedup_ci'][1]:.2f}]"
                        if vs and REPACKED in r else ""))
    n = next(iter(large.values()))["eagle3"]["prompts"]
    flags = _server_flags(entry)
    return (f"On {n} held-out prompts (96 new tokens, T = 0, interleaved prompt by prompt"
            + (f", every server started with {flags} unless named otherwise" if flags else "") + "), "
            + "; ".join(parts) + ". Intervals: 95% paired bootstrap over prompts of the pooled speedup.")


def cost_text(cm: CostModel | None) -> str:
    """The cost model's paragraph, saying what is measured and what is extrapolated."""
    if cm is None:
        return "The cost model needs both target sizes measured in one benchmark run."
    s0, s1 = cm.sizes_mib
    b0, b1 = cm.break_even
    taus = ", ".join(f"{label} {t:.2f}" for label, t in cm.taus.items())
    out = (f"Measured at {_threads(cm.threads)}: an EAGLE-3 round costs {b0:.2f} plain steps with the {s0:.0f} MiB "
           f"target and {b1:.2f} with the {s1:.0f} MiB one, so break-even needs tau {b0:.2f} and {b1:.2f}; the "
           f"drafters' taus in llama.cpp: {taus}. ")
    if not cm.slope < 0:
        return out + ("The overhead above one step does not fall as the target grows, so the two points predict no "
                      "size at which these drafters break even.")
    out += (f"Extrapolated (the overhead above one step, break-even tau minus 1, on a straight line in log-log "
            f"coordinates through these two points, slope {cm.slope:.2f}; nothing checks its shape): ")
    parts = []
    for label, t in cm.taus.items():
        size = cm.size_for(t)
        if size is None:
            parts.append(f"the {label} (tau {t:.2f}) breaks even at no size, since it gains no token per round")
        elif size > 1000 * s1:
            parts.append(f"the {label} (tau {t:.2f}) would break even only more than a thousand times beyond the "
                         "larger measured size, where the line says nothing: read it as 'at no size'")
        elif size > 10 * s1:
            parts.append(f"the {label} (tau {t:.2f}) would break even only at about {cm.params_for(t):,.0f}B "
                         f"parameters, {size / s1:,.0f} times the larger measured size: far beyond what two points "
                         "support, so read it as 'at no size this CPU serves', not as a prediction")
        else:
            parts.append(f"the {label} (tau {t:.2f}) would break even at about {size:,.0f} MiB of 4-bit weights, "
                         f"about {cm.params_for(t):.1f}B parameters")
    return out + "; ".join(parts) + "."


def reading_text(entry: Mapping[str, Any] | None) -> str:
    """What the 1.5B side by side shows, in plain text: which methods pay (interval above 1),
    the tau EAGLE-3 needed against the tau it reached, and where outputs differ from plain."""
    large = ((entry or {}).get("large") or {}).get("by_threads") or {}
    if not large:
        return ""
    t = max(large, key=int)
    run = large[t]
    e, rc = run["eagle3"], run["eagle3"].get("round_costs") or {}
    methods = [m for m, r in run.items() if isinstance(r, dict) and r.get("speedup_ci") and m != REPACKED]
    paying = [m for m in methods if run[m]["speedup_ci"][0] > 1.0]
    verb = "pays" if len(paying) == 1 else "pay"
    out = (f"At {_threads(t)}, " + (f"{' and '.join(METHOD_LABELS.get(m, m) for m in paying)} {verb}: the interval of the pooled speedup lies above 1. "
                                    if paying else "no method pays: every speedup interval reaches 1 or below. "))
    if rc:
        out += (f"EAGLE-3 would need tau {rc['round_in_plain_steps']:.2f} to break even (its round: verify and the rest "
                f"{rc.get('verify_in_plain_steps', float('nan')):.2f} plain steps, drafting "
                f"{rc.get('draft_ms_per_round', float('nan')) / rc['plain_step_ms']:.2f}) and reached {e['tau']:.2f}, "
                f"with {100 * (e.get('acceptance') or 0):.1f}% of its drafts accepted. ")
        per = e.get("drafted_per_round")
        v = rc.get("verify_in_plain_steps")
        if per and v is not None:
            extra = (v - 1.0) / per
            out += (f"Its verify of 1 + {per:.1f} tokens costs {v:.2f} plain steps, {extra:.2f} of a step for each "
                    "drafted token" + (": close to a full step each, so on this CPU the target's batch of tokens is "
                                       "paid nearly token by token, not read once as a memory-bound target's would be. "
                                       if extra > 0.5 else ", far below a step each, as a memory-bound target's. "))
    diff = e.get("first_difference") or {}
    if diff:
        where = ", ".join(f"{k} at token {v}" for k, v in sorted(diff.items(), key=lambda kv: kv[1]))
        out += (f"EAGLE-3's outputs equal plain decoding on {e['identical_to_plain']} of {e['prompts']} prompts; the "
                f"others first differ at {where}. With so few drafts accepted, nearly every token there comes from the "
                "target's verify of 1 + 3 tokens, which llama.cpp computes with batched kernels instead of its "
                "one-token ones, so a greedy near-tie can break the other way: the outputs are the target's own "
                "under other rounding, not a drafter's error. ")
        m = e.get("first_difference_margins") or {}
        if m:
            gaps = [v["margin_nats"] for v in m.values()]
            scale = [v["median_margin_before"] for v in m.values() if v.get("median_margin_before") is not None]
            out += (f"Measured: where they part, plain decoding's two most likely tokens lie {min(gaps):.2f} to "
                    f"{max(gaps):.2f} nats apart in log-probability"
                    + (f", against a median of {min(scale):.1f} to {max(scale):.1f} nats over the same prompts' earlier "
                       "positions" if scale else "") + " (llama-server's n_probs on the plain server): near-ties. ")
    for m in methods:
        if m != "eagle3" and not run[m].get("first_difference"):
            out += (f"The {METHOD_LABELS.get(m, m)} method, which verifies a batch only when its lookup finds a match, "
                    f"is identical on all {run[m]['prompts']} prompts. ")
    return (out + lossless_text(entry)).strip()


def lossless_text(entry: Mapping[str, Any] | None) -> str:
    """Why the servers run with ``--no-repack``: the entry's ``lossless_check`` (llama.cpp's
    default flags: EAGLE-3 and an EAGLE-3 server that never drafts, against plain) beside the
    identical counts under the entry's flags, and what the flag costs plain decoding (plain text)."""
    large = (entry or {}).get("large") or {}
    chk, runs = large.get("lossless_check"), large.get("by_threads") or {}
    if not chk or not runs:
        return ""
    e, never = chk["eagle3"], chk["eagle3_never_drafts"]
    where = ", ".join(f"{k} at token {v}" for k, v in sorted((e.get("first_difference") or {}).items(),
                                                             key=lambda kv: kv[1]))
    flags = _server_flags(large)
    same = "; ".join(f"{_threads(t)}: {r['eagle3']['identical_to_plain']}/{r['eagle3']['prompts']}"
                     for t, r in sorted(runs.items(), key=lambda kv: int(kv[0])))
    out = (f"Lossless, checked. With llama.cpp's default flags ({_threads(chk['threads'])}, same prompts) EAGLE-3's "
           f"outputs equal plain decoding on {e['identical_to_plain']} of {e['prompts']} prompts"
           + (f" (first differences: {where})" if where else "")
           + f", while an EAGLE-3 server that never drafts (p_min 1: every round verifies one token, with the target's "
           f"hidden-state extraction on) equals plain on {never['identical_to_plain']} of {never['prompts']}. ")
    if never["identical_to_plain"] == never["prompts"] and e["identical_to_plain"] < e["prompts"]:
        out += ("So the extraction changes nothing; the batched verify does. On x86 llama.cpp repacks 4-bit weights "
                "by default and multiplies a batch of tokens with other kernels (gemm) than a single token (gemv); "
                "they round differently, and a greedy near-tie can break the other way. ")
    out += f"With {flags} on every server, plain included, EAGLE-3 equals plain on {same}. " if flags else ""
    small = (entry or {}).get("small") or {}
    for ts, r in sorted((small.get("by_threads") or {}).items(), key=lambda kv: int(kv[0])):
        e135 = r.get("eagle3") or {}
        for pid, m in sorted((e135.get("first_difference_margins") or {}).items()):
            out += (f"The {small.get('target_gguf') or small.get('model', 'smaller')} target still parts from plain on "
                    f"{pid} at {_threads(ts)} (token {m['position']}, a near-tie of {m['margin_nats']:.2f} nats against "
                    f"a median of {m['median_margin_before']:.1f} before it): with its weight types {flags} alone does not make "
                    "llama.cpp's batched kernels round like its one-token ones (which kernel differs was not isolated), so "
                    "that target's rows are not lossless by construction. ")
    t = max(runs, key=int)
    rp = runs[t].get(REPACKED) or {}
    if rp.get("identical_to_plain") is not None and rp["identical_to_plain"] < rp["prompts"]:
        out += (f"Plain decoding itself changes with the flag: with and without repacking its outputs agree on "
                f"{rp['identical_to_plain']} of {rp['prompts']} prompts at {_threads(t)}, so each method is compared for "
                "identity with the plain server started with the same flags. ")
    if REPACKED in runs[t]:
        cost = runs[t]["plain"]["tokens_per_s"] / runs[t][REPACKED]["tokens_per_s"]
        out += (f"The flag costs plain decoding speed: at {_threads(t)} plain runs at {cost:.2f}x of its speed with "
                "repacked weights, which is why the table also gives each method against that faster plain.")
    return out


def own_drafters(bench: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The :data:`OWN` amendments measured in ``bench`` (the benchmarks), as (ordinal, entry)."""
    return [(nth, bench[key]) for key, nth in OWN if bench.get(key)]


def landing_text(entry: Mapping[str, Any] | None, ceiling: Mapping[str, Any] | None = None,
                 large: Mapping[str, Any] | None = None, own: Sequence[tuple[str, Mapping[str, Any]]] = ()) -> str:
    """The landing page's sentence on where EAGLE-3 pays on a CPU (plain text), with the
    ``llamacpp_ceiling`` entry's best speedup of a perfect drafter where measured, the stage
    of issue 42's ``large`` drafter that the corpus drafter's row measured, and the outcome tau
    offline of the drafters trained on the target's own answers (``own``: :func:`own_drafters`)."""
    big_runs = ((entry or {}).get("large") or {}).get("by_threads") or {}
    small = ((entry or {}).get("small") or {}).get("by_threads") or {}
    if not big_runs:
        return "not measured yet (wave bench --only llamacpp_1.5b)"
    t = max(big_runs, key=int)
    e = big_runs[t]["eagle3"]
    lo, hi = e["speedup_ci"]
    out = (f"inside llama.cpp on this CPU, EAGLE-3 runs the 1.5B target at {e['speedup']:.2f}x the speed of plain "
           f"llama.cpp on {t} threads (95% interval {lo:.2f} to {hi:.2f}, n = {e['prompts']} prompts, tau "
           f"{e['tau']:.2f}, {e['identical_to_plain']}/{e['prompts']} outputs identical to plain"
           + (f", every server with {_server_flags(entry)}" if _server_flags(entry) else "") + ")")
    vs = _against_repacked(e)
    if vs:
        out += (f" and {vs['speedup']:.2f}x ({vs['speedup_ci'][0]:.2f} to {vs['speedup_ci'][1]:.2f}) the speed of plain "
                "llama.cpp with its default repacked weights")
    s = (small.get(t) or {}).get("eagle3")
    if s:
        out += f", against {s['speedup']:.2f}x for the 135M target in the same run"
    rc = e.get("round_costs") or {}
    if rc:
        out += (f"; a round costs {rc['round_in_plain_steps']:.2f} plain steps at 1.5B, so a drafter breaks even only "
                f"at tau {rc['round_in_plain_steps']:.2f}" + (f" (at most {rc['tau_max']} at this depth)" if rc.get("tau_max") else ""))
    got = _corpus_run(entry)
    if got:
        tc, c = got
        clo, chi = c["speedup_ci"]
        out += (f"; with a drafter trained on the target's own answers to the prompt corpus (chapter 11's corpus "
                f"drafter{_stage_note(entry, large)}) it runs at {c['speedup']:.2f}x ({clo:.2f} to {chi:.2f}, tau "
                f"{c['tau']:.2f}, {_threads(tc)}, {c['identical_to_plain']}/{c['prompts']} identical)")
    if own:
        out += ("; 1.5B drafters trained on the target's answers to the study's own train prompts reach outcome tau "
                + _and([f"{e['figure']:.2f} ({e['tau_ci'][0]:.2f} to {e['tau_ci'][1]:.2f}, n = "
                        f"{e['delta_vs_toy']['n']} eval prompts, {nth} amendment)" for nth, e in own])
                + _own_reach(own))
    ngram = big_runs[t].get("ngram")
    if ngram and ngram.get("speedup_ci"):
        nlo, nhi = ngram["speedup_ci"]
        out += (f"; llama.cpp's model-free n-gram lookup runs at {ngram['speedup']:.2f}x ({nlo:.2f} to {nhi:.2f}, "
                f"{ngram['identical_to_plain']}/{ngram['prompts']} identical)")
    df = ceiling_frame(ceiling)
    big = df[(df["target"] == "1.5B") & (df["threads"] == int(t))] if len(df) else df
    if len(big):
        best = big.loc[big["ceiling"].idxmax()]
        out += (f"; even a drafter whose every draft is accepted would reach at most {best['ceiling']:.2f}x there "
                f"(depth {int(best['depth'])}, measured with llama.cpp's synthetic acceptance, chapter 11's ceiling)")
    cm = cost_model(entry or {}, threads="1")
    s1 = cm.sizes_mib[1] if cm is not None else 0.0
    near = {label: cm.params_for(t) for label, t in cm.taus.items()
            if cm.size_for(t) is not None and cm.size_for(t) <= 1000 * s1} if cm is not None else {}
    if near:
        out += ("; a two-point extrapolation (1 thread, labelled as such in chapter 11) would put break-even at about "
                + " and ".join(f"{b:.0f}B parameters for the {label}'s tau" for label, b in near.items()))
    return out


# ----------------------------------------------------------------------------- the ceiling (issue 42)

#: The terms of a round, in the order the chapter names them.
TERMS = {"verify": "the target's verify of the extra tokens", "extraction": "the hidden-state extraction",
         "drafter": "the drafter's calls"}


def _ceiling_settings(entry: Mapping[str, Any] | None):
    """(target label, model, threads, analysis) for every measured setting of the ceiling entry."""
    for label, t in ((entry or {}).get("targets") or {}).items():
        for th, a in sorted((t.get("by_threads") or {}).items(), key=lambda kv: int(kv[0])):
            yield label, t.get("model", ""), int(th), a


def _verify_at(a: Mapping[str, Any], k: int) -> float | None:
    from activation_wave.decode.ceiling import VerifyCurve

    pts = {(p.get("k") or float(kk)): p["steps"] for kk, p in (a.get("verify_probe") or {}).items()}
    return round(VerifyCurve(pts).at(k), 4) if pts else None


def ceiling_frame(entry: Mapping[str, Any] | None) -> pd.DataFrame:
    """One row per target, thread count, drafter variant and depth of the ``llamacpp_ceiling``
    entry: the round's terms in plain steps (verify of depth + 1 tokens, extraction, the drafter's
    depth + 1 calls), the round predicted from them and as measured with every draft accepted,
    their relative difference, the break-even tau (the measured round) and the ceiling (the
    speedup at tau = depth + 1). Empty without the entry."""
    rows = []
    for label, model, th, a in _ceiling_settings(entry):
        ext = a["extraction_cost"]["steps"]
        for v, by_d in a["round_cost_measured"].items():
            if v not in a["draft_call_cost"]:
                continue
            c = a["draft_call_cost"][v]["steps"]
            for d, r in by_d.items():
                if not d.isdigit():
                    continue
                n = int(d)
                rows.append({"target": label, "threads": th, "variant": v, "depth": n,
                             "verify (steps)": _verify_at(a, n + 1), "extraction (steps)": ext,
                             "drafter calls (steps)": round((n + 1) * c, 4),
                             "round predicted": a["round_cost_predicted"][v][d], "round measured": r,
                             "difference": a["agreement"][v][d], "break-even tau": r,
                             "ceiling": a["ceiling"][v][d]})
    return pd.DataFrame(rows)


def terms_frame(entry: Mapping[str, Any] | None) -> pd.DataFrame:
    """The measured terms per target and thread count: the plain step, the verify of 2, 4 and 8
    tokens and its cost per extra token (the slope), the extraction, one drafter call per
    variant, and whether each variant's real drafts left the output equal to plain decoding's."""
    rows = []
    for label, model, th, a in _ceiling_settings(entry):
        v = a["verify_cost_by_k"]
        row = {"target": label, "threads": th, "plain step (ms)": a["plain_step_ms"]["verify"],
               "verify k=2": v.get("2"), "verify k=4": v.get("4"), "verify k=8": v.get("8"),
               "per extra token": a["verify_slope"], "extraction": a["extraction_cost"]["steps"]}
        for var, c in a["draft_call_cost"].items():
            row[f"call {var}"] = c["steps"]
            row[f"identical {var}"] = a["identical_to_plain"].get(f"eagle3_{var}")
        rows.append(row)
    return pd.DataFrame(rows)


#: A ceiling within this of 1 is worded "at best break even", not "cannot pay": it is one run of a
#: few prompts without an interval.
NEAR_ONE = 0.05


def _largest_term(row: Mapping[str, Any]) -> str:
    parts = {"verify": row["verify (steps)"] - 1.0, "extraction": row["extraction (steps)"],
             "drafter": row["drafter calls (steps)"]}
    return max(parts, key=lambda k: parts[k])


def _agreement_parts(entry: Mapping[str, Any] | None) -> dict[str, float]:
    """The largest |predicted - measured| / measured of the rounds with real drafts, at the
    drafter's tau (synthetic) and of the n-gram speculation, over all settings."""
    worst: dict[str, float] = {}
    for _, _, _, a in _ceiling_settings(entry):
        for key, v in a["agreement"].items():
            if isinstance(v, dict):
                if "real" in v:
                    worst["real"] = max(worst.get("real", 0.0), abs(v["real"]))
            else:
                worst[key] = max(worst.get(key, 0.0), abs(v))
    return worst


def ceiling_text(entry: Mapping[str, Any] | None) -> str:
    """The ceiling in words: per target and thread count the best speedup a perfect drafter
    reaches (and at which depth and variant) and the break-even tau at depth 3; which term of a
    round weighs most; the depths at which no drafter can pay, and why; and how far the
    predicted rounds lie from the measured ones."""
    df = ceiling_frame(entry)
    if df.empty:
        return ("The round's terms have not been measured (wave bench --only llamacpp_ceiling, about half an hour on "
                "two quiet cores after scripts/setup_llamacpp.sh).")
    parts = []
    for (label, th), g in df.groupby(["target", "threads"], sort=False):
        best = g.loc[g["ceiling"].idxmax()]
        d3 = g[(g["depth"] == 3) & (g["variant"] == g["variant"].iloc[0])]
        be = f", break-even at depth 3 needs tau {d3['break-even tau'].iloc[0]:.2f}" if len(d3) else ""
        parts.append(f"{label} at {_threads(th)}: {best['ceiling']:.2f}x (depth {best['depth']}, {best['variant']} "
                     f"drafter){be}")
    out = ("The best speedup a drafter whose every draft is accepted could reach (llama.cpp's synthetic acceptance, "
           f"measured; n = {(entry or {}).get('n_prompts')} held-out prompts of {(entry or {}).get('max_new_tokens')} "
           "new tokens per server, one run, so no interval): " + "; ".join(parts) + ". ")
    d3 = df[df["depth"] == 3]
    if len(d3):
        over = (d3["round measured"] - 1.0).clip(lower=1e-9)
        share = ((d3["verify (steps)"] - 1.0) / over).clip(lower=0.0, upper=1.0)
        slopes = [a["verify_slope"] for *_, a in _ceiling_settings(entry)]
        main = "the target's verify of the 3 extra tokens" if share.mean() >= 0.5 else "the drafter and the extraction"
        out += (f"What a depth-3 round costs beyond the step it replaces is mostly {main}: the verify's extra tokens "
                f"are {share.min():.0%} to {share.max():.0%} of it, the drafter's 4 calls "
                f"{d3['drafter calls (steps)'].min():.2f} to {d3['drafter calls (steps)'].max():.2f} steps, the "
                f"extraction at most {d3['extraction (steps)'].max():.2f}. Each extra verified token costs "
                f"{min(slopes):.2f} to {max(slopes):.2f} of a plain step (the table's slope)"
                + (": on these cores the 4-bit matrix products are bound by compute, not by reading the weights, so a "
                   "batch of tokens is paid nearly token by token. " if min(slopes) > 0.5 else ". "))
    low = df.groupby(["target", "threads", "depth"], sort=False)["ceiling"].max()
    low = low[low < 1.0]
    for (label, th), g in low.groupby(level=["target", "threads"], sort=False):
        depths = [d for *_, d in g.index]
        rows = df[(df["target"] == label) & (df["threads"] == th) & df["depth"].isin(depths)]
        terms = pd.Series([_largest_term(r) for _, r in rows.iterrows()]).mode()
        span = f"{g.min():.2f}" if g.min() == g.max() else f"{g.min():.2f} to {g.max():.2f}"
        at = ("at any depth" if len(depths) == df["depth"].nunique() else
              f"at depth {', '.join(map(str, depths))}")
        if g.min() >= 1.0 - NEAR_ONE:  # one run of a few prompts, no interval: a ceiling this close to 1 is not below it
            out += (f"At {label} on {_threads(th)} the ceiling {at} is {span}, within {NEAR_ONE:.0%} of 1 in one run "
                    f"without an interval: a drafter could at best break even there. ")
            continue
        out += (f"At {label} on {_threads(th)} no drafter can pay {at} (ceiling {span}): even with every draft "
                f"accepted a round costs more plain steps than the tokens it yields, and its largest term beyond the "
                f"step is {TERMS[terms.iloc[0]]}. ")
    worst = df["difference"].abs().max()
    other = _agreement_parts(entry)
    out += (f"The rounds predicted from the terms lie within {100 * worst:.0f}% of the measured ones at every depth "
            f"and variant ({len(df)} settings" + (", the issue's bar of 15% met" if worst <= 0.15 else
                                                  ", beyond the issue's bar of 15%") + ")")
    if "real" in other:
        out += f"; with real drafts within {100 * other['real']:.0f}%"
    if "eagle3_at_tau" in other:
        out += f"; at the 1.5B drafter's tau within {100 * other['eagle3_at_tau']:.0f}%"
    if "ngram" in other:
        out += (f"; the n-gram speculation's round within {100 * other['ngram']:.0f}% (its drafts are long, so its "
                "verify comes from the line beyond the measured 8 tokens: extrapolated)")
    return out + "."


def where_points(entry: Mapping[str, Any] | None, depth: int = 3, threads: Sequence[int] = (1, 2, 4, 8, 16)
                 ) -> list[dict[str, Any]]:
    """Break-even tau at ``depth`` against threads per target: the measured thread counts
    (``measured`` True, from the measured round) and the roofline model of
    :func:`~activation_wave.decode.ceiling.thread_model` at ``threads`` (the drafter's terms held
    at their value at the largest measured thread count, in plain steps)."""
    from activation_wave.decode.ceiling import thread_model

    by_target: dict[str, dict[int, Any]] = {}
    for label, _, th, a in _ceiling_settings(entry):
        by_target.setdefault(label, {})[th] = a
    out = []
    for label, runs in by_target.items():
        model = thread_model({th: (a["plain_step_ms"]["verify"], a["verify_slope"]) for th, a in runs.items()})
        top = runs[max(runs)]
        var = next(iter(top["draft_call_cost"]), None)
        if model is None or var is None:
            continue
        ext, call = top["extraction_cost"]["steps"], top["draft_call_cost"][var]["steps"]
        for th, a in sorted(runs.items()):
            r = (a["round_cost_measured"].get(var) or {}).get(str(depth))
            if r is not None:
                out.append({"target": label, "threads": th, "break_even": r, "measured": True})
        for th in threads:
            out.append({"target": label, "threads": th, "break_even": round(model.round_steps(th, depth, ext, call), 4),
                        "measured": False, "slope": round(model.slope(th), 4), "drafter_terms": round(ext + (depth + 1) * call, 4),
                        "model": model.fit})
    return out


def where_text(entry: Mapping[str, Any] | None, sizes: Mapping[str, Any] | None, depth: int = 3) -> str:
    """Where EAGLE-3 would pay (issue 42, item 5): per target, the verify's cost per extra token
    measured at each thread count, the roofline model's break-even tau at more threads
    (extrapolated, and said so), and the thread count at which break-even falls to the taus
    today's drafters reach in llama.cpp (the ``llamacpp_1.5b`` entry's)."""
    from activation_wave.decode.ceiling import thread_model

    pts = where_points(entry, depth)
    if not pts:
        return ""
    taus = today_taus(sizes)
    out = (f"Model (stated, not tested beyond the two measured thread counts): a step reads the weights once and computes "
           f"per token, so a verify of k tokens costs 1 + (k - 1) s plain steps, s the compute's share of a step; "
           f"compute divides over threads, the weight read does not get faster. ")
    for label in dict.fromkeys(p["target"] for p in pts):
        mine = [p for p in pts if p["target"] == label]
        meas = {p["threads"]: p["break_even"] for p in mine if p["measured"]}
        ext = {p["threads"]: p for p in mine if not p["measured"] and p["threads"] > max(meas or {0: 0})}
        runs = {th: a for lab, _, th, a in _ceiling_settings(entry) if lab == label}
        slopes = ", ".join(f"{a['verify_slope']:.2f} of a step at {_threads(th)}" for th, a in sorted(runs.items()))
        out += f"{label}: each extra verified token costs {slopes} (measured)"
        if meas:
            out += (f"; break-even at depth {depth} is {', '.join(f'{v:.2f} at {_threads(t)}' for t, v in sorted(meas.items()))}"
                    " (measured)")
        fit = {p["threads"]: p["break_even"] for p in mine if not p["measured"] and p["threads"] in meas}
        if fit:
            err = max(abs(fit[t] - meas[t]) / meas[t] for t in fit)
            out += f"; the model gives these within {100 * err:.0f}%"
        if ext:
            out += (", and extrapolates " + ", ".join(f"{p['break_even']:.2f} at {t}" for t, p in sorted(ext.items()))
                    + f" threads (the drafter's own terms fixed at {next(iter(ext.values()))['drafter_terms']:.2f} "
                    "steps)")
        model = thread_model({th: (a["plain_step_ms"]["verify"], a["verify_slope"]) for th, a in runs.items()})
        top = runs[max(runs)]
        var = next(iter(top["draft_call_cost"]))
        e, c = top["extraction_cost"]["steps"], top["draft_call_cost"][var]["steps"]
        never = []  # drafters whose tau is below the drafter's own terms: said once, together
        for who, tau in taus.items():
            if tau is None or model is None:
                continue
            t = model.threads_for(tau, depth, e, c)
            if t is None:
                never.append(f"the {who} (tau {tau:.2f} in llama.cpp)")
            elif t > 16:
                out += (f"; break-even would fall to the {who}'s tau {tau:.2f} only beyond 16 threads (about {t:.0f} by the "
                        "model, far outside what two measured thread counts support)")
            else:
                out += f"; break-even falls to the {who}'s tau {tau:.2f} at about {t:.0f} threads (model)"
        if never:
            out += (f"; {join_words(never)} {'pays' if len(never) == 1 else 'pay'} at no thread count: the drafter's terms "
                    f"alone cost {e + (depth + 1) * c:.2f} steps beyond the step")
        # a larger target of the same kind: weight reads and compute both grow with the parameters, so s
        # stays; the drafter's terms shrink beside a dearer step. What is left at depth 1 is the verify.
        floor = 1.0 + top["verify_slope"]
        above = [f"the {w} (tau {t:.2f})" for w, t in taus.items() if t > floor]
        below = [f"the {w} (tau {t:.2f})" for w, t in taus.items() if t <= floor]
        verdicts = ([f"{join_words(above)} {'clears' if len(above) == 1 else 'clear'} that floor"] if above else []) + \
                   ([f"{join_words(below)} {'does' if len(below) == 1 else 'do'} not clear that floor"] if below else [])
        out += (f"; at {_threads(max(runs))} no target size brings depth-1 break-even below 1 + s = {floor:.2f} "
                "(model: the drafter's terms vanish beside a larger target, the verify's share does not), "
                + "; ".join(verdicts) + ". ")
    return out.strip()


#: The EAGLE-3 drafters of the ``llamacpp_1.5b`` side by side, by method, as the figures name them.
DRAFTER_LABELS = {"eagle3": "drafter", LARGE_METHOD: "corpus drafter"}


def _drafter_runs(sizes: Mapping[str, Any] | None) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(target label, threads, drafter name, run) of every EAGLE-3 drafter run with a tau in the
    ``llamacpp_1.5b`` entry, target by target, thread count by thread count."""
    for label, part in (("1.5B", "large"), ("135M", "small")):
        for th, r in (((sizes or {}).get(part) or {}).get("by_threads") or {}).items():
            for method, name in DRAFTER_LABELS.items():
                if (r.get(method) or {}).get("tau"):
                    yield label, th, name, r[method]


def today_taus(sizes: Mapping[str, Any] | None) -> dict[str, float]:
    """The tau each target's EAGLE-3 drafters reached in llama.cpp (the ``llamacpp_1.5b`` entry),
    by "<size> drafter" (and "<size> corpus drafter" once issue 42's drafter is in it)."""
    out: dict[str, float] = {}
    for label, _, name, run in _drafter_runs(sizes):
        out.setdefault(f"{label} {name}", float(run["tau"]))  # its first thread count's: the drafts do not change
    return out


def measured_points(sizes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Each EAGLE-3 drafter's measured run in the ``llamacpp_1.5b`` side by side (target,
    threads, label, tau, speedup), to mark on the ceiling's panels (depth 3, f16 drafter)."""
    return [{"target": label, "threads": int(th), "label": name, "tau": float(run["tau"]), "speedup": float(run["speedup"])}
            for label, th, name, run in _drafter_runs(sizes) if run.get("speedup")]


def ngram_text(sizes: Mapping[str, Any] | None) -> str:
    """llama.cpp's n-gram speculation on the 1.5B target, from the ``llamacpp_1.5b`` entry: the
    only speculation that pays on this CPU (speedup, interval, n, tau, identical outputs)."""
    large = ((sizes or {}).get("large") or {}).get("by_threads") or {}
    if not large:
        return ""
    t = max(large, key=int)
    ng = large[t].get("ngram")
    if not ng or not ng.get("speedup_ci"):
        return ""
    lo, hi = ng["speedup_ci"]
    verdict = "pays" if lo > 1.0 else "does not pay (its interval reaches 1)"
    return (f"llama.cpp's model-free n-gram lookup {verdict} on the 1.5B target: {ng['speedup']:.2f}x [{lo:.2f}, {hi:.2f}] "
            f"at {_threads(t)} (95% paired bootstrap over n = {ng['prompts']} prompts, tau {ng['tau']:.2f}, "
            f"{ng['identical_to_plain']}/{ng['prompts']} outputs identical to plain); it drafts by copying earlier "
            "text, so its drafts cost nothing to make.")


def _and(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(items) if len(items) < 3 else ", ".join(items[:-1]) + " and " + items[-1]


def _own_reach(own: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """How the :data:`OWN` drafters named stand against the issue's target, ending the answer's sentence."""
    reached = [nth for nth, e in own if e["figure"] >= LARGE_TARGET]
    if not reached:
        return f" offline, short of the issue's {LARGE_TARGET}, so none is measured in llama.cpp"
    return (f" offline; the {_and(reached)} amendment{'s' if len(reached) > 1 else ''}'s drafter"
            f"{'s' if len(reached) > 1 else ''} reach{'' if len(reached) > 1 else 'es'} the issue's {LARGE_TARGET}")


def answer_text(sizes: Mapping[str, Any] | None, ceiling: Mapping[str, Any] | None,
                bench: Mapping[str, Any] | None = None) -> str:
    """The chapter's answer: the n-gram result, C1 as measured with the toy drafter and with the
    corpus drafter (naming the stage of issue 42's :data:`LARGE` entry in ``bench``, the
    benchmarks, that its row measured), the :data:`OWN` amendments' drafters (offline only), and
    what the ceiling says about any drafter (plain text)."""
    bench = bench or {}
    large, indist_cont = bench.get(LARGE), bench.get(INDIST_CONT)
    out = []
    ng = ngram_text(sizes)
    if ng:
        out.append(ng)
    big_runs = ((sizes or {}).get("large") or {}).get("by_threads") or {}
    if big_runs:
        t = max(big_runs, key=int)
        e = big_runs[t]["eagle3"]
        out.append(f"EAGLE-3 with the 1.5B drafter trained here runs at {e['speedup']:.2f}x "
                   f"[{e['speedup_ci'][0]:.2f}, {e['speedup_ci'][1]:.2f}] at {_threads(t)}, but that drafter barely "
                   f"drafts (tau {e['tau']:.2f}): the verdict is about it, not about EAGLE-3.")
        got = _corpus_run(sizes)
        if got:
            tc, c = got
            out.append(f"The corpus drafter (C1 re-stated{_stage_note(sizes, large)}) runs at {c['speedup']:.2f}x "
                       f"[{c['speedup_ci'][0]:.2f}, {c['speedup_ci'][1]:.2f}] at {_threads(tc)} with tau {c['tau']:.2f} "
                       "in llama.cpp.")
    own = [(nth, e) for nth, e in own_drafters(bench) if nth in OWN_RECORDS]
    if own:
        out.append(f"On the target's answers to the study's own train prompts (the {_and([n for n, _ in own])} "
                   f"amendment{'s' if len(own) > 1 else ''}), 1.5B drafters of the same budget reach "
                   "outcome tau "
                   + _and([f"{e['figure']:.2f} [{e['tau_ci'][0]:.2f}, {e['tau_ci'][1]:.2f}] on "
                           + OWN_RECORDS[nth].format(**e) for nth, e in own])
                   + _own_reach(own) + ".")
    if indist_cont:
        (lo, hi), reach = indist_cont["tau_ci"], indist_cont["figure"] >= LARGE_TARGET
        out.append(f"Trained on to {indist_cont['tokens_with_parent']:,} tokens (the eleventh amendment), the ninth "
                   f"amendment's drafter reaches {indist_cont['figure']:.2f} [{lo:.2f}, {hi:.2f}] offline"
                   + ("." if reach else f", short of {LARGE_TARGET}."))
    df = ceiling_frame(ceiling)
    big = df[df["target"] == "1.5B"] if len(df) else df
    if len(big):
        parts = []
        for th, g in big.groupby("threads"):
            best = g.loc[g["ceiling"].idxmax()]
            d3 = g[g["depth"] == 3]["break-even tau"]
            parts.append(f"at most {best['ceiling']:.2f}x at {_threads(th)} (depth {best['depth']}"
                         + (f"; break-even at depth 3 needs tau {d3.min():.2f}" if len(d3) else "") + ")")
        out.append("What any EAGLE-3 drafter could reach there, measured with every draft accepted: " + ", ".join(parts)
                   + ". The round's dearest term is the target's own verify of the drafted tokens, not the drafter "
                   "(the ceiling section); n-gram lookup pays because its drafts cost nothing to make and it drafts "
                   "only where the text repeats, where most of a draft is accepted.")
    return " ".join(out) if out else "Not measured yet (wave bench --only llamacpp_1.5b, --only llamacpp_ceiling)."


def ceiling_tables(ceiling: Mapping[str, Any] | None) -> list[Any]:
    """The ceiling section's tables (the measured terms; each round predicted and measured), as
    styled tables; none when the ceiling has not been measured."""
    from activation_wave.core.tables import format_table

    if not ceiling:
        return []
    fmt = {c: "{:.3f}" for c in ("verify (steps)", "extraction (steps)", "drafter calls (steps)", "extraction")}
    return [format_table(terms_frame(ceiling), {**fmt, "plain step (ms)": "{:.1f}"}),
            format_table(ceiling_frame(ceiling), {**fmt, "difference": "{:+.1%}", "ceiling": "{:.2f}x"})]


def ceiling_values(ceiling: Mapping[str, Any] | None, sizes: Mapping[str, Any] | None,
                   bench: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The page's glued texts of the ceiling section: ``cpu_ceiling_text``, ``cpu_where_text``,
    ``cpu_answer_text`` and, from issue 42's entries in ``bench`` (the benchmarks: :data:`LARGE`,
    :data:`INDIST`, :data:`INDIST_ALL`, :data:`INDIST_CONT`, :data:`INDIST_SAMPLES`, :data:`INDIST_STEPS`),
    ``cpu_large_text``, ``cpu_indist_text``, ``cpu_indist_all_text``, ``cpu_indist_cont_text``,
    ``cpu_indist_samples_text`` and ``cpu_indist_steps_text``."""
    bench = bench or {}
    large = bench.get(LARGE)
    return {"cpu_ceiling_text": ceiling_text(ceiling), "cpu_large_text": large_drafter_text(large, sizes),
            "cpu_indist_text": indist_text(bench.get(INDIST), large),
            "cpu_indist_all_text": indist_all_text(bench.get(INDIST_ALL)),
            "cpu_indist_cont_text": indist_cont_text(bench.get(INDIST_CONT)),
            "cpu_indist_samples_text": indist_samples_text(bench.get(INDIST_SAMPLES)),
            "cpu_indist_steps_text": indist_steps_text(bench.get(INDIST_STEPS)),
            "cpu_where_text": where_text(ceiling, sizes) or "Needs the ceiling's measurement (above).",
            "cpu_answer_text": answer_text(sizes, ceiling, bench)}
