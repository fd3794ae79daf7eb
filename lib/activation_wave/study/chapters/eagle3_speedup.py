"""Chapter 6: drafters on selected layers, offline tau, and lossless online decoding.

:func:`design` lists the pre-registered drafters (chapter 6, ``sec-prereg``): the default
and every chapter 5 selection rule's triple (``draft.n_seeds`` seeds), the controls
(last-k and ``draft.n_random`` random triples, ``draft.control_seeds`` seeds), one drafter
per single block output (``draft.sweep_*``), and, with ``draft.norm_arm``, every triple once
more with a per-layer RMSNorm before ``fc``. :func:`run` trains (or loads) them on the
training capture (:func:`training_config`: the greedy responses plus
``draft.samples_per_prompt`` sampled ones per train prompt), summarises each set
(:func:`summarise_sets`), runs the paired analysis of
:mod:`~activation_wave.study.chapters.drafter_predictors` (the primary tests), decodes held-out
prompts online with the default and the best rule's drafter against the baselines
(:func:`online_figures`), reconciles online and offline tau (:func:`reconcile`), and
returns an :class:`Eagle3SpeedupResult`. Later chapters read its fields
(``load_result(..., cls=Eagle3SpeedupResult)``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from activation_wave.decode.comparison import OnlineComparison, compare_online, held_out_prompts, method_name
from activation_wave.core.config import DraftConfig, StudyConfig
from activation_wave.models.drafter import load_drafter
from activation_wave.core.stats import bootstrap_mean_ci
from activation_wave.draft.experiment import DrafterJob, ensure_weights, run_jobs
from activation_wave.study.steps import Captured, run_capture
from activation_wave.core.results import load_benchmarks
from activation_wave.measure.layer_stats import LayerStats, stats_from_cache
from activation_wave.select.selection import rank_among_all, score_set
from activation_wave.study.chapters import drafter_predictors as dp
from activation_wave.select.selection import is_rule
from activation_wave.core.stats import within_noise
from activation_wave.study.hypotheses import Hypothesis

NAME = "06_eagle3_speedup"
DEFAULT_SET = "eagle3-default"

#: How many seeded random triples of layers 1..N the probe scores (to time it and list its best).
PROBE_TRIPLES = 200
#: Chapter-5 sets trained as controls (with ``draft.control_seeds`` seeds), besides the random triples.
CONTROL_SETS = ("last-k",)

__all__ = ["Eagle3SpeedupResult", "DrafterRun", "SetSummary", "OnlineDrafter",
           "OnlineBaselines", "SetTau", "Verdict", "Reconciliation", "LayerProfile", "design",
           "training_config", "tau_interval", "summarise_sets", "layer_profile",
           "evaluate_hypotheses", "online_figures", "reconcile", "verdict", "run", "NAME",
           "tau_definitions"]


# ----------------------------------------------------------------------------- result objects


@dataclass(frozen=True)
class DrafterRun:
    """One trained drafter: its set, seed, training figures and offline tau (eval split)."""

    set: str
    layers: tuple[int, ...]
    k: int
    seed: int
    arm: str  # "triples", "sweep" or "norm" (see :class:`DrafterJob`)
    train_s: float | None
    tokens_per_s: float | None
    acceptance_by_position: tuple[float | None, ...] | None
    final_loss_by_step: tuple[float, ...] | None
    final_acc_by_step: tuple[float, ...] | None
    tau: float | None = None
    tau_lo: float | None = None
    tau_hi: float | None = None
    eval_records: int | None = None


@dataclass(frozen=True)
class SetSummary:
    """A layer set over its seeds: tau with its interval, and its selection scores."""

    set: str
    layers: tuple[int, ...]
    k: int
    arm: str
    tau: float
    tau_lo: float | None
    tau_hi: float | None
    n_seeds: int
    renyi2: float | None  # concatenation entropy S2 (a single layer: its own S2)
    mean_cka: float | None  # None for a single layer
    percentile: float | None  # of S2 among all sets of the same size; None for a single layer
    acc1: float  # first-position acceptance, mean over seeds
    train_s: float | None


@dataclass(frozen=True)
class OnlineDrafter:
    """One drafter decoding the held-out prompts online, against the baselines of the same run."""

    layers: tuple[int, ...]
    tau_t0: float
    tau_t1: float
    tokens_per_s_t0: float
    tokens_per_s_t1: float
    lossless_prompts: int  # prompts whose T = 0 chain output equals plain greedy decoding's
    n_prompts: int
    speedup_vs_plain_t0: float
    speedup_vs_plain_t1: float
    speedup_vs_prompt_lookup_t0: float
    acceptance_t0: tuple[float | None, ...]
    tau_offline_all_eval: float
    tau_tree_t0: float | None = None
    speedup_tree_vs_plain_t0: float | None = None
    lossless_prompts_tree: int | None = None


@dataclass(frozen=True)
class OnlineBaselines:
    """Tokens/s of the baselines in the online run."""

    plain_tokens_per_s_t0: float
    plain_tokens_per_s_t1: float
    prompt_lookup_tokens_per_s_t0: float


@dataclass(frozen=True)
class SetTau:
    """A set's name, layers and offline tau with its interval."""

    set: str
    layers: tuple[int, ...]
    tau: float
    tau_lo: float | None
    tau_hi: float | None


