"""Chapter 6's paired analysis: the primary tests of its pre-registered hypotheses.

Loads trained drafters only (it never trains or captures) and computes, with the
statistics of :mod:`activation_wave.core.stats`:

* per-prompt offline tau of every drafter on the eval split, with the profile's online
  settings (``spec.depth``, ``spec.draft_threshold``); seeds averaged per prompt;
* the paired delta tau of every set against the EAGLE-3 default, Holm-corrected within
  two families (the chapter-5 selection rules, H1; every compared set), with the minimum
  detectable delta at 80% power;
* Spearman rho against tau, with bootstrap intervals over sets and prompts, of the
  concatenation entropy S2 (H2), the mean CKA, the deepest layer and the probe
  (:mod:`activation_wave.select.probe`) over the triples and over the single layers;
* rho(S2 filtered at quantile q, tau) for q in 0, 0.25, 0.5, 0.75 at an equal token
  budget, and the paired difference of each against q = 0 (H3);
* every triple with a per-layer RMSNorm before fc against the same triple without, and
  rho(deepest layer, tau) in both arms (H4; :func:`norm_arm`).

:func:`run` returns a :class:`DrafterPredictors`; chapter 6 saves it as ``06_predictors``.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from activation_wave.models.capture import CaptureCache
from activation_wave.core.config import StudyConfig
from activation_wave.select.probe import ProbeData
from activation_wave.core.stats import holm, min_detectable_delta, paired_bootstrap, seed_mean, spearman_ci, spearman_difference
from activation_wave.select.selection import is_rule

NAME = "06_predictors"
REFERENCE = "eagle3-default"
#: Chapter-5 set names that are not selection rules (baselines and controls).
FILTER_QUANTILES = (0.0, 0.25, 0.5, 0.75)

__all__ = ["FoundDrafter", "SetTaus", "Comparison", "Predictor", "FilterPredictor", "ProbeTiming",
           "DrafterPredictors", "NormEffect", "norm_arm", "find_drafters", "per_prompt_tau",
           "compare_to_reference", "filtered_s2", "set_scores", "predictor_rhos", "filter_rhos", "probe_summary",
           "run", "NAME", "OutcomeRow", "SeedSpread", "SingleLayerPeak", "outcome_rows", "is_within_noise",
           "seed_spread", "single_layer_peak",
           "sweep_rows", "single_layer_seeds", "score_panels", "SCORE_LABELS", "dead_instrument", "comparison_word",
           "prose_values", "ranking_values", "peak_values", "predictor_values", "MIN_PAIRED_PROMPTS"]


@dataclass(frozen=True)
class FoundDrafter:
    """A finished drafter of chapter 6 on disk."""

    set: str
    layers: tuple[int, ...]
    seed: int
    path: str
    arm: str = "triples"  # "norm": trained with a per-layer RMSNorm before fc (H4's arm)


@dataclass(frozen=True)
class SetTaus:
    """A set's offline tau per eval prompt, averaged over its seeds (prompt order: ``prompt_ids``)."""

    set: str
    layers: tuple[int, ...]
    seeds: tuple[int, ...]
    tau: float  # mean over prompts of the seed-averaged per-prompt tau: the pre-registered outcome
    tau_pooled: float  # tokens / rounds over all prompts, mean over seeds (same depth and threshold)
    per_prompt: tuple[float | None, ...]
    #: per-prompt tau of each seed ([seeds, prompts], in the order of ``seeds``); None in
    #: results files written before it was recorded (re-run chapter 6 to fill it)
    per_seed: tuple[tuple[float | None, ...], ...] | None = None


@dataclass(frozen=True)
class Comparison:
    """Paired delta tau of one set against the reference, with Holm-adjusted p-values.

    ``mde`` is the minimum detectable delta at 80% power and level 0.05 for this
    comparison's per-prompt SD; ``mde_holm`` the same at the strictest Holm level of the
    set's family (0.05 / m).
    """

    set: str
    layers: tuple[int, ...]
    family: str  # "rules" (a chapter-5 selection rule) or "other"
    delta: float
    lo: float
    hi: float
    p: float
    p_holm_rules: float | None  # within the rules family; None for other sets
    p_holm_all: float
    n: int
    sd: float
    mde: float
    mde_holm: float


@dataclass(frozen=True)
class Predictor:
    """Spearman rho of one score against tau over one kind of unit."""

    name: str
    units: str  # "triples" or "single layers"
    rho: float | None
    lo: float | None
    hi: float | None
    n: int


@dataclass(frozen=True)
class FilterPredictor:
    """rho(S2 filtered at ``quantile``, tau) over the triples, and its paired difference to q = 0."""

    quantile: float
    n_tokens: int
    rho: float | None
    lo: float | None
    hi: float | None
    n: int
    delta_vs_unfiltered: float | None
    delta_lo: float | None
    delta_hi: float | None
    delta_p: float | None


