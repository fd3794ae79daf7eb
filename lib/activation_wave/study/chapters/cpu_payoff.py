"""The cost page, "Does EAGLE-3 pay on a CPU?" (``notebooks/11_cpu_payoff.py``): the third
architecture's drafters, the llama.cpp figures at two target sizes, the ceiling run's terms and
the 1.5B drafter designs, as numbers, tables and words the page glues (no sentence).

Pre-registered in ``book/lab/cpu_payoff.md`` (``sec-cpu-prereg``). :func:`run_drafters`
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
from activation_wave.core.stats import within_noise
from activation_wave.select.across_models import third_config, third_drafter_config
from activation_wave.study.chapters import cross_drafters as cd
from activation_wave.study.chapters.eagle3_speedup import DEFAULT_SET, Eagle3SpeedupResult
from activation_wave.study.hypotheses import Hypothesis

NAME = "11_cpu_drafters"
BENCH = "llamacpp_1.5b"
#: The benchmark that measures an EAGLE-3 round term by term (issue 42).
CEILING = "llamacpp_ceiling"
NAN = float("nan")

__all__ = ["NAME", "BENCH", "NAN", "has_drafters", "drafter_sets", "run_drafters", "trained_drafters", "speed_frame",
           "round_frame", "CostModel", "cost_model", "evaluate_hypotheses", "c2_again", "c2_frame", "c2_values",
           "LAYER_TEST", "CEILING", "ceiling_frame", "terms_frame", "where_points", "today_taus", "ceiling_tables", "ROUND_FORMATS",
           "cost_inputs_frame", "LARGE", "LARGE_METHOD", "LARGE_TARGET", "measured_points", "stage_fit", "stage_reach",
           "stage_pace", "stage_curve", "stage_lineage", "INDIST", "INDIST_ALL", "INDIST_CONT", "INDIST_SAMPLES",
           "INDIST_STEPS", "SPEED_WORD", "speed_word", "side_values",
           "ceiling_values", "where_values", "per_prompt_mean", "DESIGNS", "designs_frame", "best_design_values",
           "PRIMARY_DELTA", "design_results", "load_drafters"]


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
#: The fourteenth amendment's benchmark (``benchmarks.layer_test_1p5b``): C2 with drafters that draft.
LAYER_TEST = "c2_layer_test"
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
                        alpha: float = 0.05, layer_test: Mapping[str, Any] | None = None) -> list[Hypothesis]:
    """C1 and C2 of chapter 11's pre-registration by their verdict rules (None: not testable
    with these results, e.g. no benchmark entry or no drafters). ``layer_test``: the
    fourteenth amendment's entry (``c2_layer_test``), C2's latest statement when present."""
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
                        lo > 1.0, "paired bootstrap over prompts, one test", (lo, hi), null=1.0,
                        value=e["speedup"], n=e["prompts"])
    c1b = _c1_corpus(entry)
    if drafters is None:
        c2 = Hypothesis("C2", "the best rule's set beats the default (1.5B drafters)", "no drafters in this profile",
                        None, "")
    else:
        (g1, *_) = cd.evaluate_hypotheses(drafters, alpha)
        c2 = dataclasses.replace(g1, name="C2", claim="the best rule's set beats the default (1.5B drafters, one "
                                 "seed each)")
    c2b = c2_again(layer_test) if layer_test else None
    return [c1, *([c1b] if c1b else []), c2, *([c2b] if c2b else [])]


def c2_again(entry: Mapping[str, Any]) -> Hypothesis:
    """C2 as the fourteenth amendment re-states it, from its entry (``benchmarks.layer_test_1p5b``):
    the rival set's seed-averaged paired difference from the default, Holm across the sets; not
    testable when a drafter of either set failed the instrument check."""
    ref, rival = _c2_sets(entry)
    claim = "the best rule's set beats the default (1.5B drafters that draft, three seeds each)"
    c = entry["comparisons"].get(rival)
    base = entry["sets"][ref]["tau"]
    if c is None:
        failed = [d for d in entry["drafters"] if not d["instrument_ok"]]
        return Hypothesis("C2 (drafters that draft)", claim, "not compared", None,
                          f"not testable: {len(failed)} drafter(s) accepted a draft on fewer than "
                          f"{entry['min_prompts']} prompts", base=base, compared=rival)
    seeds = entry["sets"][rival]["seeds"]
    return Hypothesis("C2 (drafters that draft)", claim,
                      f"{rival} {entry['sets'][rival]['layers']}: delta tau = {c['mean']:+.3f} [{c['lo']:+.3f}, "
                      f"{c['hi']:+.3f}], Holm p = {c['p_holm']:.3g}, n = {c['n']} prompts, {seeds} seeds per set, "
                      f"MDE = {c['mde']:.3f}{within_noise(c['lo'], c['hi'])}",
                      bool(c["lo"] > 0 and c["p_holm"] < 0.05), "paired per prompt, seeds averaged, Holm across "
                      "the sets", (c["lo"], c["hi"]), value=c["mean"], p=c["p_holm"], n=c["n"], mde=c["mde"],
                      base=base, compared=rival)


def _c2_sets(entry: Mapping[str, Any]) -> tuple[str, str]:
    """(the default, the set compared with it) of the ``c2_layer_test`` entry (its sets, default first)."""
    ref = entry["reference"]
    return ref, next(n for n in entry["sets"] if n != ref)


def c2_frame(entry: Mapping[str, Any]) -> pd.DataFrame:
    """The fourteenth amendment's drafters by set (the ``c2_layer_test`` entry): layers, seeds,
    outcome tau per seed, the seed-averaged mean over prompts with its 95% interval, and on how
    many prompts each seed's drafter accepted a draft (the instrument check)."""
    rows = []
    for name, s in entry["sets"].items():
        ds = sorted((d for d in entry["drafters"] if d["set"] == name), key=lambda d: d["seed"])
        rows.append({"set": name, "layers": str(s["layers"]), "seeds": ", ".join(str(d["seed"]) for d in ds),
                     "tau per seed": ", ".join(f"{d['tau']:.3f}" for d in ds),
                     "tau [95% interval]": f"{s['tau']:.3f} [{s['tau_ci'][0]:.3f}, {s['tau_ci'][1]:.3f}]",
                     "prompts with an accepted draft": ", ".join(f"{d['prompts_accepting']}/{d['prompts']}"
                                                                 for d in ds)})
    return pd.DataFrame(rows)


