"""Timing and memory of the metric code at the study's size, each against a baseline in the same run.

Data: random Gaussian hidden states (float32), ``31 layers x 4096 tokens x 576`` wide,
the shape of SmolLM2-135M's ``hidden_states`` at the default token budget. The
timings do not depend on the values (no data-dependent iteration counts), so
random data are fine; the numbers are those of the machine that ran them.

Entries (each: ``seconds``, ``baseline`` {name, seconds, extrapolated?}, ``ratio`` =
baseline / ours, ``peak_rss_mb`` = peak resident memory above the level before the call):

* ``layer_entropies``: alpha = 1 entropy of every layer, smaller-side (d x d) route,
  vs the n x n Gram route (one layer timed, x L).
* ``products_and_cka``: ``M``, ``t`` and the full CKA matrix in one tiled pass
  (``LayerStats``), vs pairwise feature-form ``linear_cka`` (a sample of pairs, x L(L+1)/2).
* ``renyi2_all_triples``: closed-form S2 of all 4060 triples of 30 layers given ``M``,
  vs one eigenproblem per triple (a sample, x 4060); also reported including ``M``.
* ``concat_entropy_alpha1``: one alpha = 1 concatenation entropy of a triple (d-side,
  3d x 3d) vs the n x n Gram route.
* ``scaling``: time of ``pair_products`` and ``layer_entropies`` against n, L and d
  (baseline = the smallest size; ``exponent`` = log-log slope).

Run: ``wave bench --only metrics``. BLAS/LAPACK threads default to 1 (``bench.threads``):
on a shared machine multi-threaded eigensolvers are much slower under contention.
"""

from __future__ import annotations

import os
import platform
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from activation_wave.measure import entropy as E
from activation_wave.measure.cka import linear_cka
from activation_wave.measure.layer_stats import LayerStats
from activation_wave.benchmarks.peak import PeakRSS

SIZE = {"L": 31, "n": 4096, "d": 576}
SCALE_BASE = {"L": 8, "n": 1024, "d": 256}
SCALE_STEPS = {"n": [512, 1024, 2048, 4096], "L": [4, 8, 16, 31], "d": [64, 128, 256, 576]}