@dataclass(frozen=True)
class Reconciliation:
    """Offline tau of one drafter (first seed) brought step by step to its online setting.

    ``offline_all``: every eval prompt, whole responses; ``offline_online_prompts``: only
    the online run's prompts; ``offline_capped``: those prompts cut at the online token
    limit; ``online``: the online T = 0 chain run. The steps between them are the prompt
    sample, the cap, and what is left (near-ties that a full forward and a cached decoding
    round differently, and drafting from the target's own greedy tokens).
    """

    set: str
    offline_all: float
    offline_online_prompts: float
    offline_capped: float
    online: float
    prompt_sample: float  # offline_online_prompts - offline_all
    cap: float  # offline_capped - offline_online_prompts
    rest: float  # online - offline_capped


@dataclass(frozen=True)
class LayerProfile:
    """What the single-layer sweep is plotted beside, per ``hidden_states`` id (the
    study's statistics sample): Renyi-2 entropy, median token norm, its ratio to the
    previous layer's, and linear CKA to the previous layer (None for the first; CKA to the
    next layer is the next entry, CKA being symmetric)."""

    ids: tuple[int, ...]
    entropy2: tuple[float, ...]
    median_norm: tuple[float, ...]
    norm_ratio: tuple[float | None, ...]
    cka_prev: tuple[float | None, ...]


@dataclass(frozen=True)
class Verdict:
    """The best triple against the default: tau gap, and whether their intervals overlap."""

    gap: float
    overlap: bool
    text: str


@dataclass(frozen=True)
class Eagle3SpeedupResult:
    """Chapter 6's results: every drafter, every set, the online run and the verdict."""

    runs: tuple[DrafterRun, ...]
    summary: tuple[SetSummary, ...]  # sorted by tau, best first
    online: dict[str, OnlineDrafter]  # by set name: the default and the best rule's triple
    baselines: OnlineBaselines
    prompts: tuple[str, ...]  # ids of the online prompts
    # default, best and best_rule carry the training-time tau of ``summary`` (the drafters' logs:
    # depth draft.ttt_steps, no draft threshold), not the pre-registered outcome, which is
    # 06_predictors' (``drafter_predictors.outcome_rows``); the book ranks on the outcome only
    default: SetTau
    best: SetTau  # the main arm's triple with the highest training-time tau (not a "best" the book reports)
    best_rule: SetTau  # the selection rule's triple with the largest paired delta tau (H1), decoded online
    verdict: Verdict
    reconciliation: tuple[Reconciliation, ...]
    training_capture: str  # the capture the drafters trained on (greedy + sampled responses)
    training_records: int  # train-split records in it
    training_positions: int  # train-split response positions in it
    profile: LayerProfile

    def sets_of_size(self, k: int, arm: str | None = None) -> list[SetSummary]:
        """Summaries of the sets with ``k`` layers (of ``arm``: default the main arms,
        not the per-layer-norm one), best tau first (singles: by layer)."""
        rows = [s for s in self.summary if s.k == k and (s.arm == arm if arm else s.arm != "norm")]
        return sorted(rows, key=lambda s: s.layers[0]) if k == 1 else rows

    def first_seed_acceptance(self, name: str) -> tuple[float | None, ...]:
        """Acceptance by draft position of the set's first drafter (first seed)."""
        return next(r.acceptance_by_position for r in self.runs if r.set == name) or ()


# ----------------------------------------------------------------------------- the analysis


