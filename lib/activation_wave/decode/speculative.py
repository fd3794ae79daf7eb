"""Speculative decoding with an EAGLE-3 head: chain or tree drafts, one verify per round.

:func:`speculate`, one prompt at a time (batch 1, as in the EAGLE papers):

* prefill: one target forward over the prompt gives the first token and the hidden
  states of every prompt position; the head reads them into its own KV cache;
* each round: the head drafts ``depth`` tokens (a chain), or an EAGLE-2-style dynamic
  tree of ``tree_size`` tokens (top-``tree_topk`` expansion per level, reranked by
  cumulative draft log-probability); the target checks the last committed token plus the
  whole draft in **one** forward with its KV cache (a tree uses a 4-D ancestor mask and
  depth positions); rejected positions are cut from both caches; the hidden states the
  target computed for accepted tokens become the head's next features.

Lossless: at T = 0 a draft token is accepted iff it equals the target's argmax, and the
bonus token is the target's argmax after the accepted prefix, so the output is plain
greedy decoding token for token (up to floating-point ties: a multi-token verify runs
different matmul shapes than one-token steps). At T > 0 chains use the standard rule
(:func:`speculative_sample`): accept draft ``d ~ q`` with probability
``min(1, p(d)/q(d))``, otherwise resample from ``norm(max(0, p - q))``; a full accept
adds a bonus token from ``p``. This samples exactly from the target's ``p`` (softmax of
logits / T, no top-k/top-p). Trees at T > 0 would need the multi-candidate recursive
rejection rule; this module falls back to a chain at T > 0 and says so in
``SpecResult.notes``. The baselines live in :mod:`.baselines`, the offline replay in
:mod:`.offline`, timing and the cost model in :mod:`.timing`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from activation_wave.core.config import SpecConfig
from activation_wave.decode.rounds import (DecodeStats, SpecResult, _cache_kw, _crop, _finish, _forward, _new_cache, _pick,
                       decode_prompts, summarise)
from activation_wave.models.drafter import DraftKV, Eagle3Drafter
from activation_wave.models.targets import Target

__all__ = ["speculate", "speculative_sample"]


def _keep_rows(cache: Any, start: int, rows: Sequence[int]) -> None:
    """Keep positions ``[0, start)`` and ``start + rows`` of a dynamic cache (tree acceptance)."""
    if list(rows) == list(range(len(rows))):
        _crop(cache, start + len(rows))
        return
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise NotImplementedError("tree verification needs a transformers DynamicCache with .layers "
                                  "(transformers >= 4.56); use chain drafting (spec.tree_topk=0)")
    idx = torch.cat([torch.arange(start), start + torch.as_tensor(list(rows))])
    for layer in layers:
        if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
            continue
        i = idx.to(layer.keys.device)
        layer.keys = layer.keys.index_select(-2, i)
        layer.values = layer.values.index_select(-2, i)


def _features(drafter: Eagle3Drafter, hidden_states: Sequence[Tensor], rows: Tensor | slice | None = None) -> Tensor:
    """Fused head features [1, m, H] from the target's hidden-state tuple (rows of the last forward)."""
    h = torch.cat([hidden_states[i] for i in drafter.spec.layers], dim=-1)
    if rows is not None:
        h = h[:, rows]
    return drafter.fuse(h.to(device=drafter.fc.weight.device, dtype=drafter.fc.weight.dtype))


