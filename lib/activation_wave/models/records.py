"""Cached records as drafters see them, and padded batches of them.

A :class:`Record` is one capture-cache record reduced to what a draft head reads (the
concatenated hidden states of its layers, the prompt length, the loss mask and the
target's next-token top-k); :func:`make_batches` groups records by length and
:func:`collate` pads a group into a :class:`Batch`. Training (:mod:`.training`) and
offline acceptance (:mod:`.offline`) both read records through this module, so neither
imports the other's internals.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from activation_wave.models.capture import CaptureCache

__all__ = ["Record", "Batch", "DiskRecords", "load_records", "make_batches", "collate"]


@dataclass
class Record:
    """One cached record, reduced to what drafters need."""

    index: int
    id: str
    prompt_len: int
    input_ids: Tensor  # [T] long
    hidden: Tensor  # [T, k*H] concatenated hidden states (layer order ascending)
    loss_mask: Tensor  # [T] bool: position predicts a response token
    top1: Tensor  # [T] long: target argmax next token
    topk_ids: Tensor  # [T, k] long
    topk_logprobs: Tensor  # [T, k]
    last: Tensor | None = None  # [T, H] h_N, the last block's output before the final norm (feature loss)

    def __len__(self) -> int:
        return int(self.input_ids.numel())


@dataclass
class Batch:
    """Right-padded records. B records, T = longest, S = positions of steps >= 1."""

    input_ids: Tensor  # [B, T]
    hidden: Tensor  # [B, T, k*H]
    lengths: Tensor  # [B]
    prompt_lens: Tensor  # [B]
    loss_mask: Tensor  # [B, T] bool
    top1: Tensor  # [B, T] target ids
    topk_ids: Tensor  # [B, T, k] target ids
    topk_logprobs: Tensor  # [B, T, k]
    sub: Tensor  # [B, S] positions where chains are anchored
    sub_ok: Tensor  # [B, S] bool: real (not padding) anchors
    last: Tensor | None = None  # [B, T, H] h_N before the final norm, when the records carry it

    def to(self, device: torch.device | str) -> Batch:
        return Batch(**{k: None if v is None else v.to(device) for k, v in vars(self).items()})


def load_records(cache: CaptureCache, layers: Sequence[int], split: str | None = "train",
                 dtype: torch.dtype = torch.float32, *, last: bool = False) -> list[Record]:
    """All records of ``split`` with their concatenated hidden states ([T, k*H], ``dtype``), in memory.

    ``last`` also loads ``h.{N}`` into :attr:`Record.last`: the cache's index N is the last
    block's output *before* the final norm (capture schema 2), the regression target of the
    feature loss. :class:`DiskRecords` gives the same records without holding them.
    """
    return list(DiskRecords(cache, layers, split, dtype, last=last))


class DiskRecords(Sequence[Record]):
    """The records of ``split``, read from the capture's shards when indexed: memory of one
    record, not of the data set, however many records the capture holds.

    Each record's rows are read with safetensors' lazy slices (only its rows of only the
    asked layers), so a batch costs a few small reads; record ``i`` equals ``load_records``'s
    ``i``-th (same order, same values), so training from disk gives the same weights.
    ``hidden=False`` skips the hidden states (an empty ``[T, 0]`` tensor): what the draft
    vocabulary and the counts read.
    """

    def __init__(self, cache: CaptureCache, layers: Sequence[int], split: str | None = "train",
                 dtype: torch.dtype = torch.float32, *, last: bool = False, hidden: bool = True):
        from safetensors import safe_open

        self.layers, self.dtype, self.hidden = [int(i) for i in layers], dtype, hidden
        n = cache.n_layers
        self.last = n if last else None
        cache.check_layers(self.layers + ([n] if last else []))
        self._open = lambda f: safe_open(str(cache.path / f), framework="pt")
        metas = cache.records
        #: (shard file, first row, stop row, record index) per record of the split, in cache order
        self.index: list[tuple[str, int, int, int]] = []
        for s in cache.manifest["shards"]:
            a, b = s["records"]
            if split is not None and not any(metas[r]["split"] == split for r in range(a, b)):
                continue  # no record of this split: its shard is not even opened
            with self._open(s["file"]) as fh:
                rec = fh.get_tensor("record").long()
            starts = torch.searchsorted(rec, torch.arange(a, b + 1)).tolist()
            self.index += [(s["file"], starts[r - a], starts[r - a + 1], r) for r in range(a, b)
                           if starts[r - a + 1] > starts[r - a] and (split is None or metas[r]["split"] == split)]
        self._metas = metas

    def __len__(self) -> int:
        return len(self.index)

    def view(self, keep: Sequence[int] | None = None, *, hidden: bool | None = None) -> DiskRecords:
        """The records ``keep`` (positions in this view, in that order; all by default), with or
        without their hidden states: the same shards, no second pass over them."""
        out = copy.copy(self)
        if keep is not None:
            out.index = [self.index[i] for i in keep]
        if hidden is not None:
            out.hidden = hidden
        return out

    def lengths(self) -> list[int]:
        return [stop - first for _, first, stop, _ in self.index]

    def __getitem__(self, i: int) -> Record:  # type: ignore[override]
        file, a, b, r = self.index[i]
        with self._open(file) as fh:
            def rows(name: str) -> Tensor:
                return fh.get_slice(name)[a:b]
            hid = (torch.cat([rows(f"h.{j}").float() for j in self.layers], dim=-1).to(self.dtype) if self.hidden
                   else torch.zeros(b - a, 0, dtype=self.dtype))
            last = rows(f"h.{self.last}").float().to(self.dtype) if self.last is not None else None
            meta = self._metas[r]
            return Record(r, meta["id"], meta["prompt_len"], rows("input_ids").long(), hid, rows("loss_mask").bool(),
                          rows("top1").long(), rows("topk_ids").long(), rows("topk_logprobs"), last)


def make_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Group record indices, sorted by length, so that ``B * T_max <= batch_tokens``."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        if cur and (len(cur) + 1) * lengths[i] > batch_tokens:
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    return batches


def collate(recs: Sequence[Record], n_steps: int) -> Batch:
    """Pad records into a :class:`Batch`; anchors start ``n_steps`` before the response."""
    B, T = len(recs), max(len(r) for r in recs)
    k = recs[0].topk_ids.shape[1]
    ids = torch.zeros(B, T, dtype=torch.long)
    hid = torch.zeros(B, T, recs[0].hidden.shape[1], dtype=recs[0].hidden.dtype)
    lm = torch.zeros(B, T, dtype=torch.bool)
    top1 = torch.zeros(B, T, dtype=torch.long)
    tki = torch.zeros(B, T, k, dtype=torch.long)
    tkl = torch.full((B, T, k), -math.inf)
    for b, r in enumerate(recs):
        n = len(r)
        ids[b, :n], hid[b, :n], lm[b, :n] = r.input_ids, r.hidden, r.loss_mask
        top1[b, :n], tki[b, :n], tkl[b, :n] = r.top1, r.topk_ids, r.topk_logprobs
    lengths = torch.tensor([len(r) for r in recs])
    plens = torch.tensor([r.prompt_len for r in recs])
    # A chain anchored at t has targets at t+1 .. t+n_steps; it matters if one of them is
    # a response position (>= prompt_len - 1) and t + 1 <= T - 2 (last position with a target).
    start = (plens - 1 - n_steps).clamp(min=0)
    stop = (lengths - 2).clamp(min=0)  # exclusive
    width = max(int((stop - start).clamp(min=1).max()), 1)
    ar = torch.arange(width)
    sub = (start[:, None] + ar[None]).clamp(max=T - 1)
    sub_ok = ar[None] < (stop - start)[:, None]
    last = None
    if recs[0].last is not None:
        last = torch.zeros(B, T, recs[0].last.shape[1], dtype=recs[0].last.dtype)
        for b, r in enumerate(recs):
            last[b, :len(r)] = r.last
    return Batch(ids, hid, lengths, plens, lm, top1, tki, tkl, sub, sub_ok, last)