@dataclass(frozen=True)
class ProbeTiming:
    """What the probe cost here, in wall seconds and in CPU seconds of this process (the
    latter is what a shared, loaded machine does not inflate), and how it was set up."""

    build_s: float
    per_set_s: float  # mean over the scored sets
    per_set_cpu_s: float
    triples_s: float | None  # scoring n_triples triples of layers 1..N (all, or a seeded sample), when timed
    triples_cpu_s: float | None
    n_triples: int | None
    settings: dict[str, Any]


@dataclass(frozen=True)
class NormEffect:
    """A triple trained with a per-layer RMSNorm before fc against the same triple without
    (seeds averaged): paired delta tau over the eval prompts (H4's arm)."""

    set: str
    layers: tuple[int, ...]
    tau_plain: float
    tau_norm: float
    delta: float
    lo: float
    hi: float
    p: float
    n: int


@dataclass(frozen=True)
class DrafterPredictors:
    """Result of :func:`run` (exploratory; see the module doc)."""

    capture: str
    reference: str
    depth: int
    draft_threshold: float
    n_boot: int
    prompt_ids: tuple[str, ...]
    missing_drafters: tuple[str, ...]
    sets: tuple[SetTaus, ...]
    comparisons: tuple[Comparison, ...]
    mde_rules_pooled: float | None  # MDE at 0.05 / m_rules from the rules' pooled per-prompt SD
    scores: dict[str, dict[str, float | None]]
    predictors: tuple[Predictor, ...]
    filtering: tuple[FilterPredictor, ...]
    probe: ProbeTiming
    best_probe_triples: tuple[tuple[tuple[int, ...], float], ...]
    seconds: float
    norm_effects: tuple[NormEffect, ...] = ()  # H4: every triple with vs without the per-layer norm
    norm_predictors: tuple[Predictor, ...] = ()  # H4: rho(deepest layer, tau) in each arm over the same triples


# ----------------------------------------------------------------------------- finding drafters


def find_drafters(cache: CaptureCache, jobs: Sequence[Any]) -> tuple[list[FoundDrafter], list[str]]:
    """Finished drafters of chapter 6's design ``jobs`` (:func:`~.eagle3_speedup.design`)
    under ``cache``, and the ``set/seed`` names of those not trained yet. Only looks."""
    from activation_wave.draft.experiment import drafter_dir, is_trained

    found, missing = [], []
    for job in jobs:
        path = drafter_dir(cache, list(job.layers), job.config)
        if is_trained(cache, list(job.layers), job.config):
            found.append(FoundDrafter(job.set, tuple(job.layers), job.config.seed, str(path), job.arm))
        else:
            missing.append(f"{job.set}/seed{job.config.seed}")
    return found, missing


# ----------------------------------------------------------------------------- tau per prompt


def per_prompt_tau(target: Any, cache: CaptureCache, drafters: Sequence[FoundDrafter], *, depth: int,
                   threshold: float, workers: int = 1, threads: int = 1, ledger: str = "",
                   progress: bool = False) -> tuple[tuple[str, ...], dict[str, np.ndarray], dict[str, float]]:
    """Offline tau per eval prompt of every drafter, grouped by set; ``workers`` drafters
    scored at once (:func:`~activation_wave.draft.experiment.score_drafters`, same results).

    Returns ``(prompt_ids, {set: [seeds, prompts]}, {set: pooled tau averaged over seeds})``;
    a prompt without a verify round is NaN. ``ledger``: the drafter ledger whose scores are
    read back and extended (:func:`~activation_wave.draft.experiment.score_drafters`).
    """
    from activation_wave.draft.experiment import score_drafters

    ids = tuple(r["id"] for r in cache.records if r["split"] == "eval")
    where = {p: i for i, p in enumerate(ids)}
    rows: dict[str, list[np.ndarray]] = {}
    pooled: dict[str, list[float]] = {}
    scored = score_drafters(target, cache, [d.path for d in drafters], depth=depth, threshold=threshold,
                            workers=workers, threads=threads, ledger=ledger, progress=progress)
    for d, ev in zip(drafters, scored):
        tau = np.full(len(ids), np.nan)
        for rec in ev["per_record"]:
            tau[where[rec["id"]]] = rec["tau"] if rec["rounds"] else np.nan
        rows.setdefault(d.set, []).append(tau)
        pooled.setdefault(d.set, []).append(float(ev["tau_offline"]))
    return ids, {s: np.stack(v) for s, v in rows.items()}, {s: float(np.mean(v)) for s, v in pooled.items()}