def design(selected: Mapping[str, Sequence[int]], n_layers: int, draft: DraftConfig) -> list[DrafterJob]:
    """The pre-registered drafters, in training order (triples, sweep, norm arm).

    Triples: the default and each selection rule's set with ``draft.n_seeds`` seeds;
    :data:`CONTROL_SETS` and the first ``draft.n_random`` random triples with
    ``draft.control_seeds``; chapter 5's other sets are not trained. Sweep: one drafter
    per block output ``1, 1 + stride, ...`` up to N on ``draft.sweep_fraction`` of the
    data, a second seed on every ``draft.sweep_seed_every``-th of them. Norm arm
    (``draft.norm_arm``): each triple once (first seed) with ``fused_norm``, named
    ``<set>+norm``.
    """
    jobs: list[DrafterJob] = []

    def add(name: str, ids: Sequence[int], arm: str, seeds: int, **change: Any) -> None:
        jobs.extend(DrafterJob(name, tuple(int(i) for i in ids), arm,
                               dataclasses.replace(draft, seed=draft.seed + i, **change)) for i in range(seeds))

    if DEFAULT_SET not in selected:
        raise ValueError(f"chapter 5's sets must include {DEFAULT_SET!r} (got {sorted(selected)}); re-run chapter 5")
    randoms = [n for n in selected if n.startswith("random-")][: draft.n_random]
    triples = {n: ids for n, ids in selected.items()
               if n == DEFAULT_SET or is_rule(n) or n in CONTROL_SETS or n in randoms}
    for name, ids in triples.items():
        add(name, ids, "triples", draft.n_seeds if name == DEFAULT_SET or is_rule(name) else draft.control_seeds)
    if draft.sweep_stride:
        every = draft.sweep_seed_every
        for j, layer in enumerate(range(1, n_layers + 1, draft.sweep_stride)):
            add(f"single-{layer}", [layer], "sweep", 2 if every and (j + 1) % every == 0 else 1,
                records_fraction=draft.sweep_fraction)
    if draft.norm_arm:
        for name, ids in triples.items():
            add(f"{name}+norm", ids, "norm", 1, fused_norm=True)
    return jobs


def training_config(cfg: StudyConfig) -> StudyConfig:
    """The config of the drafters' training capture: the study's, with
    ``draft.samples_per_prompt`` sampled responses per train prompt (the greedy ones and
    the eval split stay the study's)."""
    return dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, samples_per_prompt=cfg.draft.samples_per_prompt))


def tau_interval(taus: Sequence[float], los: Sequence[float], his: Sequence[float]) -> tuple[float, float]:
    """The 95% interval of a set's tau over its seeds.

    One seed: that drafter's bootstrap interval over eval records. Several: the bootstrap
    interval of the mean over seeds, widened to the mean per-seed record interval where
    that is wider (seed spread and record sampling, whichever is larger)."""
    if len(taus) == 1:
        return float(min(los)), float(max(his))
    lo, hi = bootstrap_mean_ci(np.asarray(taus, float))
    return float(min(lo, float(np.mean(los)))), float(max(hi, float(np.mean(his))))


def _none(x: Any) -> Any:
    """NaN -> None (the results file's convention for 'not defined')."""
    return None if isinstance(x, float) and math.isnan(x) else x


def summarise_sets(runs: Sequence[Mapping[str, Any]], stats: LayerStats) -> list[SetSummary]:
    """One :class:`SetSummary` per set of ``runs`` (rows of ``run_sets``), best tau first."""
    df = pd.DataFrame(runs)
    rows = []
    for name, grp in df.groupby("set", sort=False):
        ids = list(grp["layers"].iloc[0])
        taus = grp["tau"].to_numpy(float)
        lo, hi = tau_interval(taus, grp["tau_lo"].to_numpy(float), grp["tau_hi"].to_numpy(float))
        if len(ids) > 1:
            sc = score_set(stats, ids)
            renyi2, cka, pct = sc["renyi2"], sc.get("mean_cka", np.nan), rank_among_all(stats, ids)["percentile"]
        else:
            renyi2, cka, pct = float(stats.entropy2[stats.pos([ids[0]])[0]]), np.nan, np.nan
        rows.append({"set": name, "layers": tuple(ids), "k": len(ids), "arm": grp["arm"].iloc[0],
                     "tau": float(taus.mean()), "tau_lo": lo,
                     "tau_hi": hi, "n_seeds": len(grp), "renyi2": float(renyi2), "mean_cka": float(cka),
                     "percentile": float(pct),
                     "acc1": float(np.mean([r[0] for r in grp["acceptance_by_position"]])),
                     "train_s": float(grp["train_s"].mean())})
    ordered = pd.DataFrame(rows).sort_values("tau", ascending=False)  # pandas' order, as the chapter always had
    return [SetSummary(**{k: _none(v) for k, v in row.items()}) for row in ordered.to_dict("records")]


