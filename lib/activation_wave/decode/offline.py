"""Offline acceptance: the rounds of an online greedy run, replayed from cached responses.

At T = 0 the target's continuation is its cached greedy response, so the rounds of an
online run can be replayed with head forwards only (:meth:`Eagle3Drafter.unroll` gives
every chain at once), comparing drafts to the cached ``top1``. The same stop and depth
rules are applied, so ``tau_offline`` should match the online tau on the same prompts up
to rare numerical ties.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from activation_wave.models.capture import CaptureCache
from activation_wave.decode.rounds import DecodeStats
from activation_wave.models.drafter import Eagle3Drafter
from activation_wave.models.records import DiskRecords, collate, make_batches

__all__ = ["offline_acceptance"]


@torch.inference_mode()
def offline_acceptance(drafter: Eagle3Drafter, cache: CaptureCache, depth: int, split: str | None = "eval",
                       *, max_new_tokens: int | None = None, ids: Sequence[str] | None = None,
                       threshold: float = 0.0, batch_tokens: int = 4096) -> dict[str, Any]:
    """Acceptance of chain drafts at T = 0, from cached greedy responses and head forwards only.

    For each record, the rounds an online greedy run would make are replayed: the first
    anchor is the last prompt position, a round at anchor ``t`` drafts ``min(depth,
    remaining - 1)`` tokens and accepts the longest prefix equal to the cached target
    argmax (``top1``), then moves to ``t + accepted + 1``. ``max_new_tokens`` cuts the
    responses as an online run with that limit would; ``ids`` keeps only those records;
    ``threshold`` applies the dynamic draft length of ``SpecConfig.draft_threshold`` (the
    stop decisions that matter use the same, correct, tokens online and offline, so tau
    is unchanged by replaying; only the count of drafted tokens past a mismatch differs).

    Returns ``tau_offline`` (tokens per verify, as in :class:`SpecResult`),
    ``acceptance_by_position`` (per drafted position, over the replayed rounds),
    ``accept_hist``, and the same over *every* response position as anchor
    (``tau_all_anchors``, ``acceptance_all_anchors``: denser, not what a run sees).
    """
    was_training = drafter.training
    drafter.eval()
    # read a batch at a time from the shards (a large capture's split need not fit in memory)
    disk = DiskRecords(cache, drafter.spec.layers, split, dtype=drafter.fc.weight.dtype)
    if ids is not None:
        wanted = set(ids)
        disk = disk.view([i for i, (_, _, _, r) in enumerate(disk.index) if cache.records[r]["id"] in wanted])
    lengths = disk.lengths()
    stats = DecodeStats(depth)
    all_drafted, all_acc = [0] * depth, [0] * depth
    per_record = []
    new_total = rounds_total = 0
    for group in make_batches(lengths, batch_tokens):
        recs = [disk[i] for i in group]
        b = collate(recs, depth).to(drafter.fc.weight.device)
        outs = drafter.unroll(drafter.fuse(b.hidden), b.input_ids, b.lengths, depth, sub=b.sub)
        lps = [torch.log_softmax(drafter.logits(o).float(), -1).max(-1) for o in outs]
        preds = torch.stack([drafter.draft_to_target[lp.indices] for lp in lps], -1)  # [B, S, D] target ids
        # how many drafts the dynamic-length rule lets through: cumulative head probability >= threshold
        cum = torch.stack([lp.values for lp in lps], -1).cumsum(-1)  # [B, S, D] log
        n_ok = (cum >= math.log(threshold)).sum(-1) if threshold > 0 else torch.full(cum.shape[:2], depth)
        T = b.input_ids.shape[1]
        u = b.sub[..., None] + torch.arange(1, depth + 1, device=b.sub.device)  # [B, S, D] target-argmax positions
        ok = (u <= (b.lengths - 2)[:, None, None]) & b.sub_ok[..., None]
        match = (preds == b.top1.gather(1, u.clamp(max=T - 1).flatten(1)).view_as(u)) & ok
        for bi, r in enumerate(recs):
            m = match[bi].tolist()
            allow = n_ok[bi].tolist()
            first = int(b.sub[bi, 0])
            L = len(r) - r.prompt_len  # response tokens
            limit = L if max_new_tokens is None else max_new_tokens  # what an online run knows
            L = min(L, limit)
            # every anchor: the longest accepted prefix where i positions exist
            for s in range(int(b.sub_ok[bi].sum())):
                t = first + s
                if t < r.prompt_len - 1 or t > len(r) - 3:
                    continue
                avail = min(depth, len(r) - 2 - t)
                a = _prefix(m[s][:avail])
                for i in range(avail):
                    all_drafted[i] += 1
                    all_acc[i] += int(i < a)
            # the online walk
            t, produced, accepts = r.prompt_len - 1, 1, []
            while produced < L:
                k = min(depth, limit - produced - 1, allow[t - first])  # beyond an end token nothing matches
                a = _prefix(m[t - first][:k]) if k > 0 else 0
                stats.add(k, a)
                produced += a + 1
                accepts.append(a)
                t += a + 1
            rounds = len(accepts)
            produced = min(produced, L)
            new_total += produced
            rounds_total += rounds
            per_record.append({"index": r.index, "id": r.id, "tokens": produced, "rounds": rounds, "accepted": accepts,
                               "tau": (produced - 1) / rounds if rounds else float("nan")})
    if was_training:
        drafter.train()
    per_record.sort(key=lambda p: p["index"])
    acc_all = [a / d if d else float("nan") for a, d in zip(all_acc, all_drafted)]
    return {
        "depth": depth, "split": split, "n_records": len(per_record), "max_new_tokens": max_new_tokens,
        "tau_offline": (new_total - len(per_record)) / rounds_total if rounds_total else float("nan"),
        "acceptance_by_position": [a / d if d else float("nan") for a, d in zip(stats.accepted, stats.drafted)],
        "accept_hist": stats.hist, "rounds": rounds_total, "new_tokens": new_total,
        "tau_all_anchors": 1 + sum(math.prod(_cond(acc_all)[:i + 1]) for i in range(depth)) if depth else 1.0,
        "acceptance_all_anchors": acc_all, "per_record": per_record,
    }


def _prefix(flags: Sequence[bool]) -> int:
    n = 0
    for f in flags:
        if not f:
            break
        n += 1
    return n


def _cond(acc: Sequence[float]) -> list[float]:
    """P(prefix >= i+1) per position -> conditional acceptance P(i+1 | first i accepted)."""
    out, prev = [], 1.0
    for a in acc:
        a = 0.0 if math.isnan(a) else a
        out.append(a / prev if prev > 0 else 0.0)
        prev = a
    return out