def _values(row: Sequence[float]) -> tuple[float | None, ...]:
    """Per-prompt values for a results file: NaN (no verify round) -> None."""
    return tuple(None if not np.isfinite(v) else float(v) for v in row)


def _set_taus(name: str, layers: Sequence[int], seeds: Sequence[int], tau: np.ndarray, pooled: float) -> SetTaus:
    """:class:`SetTaus` of one set from its per-seed per-prompt tau ``[seeds, prompts]``
    (rows in the order of ``seeds``), seeds sorted."""
    order = np.argsort(seeds, kind="stable")
    mean = seed_mean(tau)
    return SetTaus(name, tuple(layers), tuple(int(seeds[i]) for i in order), float(np.nanmean(mean)), pooled,
                   _values(mean), tuple(_values(tau[i]) for i in order))


def compare_to_reference(taus: Mapping[str, np.ndarray], layers: Mapping[str, Sequence[int]], reference: str, *,
                         n_boot: int, seed: int = 0) -> list[Comparison]:
    """Paired bootstrap of every set against ``reference``, Holm within the rules and over all."""
    if reference not in taus:
        raise ValueError(f"no drafter of the reference set {reference!r}; sets with drafters: {sorted(taus)}")
    names = [s for s in taus if s != reference]
    deltas = {s: paired_bootstrap(taus[s], taus[reference], n_boot=n_boot, seed=seed) for s in names}
    rules = [s for s in names if is_rule(s)]
    adj_all = dict(zip(names, holm([deltas[s].p for s in names])))
    adj_rules = dict(zip(rules, holm([deltas[s].p for s in rules])))
    out = []
    for s in names:
        d = deltas[s]
        m = len(rules) if s in adj_rules else len(names)
        out.append(Comparison(set=s, layers=tuple(layers[s]), family="rules" if s in adj_rules else "other",
                              delta=d.mean, lo=d.lo, hi=d.hi, p=d.p, p_holm_rules=adj_rules.get(s),
                              p_holm_all=adj_all[s], n=d.n, sd=d.sd, mde=min_detectable_delta(d.sd, d.n),
                              mde_holm=min_detectable_delta(d.sd, d.n, alpha=0.05 / m)))
    return out


# ----------------------------------------------------------------------------- scores


def filtered_s2(cache: CaptureCache, cfg: StudyConfig, sets: Mapping[str, Sequence[int]], *,
                quantiles: Sequence[float] = FILTER_QUANTILES, budget: int | None = None
                ) -> tuple[int, dict[float, dict[str, float]]]:
    """S2 of every set from statistics filtered at each quantile, all on ``budget`` tokens.

    Filtering at ``q`` draws ``budget / (1 - q)`` response positions (seed
    ``cfg.metrics.seed``) and keeps the ``budget`` with the highest next-token entropy,
    i.e. drops the lowest ``q`` share; so every quantile's statistics see the same number
    of tokens. ``budget`` defaults to the tokens chapter 6's filtered statistics keep
    (``token_budget * (1 - filter_quantile)``). Returns ``(budget, {q: {set: S2}})``.
    """
    from activation_wave.measure.layer_stats import LayerStats

    budget = budget or max(4, round(cfg.metrics.token_budget * (1 - cfg.metrics.filter_quantile)))
    layers = sorted({int(i) for ids in sets.values() for i in ids})
    out: dict[float, dict[str, float]] = {}
    for q in quantiles:
        if not 0.0 <= q < 1.0:
            raise ValueError(f"filter quantile {q} must lie in [0, 1)")
        sample = cache.sample_tokens(math.ceil(budget / (1.0 - q)), seed=cfg.metrics.seed, layers=layers,
                                     min_position=cfg.metrics.drop_first)
        keep = np.sort(np.argsort(-np.nan_to_num(sample.next_entropy, nan=-np.inf), kind="stable")[:budget])
        stats = LayerStats.from_hidden(sample.hidden[:, keep], layers, cache.n_layers)
        out[q] = {name: stats.concat_entropy(list(ids), 2.0) for name, ids in sets.items()}
    return budget, out


def set_scores(cache: CaptureCache, cfg: StudyConfig, sets: Mapping[str, Sequence[int]], probe: ProbeData
               ) -> dict[str, dict[str, float | None]]:
    """Per set: S2 and mean CKA as chapter 6 computes them, the deepest layer, the probe."""
    from activation_wave.measure.layer_stats import stats_from_cache

    stats = stats_from_cache(cache, cfg).stats
    out = {}
    for name, ids in sets.items():
        ids = list(ids)
        out[name] = {"renyi2": stats.concat_entropy(ids, 2.0),
                     "mean_cka": stats.mean_cka(ids) if len(ids) > 1 else None,
                     "deepest": float(max(ids)), "probe": probe.score(ids).score}
    return out