def online_figures(cmp: OnlineComparison, name: str, layers: Sequence[int], tau_offline: float) -> OnlineDrafter:
    """What chapter 6 reports of drafter ``name`` in an online comparison."""
    m = lambda kind: method_name(name, kind)  # noqa: E731
    r0, r1 = cmp.pooled[m("chain_t0")], cmp.pooled[m("chain_t1")]
    tree = cmp.pooled.get(m("tree_t0"))
    return OnlineDrafter(
        layers=tuple(layers), tau_t0=r0.tau, tau_t1=r1.tau, tokens_per_s_t0=r0.tokens_per_s,
        tokens_per_s_t1=r1.tokens_per_s, lossless_prompts=cmp.identical(m("chain_t0")), n_prompts=len(cmp.prompt_ids),
        speedup_vs_plain_t0=cmp.speedup(m("chain_t0"), "plain_t0"),
        speedup_vs_plain_t1=cmp.speedup(m("chain_t1"), "plain_t1"),
        speedup_vs_prompt_lookup_t0=cmp.speedup(m("chain_t0"), "prompt_lookup_t0"),
        acceptance_t0=tuple(_none(a) for a in r0.acceptance_by_position), tau_offline_all_eval=tau_offline,
        tau_tree_t0=tree.tau if tree else None,
        speedup_tree_vs_plain_t0=cmp.speedup(m("tree_t0"), "plain_t0") if tree else None,
        lossless_prompts_tree=cmp.identical(m("tree_t0")) if tree else None)


def verdict(best: SetTau, default: SetTau) -> Verdict:
    """The best triple against the default: overlapping intervals mean 'within the uncertainty'."""
    overlap = bool(best.tau_lo is None or default.tau_hi is None or best.tau_lo <= default.tau_hi)
    if best.set == default.set:
        text = "the default itself"
    else:
        text = "within the uncertainty of the default's" if overlap else "clearly above the default's"
    return Verdict(gap=best.tau - default.tau, overlap=overlap, text=text)


def _set_tau(s: SetSummary) -> SetTau:
    return SetTau(set=s.set, layers=s.layers, tau=s.tau, tau_lo=s.tau_lo, tau_hi=s.tau_hi)


def _drafter_run(row: Mapping[str, Any]) -> DrafterRun:
    tup = lambda v: None if v is None else tuple(_none(x) for x in v)  # noqa: E731
    return DrafterRun(set=row["set"], layers=tuple(row["layers"]), k=row["k"], seed=row["seed"], arm=row["arm"],
                      train_s=row.get("train_s"), tokens_per_s=row.get("tokens_per_s"),
                      acceptance_by_position=tup(row.get("acceptance_by_position")),
                      final_loss_by_step=tup(row.get("final_loss_by_step")),
                      final_acc_by_step=tup(row.get("final_acc_by_step")), tau=row.get("tau"),
                      tau_lo=row.get("tau_lo"), tau_hi=row.get("tau_hi"), eval_records=row.get("eval_records"))


def layer_profile(cs: Any) -> LayerProfile:
    """:class:`LayerProfile` of a :class:`~activation_wave.measure.layer_stats.CacheStats`."""
    from activation_wave.models.capture import norm_profile

    st = cs.stats
    ids = tuple(int(i) for i in st.ids)
    med = norm_profile(cs.sample.hidden[:, cs.keep])["median_norm"]
    cka = np.asarray(st.cka)
    n = len(ids)
    return LayerProfile(ids=ids, entropy2=tuple(float(x) for x in st.entropy2), median_norm=tuple(float(x) for x in med),
                        norm_ratio=(None, *(float(med[i] / med[i - 1]) for i in range(1, n))),
                        cka_prev=(None, *(float(cka[i, i - 1]) for i in range(1, n))))


def _interval(p: Any) -> tuple[float, float] | None:
    """A predictor's 95% interval, or None without one."""
    return (p.lo, p.hi) if p is not None and p.lo is not None and p.hi is not None else None


def _rho_stat(p: Any) -> str:
    """A predictor's table cell: ``rho = +0.81 [+0.62, +0.92], n = 10 triples``."""
    if p is None or p.rho is None:
        return "not computed"
    ci = f" [{p.lo:+.2f}, {p.hi:+.2f}]" if p.lo is not None and p.hi is not None else ""
    return f"rho = {p.rho:+.2f}{ci}, n = {p.n} triples"