def measure(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """``(seconds, peak RSS above the starting level in MB, result)`` of ``fn()``; RSS is
    sampled every 5 ms (torch's allocations are invisible to tracemalloc), so very short
    spikes can be missed."""
    with PeakRSS(interval=0.005) as mem:
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
    return dt, mem.peak - mem.start, out


def _entry(
    seconds: float, peak: float, base_name: str, base_seconds: float, extrapolated: str | None = None, **extra: Any
) -> dict:
    return {
        "seconds": round(seconds, 4),
        "peak_rss_mb": round(peak, 1),
        "baseline": {"name": base_name, "seconds": round(base_seconds, 4), "extrapolated": extrapolated},
        "ratio": round(base_seconds / seconds, 2) if seconds > 0 else None,
        **extra,
    }


def _scaling(rng: torch.Generator) -> dict:
    out: dict[str, Any] = {}
    for what, fn in (("pair_products", lambda H: E.pair_products(H)), ("layer_entropies", E.layer_entropies)):
        for axis, steps in SCALE_STEPS.items():
            times, peaks = [], []
            for v in steps:
                shape = {**SCALE_BASE, axis: v}
                H = torch.randn(shape["L"], shape["n"], shape["d"], generator=rng)
                dt, pk, _ = measure(lambda: fn(H))
                times.append(round(dt, 4))
                peaks.append(round(pk, 1))
            slope = float(np.polyfit(np.log(steps), np.log(times), 1)[0])
            out[f"{what}_vs_{axis}"] = {
                "axis": axis, "values": steps, "fixed": {k: v for k, v in SCALE_BASE.items() if k != axis},
                "seconds": times, "peak_rss_mb": peaks,
                "baseline": {"name": f"smallest {axis}", "seconds": times[0]},
                "ratio": [round(t / times[0], 2) for t in times], "exponent": round(slope, 2),
            }
    return out


def run(results: dict | None = None, *, size: dict | None = None, threads: int = 1, seed: int = 0,
        pair_sample: int = 8, eig_sample: int = 3, scaling: bool = True) -> dict:
    """Run every measurement; fill and return ``results`` (a new dict if None)."""
    results = {} if results is None else results
    size = {**SIZE, **(size or {})}
    L, n, d = size["L"], size["n"], size["d"]
    torch.set_num_threads(threads)
    rng = torch.Generator().manual_seed(seed)
    pick = random.Random(seed)
    t_start = time.perf_counter()
    results["meta"] = {
        "data": f"random Gaussian hidden states, float32, [L={L}, n={n}, d={d}] (SmolLM2-135M shape); "
        "timings do not depend on the values",
        "torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "machine": platform.machine(), "cpu_count": os.cpu_count(), "torch_threads": threads,
        "load_average": os.getloadavg(), "seed": seed,
    }
    H = torch.randn(L, n, d, generator=rng)
    entries: dict[str, Any] = {}

    # 1. single-layer entropies: d x d route vs n x n Gram route
    dt, pk, ent = measure(lambda: E.layer_entropies(H))
    g1, _, g_val = measure(lambda: E.matrix_entropy(H[0], via="gram"))
    assert abs(g_val - ent[0]) < 1e-8, "Gram and covariance routes disagree"
    entries["layer_entropies"] = _entry(dt, pk, "n x n Gram route (1 layer timed)", g1 * L, f"x{L} layers")

    # 2. M, t and CKA in one tiled pass vs pairwise feature-form CKA
    stats = LayerStats.from_hidden(H)
    dt, pk, _ = measure(stats._products)
    pairs = [(a, b) for a in range(L) for b in range(a, L)]
    sample = pick.sample(pairs, min(pair_sample, len(pairs)))
    tp, _, vals = measure(lambda: [linear_cka(H[a], H[b]) for a, b in sample])
    err = max(abs(v - stats.cka[a, b]) for v, (a, b) in zip(vals, sample))
    entries["products_and_cka"] = _entry(
        dt, pk, "pairwise feature-form linear_cka", tp / len(sample) * len(pairs),
        f"{len(sample)} pairs timed, x{len(pairs)}", max_abs_diff=err,
    )
    t_products = dt

    # 3. all triples of layers 1..L-1: closed form vs eigen per subset
    pool = list(range(1, L))
    dt, pk, (sets, s2) = measure(lambda: E.renyi2_all_subsets(stats.M, stats.t, 3, pool=pool))
    sub = [sets[i] for i in pick.sample(range(len(sets)), eig_sample)]
    te, _, eig = measure(lambda: [E.concat_entropy([H[i] for i in s], 2.0) for s in sub])
    closed = [E.renyi2_subset(stats.M, stats.t, s) for s in sub]
    base = te / len(sub) * len(sets)
    entries["renyi2_all_triples"] = _entry(
        dt, pk, "eigenproblem per triple (alpha=2)", base, f"{len(sub)} triples timed, x{len(sets)}",
        n_subsets=len(sets), seconds_including_products=round(dt + t_products, 3),
        ratio_including_products=round(base / (dt + t_products), 1),
        max_abs_diff=float(max(abs(a - b) for a, b in zip(eig, closed))),
    )

    # 4. alpha = 1 concatenation entropy of one triple: 3d x 3d vs n x n
    s = [1, L // 2, L - 3]
    dt, pk, v1 = measure(lambda: E.concat_entropy([H[i] for i in s], 1.0))
    P = torch.cat([E.prepare(H[i]) for i in s], 1)
    tg, _, vg = measure(lambda: E.renyi_entropy(E._eig_prepared(P, "gram"), 1.0))
    entries["concat_entropy_alpha1"] = _entry(
        dt, pk, "n x n Gram route, same triple", tg, None,
        all_triples_hours=round(dt * len(sets) / 3600, 2), max_abs_diff=abs(v1 - vg),
    )
    del H, stats, P

    if scaling:
        entries["scaling"] = _scaling(rng)
    results["entries"] = entries
    results["meta"]["total_seconds"] = round(time.perf_counter() - t_start, 1)
    return results