def c2_values(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The page's numbers of the ``c2_layer_test`` entry beyond the record: the sets' taus, the
    drafters, how many passed the instrument check, their CPU-minutes (from the ledger) and CPU."""
    ref, rival = _c2_sets(entry)
    ds = entry["drafters"]
    c = entry["comparisons"].get(rival) or {}
    return {"c2_default_tau": entry["sets"][ref]["tau"], "c2_rival_tau": entry["sets"][rival]["tau"],
            "c2_rival": rival, "c2_rival_layers": str(entry["sets"][rival]["layers"]),
            "c2_default_layers": str(entry["sets"][ref]["layers"]), "c2_seeds": entry["sets"][ref]["seeds"],
            "c2_mde": c.get("mde", math.nan),
            "c2_drafters": len(ds), "c2_ok": sum(d["instrument_ok"] for d in ds),
            "c2_min_prompts": entry["min_prompts"], "c2_prompts": entry["sets"][ref]["prompts"],
            "c2_cpu_min": round(sum(d["train_cpu_min"] for d in ds)), "c2_cpu": ", ".join(sorted(
                {d["cpu"] or "unknown CPU" for d in ds}))}


def _corpus_run(sizes: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
    """(threads, run) of the corpus drafter at the largest thread count it was measured at."""
    large = ((sizes or {}).get("large") or {}).get("by_threads") or {}
    runs = {t: r[LARGE_METHOD] for t, r in large.items() if (r.get(LARGE_METHOD) or {}).get("speedup_ci")}
    return (t := max(runs, key=int), runs[t]) if runs else None


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
                      lo > 1.0, "paired bootstrap over prompts, one test (second amendment)", (lo, hi), null=1.0,
                      value=e["speedup"], n=e["prompts"])


def stage_lineage(stages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The last stage and the stages it continues (``from``), first to last."""
    if not stages:
        return []
    by = {r["stage"]: r for r in stages}
    chain = [stages[-1]]
    while chain[0].get("from"):
        chain.insert(0, by[chain[0]["from"]])
    return chain


#: The training batches whose mean loss says how closely a drafter fits its records at the end.


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


# ----------------------------------------------------------------------------- the ceiling (issue 42)

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


def ceiling_tables(ceiling: Mapping[str, Any] | None) -> list[Any]:
    """The ceiling section's tables (the measured terms; each round predicted and measured), as
    styled tables; none when the ceiling has not been measured."""
    from activation_wave.core.tables import format_table

    if not ceiling:
        return []
    fmt = {c: "{:.3f}" for c in ("verify (steps)", "extraction (steps)", "drafter calls (steps)", "extraction")}
    return [format_table(terms_frame(ceiling), {**fmt, "plain step (ms)": "{:.1f}"}),
            format_table(ceiling_frame(ceiling), {**fmt, "difference": "{:+.1%}", "ceiling": "{:.2f}x"})]




# ----------------------------------------------------------------------------- values the page glues
# The page's sentences live in its markdown (notebooks/11_cpu_payoff.py); these functions give
# the numbers and the words from one vocabulary that fill them, never a sentence.

#: How a speed reads against plain decoding, from its 95% interval: the one vocabulary of every
#: speed on the page ("EAGLE-3 ran at 0.36x plain decoding (...): slower than plain decoding").
SPEED_WORD = {"faster": "faster than plain decoding", "slower": "slower than plain decoding",
              "noise": "within noise of plain decoding", None: "not measured"}


def speed_word(lo: float | None, hi: float | None) -> str:
    """:data:`SPEED_WORD` of a speedup's 95% interval: faster when it lies above 1, slower when
    below, within noise when it covers 1.

    >>> speed_word(1.18, 1.88), speed_word(0.33, 0.41), speed_word(0.97, 1.13), speed_word(None, None)
    ('faster than plain decoding', 'slower than plain decoding', 'within noise of plain decoding', 'not measured')
    """
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return SPEED_WORD[None]
    return SPEED_WORD["faster" if lo > 1.0 else "slower" if hi < 1.0 else "noise"]


def _run_values(prefix: str, r: Mapping[str, Any] | None) -> dict[str, Any]:
    """``<prefix>_speedup``, ``_lo``, ``_hi``, ``_word``, ``_tau``, ``_identical`` of one method's run."""
    ci = (r or {}).get("speedup_ci") or [NAN, NAN]
    return {f"{prefix}_speedup": (r or {}).get("speedup", NAN), f"{prefix}_lo": ci[0], f"{prefix}_hi": ci[1],
            f"{prefix}_word": speed_word(*ci) if r else SPEED_WORD[None], f"{prefix}_tau": (r or {}).get("tau", NAN),
            f"{prefix}_identical": f"{r['identical_to_plain']}/{r['prompts']}" if r else "-"}

def against_default_plain(run: Mapping[str, Any], method: str) -> dict[str, float]:
    """``method`` against the plain server with llama.cpp's default flags (weights repacked, the
    plain run a user gets) in one ``by_threads`` run, pooled over prompts with its 95% interval over
    prompts: ``speedup``, ``lo``, ``hi``, ``n`` (NaN without that run)."""
    from activation_wave.core.stats import prompt_speedup

    if REPACKED not in run or method not in run or not run.get("per_prompt"):
        return {"speedup": NAN, "lo": NAN, "hi": NAN, "n": 0}
    return prompt_speedup(run["per_prompt"], method, REPACKED)


def side_values(sizes: Mapping[str, Any] | None) -> dict[str, Any]:
    """The llama.cpp side by side (``llamacpp_1.5b``) at its largest thread count: the 1.5B target's
    methods (``toy``: the two-epoch drafter, ``corp``: the corpus drafter, ``ng``: n-gram lookup),
    the 135M target's drafter (``small``), prompts, new tokens, the flag's cost to plain decoding
    and the identity checks under llama.cpp's default flags."""
    big = ((sizes or {}).get("large") or {}).get("by_threads") or {}
    small = ((sizes or {}).get("small") or {}).get("by_threads") or {}
    t = max(big, key=int) if big else None
    run = big.get(t) or {}
    chk = ((sizes or {}).get("large") or {}).get("lossless_check") or {}
    out = {"side_threads": int(t) if t else 0, "side_n": (run.get("eagle3") or {}).get("prompts", 0),
           "side_new_tokens": (sizes or {}).get("max_new_tokens", 0),
           **_run_values("toy", run.get("eagle3")), **_run_values("corp", run.get(LARGE_METHOD)),
           **_run_values("ng", run.get("ngram")), **_run_values("small", (small.get(t) or {}).get("eagle3")),
           "plain_tps": (run.get("plain") or {}).get("tokens_per_s", NAN),
           "repack_cost": (run["plain"]["tokens_per_s"] / run[REPACKED]["tokens_per_s"]
                           if REPACKED in run and "plain" in run else NAN),
           "default_identical": (f"{chk['eagle3']['identical_to_plain']}/{chk['eagle3']['prompts']}"
                                 if chk.get("eagle3") else "-"),
           "never_identical": (f"{chk['eagle3_never_drafts']['identical_to_plain']}/{chk['eagle3_never_drafts']['prompts']}"
                               if chk.get("eagle3_never_drafts") else "-")}
    out["corp_acceptance"] = (run.get(LARGE_METHOD) or {}).get("acceptance", NAN)
    d = against_default_plain(run, "ngram")  # n-gram against the plain run with default flags
    out.update(ngd_speedup=d["speedup"], ngd_lo=d["lo"], ngd_hi=d["hi"], ngd_word=speed_word(d["lo"], d["hi"]))
    return out


def _depth3(df: pd.DataFrame, target: str, threads: int, variant: str = "f16") -> float:
    row = df[(df["target"] == target) & (df["threads"] == threads) & (df["depth"] == 3) & (df["variant"] == variant)]
    return float(row["break-even tau"].iloc[0]) if len(row) else NAN


def ceiling_values(ceiling: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ceiling run's numbers (``llamacpp_ceiling``): the one break-even tau the page gives
    (``be_<target>_<threads>``: the measured depth-3 round, f16 drafter, every draft accepted),
    the best ceiling per target and thread count (``ceil_<target>_<threads>`` and its depth),
    the depth-1 ceiling of the 1.5B target at 2 threads, the verify's cost per extra token, the
    terms' ranges at depth 3, and how far the rounds predicted from the terms lie from the
    measured ones. ``<target>``: ``small`` (135M) or ``big`` (1.5B)."""
    df = ceiling_frame(ceiling)
    out: dict[str, Any] = {"ceil_n": (ceiling or {}).get("n_prompts", 0), "ceil_tokens": (ceiling or {}).get("max_new_tokens", 0)}
    for label, key in (("135M", "small"), ("1.5B", "big")):
        for th in (1, 2):
            g = df[(df["target"] == label) & (df["threads"] == th)] if len(df) else df
            best = g.loc[g["ceiling"].idxmax()] if len(g) else None
            out[f"be_{key}_{th}"] = _depth3(df, label, th) if len(df) else NAN
            out[f"ceil_{key}_{th}"] = float(best["ceiling"]) if best is not None else NAN
            out[f"ceil_{key}_{th}_depth"] = int(best["depth"]) if best is not None else 0
            d1 = g[g["depth"] == 1]["ceiling"] if len(g) else []
            out[f"ceil1_{key}_{th}"] = float(max(d1)) if len(d1) else NAN
    slopes = [a["verify_slope"] for *_, a in _ceiling_settings(ceiling)]
    d3 = df[df["depth"] == 3] if len(df) else df
    share = ((d3["verify (steps)"] - 1.0) / (d3["round measured"] - 1.0).clip(lower=1e-9)).clip(0.0, 1.0) if len(d3) else []
    worst = _agreement_parts(ceiling)
    out |= {"slope_min": min(slopes) if slopes else NAN, "slope_max": max(slopes) if slopes else NAN,
            "share_min": float(min(share)) if len(share) else NAN, "share_max": float(max(share)) if len(share) else NAN,
            "calls_min": float(d3["drafter calls (steps)"].min()) if len(d3) else NAN,
            "calls_max": float(d3["drafter calls (steps)"].max()) if len(d3) else NAN,
            "extraction_max": float(d3["extraction (steps)"].max()) if len(d3) else NAN,
            "agree_worst": float(df["difference"].abs().max()) if len(df) else NAN,
            "agree_settings": len(df), "agree_real": worst.get("real", NAN)}
    return out


def where_values(ceiling: Mapping[str, Any] | None, sizes: Mapping[str, Any] | None, depth: int = 3) -> dict[str, Any]:
    """Where a drafter would pay, by the roofline model of :func:`where_points`: per target
    (``small``, ``big``) the model's break-even at 16 threads, its largest error at the measured
    thread counts, the thread count at which break-even falls to the 135M drafter's tau in
    llama.cpp (NaN: at no thread count), and the floor ``1 + s`` at the largest measured thread
    count that no target size of the same kind goes below at depth 1."""
    from activation_wave.decode.ceiling import thread_model

    pts = where_points(ceiling, depth)
    taus = today_taus(sizes)
    small_tau = taus.get("135M drafter", NAN)
    out: dict[str, Any] = {"small_llama_tau": small_tau}
    for label, key in (("135M", "small"), ("1.5B", "big")):
        runs = {th: a for lab, _, th, a in _ceiling_settings(ceiling) if lab == label}
        mine = [p for p in pts if p["target"] == label]
        meas = {p["threads"]: p["break_even"] for p in mine if p["measured"]}
        fit = {p["threads"]: p["break_even"] for p in mine if not p["measured"]}
        out[f"model_err_{key}"] = max((abs(fit[t] - meas[t]) / meas[t] for t in meas if t in fit), default=NAN)
        out[f"model16_{key}"] = fit.get(16, NAN)
        model = thread_model({th: (a["plain_step_ms"]["verify"], a["verify_slope"]) for th, a in runs.items()}) \
            if runs else None
        if model is None:
            out[f"threads_for_{key}"], out[f"floor_{key}"] = NAN, NAN
            continue
        top = runs[max(runs)]
        var = next(iter(top["draft_call_cost"]))
        t = model.threads_for(small_tau, depth, top["extraction_cost"]["steps"], top["draft_call_cost"][var]["steps"]) \
            if math.isfinite(small_tau) else None
        out[f"threads_for_{key}"] = float(t) if t is not None else NAN
        out[f"floor_{key}"] = 1.0 + top["verify_slope"]
    return out


def per_prompt_mean(entry: Mapping[str, Any], key: str | None = None) -> tuple[float, int]:
    """A 1.5B drafter's outcome tau as the page states it: the mean over eval prompts of its
    per-prompt tau (the entry's ``figure`` is pooled, a ratio of sums; its interval and the
    paired differences are over per-prompt means, so the mean goes with them), and n."""
    per = entry.get("per_prompt_tau") or {}
    vals = per.get(key) if key else next(iter(per.values()), None)
    if not vals:
        return NAN, 0
    return float(np.mean(vals)), len(vals)


#: The 1.5B drafters the page places under the ceiling, in the order they were trained: the
#: benchmark entry, its per-prompt key, and what it trained on (a table cell).
DESIGNS = ((LARGE, "corpus", "1,024 corpus prompts, trained on to 4M tokens"),
           (INDIST, "indist", "the 128 study train prompts"),
           (INDIST_ALL, "indist_all", "all 324 study train prompts"),
           (INDIST_CONT, "indist_cont", "the 324 prompts, trained on to 2M tokens"),
           (INDIST_SAMPLES, "indist_samples", "the 128 prompts plus 2 sampled answers each"),
           (INDIST_STEPS, "indist_steps", "as the previous, in batches of 256 tokens"))


def designs_frame(bench: Mapping[str, Any]) -> pd.DataFrame:
    """One row per 1.5B drafter design of :data:`DESIGNS` measured in ``bench``: what it trained
    on, its training CPU-minutes, outcome tau (mean over eval prompts) with its 95% interval,
    and n. Empty when none is measured."""
    rows = []
    for key, per, what in DESIGNS:
        e = bench.get(key)
        if not e:
            continue
        mean, n = per_prompt_mean(e, per)
        lo, hi = e["tau_ci"]
        rows.append({"drafter trained on": what, "CPU-minutes": e.get("all_stages_cpu_min") or e.get("train_cpu_min"),
                     "outcome tau (mean over prompts)": round(mean, 3), "95% interval": f"[{lo:.2f}, {hi:.2f}]",
                     "prompts": n})
    return pd.DataFrame(rows)


def best_design_values(bench: Mapping[str, Any], ceiling: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The best 1.5B drafter of :data:`DESIGNS` by its mean outcome tau (``best_tau``, ``best_lo``,
    ``best_hi``, ``best_n``, ``best_what``), how many designs were scored (``n_designs``), the toy
    drafter's tau on the same prompts, and the ratio of the measured break-even (depth 3, 2
    threads, f16 drafter) to the best tau (``best_gap``)."""
    scored = [(per_prompt_mean(bench[k], p), bench[k], what) for k, p, what in DESIGNS if bench.get(k)]
    if not scored:
        return {"n_designs": 0, "best_tau": NAN, "best_lo": NAN, "best_hi": NAN, "best_n": 0, "best_what": "-",
                "toy_offline": NAN, "best_gap": NAN}
    (mean, n), e, what = max(scored, key=lambda s: s[0][0])
    be = ceiling_values(ceiling)["be_big_2"] if ceiling else NAN
    toy = per_prompt_mean(e, "toy")[0]
    return {"n_designs": len(scored), "best_tau": mean, "best_lo": e["tau_ci"][0], "best_hi": e["tau_ci"][1],
            "best_n": n, "best_what": what, "toy_offline": toy, "best_gap": be / mean if mean else NAN}


#: Each design's registered comparison: the entry's paired difference that its primary test reads.
PRIMARY_DELTA = {LARGE: "delta_vs_toy", INDIST: "delta_vs_corpus", INDIST_ALL: "delta_vs_indist",
                 INDIST_CONT: "delta_vs_parent", INDIST_SAMPLES: "delta_vs_indist", INDIST_STEPS: "delta_vs_indist"}


def design_results(bench: Mapping[str, Any]) -> dict[str, Any]:
    """The lab record's numbers for each design of :data:`DESIGNS` (glued by the page, pasted by
    the lab record): ``lab_<key>_tau`` (mean over eval prompts), ``_lo``, ``_hi``, ``_n``, the
    registered comparison's paired difference ``_delta``, ``_dlo``, ``_dhi``, ``_p`` and its
    word ``_word`` (:func:`~activation_wave.study.hypotheses`-style: "above 0", "below 0" or
    "within noise of 0" by where the interval lies), and the CPU-minutes ``_cpu``."""
    out: dict[str, Any] = {}
    for key, per, _ in DESIGNS:
        e = bench.get(key)
        if not e:
            continue
        mean, n = per_prompt_mean(e, per)
        d = e.get(PRIMARY_DELTA[key]) or {}
        lo, hi = d.get("lo", NAN), d.get("hi", NAN)
        word = "above 0" if lo > 0 else "below 0" if hi < 0 else "within noise of 0"
        out |= {f"lab_{per}_tau": mean, f"lab_{per}_lo": e["tau_ci"][0], f"lab_{per}_hi": e["tau_ci"][1],
                f"lab_{per}_n": n, f"lab_{per}_delta": d.get("mean", NAN), f"lab_{per}_dlo": lo, f"lab_{per}_dhi": hi,
                f"lab_{per}_p": d.get("p", NAN), f"lab_{per}_word": word,
                f"lab_{per}_cpu": e.get("all_stages_cpu_min") or e.get("train_cpu_min") or NAN}
    return out


def load_drafters(cfg: StudyConfig, results_root: str | None = None) -> cd.CrossDrafterResult | None:
    """The registered 1.5B drafters of C2 for the page: their results file when this profile wrote
    one (a clone reads the committed scores instead of capturing the 1.5B target's hidden states
    again, which takes the better part of an hour on two cores), else :func:`run_drafters`, whose
    result is saved; None when the profile trains no third-architecture drafters."""
    from activation_wave.core.results import save_result

    if not has_drafters(cfg):
        return None
    try:
        return load_result(NAME, cfg, results_root, cls=cd.CrossDrafterResult)
    except FileNotFoundError:
        res = run_drafters(cfg, results_root)
        save_result(NAME, res, cfg, results_root)
        return res