def evaluate_hypotheses(pred: Any, alpha: float = 0.05) -> list[Hypothesis]:
    """H1-H4 of chapter 6's pre-registration, each by its primary test and verdict rule,
    from the paired analysis ``pred`` (:class:`~.drafter_predictors.DrafterPredictors`).
    H1 is not testable (None) with fewer than ``MIN_PAIRED_PROMPTS`` eval prompts."""
    out = []
    rules = [c for c in pred.comparisons if c.family == "rules" and c.p_holm_rules is not None]
    taus = {s.set: s.per_prompt for s in pred.sets}
    if rules:
        b = max(rules, key=lambda c: c.delta)
        ok = any(c.delta > 0 and c.p_holm_rules < alpha for c in rules) if b.n >= dp.MIN_PAIRED_PROMPTS else None
        if dp.dead_instrument(taus.get(pred.reference, ())) or dp.dead_instrument(taus.get(b.set, ())):
            ok = None  # a drafter that accepts nothing measures nothing: no verdict rests on it
        out.append(Hypothesis("H1", "the best selection rule's set beats the default",
                              f"best rule {b.set}: delta tau = {b.delta:+.3f} [{b.lo:+.3f}, {b.hi:+.3f}], Holm p = "
                              f"{b.p_holm_rules:.3g}, n = {b.n} prompts, MDE = {b.mde_holm:.3f}"
                              f"{within_noise(b.lo, b.hi)}", ok,
                              f"{len(rules)} rules compared with the default, paired per prompt", (b.lo, b.hi),
                              value=b.delta, p=b.p_holm_rules, n=b.n, mde=b.mde_holm, compared=b.set,
                              base=next((s.tau for s in pred.sets if s.set == pred.reference), None)))
    else:
        out.append(Hypothesis("H1", "the best selection rule's set beats the default", "no rule's drafter", None, ""))

    s2 = next((p for p in pred.predictors if p.name == "renyi2" and p.units == "triples"), None)
    out.append(Hypothesis("H2", "concatenation entropy S2 correlates positively with tau",
                          _rho_stat(s2) if s2 else "fewer than 3 triples", None if s2 is None else bool(s2.lo > 0),
                          "Spearman over the main arm's triples, intervals resample sets and prompts",
                          _interval(s2), value=s2.rho if s2 else None, n=s2.n if s2 else None))
    f = next((x for x in pred.filtering if x.quantile == 0.5), None)
    have_f = f is not None and f.delta_lo is not None
    out.append(Hypothesis("H3", "token-filtered statistics predict tau better than unfiltered ones",
                          (f"rho(S2 at q = 0.5) - rho(S2 unfiltered) = {f.delta_vs_unfiltered:+.2f} "
                           f"[{f.delta_lo:+.2f}, {f.delta_hi:+.2f}], n = {f.n} triples, {f.n_tokens} tokens each"
                           f"{within_noise(f.delta_lo, f.delta_hi)}")
                          if have_f else "not computed", bool(f.delta_lo > 0) if have_f else None,
                          "equal token budget at every quantile", (f.delta_lo, f.delta_hi) if have_f else None,
                          value=f.delta_vs_unfiltered if have_f else None, n=f.n if have_f else None))
    normed = next((p for p in pred.norm_predictors if "RMSNorm" in p.units), None)
    plain = next((p for p in pred.norm_predictors if "RMSNorm" not in p.units), None)
    out.append(Hypothesis("H4", "the depth effect survives per-layer normalisation of the fused features",
                          (f"with the norm: {_rho_stat(normed)}; without: {_rho_stat(plain)}" if normed and plain
                           else "no per-layer-norm arm"), None if normed is None else bool(normed.hi < 0),
                          "rho(deepest layer of the triple, tau), same triples in both arms", _interval(normed),
                          value=normed.rho if normed else None, n=normed.n if normed else None))
    return out


