"""Chapter 3, CKA and compartments: the CKA map of every layer pair, its segmentation
into contiguous compartments (how many, by which rule), what each compartment holds,
and the debiased estimator.

:func:`run` returns a :class:`CkaCompartmentsResult`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from activation_wave.measure.cka import cka_matrix, compartment_costs, segment_compartments
from activation_wave.core.config import StudyConfig
from activation_wave.measure.layer_stats import LayerStats
from activation_wave.core.layers import candidate_ids, default_or_none, profile_positions, span_of, span_text
from activation_wave.study.glue import counted

Matrix = list[list[float]]
Spans = list[tuple[int, int]]


@dataclass(frozen=True)
class Compartment:
    """One compartment (inclusive id range): size, mean CKA inside and to its neighbours,
    mean and best single-layer ``S_2``, and the ids of each marked set inside it."""

    index: int
    first: int
    last: int
    size: int
    mean_cka_inside: float
    mean_cka_neighbours: float | None
    mean_s2: float
    best_layer: int
    marks: dict[str, list[int]]


def compartment_rows(stats: LayerStats, compartments: Sequence[tuple[int, int]], *,
                     mark: Mapping[str, Sequence[int]] | None = None) -> list[Compartment]:
    """One :class:`Compartment` per inclusive id range, from the statistics' CKA and ``S_2``.

    ``mark``: name -> layer ids (e.g. ``{"EAGLE-3 default": [2, 15, 27]}``).
    """
    C, ent = stats.cka, stats.entropy2
    rows = []
    for j, (a, b) in enumerate(compartments):
        p = stats.pos([i for i in stats.ids if a <= i <= b])
        k = len(p)
        nbrs = [compartments[x] for x in (j - 1, j + 1) if 0 <= x < len(compartments)]
        nb = [q for q, i in enumerate(stats.ids) if q not in p and any(lo <= i <= hi for lo, hi in nbrs)]
        rows.append(Compartment(
            index=j + 1, first=int(a), last=int(b), size=k,
            mean_cka_inside=float((C[np.ix_(p, p)].sum() - k) / (k * (k - 1))) if k > 1 else 1.0,
            mean_cka_neighbours=float(C[np.ix_(p, nb)].mean()) if nb else None,
            mean_s2=float(ent[p].mean()), best_layer=int(stats.ids[p[int(np.argmax(ent[p]))]]),
            marks={name: [int(i) for i in lay if a <= i <= b] for name, lay in (mark or {}).items()}))
    return rows


def compartment_frame(rows: Sequence[Compartment]) -> pd.DataFrame:
    """Compartments as a table for reading."""
    return pd.DataFrame([{"compartment": r.index, "layers": span_text([(r.first, r.last)]), "size": r.size,
                          "mean CKA inside": r.mean_cka_inside, "mean CKA to neighbours": r.mean_cka_neighbours,
                          "mean S2": r.mean_s2, "best layer (S2)": r.best_layer,
                          **{name: ", ".join(map(str, ids)) for name, ids in r.marks.items()}} for r in rows])


@dataclass(frozen=True)
class CkaCompartmentsResult:
    """What chapter 3 reports. ``W`` ``[k_max]``: the best within-compartment scatter
    for 1..k_max compartments; compartments are inclusive id ranges by the gain-ratio
    rule (``compartments``), the elbow rule, on debiased CKA, and with k = select.k."""

    ids: list[int]
    n_layers: int
    n_tokens: int
    hidden_size: int
    cka: Matrix
    cka_debiased: Matrix
    k_max: int
    W: list[float]
    compartments: Spans
    compartments_elbow: Spans
    compartments_debiased: Spans
    compartments_k: Spans
    select_k: int
    table: list[Compartment]
    cka_min: float
    cka_min_pair: tuple[int, int]
    cka_adjacent_median: float
    sharpest_step: tuple[int, int]
    sharpest_value: float
    cka_first_last: float
    explained: float
    default_layers: list[int] | None
    default_compartments: int
    debias_mean: float
    debias_max: float


def run(cfg: StudyConfig, cap: Any) -> CkaCompartmentsResult:
    """Chapter 3 on a capture (:class:`~activation_wave.study.steps.Captured`)."""
    m, cache = cfg.metrics, cap.cache
    N = cache.n_layers
    sample = cache.sample_tokens(m.token_budget, seed=m.seed, min_position=m.drop_first)
    H, ids = sample.hidden, list(sample.layers)
    stats = LayerStats.from_hidden(H, ids, N)
    C = stats.cka  # plain linear CKA of the mean-centred hidden states
    Cd = cka_matrix(H, debiased=True)
    k_max = min(len(ids), 12)
    W = compartment_costs(C, k_max)
    comps = segment_compartments(C, ids=ids, k_max=k_max)  # k by the gain-ratio rule
    default = default_or_none(N)
    off = ~np.eye(len(ids), dtype=bool)
    a, b = sorted(np.unravel_index(int(np.argmin(np.where(off, C, np.inf))), C.shape))
    keep = profile_positions(ids, N)  # the sharpest step is sought among entries on one scale
    steps = np.array([C[keep[i], keep[i + 1]] for i in range(len(keep) - 1)])
    j = int(np.argmin(steps))
    first = stats.pos(candidate_ids(ids)[:1])[0]
    diff = (C - Cd)[off]
    return CkaCompartmentsResult(
        ids=ids, n_layers=N, n_tokens=int(H.shape[1]), hidden_size=int(cap.target.hidden_size), cka=C.tolist(),
        cka_debiased=Cd.tolist(), k_max=k_max, W=np.asarray(W).tolist(), compartments=comps,
        compartments_elbow=segment_compartments(C, ids=ids, k_max=k_max, rule="elbow"),
        compartments_debiased=segment_compartments(Cd, ids=ids, k_max=k_max),
        compartments_k=segment_compartments(C, cfg.select.k, ids=ids), select_k=int(cfg.select.k),
        table=compartment_rows(stats, comps, mark={"EAGLE-3 default": default} if default else None),
        cka_min=float(C[off].min()), cka_min_pair=(int(ids[a]), int(ids[b])),
        cka_adjacent_median=float(np.median([C[i, i + 1] for i in range(len(ids) - 1)])),
        sharpest_step=(int(ids[keep[j]]), int(ids[keep[j + 1]])), sharpest_value=float(steps[j]),
        cka_first_last=float(C[first, keep[-1]]), explained=float(1 - W[len(comps) - 1] / W[0]),
        default_layers=default, default_compartments=len(set(span_of(default, comps))) if default else 0,
        debias_mean=float(diff.mean()), debias_max=float(np.abs(diff).max()))


def prose_values(r: CkaCompartmentsResult) -> dict[str, Any]:
    """The values the chapter's prose quotes, by the names it quotes them."""
    k = len(r.compartments)
    return dict(n_tokens=r.n_tokens, k_auto=k, k_elbow=len(r.compartments_elbow), k_max=r.k_max, cka_min=r.cka_min,
                cka_min_pair=f"{r.cka_min_pair[0]} and {r.cka_min_pair[1]}", cka_adjacent_median=r.cka_adjacent_median,
                sharpest_from=r.sharpest_step[0], sharpest_to=r.sharpest_step[1], sharpest_value=r.sharpest_value,
                cka_first_last=r.cka_first_last, compartments_text=span_text(r.compartments), W1=float(r.W[0]),
                W_auto=float(r.W[k - 1]), explained_auto=r.explained, compartments_elbow_text=span_text(r.compartments_elbow),
                default_n_compartments=r.default_compartments, default_layers=str(r.default_layers or []),
                select_k=r.select_k, compartments_k_text=span_text(r.compartments_k), hidden_size=r.hidden_size,
                debias_mean=r.debias_mean, debias_max=r.debias_max,
                debias_same="the same" if r.compartments_debiased == r.compartments else "different",
                compartments_d_text=span_text(r.compartments_debiased),
                # counts with their noun, for sentences that read right with one compartment too
                k_auto_text=counted(k, "compartment"), k_elbow_text=counted(len(r.compartments_elbow), "compartment"),
                default_compartments_text=counted(r.default_compartments, "compartment"))