def predictor_rhos(taus: Mapping[str, np.ndarray], layers: Mapping[str, Sequence[int]],
                   scores: Mapping[str, Mapping[str, float | None]], *, n_boot: int, seed: int = 0) -> list[Predictor]:
    """rho of every score against tau over the triples and over the single layers."""
    out = []
    for units, k in (("triples", 3), ("single layers", 1)):
        names = [s for s in taus if len(layers[s]) == k]
        if len(names) < 3:
            continue
        y = np.stack([seed_mean(taus[s]) for s in names])  # [units, prompts]
        for key in ("renyi2", "mean_cka", "deepest", "probe"):
            x = np.array([np.nan if scores[s].get(key) is None else scores[s][key] for s in names], float)
            if np.isfinite(x).sum() < 3:
                continue
            c = spearman_ci(x, y, n_boot=n_boot, seed=seed)
            out.append(Predictor(key, units, c.rho, c.lo, c.hi, c.n))
    return out


def filter_rhos(cache: CaptureCache, cfg: StudyConfig, taus: Mapping[str, np.ndarray],
                layers: Mapping[str, Sequence[int]], *, n_boot: int, seed: int = 0
                ) -> tuple[list[FilterPredictor], dict[float, dict[str, float]]]:
    """rho(S2 filtered at each quantile, tau) over the triples (:func:`filtered_s2`), each
    compared with q = 0 on the same resamples; also returns the S2 values."""
    triples = [s for s in taus if len(layers[s]) == 3]
    budget, s2q = filtered_s2(cache, cfg, {s: layers[s] for s in triples})
    y = np.stack([seed_mean(taus[s]) for s in triples])
    out = []
    for q, by_set in s2q.items():
        x = np.array([by_set[s] for s in triples])
        c = spearman_ci(x, y, n_boot=n_boot, seed=seed)
        d = (spearman_difference(x, np.array([s2q[0.0][s] for s in triples]), y, n_boot=n_boot, seed=seed)
             if q != 0.0 and 0.0 in s2q else None)
        out.append(FilterPredictor(q, budget, c.rho, c.lo, c.hi, c.n, d and d.delta, d and d.lo, d and d.hi,
                                   d and d.p))
    return out, s2q


def probe_summary(cache: CaptureCache, sets: Mapping[str, Sequence[int]], probe_kw: Mapping[str, Any] | None, *,
                  triples: int | None) -> tuple[ProbeData, ProbeTiming, list[tuple[tuple[int, ...], float]]]:
    """Build the probe over every layer and time it on ``sets``, and on triples of layers
    1..N: all of them (``triples=0``), a seeded sample of that many, or none (``None``).
    Returns the probe, its timing and the 10 best of the scored triples."""
    probe = ProbeData.from_cache(cache, **dict(probe_kw or {}))
    c1 = time.process_time()
    per_set = [probe.score(ids).seconds for ids in sets.values()]
    per_set_cpu = (time.process_time() - c1) / max(1, len(per_set))
    best: list[tuple[tuple[int, ...], float]] = []
    all_s = all_cpu = n_all = None
    if triples is not None:
        combos = list(itertools.combinations([i for i in probe.layers if i >= 1], 3))
        if triples:
            pick = np.random.default_rng(0).choice(len(combos), size=min(triples, len(combos)), replace=False)
            combos = [combos[i] for i in sorted(pick)]
        t1, c1 = time.perf_counter(), time.process_time()
        ranked = sorted((probe.score(c) for c in combos), key=lambda r: (-r.score, r.layers))
        all_s, all_cpu, n_all = time.perf_counter() - t1, time.process_time() - c1, len(ranked)
        best = [(r.layers, r.score) for r in ranked[:10]]
    first = probe.blocks[probe.layers[0]]
    settings = {k: getattr(probe, k) for k in ("target", "steps", "ridge", "with_token", "n_train")}
    settings.update(rank=first.stop - first.start, vocab=len(probe.vocab_ids), n_eval=len(probe.labels_eval))
    timing = ProbeTiming(build_s=probe.build_seconds, per_set_s=float(np.mean(per_set)), per_set_cpu_s=per_set_cpu,
                         triples_s=all_s, triples_cpu_s=all_cpu, n_triples=n_all, settings=settings)
    return probe, timing, best


# ----------------------------------------------------------------------------- the analysis