def tau_definitions(res: Eagle3SpeedupResult, pred: Any, cfg: StudyConfig, name: str = DEFAULT_SET
                    ) -> list[dict[str, Any]]:
    """The offline tau of one set's drafters under each definition the chapter shows, from
    the training-time evaluation to the pre-registered outcome, one changed setting per
    row: the training-time evaluation (each drafter's own log: depth ``draft.ttt_steps``,
    no draft threshold, tokens / rounds pooled over the eval prompts, mean over seeds);
    the same at the online depth and draft threshold; that for the first seed only (where
    the online reconciliation starts); the outcome (mean over prompts of the seed-averaged
    per-prompt tau). Every row scores the same drafters on the same eval prompts."""
    by_set = {s.set: s for s in pred.sets}
    train = [r.tau for r in res.runs if r.set == name and r.tau is not None]
    st = by_set.get(name)
    recon = next((r for r in res.reconciliation if r.set == name), None)
    n_seeds = len(train)
    thr = f"{pred.draft_threshold:g}" if pred.draft_threshold > 0 else "none"
    rows = [("training-time evaluation (the drafters' logs: runs, summary)", float(np.mean(train)) if train else None,
             cfg.draft.ttt_steps, "none", f"{n_seeds}, mean of the pooled values", "pooled: tokens / rounds"),
            ("online depth and draft threshold", st.tau_pooled if st else None, pred.depth, thr,
             f"{len(st.seeds) if st else 0}, mean of the pooled values", "pooled: tokens / rounds"),
            ("... first seed only (the reconciliation's start)", recon.offline_all if recon else None, pred.depth,
             thr, "first", "pooled: tokens / rounds"),
            ("the pre-registered outcome", st.tau if st else None, pred.depth, thr,
             f"{len(st.seeds) if st else 0}, averaged per prompt", "mean over prompts")]
    return [{"tau": what, "value": v, "depth": d, "draft threshold": t, "seeds": sd, "averaging": a}
            for what, v, d, t, sd, a in rows]


def reconcile(target: Any, cache: Any, name: str, path: str, online: OnlineDrafter, prompt_ids: Sequence[str],
              cfg: StudyConfig) -> Reconciliation:
    """Offline tau of drafter ``path`` on ``cache``'s eval split, step by step towards the
    online run ``online`` (same depth and draft threshold throughout): see :class:`Reconciliation`."""
    from activation_wave.decode.offline import offline_acceptance

    ensure_weights(target, [path], cfg.draft.ledger)
    drafter = load_drafter(path, target)
    kw = {"threshold": cfg.spec.draft_threshold}
    full = offline_acceptance(drafter, cache, cfg.spec.depth, "eval", **kw)["tau_offline"]
    same = offline_acceptance(drafter, cache, cfg.spec.depth, "eval", ids=prompt_ids, **kw)["tau_offline"]
    capped = offline_acceptance(drafter, cache, cfg.spec.depth, "eval", ids=prompt_ids,
                                max_new_tokens=cfg.spec.max_new_tokens, **kw)["tau_offline"]
    return Reconciliation(set=name, offline_all=full, offline_online_prompts=same, offline_capped=capped,
                          online=online.tau_t0, prompt_sample=same - full, cap=capped - same,
                          rest=online.tau_t0 - capped)


