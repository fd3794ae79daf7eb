"""Statistics over any number of tokens in bounded memory.

The chapters compute their statistics on a seeded token subsample (``token_budget``
tokens, memory O(budget)). For checks at scale, and to show that memory does not grow
with the token count, this module streams token chunks from a capture cache through
fixed-size accumulators:

* :class:`CovarianceEntropy`: per layer, the ``d x d`` second-moment matrix of the
  prepared rows (centred with a mean from a first pass, then L2-normalised), whose
  spectrum equals the Gram matrix's non-zero spectrum; memory ``L d^2``;
* :class:`~activation_wave.measure.cka.MinibatchCKA`: unbiased HSIC averaged over minibatches;
  memory ``L^2`` plus one batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from activation_wave.models.capture import CaptureCache
from activation_wave.measure.cka import MinibatchCKA
from activation_wave.measure.entropy import renyi_entropy


def stream_chunks(cache: CaptureCache, layers: Sequence[int], n_tokens: int, chunk: int = 4096) -> Iterator[np.ndarray]:
    """Yield ``[L, c, d]`` float32 chunks of response positions, cycling over the cache
    until ``n_tokens`` have been produced (a cycle re-reads the shards in order)."""
    produced, buf, held = 0, [], 0
    while produced < n_tokens:
        any_rows = False
        for shard in cache.iter_shards(layers, fields=("loss_mask",)):
            keep = shard["loss_mask"].bool()
            rows = np.stack([shard[f"h.{i}"][keep].numpy() for i in layers])  # [L, r, d]
            any_rows |= rows.shape[1] > 0
            buf.append(rows)
            held += rows.shape[1]
            while held >= chunk and produced < n_tokens:
                cat = np.concatenate(buf, axis=1)
                take = min(chunk, n_tokens - produced)
                yield cat[:, :take]
                produced += take
                buf, held = [cat[:, take:]], cat.shape[1] - take
            if produced >= n_tokens:
                return
        if not any_rows:
            raise ValueError("the capture cache has no response positions to stream")


class CovarianceEntropy:
    """Streaming matrix entropy of each layer from ``d x d`` accumulators (two passes).

    ``mean`` ``[L, d]`` is the centre from a first pass (rows are normalised after
    centring, so it must be known up front).
    """

    def __init__(self, mean: np.ndarray):
        self.mean = torch.as_tensor(mean, dtype=torch.float32)[:, None, :]  # [L, 1, d]
        L, _, d = self.mean.shape
        self.acc = torch.zeros(L, d, d, dtype=torch.float64)
        self.n = 0

    def add(self, chunk: np.ndarray) -> None:
        X = torch.as_tensor(chunk, dtype=torch.float32) - self.mean
        X = X / X.norm(dim=-1, keepdim=True).clamp_min(1e-30)
        self.acc += torch.bmm(X.transpose(1, 2), X).double()  # fp32 products, fp64 sums
        self.n += X.shape[1]

    def result(self, alpha: float = 1.0) -> np.ndarray:
        out = []
        for C in self.acc:
            ev = torch.linalg.eigvalsh(C).clamp_min(0)
            out.append(renyi_entropy(ev / ev.sum(), alpha))
        return np.array(out)


def streaming_stats(cache: CaptureCache, n_tokens: int, layers: Sequence[int] | None = None, *, chunk: int = 4096,
                    cka_batch: int = 256, alpha: float = 1.0,
                    on_chunk: Callable[[int], None] | None = None) -> dict[str, np.ndarray]:
    """Layer entropies and minibatch CKA over ``n_tokens`` streamed tokens.

    ``on_chunk(tokens_so_far)`` is called after each chunk of the second pass (the
    memory benchmark samples resident memory there).
    """
    layers = list(cache.layer_ids if layers is None else layers)
    total, count = None, 0
    for ch in stream_chunks(cache, layers, n_tokens, chunk):  # pass 1: the centre
        s = ch.astype(np.float64).sum(1)
        total = s if total is None else total + s
        count += ch.shape[1]
    mean = total / count
    ent, cka = CovarianceEntropy(mean), MinibatchCKA(len(layers))
    seen = 0
    for ch in stream_chunks(cache, layers, n_tokens, chunk):  # pass 2: accumulators
        ent.add(ch)
        for s in range(0, ch.shape[1] - cka_batch + 1, cka_batch):
            cka.update(ch[:, s:s + cka_batch])
        seen += ch.shape[1]
        if on_chunk:
            on_chunk(seen)
    return {"layers": np.array(layers), "entropy": ent.result(alpha), "cka": cka.result(), "n_tokens": seen}