def _predictors(cache: CaptureCache, cfg: StudyConfig, taus: Mapping[str, np.ndarray],
                layers: Mapping[str, Sequence[int]], probe_kw: Mapping[str, Any] | None, triples: int | None,
                n_boot: int, seed: int) -> tuple[ProbeTiming, list, dict, list[Predictor], list[FilterPredictor]]:
    """Probe, scores of every set (the filtered S2 values included) and the rhos of both kinds."""
    probe, timing, best = probe_summary(cache, layers, probe_kw, triples=triples)
    scores = set_scores(cache, cfg, layers, probe)
    predictors = predictor_rhos(taus, layers, scores, n_boot=n_boot, seed=seed)
    filtering, s2q = filter_rhos(cache, cfg, taus, layers, n_boot=n_boot, seed=seed)
    for q, by_set in s2q.items():
        for name, value in by_set.items():
            scores[name][f"renyi2_q{q:g}"] = value
    return timing, best, scores, predictors, filtering


def norm_arm(taus: Mapping[str, np.ndarray], layers: Mapping[str, Sequence[int]], *, n_boot: int, seed: int = 0,
             suffix: str = "+norm") -> tuple[list[NormEffect], list[Predictor]]:
    """H4: each triple ``<set>+norm`` against ``<set>`` (paired over prompts, seeds averaged),
    and rho(deepest layer, tau) over the same triples in both arms."""
    pairs = [(s[: -len(suffix)], s) for s in taus if s.endswith(suffix) and s[: -len(suffix)] in taus]
    effects = []
    for plain, normed in pairs:
        d = paired_bootstrap(taus[normed], taus[plain], n_boot=n_boot, seed=seed)
        effects.append(NormEffect(plain, tuple(layers[plain]), float(np.nanmean(seed_mean(taus[plain]))),
                                  float(np.nanmean(seed_mean(taus[normed]))), d.mean, d.lo, d.hi, d.p, d.n))
    rhos = []
    if len(pairs) >= 3:
        depth = np.array([max(layers[p]) for p, _ in pairs], float)
        for arm, col in (("triples, no norm", 0), ("triples, per-layer RMSNorm", 1)):
            y = np.stack([seed_mean(taus[pair[col]]) for pair in pairs])
            c = spearman_ci(depth, y, n_boot=n_boot, seed=seed)
            rhos.append(Predictor("deepest", arm, c.rho, c.lo, c.hi, c.n))
    return effects, rhos


def run(cfg: StudyConfig, cache: CaptureCache, target: Any, jobs: Sequence[Any], *,
        drafters: Sequence[FoundDrafter] | None = None, eval_cache: CaptureCache | None = None,
        reference: str = REFERENCE, n_boot: int = 10_000, probe_kw: Mapping[str, Any] | None = None,
        triples: int | None = 0, seed: int = 0) -> DrafterPredictors:
    """The paired analysis and the predictors of the module doc on finished drafters.

    ``jobs``: chapter 6's design (:func:`~.eagle3_speedup.design`). ``drafters``: the
    drafters to score (default: look the jobs up under ``eval_cache`` with
    :func:`find_drafters`); those of arm ``"norm"`` only enter the H4 part. ``eval_cache``:
    the capture the drafters trained on, whose eval split scores them (default ``cache``,
    whose statistics always score the sets). Loads drafters only (missing ones are listed in the result, not trained).
    ``target`` supplies the drafters' frozen token embeddings. ``triples`` also scores
    triples of layers ``1..N`` with the probe, to time it and list the best (see
    :func:`probe_summary`).
    """
    t0 = time.perf_counter()
    missing: list[str] = []
    if drafters is None:
        drafters, missing = find_drafters(eval_cache or cache, jobs)
    if not drafters:
        raise FileNotFoundError(f"no finished chapter-6 drafter under {cache.path / 'drafters'} for these sets: "
                                "run the drafters page first (wave study --only 06_eagle3_speedup; this analysis never trains)")
    prompt_ids, all_taus, pooled = per_prompt_tau(target, eval_cache or cache, drafters, depth=cfg.spec.depth,
                                                  threshold=cfg.spec.draft_threshold, workers=cfg.draft.workers,
                                                  threads=cfg.draft.threads, ledger=cfg.draft.ledger)
    normed = {d.set for d in drafters if d.arm == "norm"}
    taus = {s: v for s, v in all_taus.items() if s not in normed}
    sets = {j.set: tuple(j.layers) for j in jobs}
    layers = {s: sets[s] for s in all_taus}
    comparisons = compare_to_reference(taus, layers, reference, n_boot=n_boot, seed=seed)
    rules = [c for c in comparisons if c.family == "rules"]
    mde_pooled = (min_detectable_delta(float(np.sqrt(np.mean([c.sd ** 2 for c in rules]))),
                                       int(np.mean([c.n for c in rules])), alpha=0.05 / len(rules))
                  if rules else None)
    effects, norm_rhos = norm_arm(all_taus, layers, n_boot=n_boot, seed=seed)

    main_layers = {s: layers[s] for s in taus}
    timing, best, scores, predictors, filtering = _predictors(cache, cfg, taus, main_layers, probe_kw, triples,
                                                              n_boot, seed)

    set_taus = tuple(_set_taus(s, layers[s], [d.seed for d in drafters if d.set == s], all_taus[s], pooled[s])
                     for s in all_taus)
    return DrafterPredictors(capture=str(cache.path), reference=reference, depth=cfg.spec.depth,
                             draft_threshold=cfg.spec.draft_threshold, n_boot=n_boot, prompt_ids=prompt_ids,
                             missing_drafters=tuple(missing), sets=set_taus, comparisons=tuple(comparisons),
                             mde_rules_pooled=mde_pooled, scores=scores, predictors=tuple(predictors),
                             filtering=tuple(filtering), probe=timing, best_probe_triples=tuple(best),
                             seconds=time.perf_counter() - t0, norm_effects=tuple(effects),
                             norm_predictors=tuple(norm_rhos))