def run(cfg: StudyConfig, cap: Captured, selected: Mapping[str, Sequence[int]], *, progress: bool = False,
        n_boot: int = 10_000) -> tuple[Eagle3SpeedupResult, Any]:
    """Chapter 6 end to end: train or load every drafter of :func:`design` on the training
    capture, summarise, run the paired analysis, decode online, reconcile.

    ``cap``: the study's capture (its statistics score the sets); ``selected``: chapter 5's
    named layer sets (they include ``"eagle3-default"``). Returns the chapter's result and
    the :class:`~activation_wave.study.chapters.drafter_predictors.DrafterPredictors` of the
    paired analysis (saved separately as ``06_predictors``).
    """
    target = cap.target
    train_cap = run_capture(training_config(cfg), progress=progress)
    jobs = design(selected, cap.cache.n_layers, cfg.draft)
    rows = run_jobs(target, train_cap.cache, [(j.set, j.layers, j.config) for j in jobs], cfg.draft.workers,
                    progress=progress)
    for row, job in zip(rows, jobs):
        row["arm"] = job.arm
    cs = stats_from_cache(cap.cache, cfg)
    summary = summarise_sets(rows, cs.stats)
    by_name = {s.set: s for s in summary}
    main = [s for s in summary if s.arm != "norm"]
    default, best = _set_tau(by_name[DEFAULT_SET]), _set_tau(next(s for s in main if s.k == 3))

    found = [dp.FoundDrafter(r["set"], tuple(r["layers"]), r["seed"], r["path"], r["arm"]) for r in rows]
    pred = dp.run(cfg, cap.cache, target, jobs, drafters=found, eval_cache=train_cap.cache, n_boot=n_boot,
                  triples=PROBE_TRIPLES)
    rules = [c for c in pred.comparisons if c.family == "rules"]
    best_rule = (_set_tau(by_name[max(rules, key=lambda c: c.delta).set]) if rules else best)

    prompts = [(p.id, ids) for p, ids in held_out_prompts(target, cfg.data, cfg.spec.max_prompts, cfg.spec.seed)]
    online_sets = list(dict.fromkeys([DEFAULT_SET, best_rule.set]))
    path = {r["set"]: r["path"] for r in reversed(rows)}  # the first seed's drafter
    ensure_weights(target, [path[name] for name in online_sets], cfg.draft.ledger, workers=cfg.draft.workers,
                   progress=progress)
    drafters = {name: load_drafter(path[name], target) for name in online_sets}
    cmp = compare_online(target, drafters, prompts, cfg.spec, progress=progress)
    online = {name: online_figures(cmp, name, by_name[name].layers, by_name[name].tau) for name in online_sets}
    recon = tuple(reconcile(target, train_cap.cache, name, path[name], online[name], cmp.prompt_ids, cfg)
                  for name in online_sets)
    plain0, plain1, lookup0 = (cmp.pooled[n].tokens_per_s for n in ("plain_t0", "plain_t1", "prompt_lookup_t0"))
    train_recs = [r for r in train_cap.cache.records if r["split"] == "train"]
    res = Eagle3SpeedupResult(
        runs=tuple(_drafter_run(r) for r in rows), summary=tuple(summary),
        online=online,
        baselines=OnlineBaselines(plain_tokens_per_s_t0=plain0, plain_tokens_per_s_t1=plain1,
                                  prompt_lookup_tokens_per_s_t0=lookup0),
        prompts=cmp.prompt_ids, default=default, best=best, best_rule=best_rule, verdict=verdict(best, default),
        reconciliation=recon, training_capture=str(train_cap.cache.path), training_records=len(train_recs),
        training_positions=int(sum(r["length"] - r["prompt_len"] for r in train_recs)), profile=layer_profile(cs))
    return res, pred


def _seed_pairs(runs: Sequence[DrafterRun], arm: str) -> list[tuple[DrafterRun, DrafterRun]]:
    """The first two seeds of every set of ``arm`` trained with at least two (tau known)."""
    by_set: dict[str, list[DrafterRun]] = {}
    for r in runs:
        if r.arm == arm and r.tau is not None:
            by_set.setdefault(r.set, []).append(r)
    return [(v[0], v[1]) for v in by_set.values() if len(v) >= 2]