def speculative_sample(p_logits: Tensor, q: Tensor, drafts: Sequence[int], temperature: float,
                       gen: torch.Generator | None = None) -> tuple[int, int]:
    """Standard speculative sampling for a chain (Leviathan et al. 2023; Chen et al. 2023).

    Args:
        p_logits: [D+1, V] target logits at the last committed token and each draft.
        q: [D, V] draft probabilities over the target vocabulary (0 outside the draft
            vocabulary) from which ``drafts`` were sampled.
        drafts: D draft token ids.
        temperature: > 0; ``p = softmax(p_logits / temperature)``.

    Returns ``(n_accepted, next_token)``; the emitted tokens ``drafts[:n] + [next]`` are
    distributed exactly as ``n + 1`` tokens sampled from ``p`` one by one.
    """
    p = torch.softmax(p_logits.float() / temperature, dim=-1)
    for i, d in enumerate(drafts):
        pd, qd = float(p[i, d]), float(q[i, d])
        u = float(torch.rand((), generator=gen))
        if qd > 0 and u * qd < pd:  # u < min(1, p/q) without dividing
            continue
        resid = (p[i] - q[i]).clamp(min=0)
        total = float(resid.sum())
        if total <= 0:  # p == q: rejection has probability 0; guard rounding
            resid, total = p[i], 1.0
        return i, int(torch.multinomial(resid / total, 1, generator=gen))
    return len(drafts), int(torch.multinomial(p[len(drafts)], 1, generator=gen))


def _draft_chain(drafter: Eagle3Drafter, o_last: Tensor, c: int, depth: int, dc: DraftKV, temperature: float,
                 gen: torch.Generator | None, threshold: float = 0.0) -> tuple[list[int], Tensor | None]:
    """Draft up to ``depth`` tokens from the head output o_last [1, 1, H] at position c - 1.

    Drafting stops early when the product of the head's probabilities of the drafted
    tokens falls below ``threshold`` (a dynamic draft length: a draft whose chain is
    unlikely to be accepted costs verify time and rarely pays). Returns target ids and,
    at T > 0, their proposal distributions q [n, V].
    """
    drafts: list[int] = []
    qs: list[Tensor] = []
    V = drafter.spec.vocab_size
    cum = 1.0
    for i in range(depth):
        lg = drafter.logits(o_last)[0, 0].float()  # [Vd]
        if temperature <= 0:
            d = int(lg.argmax())
            if threshold > 0:
                cum *= float(torch.softmax(lg, -1)[d])
        else:
            qd = torch.softmax(lg / temperature, -1)
            d = int(torch.multinomial(qd, 1, generator=gen))
            cum *= float(qd[d])
        if cum < threshold:
            break
        if temperature > 0:
            q = torch.zeros(V)
            q[drafter.draft_to_target.cpu()] = qd.cpu()
            qs.append(q)
        tid = int(drafter.draft_to_target[d])
        drafts.append(tid)
        if i + 1 < depth:  # entry (o_{c-1+i}, d_{i+1}) at position c + i predicts the next draft
            o_last = drafter.step(o_last, torch.tensor([[tid]]), torch.tensor([c + i]), dc)
    return drafts, (torch.stack(qs) if qs else None)