#: Fewest eval prompts for which the paired bootstrap's p-values are reported as a test
#: (with a handful of prompts the resampling distribution is degenerate).
MIN_PAIRED_PROMPTS = 10


def dead_instrument(per_prompt: Sequence[float | None]) -> bool:
    """Whether a drafter measured nothing: its tau is 1 (no draft ever accepted) on every scored
    prompt. A verdict rests on a working instrument, so a comparison with such a drafter on
    either side is not testable (:func:`activation_wave.study.chapters.eagle3_speedup.evaluate_hypotheses`,
    :func:`activation_wave.study.chapters.cross_drafters.evaluate_hypotheses`).

    >>> dead_instrument([1.0, 1.0, None]), dead_instrument([1.0, 1.2]), dead_instrument([])
    (True, False, False)
    """
    vals = [float(v) for v in per_prompt if v is not None and np.isfinite(v)]
    return bool(vals) and all(abs(v - 1.0) < 1e-12 for v in vals)


def comparison_word(delta: float | None, p: float | None, alpha: float = 0.05) -> str:
    """A paired comparison in the book's one vocabulary: "higher", "lower" (adjusted ``p`` below
    ``alpha``), "within noise", or "not testable" (no comparison).

    >>> comparison_word(0.02, 0.001), comparison_word(-0.02, 0.001), comparison_word(0.01, 0.3), comparison_word(None, None)
    ('higher', 'lower', 'within noise', 'not testable')
    """
    if delta is None or p is None:
        return "not testable"
    return ("higher" if delta > 0 else "lower") if p < alpha else "within noise"


def prose_values(res: DrafterPredictors, alpha: float = 0.05) -> dict[str, Any]:
    """Chapter 6's values for the rules' paired comparisons with the reference: how many
    prompts, how many rules' sets beat or fall below it after Holm's correction, the best
    rule (largest delta) with its figures and word, and the rules' pooled MDE."""
    nan = float("nan")
    rules = [c for c in res.comparisons if c.family == "rules" and c.p_holm_rules is not None]
    n = max((c.n for c in res.comparisons), default=0)
    testable = bool(rules) and min(c.n for c in rules) >= MIN_PAIRED_PROMPTS
    best = max(rules, key=lambda c: c.delta) if rules else None
    return {"paired_n": n, "paired_n_rules": len(rules),
            "paired_n_higher": sum(c.delta > 0 and c.p_holm_rules < alpha for c in rules) if testable else 0,
            "paired_n_lower": sum(c.delta < 0 and c.p_holm_rules < alpha for c in rules) if testable else 0,
            "best_rule": best.set if best else "none", "best_rule_layers": str(list(best.layers)) if best else "",
            "best_rule_delta": best.delta if best else nan, "best_rule_lo": best.lo if best else nan,
            "best_rule_hi": best.hi if best else nan, "best_rule_p_holm": best.p_holm_rules if best else nan,
            "best_rule_word": comparison_word(best.delta, best.p_holm_rules, alpha) if best and testable
            else "not testable",
            "paired_mde_rules": res.mde_rules_pooled if res.mde_rules_pooled is not None else nan}


# ----------------------------------------------------------------------------- the outcome, read back
#
# What chapters 6, 7, 8 and the landing page say about "the best" set or layer: always the
# pre-registered outcome (``SetTaus.tau``: offline tau at the online depth and draft
# threshold, mean over the eval prompts of the seed-averaged per-prompt tau), never the
# training-time evaluation of chapter 6's ``runs`` (depth ``draft.ttt_steps``, no threshold).


@dataclass(frozen=True)
class OutcomeRow:
    """One set on the pre-registered outcome, with its 95% bootstrap interval over prompts
    and (every set but the reference) its paired delta against the reference."""

    set: str
    layers: tuple[int, ...]
    n_seeds: int
    tau: float
    lo: float
    hi: float
    delta: float | None = None
    delta_lo: float | None = None
    delta_hi: float | None = None
    p_holm: float | None = None  # within the rules for a rule's set, over all compared sets otherwise
    n: int | None = None  # prompts of the paired comparison
    family: str | None = None  # the Holm family of p_holm: "rules" or "all"