def precision_values(entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``training_precision`` benchmark's figures (why the drafters train in fp32): the CPU,
    whether it has bf16 units ("with"/"without"), the date, and loss positions per second in bf16
    and fp32, natively and limited to AVX2 kernels (NaN where not measured)."""
    nan = float("nan")
    if not entry:
        return {"prec_cpu": "not measured", "prec_bf16_units": "without", "prec_date": "", "prec_bf16": nan,
                "prec_fp32": nan, "prec_avx2_bf16": nan, "prec_avx2_fp32": nan, "prec_avx2_ratio": nan}
    nat, avx = entry["native"]["median"], (entry.get("avx2_only") or {})
    return {"prec_cpu": entry["cpu"], "prec_bf16_units": "with" if entry["bf16_units"] else "without",
            "prec_date": entry["measured"][:10], "prec_bf16": nat["bf16"], "prec_fp32": nat["fp32"],
            "prec_avx2_bf16": avx.get("median", {}).get("bf16", nan), "prec_avx2_fp32": avx.get("median", {}).get("fp32", nan),
            "prec_avx2_ratio": avx.get("ratio_fp32_over_bf16", nan)}


def prose_values(res: Eagle3SpeedupResult, cfg: StudyConfig, pred: Any) -> dict[str, Any]:
    """Every number the chapter's text cites, by glue name (NaN where a quantity is undefined).

    Every "best", ranking and tau of a set is the pre-registered outcome, read from the
    paired analysis ``pred`` (:class:`~.drafter_predictors.DrafterPredictors`); the
    training-time tau of ``res`` appears only under names that say so (``tau_train_*``)."""
    nan = float("nan")
    trained = [r.train_s for r in res.runs if r.train_s is not None]
    o_def, o_rule = res.online[res.default.set], res.online[res.best_rule.set]
    triples = {r.set: r for r in dp.outcome_rows(pred, 3)}
    d = triples.get(DEFAULT_SET)
    defs = [row["value"] for row in tau_definitions(res, pred, cfg)]
    v = [nan if x is None else float(x) for x in defs]
    out: dict[str, Any] = {
        "tau_default": d.tau if d else nan, "tau_default_lo": d.lo if d else nan, "tau_default_hi": d.hi if d else nan,
        "n_drafters": len(res.runs),
        "n_sets": len(res.summary), "train_s_mean": float(np.mean(trained)) if trained else nan,
        "train_min_total": float(np.sum(trained)) / 60 / max(1, cfg.draft.workers) if trained else nan,
        "training_records": res.training_records, "training_positions": res.training_positions,
        "samples_per_prompt": cfg.draft.samples_per_prompt, "epochs": cfg.draft.epochs,
        "train_dtype": cfg.draft.dtype,
        "best_rule_set": f"{res.best_rule.set} {list(res.best_rule.layers)}",
        "lossless_default": f"{o_def.lossless_prompts}/{o_def.n_prompts}",
        "lossless_rule": f"{o_rule.lossless_prompts}/{o_rule.n_prompts}",
        "speedup_rule_t0": o_rule.speedup_vs_plain_t0, "speedup_default_t0": o_def.speedup_vs_plain_t0,
        "speedup_lookup_rule": o_rule.speedup_vs_prompt_lookup_t0, "tau_online_default": o_def.tau_t0,
        "speedup_rule_t1": o_rule.speedup_vs_plain_t1, "tau_rule_t1": o_rule.tau_t1,
        "n_online_prompts": len(res.prompts), "online_tokens": cfg.spec.max_new_tokens,
        # the same drafters under each definition of offline tau (tau_definitions), and what each step changes
        "tau_train_default": v[0], "tau_pooled_default": v[1], "tau_first_seed_default": v[2],
        "tau_outcome_default": v[3], "tau_step_threshold": v[1] - v[0], "tau_step_seed": v[2] - v[1],
        "tau_step_averaging": v[3] - v[1], "train_depth": cfg.draft.ttt_steps, "online_depth": pred.depth,
        "online_threshold": pred.draft_threshold,
    }
    out["tau_step_depth"] = f"{cfg.draft.ttt_steps} -> {pred.depth}"
    # what the design would cost at the data-scaling benchmark's recipe (10 epochs), two drafters at once
    point = next((p for p in load_benchmarks().get("drafter_data_scaling", {}).get("points", [])
                  if p.get("samples_per_prompt") == cfg.draft.samples_per_prompt and p.get("train_wall_s")), None)
    out["ten_epoch_min"] = point["train_wall_s"] / 60 if point else nan
    out["ten_epoch_hours"] = len(res.runs) * out["ten_epoch_min"] / 60 / max(1, cfg.draft.workers)
    out.update(n_workers=cfg.draft.workers, sweep_share=cfg.draft.sweep_fraction,
               sweep_seed_pairs=len(_seed_pairs(res.runs, "sweep")),
               n_norm_triples=len({r.set for r in res.runs if r.arm == "norm"}))
    singles = dp.outcome_rows(pred, 1)
    if singles:
        peak, worst = dp.single_layer_peak(pred), singles[-1]
        out.update(single_best_layer=peak.layer, single_best_tau=peak.tau,
                   single_worst_layer=worst.layers[0], single_worst_tau=worst.tau, n_singles=len(singles))
    r = {x.set: x for x in res.reconciliation}[res.default.set]
    out.update(recon_all=r.offline_all, recon_prompts=r.offline_online_prompts, recon_capped=r.offline_capped,
               recon_online=r.online, recon_sample=r.prompt_sample, recon_cap=r.cap, recon_rest=r.rest)
    tree = o_rule.tau_tree_t0 is not None
    out.update(tree_topk=cfg.spec.tree_topk, tree_size=cfg.spec.tree_size,
               tau_tree=o_rule.tau_tree_t0 if tree else nan,
               speedup_tree=o_rule.speedup_tree_vs_plain_t0 if tree else nan,
               lossless_tree=f"{o_rule.lossless_prompts_tree}/{o_rule.n_prompts}" if tree else "not run")
    out.update(precision_values(load_benchmarks().get("training_precision")), **dp.ranking_values(pred, 3),
               **dp.peak_values(dp.single_layer_peak(pred)))
    return out
