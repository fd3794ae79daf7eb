"""How stable a layer selection is when the prompts are resampled (bootstrap), and
paired comparisons of fixed sets scored on the same resamples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from activation_wave.measure.entropy import Array
from activation_wave.measure.layer_stats import LayerStats
from activation_wave.select.selection import Selection, select_layers

__all__ = ["Stability", "bootstrap_methods", "paired_difference"]


@dataclass(frozen=True)
class Stability:
    """How often each set and each layer is chosen when prompts are resampled.

    ``sets``: DataFrame (ids, count, freq) sorted by frequency; ``layers``: Series
    layer id -> fraction of replicates that chose it; ``full``: the selection on all data.
    """

    sets: pd.DataFrame
    layers: pd.Series
    full: Selection
    n_boot: int

    def to_dict(self) -> dict:
        return {
            "sets": [{"ids": list(r.ids), "count": int(r.count), "freq": float(r.freq)} for r in self.sets.itertuples()],
            "layers": {int(k): float(v) for k, v in self.layers.items()},
            "full": self.full.to_dict(),
            "n_boot": self.n_boot,
        }


def bootstrap_methods(
    H: Array,
    groups: Array,
    methods: Sequence[str],
    k: int = 3,
    n_boot: int = 20,
    seed: int = 0,
    *,
    ids: Sequence[int] | None = None,
    n_blocks: int | None = None,
    lam: float = 1.0,
    alpha: float = 2.0,
    max_tokens: int | None = None,
    track: Mapping[str, Sequence[int]] | None = None,
    scores_out: list | None = None,
) -> dict[str, Stability]:
    """Rerun several selection rules on bootstrap resamples of the prompts, sharing each replicate's statistics.

    Each replicate resamples prompts with replacement and computes one
    :class:`LayerStats` that every method reads (``lam`` goes to ``"combined"`` only),
    so the cost is ``n_boot`` statistics, not ``n_boot x len(methods)``. With
    ``max_tokens`` the tokens are first subsampled (seeded) to at most that many: the
    statistics cost grows as ``n^2``.

    ``track``: name -> layer ids of fixed sets (e.g. the EAGLE-3 default, or each
    method's choice on all the data) whose closed-form ``S_2`` is recorded in every
    replicate; pass a list as ``scores_out`` to receive one dict per replicate
    (``{name: S_2}``, plus ``"chosen:<method>"`` for the replicate's own choice), for
    paired comparisons between sets on the same resamples.
    """
    g = np.asarray(groups).reshape(-1)
    if g.shape[0] != len(H[0]):
        raise ValueError(f"groups has {g.shape[0]} entries but H has {len(H[0])} tokens")
    Hn = np.asarray(H)
    rng = np.random.default_rng(seed)
    if max_tokens is not None and Hn.shape[1] > max_tokens:
        rows = np.sort(rng.choice(Hn.shape[1], size=int(max_tokens), replace=False))
        Hn, g = Hn[:, rows], g[rows]
    prompts = [np.flatnonzero(g == u) for u in np.unique(g)]

    def pick(stats: LayerStats) -> dict[str, tuple[int, ...]]:
        return {m: select_layers(stats, k, m, lam=lam if m == "combined" else None, alpha=alpha, seed=seed).ids
                for m in methods}

    full_stats = LayerStats.from_hidden(Hn, ids, n_blocks)
    full = {m: select_layers(full_stats, k, m, lam=lam if m == "combined" else None, alpha=alpha, seed=seed)
            for m in methods}
    chosen: dict[str, list[tuple[int, ...]]] = {m: [] for m in methods}
    for _ in range(n_boot):
        rows = np.concatenate([prompts[j] for j in rng.integers(0, len(prompts), len(prompts))])
        st = LayerStats.from_hidden(Hn[:, rows], ids, n_blocks)
        picked = pick(st)
        for m, sel in picked.items():
            chosen[m].append(sel)
        if scores_out is not None:
            rec = {name: st.concat_entropy(lay, 2.0) for name, lay in (track or {}).items()}
            rec.update({f"chosen:{m}": st.concat_entropy(sel, 2.0) for m, sel in picked.items()})
            scores_out.append(rec)
    out = {}
    for m in methods:
        counts = pd.Series(chosen[m], dtype=object).value_counts()
        sets = pd.DataFrame({"ids": list(counts.index), "count": counts.values, "freq": counts.values / max(n_boot, 1)})
        pool = full[m].params["candidates"]
        layers = pd.Series({i: sum(i in c for c in chosen[m]) / max(n_boot, 1) for i in pool}, name="freq")
        out[m] = Stability(sets, layers, full[m], n_boot)
    return out


def paired_difference(records: Sequence[Mapping[str, float]], a: str, b: str, *, level: float = 0.9) -> dict[str, float]:
    """Bootstrap comparison of two tracked sets scored on the same replicates.

    ``records`` is the ``scores_out`` list of :func:`bootstrap_methods`. Returns the mean
    of ``S_2(a) - S_2(b)`` over replicates, its ``level`` percentile interval
    (``lo``, ``hi``), and ``frac_b_at_least_a``: the share of replicates in which ``b``
    scores at least as high as ``a``.
    """
    if not records:
        raise ValueError("paired_difference needs bootstrap records (scores_out of bootstrap_methods)")
    missing = [x for x in (a, b) if x not in records[0]]
    if missing:
        raise ValueError(f"{missing} not tracked; tracked: {sorted(records[0])}")
    d = np.array([r[a] - r[b] for r in records])
    q = (1 - level) / 2
    return {"mean": float(d.mean()), "lo": float(np.quantile(d, q)), "hi": float(np.quantile(d, 1 - q)),
            "frac_b_at_least_a": float((d <= 0).mean()), "n_boot": int(len(d))}