@dataclass(frozen=True)
class SeedSpread:
    """How far two seeds of one set lie apart on the outcome: over the sets of one size with
    at least two seeds, the mean and largest |tau of seed a - tau of seed b| (first two
    seeds). ``n_sets`` is 0 when the results file holds no per-seed tau."""

    n_sets: int
    mean: float | None
    largest: float | None
    sets: tuple[str, ...]


@dataclass(frozen=True)
class SingleLayerPeak:
    """The single-layer drafter highest on the outcome, the layers that come close to it,
    and the seed spread they are judged against."""

    layer: int
    tau: float
    lo: float
    hi: float
    n_seeds: int
    close: tuple[tuple[int, float], ...]  # other layers within the seed spread of the peak, best first
    spread: SeedSpread
    n_layers: int  # single layers in the sweep


def _is_main(name: str, suffix: str = "+norm") -> bool:
    return not name.endswith(suffix)


def outcome_rows(res: DrafterPredictors, k: int | None = None, *, alpha: float = 0.05) -> list[OutcomeRow]:
    """Every set of ``k`` layers (all sizes: None) of the main arms on the outcome, highest
    first, with its interval over prompts and its paired comparison with the reference."""
    from activation_wave.core.stats import mean_ci

    cmp = {c.set: c for c in res.comparisons}
    rows = []
    for s in res.sets:
        if not _is_main(s.set) or (k is not None and len(s.layers) != k):
            continue
        _, lo, hi = mean_ci(s.per_prompt)
        c = cmp.get(s.set)
        rules = c is not None and c.p_holm_rules is not None
        rows.append(OutcomeRow(s.set, tuple(s.layers), len(s.seeds), s.tau, lo, hi,
                               *((c.delta, c.lo, c.hi, c.p_holm_rules if rules else c.p_holm_all, c.n,
                                  "rules" if rules else "all") if c else ())))
    return sorted(rows, key=lambda r: -r.tau)


def sweep_rows(res: DrafterPredictors) -> list[OutcomeRow]:
    """The single-layer drafters on the outcome, by layer index."""
    return sorted(outcome_rows(res, 1), key=lambda r: r.layers[0])


def single_layer_seeds(res: DrafterPredictors) -> dict[int, list[float]]:
    """Layer -> the outcome tau of each seed (mean over prompts), for the single layers with
    two or more seeds recorded (empty for results written before per-seed tau was kept)."""
    out = {}
    for s in res.sets:
        if _is_main(s.set) and len(s.layers) == 1 and s.per_seed and len(s.per_seed) >= 2:
            out[s.layers[0]] = [float(np.nanmean(np.array([np.nan if v is None else v for v in row], float)))
                                for row in s.per_seed]
    return out


#: The selection scores chapter 6 plots against the outcome, with their axis labels.
SCORE_LABELS = {"renyi2": "concatenation entropy S2 of the triple (nats)",
                "mean_cka": "mean pairwise CKA of the triple"}


def score_panels(res: DrafterPredictors, rows: Sequence[OutcomeRow]) -> dict[str, list[float]]:
    """Axis label -> each row's score (:data:`SCORE_LABELS`; NaN where undefined), in the
    order of ``rows``: the scores the predictors table correlates with the outcome."""
    return {label: [np.nan if res.scores.get(r.set, {}).get(key) is None else float(res.scores[r.set][key])
                    for r in rows] for key, label in SCORE_LABELS.items()}


def is_within_noise(row: OutcomeRow, alpha: float = 0.05) -> bool:
    """Whether a set's paired delta against the reference is within noise: its interval
    covers 0 or its Holm-adjusted p is not below ``alpha`` (the reference itself: False)."""
    if row.delta is None:
        return False
    covers = row.delta_lo is not None and row.delta_lo <= 0 <= row.delta_hi
    return bool(covers or row.p_holm is None or row.p_holm >= alpha)