def _draft_tree(drafter: Eagle3Drafter, o_root: Tensor, c: int, depth: int, topk: int, size: int,
                dc: DraftKV) -> tuple[list[int], list[int], list[int]]:
    """EAGLE-2-style dynamic tree from the head output o_root [1, 1, H] at position c - 1.

    Level 1 holds the top-``topk`` tokens; each next level expands the ``topk`` best nodes
    (cumulative draft log-prob) of the previous one, each into its top-``topk`` children.
    The ``size`` best nodes overall are kept (ancestors first, since a child never scores
    above its parent). Returns (target tokens, parent index or -1, depth) of the kept
    nodes in breadth-first order.
    """
    tok: list[int] = []
    parent: list[int] = []
    level: list[int] = []
    score: list[float] = []
    slot: dict[int, int] = {}  # node -> draft-cache slot of the entry that expanded it
    out_of: dict[int, Tensor] = {}  # node -> head output that scored its children
    lp = torch.log_softmax(drafter.logits(o_root)[0, 0].float(), -1)
    v, i = lp.topk(min(topk, lp.numel()))
    for s, d in zip(v.tolist(), i.tolist()):
        tok.append(int(drafter.draft_to_target[d])); parent.append(-1); level.append(1); score.append(s)
    frontier = list(range(len(tok)))
    for lev in range(2, depth + 1):
        L = dc.length
        K = len(frontier)
        mask = torch.zeros(K, L + K, dtype=torch.bool)
        mask[:, :c] = True  # committed context
        for r, n in enumerate(frontier):
            mask[r, L + r] = True
            a = parent[n]
            while a >= 0:
                mask[r, slot[a]] = True
                a = parent[a]
        feats = torch.cat([out_of.get(parent[n], o_root) for n in frontier], dim=1)  # [1, K, H]
        o = drafter.step(feats, torch.tensor([[tok[n] for n in frontier]]),
                         torch.full((K,), c - 2 + lev), dc, mask)
        lp = torch.log_softmax(drafter.logits(o)[0].float(), -1)  # [K, Vd]
        cand: list[tuple[float, int, int]] = []
        for r, n in enumerate(frontier):
            slot[n] = L + r
            out_of[n] = o[:, r:r + 1]
            v, i = lp[r].topk(min(topk, lp.shape[1]))
            cand += [(score[n] + s, n, d) for s, d in zip(v.tolist(), i.tolist())]
        new = []
        for s, n, d in cand:
            tok.append(int(drafter.draft_to_target[d])); parent.append(n); level.append(lev); score.append(s)
            new.append(len(tok) - 1)
        frontier = sorted(new, key=lambda n: -score[n])[:topk]
    keep = set(sorted(range(len(tok)), key=lambda n: (-score[n], level[n], n))[:size])
    for n in list(keep):  # ancestors (a tie could have left one out)
        a = parent[n]
        while a >= 0 and a not in keep:
            keep.add(a)
            a = parent[a]
    order = sorted(keep, key=lambda n: (level[n], n))
    pos = {n: r for r, n in enumerate(order)}
    return [tok[n] for n in order], [pos[parent[n]] if parent[n] >= 0 else -1 for n in order], \
        [level[n] for n in order]


def _tree_mask(c: int, parents: Sequence[int], dtype: torch.dtype) -> Tensor:
    """4-D additive mask [1, 1, 1+M, c+1+M] for verifying root + M tree nodes after c cached tokens."""
    M = len(parents)
    allow = torch.zeros(1 + M, c + 1 + M, dtype=torch.bool)
    allow[:, : c + 1] = True  # context and the root (last committed token)
    for r, p in enumerate(parents):
        allow[1 + r, c + 1 + r] = True
        while p >= 0:
            allow[1 + r, c + 1 + p] = True
            p = parents[p]
    mask = torch.zeros(allow.shape, dtype=dtype)
    mask.masked_fill_(~allow, torch.finfo(dtype).min)
    return mask[None, None]


