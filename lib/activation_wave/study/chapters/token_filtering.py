"""Chapter 4, which tokens count: next-token-entropy filtering, the token budget, and
the sink question (do a few outlier tokens make the sharp features of an entropy or
CKA profile?).

:func:`run` computes everything the chapter shows from a capture and returns a
:class:`TokenFilteringResult`; the notebook draws its figures from the fields. The
*cliff* of an entropy profile is defined once, here (:func:`cliff_of`): the largest
fall between consecutive layers of the mean-centred profile over every position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from activation_wave.measure.cka import cka_matrix, segment_compartments
from activation_wave.core.config import StudyConfig
from activation_wave.measure.entropy import depth_landmarks, layer_entropies
from activation_wave.measure.filtering import (apply_mask, compare_conditions, massive_tokens, outlier_conditions, response_offsets,
                         token_count_stability, token_entropy_mask, token_ids_at, token_norms)
from activation_wave.core.layers import profile_positions, span_text
from activation_wave.study.glue import counted

#: Positions at which the target is all but certain: next-token entropy below this (nats).
SURE_NATS = 0.1
#: Stable keys of the four treatments of outlier tokens, in the order of
#: :func:`~activation_wave.measure.filtering.outlier_conditions` (the first is the reference).
CONDITION_KEYS = ("all", "no_first", "no_massive", "median")
#: Token-entropy subsets compared in the filter section.
SUBSET_KEYS = ("all", "random", "kept", "dropped")
#: Multiples of the median norm swept when dropping high-norm response tokens before CKA.
NORM_FACTORS = (3.0, 5.0, 10.0)
#: A treatment "removes" the cliff when the largest remaining fall is under this share of it.
REMOVED_SHARE = 0.5

Vector = list[float]
Matrix = list[list[float]]
Spans = list[tuple[int, int]]


@dataclass(frozen=True)
class Cliff:
    """The largest fall of an entropy profile between consecutive layers (over the
    entries of :func:`~activation_wave.core.layers.profile_positions`): ``drop`` nats from layer
    ``from_layer`` into ``to_layer``, the values ``before`` / ``after`` it, and the change
    from there to the last layer (N, the last block before the final norm)."""

    drop: float
    from_layer: int
    to_layer: int
    before: float
    after: float
    recovery: float


def cliff_of(entropy: Sequence[float], ids: Sequence[int], n_layers: int) -> Cliff:
    """THE cliff of a depth profile (:class:`Cliff`).

    >>> c = cliff_of([4.0, 4.5, 1.2, 3.9, 9.0], [0, 1, 2, 3, 4], 4)
    >>> (round(c.drop, 6), c.to_layer, round(c.recovery, 6))
    (3.3, 2, 7.8)
    """
    keep = profile_positions(ids, n_layers)
    v = np.asarray(entropy, dtype=float)[keep]
    s = depth_landmarks(entropy, ids, n_layers)
    j = [int(ids[p]) for p in keep].index(s["drop_to"])
    return Cliff(drop=s["drop"], from_layer=s["drop_from"], to_layer=s["drop_to"],
                 before=float(v[j - 1]) if j > 0 else float(v[j]), after=float(v[j]),
                 recovery=float(v[-1] - v[j]))


def _profile_rho(a: Sequence[float], b: Sequence[float], ids: Sequence[int], n_layers: int) -> float:
    """Spearman correlation over layers of two depth profiles (the entries of
    :func:`~activation_wave.core.layers.profile_positions`)."""
    keep = profile_positions(ids, n_layers)
    return float(spearmanr(np.asarray(a)[keep], np.asarray(b)[keep]).statistic)


@dataclass(frozen=True)
class EntropyFilter:
    """Filtered against unfiltered: the cut, entropy profiles of token subsets
    (:data:`SUBSET_KEYS`) and CKA over all and over the kept tokens."""

    quantile: float
    threshold: float
    n_kept: int
    sure_nats: float
    frac_sure: float
    median_entropy: float
    entropy: dict[str, Vector]
    d_kept_mean: float
    d_dropped_mean: float
    rho_kept_all: float
    kept_argmax: int
    all_argmax: int
    cka_all: Matrix
    cka_kept: Matrix
    compartments_all: Spans
    compartments_kept: Spans
    cka_mad: float


@dataclass(frozen=True)
class TokenBudget:
    """Statistics on random subsets of fewer tokens against the whole sample:
    ``all`` / ``kept`` -> measure -> ``[sizes, replicates]`` (see
    :func:`~activation_wave.measure.filtering.token_count_stability`)."""

    sizes: list[int]
    all: dict[str, Matrix]
    kept: dict[str, Matrix]

    def at(self, which: str, measure: str, i: int) -> float:
        """Mean over replicates of ``measure`` for the ``i``-th size (``which``: all / kept)."""
        return float(np.mean(getattr(self, which)[measure][i]))


@dataclass(frozen=True)
class OutlierCondition:
    """One treatment of outlier tokens: its label, tokens, centring, entropy ``[L]``,
    CKA ``[L, L]`` (mean-centred treatments only) and compartments."""

    label: str
    n_tokens: int
    center: str
    entropy: Vector
    cka: Matrix | None
    compartments: Spans | None


@dataclass(frozen=True)
class SinkAnalysis:
    """The sink question over a sample of every position (prompt included)."""

    n_tokens: int
    n_first: int
    first_token: str
    first_norm_ratio: Vector
    sink_peak: float
    sink_peak_layer: int
    other_ratio: Vector
    other_peak: float
    massive_factor: float
    n_massive: int
    massive_first_share: float
    conditions: dict[str, OutlierCondition]
    cliff: Cliff
    drops: dict[str, float]
    at_cliff: dict[str, float]
    removed: str
    spearman_entropy_log_first_ratio: float
    first_effect: float
    first_effect_layer: int


@dataclass(frozen=True)
class NormSweepRow:
    """CKA compartments of the response tokens after dropping those above a norm multiple."""

    dropped: str
    n_dropped: int
    share: float
    top_tokens: str
    compartments: str


@dataclass(frozen=True)
class ResponseOutliers:
    """Outlier treatments on the response positions the study uses."""

    conditions: dict[str, OutlierCondition]
    response_ratio: Vector
    response_peak: float
    response_peak_layer: int
    first_response_ratio: float
    drop_reference: float
    drop_max_other: float
    entropy_shift_max: float
    sweep: list[NormSweepRow]
    low_factor: float | None
    cka_low: Matrix | None
    spans_low: Spans | None
    cka_normalized: Matrix
    spans_normalized: Spans
    compartments_normalized: str
    cka_moves: bool


@dataclass(frozen=True)
class TokenFilteringResult:
    """Everything chapter 4 reports (see the module docstring)."""

    ids: list[int]
    n_layers: int
    alpha: float
    n_tokens: int
    next_entropy: Vector
    filter: EntropyFilter
    budget: TokenBudget
    sink: SinkAnalysis
    response: ResponseOutliers


def entropy_filter(H: Any, next_entropy: np.ndarray, ids: list[int], n_layers: int, *, quantile: float,
                   alpha: float, seed: int, k_max: int) -> EntropyFilter:
    """Profiles and CKA of the tokens the entropy filter keeps, against a random subset
    of the same size, all tokens and the dropped ones."""
    n = H.shape[1]
    keep = token_entropy_mask(next_entropy, quantile=quantile)
    rand = np.zeros(n, dtype=bool)
    rand[np.random.default_rng(seed).choice(n, size=int(keep.sum()), replace=False)] = True
    E = dict(zip(SUBSET_KEYS, (layer_entropies(H, alpha), layer_entropies(H[:, rand], alpha),
                               layer_entropies(H[:, keep], alpha), layer_entropies(H[:, ~keep], alpha))))
    C_all, C_hi = cka_matrix(H), cka_matrix(H[:, keep])
    off = ~np.eye(len(ids), dtype=bool)
    return EntropyFilter(
        quantile=float(quantile), threshold=float(np.quantile(next_entropy, quantile)), n_kept=int(keep.sum()),
        sure_nats=SURE_NATS, frac_sure=float((next_entropy < SURE_NATS).mean()),
        median_entropy=float(np.median(next_entropy)), entropy={k: v.tolist() for k, v in E.items()},
        d_kept_mean=float((E["kept"] - E["random"]).mean()), d_dropped_mean=float((E["dropped"] - E["random"]).mean()),
        rho_kept_all=_profile_rho(E["kept"], E["all"], ids, n_layers),
        kept_argmax=depth_landmarks(E["kept"], ids, n_layers)["argmax"], all_argmax=depth_landmarks(E["all"], ids, n_layers)["argmax"],
        cka_all=C_all.tolist(), cka_kept=C_hi.tolist(),
        compartments_all=segment_compartments(C_all, ids=ids, k_max=k_max),
        compartments_kept=segment_compartments(C_hi, ids=ids, k_max=k_max),
        cka_mad=float(np.abs(C_all - C_hi)[off].mean()))


def budget_sizes(n_kept: int) -> list[int]:
    """Token counts the budget section tries: powers of two from 32 below the number of
    kept tokens, and that number (at most 1024).

    >>> budget_sizes(300)
    [32, 64, 128, 256, 300]
    """
    return sorted(set([s for s in (32, 64, 128, 256, 512, 1024) if s < n_kept] + [min(n_kept, 1024)]))


def token_budget(H: Any, keep: np.ndarray, profile: Sequence[int], *, alpha: float, seed: int,
                 n_rep: int = 3) -> TokenBudget:
    """:func:`~activation_wave.measure.filtering.token_count_stability` of all and of the kept tokens
    (``profile``: positions of the layers whose entropy ranking is compared)."""
    sizes = budget_sizes(int(keep.sum()))
    measures = ("profile_corr", "entropy_shift", "cka_mad", "same_compartments")
    st = {name: token_count_stability(X, sizes, n_rep=n_rep, seed=seed, alpha=alpha, profile=profile)
          for name, X in (("all", H), ("kept", H[:, keep]))}
    return TokenBudget(sizes=sizes, **{name: {m: s[m].tolist() for m in measures} for name, s in st.items()})


def _conditions(res: Mapping[str, dict], ids: list[int], k_max: int) -> dict[str, OutlierCondition]:
    """:func:`~activation_wave.measure.filtering.compare_conditions`' output as result objects keyed
    by :data:`CONDITION_KEYS` (compartments wherever CKA was computed)."""
    out = {}
    for key, (label, v) in zip(CONDITION_KEYS, res.items()):
        C = v["cka"]
        out[key] = OutlierCondition(label=label, n_tokens=int(v["n_tokens"]), center=v["center"],
                                    entropy=np.asarray(v["entropy"]).tolist(),
                                    cka=None if C is None else np.asarray(C).tolist(),
                                    compartments=None if C is None else segment_compartments(C, ids=ids, k_max=k_max))
    return out


def _verdict(gone: Sequence[bool]) -> str:
    """'all', 'some' or 'none' of the treatments remove the cliff."""
    return "all" if all(gone) else ("some" if any(gone) else "none")


def sink_analysis(cache: Any, tokenizer: Any, cfg: StudyConfig, ids: list[int], n_layers: int, k_max: int) -> SinkAnalysis:
    """Norm ratios of the first sequence token and entropy/CKA under the four treatments,
    over a sample of every position (prompt included)."""
    m = cfg.metrics
    sall = cache.sample_tokens(m.token_budget, seed=m.seed, mask="all")
    Ha = sall.hidden
    norms = token_norms(Ha)
    ratio = norms / np.median(norms, axis=1, keepdims=True)  # [L, n]: token norm / layer median
    first = sall.position == 0
    massive = massive_tokens(norms, m.massive_factor)
    first_ids = token_ids_at(cache, sall.record[first], sall.position[first])
    vals, counts = np.unique(first_ids, return_counts=True)
    sink = np.median(ratio[:, first], axis=1)
    conds = _conditions(compare_conditions(Ha, outlier_conditions(
        sall.position, norms, drop_first=max(1, m.drop_first), massive_factor=m.massive_factor), alpha=m.alpha),
        ids, k_max)
    ref = conds["all"].entropy
    cliff = cliff_of(ref, ids, n_layers)
    at = ids.index(cliff.to_layer)
    drops = {k: depth_landmarks(c.entropy, ids, n_layers)["drop"] for k, c in conds.items()}
    keep = profile_positions(ids, n_layers)
    effect = np.abs(np.asarray(ref) - np.asarray(conds["no_first"].entropy))[keep]
    return SinkAnalysis(
        n_tokens=int(Ha.shape[1]), n_first=int(first.sum()), first_token=repr(tokenizer.decode([int(vals[int(np.argmax(counts))])])),
        first_norm_ratio=sink.tolist(), sink_peak=float(sink.max()), sink_peak_layer=int(ids[int(np.argmax(sink))]),
        other_ratio=ratio[:, ~first].max(axis=1).tolist(), other_peak=float(ratio[:, ~first].max()),
        massive_factor=float(m.massive_factor), n_massive=int(massive.sum()),
        massive_first_share=float(first[massive].mean()) if massive.any() else 0.0,
        conditions=conds, cliff=cliff, drops=drops, at_cliff={k: float(c.entropy[at]) for k, c in conds.items()},
        removed=_verdict([drops[k] < REMOVED_SHARE * cliff.drop for k in CONDITION_KEYS[1:]]),
        spearman_entropy_log_first_ratio=_profile_rho(ref, np.log(sink), ids, n_layers),
        first_effect=float(effect.max()), first_effect_layer=int(ids[keep[int(np.argmax(effect))]]))


def _top_tokens(cache: Any, tokenizer: Any, sample: Any, drop: np.ndarray, top: int = 3) -> str:
    """The most frequent input tokens among the dropped positions, with counts."""
    tid, cnt = np.unique(token_ids_at(cache, sample.record[drop], sample.position[drop]), return_counts=True)
    return ", ".join(f"{tokenizer.decode([int(t)])!r} ({c})" for t, c in sorted(zip(tid, cnt), key=lambda x: -x[1])[:top])


def response_outliers(cache: Any, tokenizer: Any, sample: Any, cfg: StudyConfig, ids: list[int], n_layers: int,
                      k_max: int, cka_all: np.ndarray) -> ResponseOutliers:
    """The four treatments on the study's response positions, and CKA compartments after
    dropping response tokens above several multiples of the median norm."""
    m = cfg.metrics
    H, n = sample.hidden, sample.hidden.shape[1]
    norms = token_norms(H)
    ratio = norms / np.median(norms, axis=1, keepdims=True)
    offsets = response_offsets(sample.position, sample.record, cache.records)
    conds = _conditions(compare_conditions(H, outlier_conditions(
        offsets, norms, drop_first=max(1, m.drop_first), massive_factor=m.massive_factor), alpha=m.alpha, cka=False),
        ids, k_max)
    comp_all = span_text(segment_compartments(cka_all, ids=ids, k_max=k_max))
    rows = [NormSweepRow("none (plain CKA)", 0, 0.0, "", comp_all)]
    C_low, f_low = None, None
    for f in sorted({*NORM_FACTORS, float(m.massive_factor)}):
        drop = massive_tokens(norms, f)
        if drop.sum() > n - 4:
            continue
        C = cka_matrix(apply_mask(H, ~drop)[0]) if drop.any() else cka_all
        if C_low is None and drop.any():
            C_low, f_low = C, f
        rows.append(NormSweepRow(f"norm > {f:g}x median", int(drop.sum()), float(drop.mean()),
                                 _top_tokens(cache, tokenizer, sample, drop) if drop.any() else "",
                                 span_text(segment_compartments(C, ids=ids, k_max=k_max))))
    C_norm = cka_matrix(H, normalize=True)
    spans_norm = segment_compartments(C_norm, ids=ids, k_max=k_max)
    comp_norm = span_text(spans_norm)
    rows.append(NormSweepRow("none, row-normalised CKA", 0, 0.0, "", comp_norm))
    ref = np.asarray(conds["all"].entropy)
    drops = [depth_landmarks(c.entropy, ids, n_layers)["drop"] for c in conds.values()]
    return ResponseOutliers(
        conditions=conds, response_ratio=ratio.max(axis=1).tolist(), response_peak=float(ratio.max()),
        response_peak_layer=int(ids[int(np.argmax(ratio.max(axis=1)))]),
        first_response_ratio=float(ratio[:, offsets == 0].max()) if (offsets == 0).any() else 1.0,
        drop_reference=drops[0], drop_max_other=max(drops[1:]),
        entropy_shift_max=float(max(np.abs(np.asarray(c.entropy) - ref).max() for k, c in conds.items() if k != "all")),
        sweep=rows, low_factor=f_low, cka_low=None if C_low is None else np.asarray(C_low).tolist(),
        spans_low=None if C_low is None else segment_compartments(C_low, ids=ids, k_max=k_max),
        cka_normalized=C_norm.tolist(), spans_normalized=spans_norm, compartments_normalized=comp_norm,
        cka_moves=any(r.compartments != comp_all for r in rows))


def low_row(result: ResponseOutliers) -> NormSweepRow:
    """The sweep row of the lowest norm multiple that drops any token (the plain-CKA row
    when none does)."""
    hit = [r for r in result.sweep[1:-1] if r.n_dropped > 0]
    return hit[0] if hit else result.sweep[0]


def low_values(result: ResponseOutliers) -> dict[str, Any]:
    """What the page says of the lowest norm multiple that drops any response token: the
    multiple (the smallest one tried when no token exceeds any, so that the sentence "N tokens
    exceed F times the median" stays true with N = 0), the count with its noun, the share, the
    most frequent dropped tokens and the compartments without them."""
    row = low_row(result)
    return dict(f_low=result.low_factor or min(NORM_FACTORS), n_low=row.n_dropped,
                n_low_text=counted(row.n_dropped, "token"), share_low=row.share, top_low=row.top_tokens or "none",
                comp_low=row.compartments)


#: How the prose names the verdict of :attr:`SinkAnalysis.removed`.
#: How many of the three outlier treatments remove the entropy cliff on their own (``SinkAnalysis.removed``),
#: as the page's sentence "Treatments that remove the cliff on their own: ___." reads it.
REMOVED_BY = {"all": "all three", "some": "some, not all", "none": "none"}
#: Whether plain CKA's compartments move when the highest-norm response tokens are left out.
CKA_MOVES = {True: "change", False: "stay the same"}


def sweep_table(response: ResponseOutliers) -> Any:
    """The norm sweep as a frame with the chapter's column names."""
    import pandas as pd

    return pd.DataFrame([{"tokens dropped": r.dropped, "n dropped": r.n_dropped, "share": r.share,
                          "most frequent dropped tokens": r.top_tokens, "compartments": r.compartments}
                         for r in response.sweep])


def run(cfg: StudyConfig, cap: Any) -> TokenFilteringResult:
    """Chapter 4 on a capture (:class:`~activation_wave.study.steps.Captured`)."""
    cache, tok, m = cap.cache, cap.target.tokenizer, cfg.metrics
    N = cache.n_layers
    sample = cache.sample_tokens(m.token_budget, seed=m.seed, min_position=m.drop_first)
    H, ids = sample.hidden, list(sample.layers)
    k_max = min(len(ids), 12)
    filt = entropy_filter(H, sample.next_entropy, ids, N, quantile=m.filter_quantile, alpha=m.alpha, seed=m.seed,
                          k_max=k_max)
    keep = token_entropy_mask(sample.next_entropy, quantile=m.filter_quantile)
    return TokenFilteringResult(
        ids=ids, n_layers=N, alpha=float(m.alpha), n_tokens=int(H.shape[1]), next_entropy=sample.next_entropy.tolist(),
        filter=filt, budget=token_budget(H, keep, profile_positions(ids, N), alpha=m.alpha, seed=m.seed),
        sink=sink_analysis(cache, tok, cfg, ids, N, k_max),
        response=response_outliers(cache, tok, sample, cfg, ids, N, k_max, np.asarray(filt.cka_all)))