def ranking_values(res: DrafterPredictors, k: int = 3, alpha: float = 0.05) -> dict[str, Any]:
    """The set of ``k`` layers highest on the outcome (``rank_top*``: name, layers, tau and its
    interval over prompts) and the comparison that decides whether that ranking means anything
    (``rank_vs*``: the top set against the reference, or the runner-up's when the reference is
    on top): name, paired delta, interval, Holm p and :func:`comparison_word`."""
    nan = float("nan")
    rows = outcome_rows(res, k)
    out: dict[str, Any] = {"rank_top": "none", "rank_top_layers": "", "rank_top_tau": nan, "rank_top_lo": nan,
                           "rank_top_hi": nan, "rank_vs": "none", "rank_vs_delta": nan, "rank_vs_lo": nan,
                           "rank_vs_hi": nan, "rank_vs_p": nan, "rank_vs_word": "not testable"}
    if not rows:
        return out
    top = rows[0]
    out.update(rank_top=top.set, rank_top_layers=str(list(top.layers)), rank_top_tau=top.tau, rank_top_lo=top.lo,
               rank_top_hi=top.hi)
    vs = next((r for r in rows[1:] if r.delta is not None), None) if top.set == res.reference else top
    if vs is not None and vs.delta is not None:
        out.update(rank_vs=vs.set, rank_vs_delta=vs.delta, rank_vs_lo=vs.delta_lo, rank_vs_hi=vs.delta_hi,
                   rank_vs_p=vs.p_holm, rank_vs_word=comparison_word(vs.delta, vs.p_holm, alpha)
                   if (vs.n or 0) >= MIN_PAIRED_PROMPTS else "not testable")
    return out


def seed_spread(res: DrafterPredictors, k: int = 1) -> SeedSpread:
    """:class:`SeedSpread` over the main arm's sets of ``k`` layers with two or more seeds,
    from the per-seed per-prompt tau (none recorded: ``n_sets`` 0)."""
    gaps, names = [], []
    for s in res.sets:
        if not _is_main(s.set) or len(s.layers) != k or not s.per_seed or len(s.per_seed) < 2:
            continue
        a, b = (np.nanmean(np.array([np.nan if v is None else v for v in row], float)) for row in s.per_seed[:2])
        gaps.append(abs(float(a) - float(b)))
        names.append(s.set)
    if not gaps:
        return SeedSpread(0, None, None, ())
    return SeedSpread(len(gaps), float(np.mean(gaps)), float(np.max(gaps)), tuple(names))


def single_layer_peak(res: DrafterPredictors) -> SingleLayerPeak | None:
    """The single layer highest on the outcome and the layers within the seed spread of it
    (within its own 95% interval over prompts when no seed spread is recorded)."""
    rows = outcome_rows(res, 1)
    if not rows:
        return None
    top, spread = rows[0], seed_spread(res, 1)
    margin = spread.mean if spread.mean is not None else top.tau - top.lo
    close = tuple((r.layers[0], r.tau) for r in rows[1:] if top.tau - r.tau <= margin)
    return SingleLayerPeak(top.layers[0], top.tau, top.lo, top.hi, top.n_seeds, close, spread, len(rows))


def peak_values(peak: SingleLayerPeak | None) -> dict[str, Any]:
    """The best single layer on the outcome as values: its layer, tau and interval, seeds, the
    other layers within the seed spread of it (``close``, "none" when no layer is) and that
    spread (mean and largest gap between two seeds of one layer; NaN when not recorded)."""
    nan = float("nan")
    if peak is None:
        return {"peak_layer": -1, "peak_tau": nan, "peak_lo": nan, "peak_hi": nan, "peak_seeds": 0,
                "peak_close": "none", "peak_n_close": 0, "peak_gap": nan, "peak_spread": nan,
                "peak_spread_max": nan, "peak_spread_n": 0}
    sp = peak.spread
    return {"peak_layer": peak.layer, "peak_tau": peak.tau, "peak_lo": peak.lo, "peak_hi": peak.hi,
            "peak_seeds": peak.n_seeds,
            "peak_close": ", ".join(f"{layer} ({tau:.3f})" for layer, tau in peak.close) or "none",
            "peak_n_close": len(peak.close), "peak_gap": (peak.tau - peak.close[-1][1]) if peak.close else nan,
            "peak_spread": nan if sp.mean is None else sp.mean, "peak_spread_max": nan if sp.largest is None
            else sp.largest, "peak_spread_n": sp.n_sets}


def predictor_values(p: Predictor | None, prefix: str) -> dict[str, Any]:
    """One predictor's rho, interval and n under ``<prefix>_rho``, ``_lo``, ``_hi``, ``_n``, and
    ``_word``: "above 0", "below 0" or "within noise" (its interval covers 0), "not testable"
    without an interval."""
    nan = float("nan")
    if p is None or p.rho is None:
        return {f"{prefix}_rho": nan, f"{prefix}_lo": nan, f"{prefix}_hi": nan, f"{prefix}_n": 0,
                f"{prefix}_word": "not testable"}
    ok = p.lo is not None and p.hi is not None and np.isfinite(p.lo)
    word = ("above 0" if p.lo > 0 else "below 0" if p.hi < 0 else "within noise") if ok else "not testable"
    return {f"{prefix}_rho": p.rho, f"{prefix}_lo": p.lo if ok else nan, f"{prefix}_hi": p.hi if ok else nan,
            f"{prefix}_n": p.n, f"{prefix}_word": word}