@torch.inference_mode()
def _speculate_one(target: Target, drafter: Eagle3Drafter, prompt: Sequence[int], cfg: SpecConfig,
                   stop: set[int], gen: torch.Generator | None, tree: bool, stats: DecodeStats) -> dict[str, Any]:
    model = target.model
    dev = next(model.parameters()).device
    kw = _cache_kw(model)
    T = cfg.temperature
    t0 = time.perf_counter()
    tc = _new_cache(model)
    n = len(prompt)
    out = _forward(model, torch.tensor([list(prompt)], device=dev), tc, kw, logits_to_keep=1)
    x = _pick(out.logits[0, -1], T, gen)
    tokens: list[int] = []
    done = _finish(tokens, [x], stop, cfg.max_new_tokens)
    dc = drafter.new_cache(n + cfg.max_new_tokens + 2 * max(cfg.depth, 1) * max(cfg.tree_topk, 1) + 8)
    pend_feat = _features(drafter, out.hidden_states)  # entries t = 0..n-1: (h_t, x_{t+1})
    pend_tok = list(prompt[1:]) + [x]
    start, accepts, drafted = 0, [], []
    while not done:
        o = drafter.step(pend_feat, torch.tensor([pend_tok]), torch.arange(start, start + len(pend_tok)), dc)
        c = start + len(pend_tok)  # target cache length; x (position c) is not in it yet
        depth = min(cfg.depth, cfg.max_new_tokens - len(tokens) - 1)  # no drafts past the limit
        use_tree = tree and depth > 1
        if use_tree:
            drafts, parents, levels = _draft_tree(drafter, o[:, -1:], c, depth, cfg.tree_topk, cfg.tree_size, dc)
            lev = torch.tensor([0] + levels)
            ver = _forward(model, torch.tensor([[x] + drafts], device=dev), tc, kw,
                           position_ids=(c + lev)[None].to(dev),
                           mask=_tree_mask(c, parents, next(model.parameters()).dtype).to(dev))
            g = ver.logits[0].argmax(-1).tolist()
            path, cur = [0], -1  # rows of the verify input; cur = accepted node (-1: root)
            while True:
                want = g[path[-1]]
                nxt = next((r for r, p in enumerate(parents) if p == cur and drafts[r] == want), None)
                if nxt is None:
                    break
                path.append(1 + nxt)
                cur = nxt
            a, bonus = len(path) - 1, g[path[-1]]
            accepted = [drafts[r - 1] for r in path[1:]]
            stats.add(max(levels), a)
            drafted.append(max(levels))
            _keep_rows(tc, c, path)
            rows: Tensor | slice = torch.tensor(path)
        else:
            drafts, q = _draft_chain(drafter, o[:, -1:], c, depth, dc, T, gen, cfg.draft_threshold) \
                if depth > 0 else ([], None)
            ver = _forward(model, torch.tensor([[x] + drafts], device=dev), tc, kw)
            if T <= 0:
                g = ver.logits[0].argmax(-1).tolist()
                a = 0
                while a < len(drafts) and drafts[a] == g[a]:
                    a += 1
                bonus = g[a]
            else:
                a, bonus = speculative_sample(ver.logits[0].cpu(), q if q is not None else torch.zeros(0),
                                              drafts, T, gen)
            accepted = drafts[:a]
            stats.add(len(drafts), a)
            drafted.append(len(drafts))
            _crop(tc, c + a + 1)
            rows = slice(0, a + 1)
        accepts.append(a)
        dc.crop(c)
        new = accepted + [bonus]
        done = _finish(tokens, new, stop, cfg.max_new_tokens)
        pend_feat = _features(drafter, ver.hidden_states, rows)
        pend_tok, start, x = new, c, bonus
    return {"token_ids": tokens, "wall_s": time.perf_counter() - t0, "rounds": len(accepts), "accepted": accepts,
            "drafted": drafted}


def speculate(target: Target, drafter: Eagle3Drafter, prompts_ids: Sequence[Sequence[int]], cfg: SpecConfig,
              ids: Sequence[str] | None = None, *, tree: bool | None = None) -> SpecResult:
    """Speculative decoding of each prompt (token ids, chat template applied) with ``drafter``.

    ``tree`` (default: ``cfg.tree_topk > 0``) drafts an EAGLE-2-style dynamic tree of
    ``cfg.tree_size`` tokens, depth ``cfg.depth``, instead of a chain; at T > 0 it falls
    back to a chain (noted in the result). Random draws use a generator seeded with
    ``cfg.seed + prompt index``, so results do not depend on the other prompts.
    """
    tree = cfg.tree_topk > 0 if tree is None else tree
    notes = []
    if tree and cfg.temperature > 0:
        notes.append("tree drafting at T > 0 is not implemented (needs recursive rejection over siblings); "
                     "ran chain drafting instead")
        tree = False
    if tree and (cfg.tree_topk < 1 or cfg.tree_size < 1):
        raise ValueError(f"tree drafting needs spec.tree_topk >= 1 and spec.tree_size >= 1, got "
                         f"{cfg.tree_topk} and {cfg.tree_size}")
    stats = DecodeStats(cfg.depth)
    drafter.ensure_target(target)
    drafter.eval()
    per, note = decode_prompts(target, prompts_ids, cfg, ids, lambda prompt, i, stop: _speculate_one(
        target, drafter, prompt, cfg, stop, torch.Generator().manual_seed(cfg.seed + i), tree, stats))
    notes.append(note)
    return summarise("eagle3-tree" if tree else "eagle3-chain", cfg.temperature, cfg.depth, per, stats.hist,
                      stats.drafted, stats.accepted, layers=list(drafter.spec.layers),
                      tree_size=cfg.tree_size if tree else 0, notes=notes)
