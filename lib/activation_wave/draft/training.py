"""Training a draft head on cached target hidden states (EAGLE-3's training-time test).

One optimiser step on a padded batch of records:

1. ``fused = drafter.fuse(h)`` for every position (``h`` = concatenated cached hidden
   states of the chosen layers);
2. :meth:`Eagle3Drafter.unroll` runs ``cfg.ttt_steps`` chained steps, each feeding the
   previous step's output back as the feature, as the head does when drafting;
3. step ``j`` at position ``t`` predicts token ``t + j + 2``; its loss is the cross
   entropy against the target's next-token distribution at position ``t + j + 1``,
   weighted ``cfg.step_decay ** j`` and summed over steps.

**Feature loss** (``cfg.feature_loss`` = lambda > 0, EAGLE-1/2's regression term): step
``j``'s output before the final norm is also regressed onto the target's last hidden
state before the final norm, ``h_N`` at position ``t + j + 1`` (the state whose LM head
gives the distribution step ``j`` is trained on; the capture's index N, schema 2):
``lambda * SmoothL1(out_j, h_N)``, averaged over the step's loss positions and features,
with the same decay weight. ``h_N`` is loaded with the chosen layers in one pass.

**Warm starts** (``cfg.head_init``, ``norm_init``, ``block_init``): see
:meth:`~activation_wave.models.drafter.Eagle3Drafter.from_target`.

**Targets.** With ``cfg.soft_targets`` (default) the target distribution is the cached
top-k (k = 8) of the target's log-probabilities, restricted to the draft vocabulary and
renormalised; otherwise the target's argmax (``top1``) is a hard label. Soft targets carry
more signal per token (the target's second choices), which matters with the few tens of
thousands of tokens a CPU study affords, and they are what EAGLE-3 trains on (the full
distribution, of which the top 8 hold almost all the mass). Positions whose target
argmax is outside the draft vocabulary are skipped, as in SpecForge: no draft token
could be accepted there at T = 0, and the renormalised remainder would teach the head a
token the target would not pick.

**Which positions.** Only positions whose target token is a response token
(``loss_mask``) count; train-split records only. Step 0 runs on every position (its keys
are the context of all later steps); later steps only on positions that can reach a
response token, which roughly halves the work for prompts as long as their responses.

**Speed.** Records are sorted by length and packed into batches of about
``cfg.batch_tokens`` tokens (less padding); matmuls run in bf16 autocast when
``cfg.dtype == "bf16"`` (AMX / AVX-512-bf16 CPUs do these several times faster than fp32),
with fp32 master weights and fp32 softmax / norms / loss. The LM head (the largest matmul)
only runs on positions with a loss.

>>> # doctest: +SKIP
>>> path = train_drafter(target, cache, [2, 15, 27], cfg.draft, "runs/drafters/default")
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from activation_wave.models.capture import CaptureCache
from activation_wave.core.config import DraftConfig
from activation_wave.models.drafter import Eagle3Drafter, save_drafter, select_draft_vocab
from activation_wave.decode.kernels import threads
from activation_wave.core.layers import layer_ids
from activation_wave.models.targets import Target
from activation_wave.core.progress import progress_bar
from activation_wave.models.records import Batch, DiskRecords, Record, collate, make_batches

__all__ = ["TrainingDiverged", "draft_vocab_for", "train_drafter", "ttt_loss"]


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite; nothing is saved (the message names the fix)."""


def draft_vocab_for(records: Sequence[Record], vocab_size: int, size: int, always: Sequence[int] = ()) -> Tensor:
    """Draft vocabulary: the ``size`` most frequent response tokens (ties: top-k appearances)."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    seen = torch.zeros(vocab_size, dtype=torch.long)
    for r in records:
        m = r.loss_mask
        counts += torch.bincount(r.input_ids[1:][m[:-1]], minlength=vocab_size)
        seen += torch.bincount(r.topk_ids[m].flatten(), minlength=vocab_size)
    return select_draft_vocab(counts, size, secondary=seen, always=always)


def _plan(batches: Sequence[Sequence[int]], lengths: Sequence[int], epochs: int, max_tokens: int,
          gen: torch.Generator) -> list[list[int]]:
    """The batch order of every epoch: a seeded permutation per epoch, ``epochs`` of them, or
    (``max_tokens`` > 0) as many as reach that many training tokens, the last cut where the
    budget is met (a seeded subset of its batches). Drawn up front so that the learning-rate
    schedule knows its length; the permutations are the ones epoch-by-epoch drawing gives."""
    sizes = [sum(lengths[i] for i in b) for b in batches]
    plan: list[list[int]] = []
    done = 0
    while (len(plan) < epochs) if max_tokens <= 0 else (done < max_tokens):
        order = torch.randperm(len(batches), generator=gen).tolist()
        if max_tokens > 0:
            cut = 0
            while cut < len(order) and done < max_tokens:
                done += sizes[order[cut]]
                cut += 1
            order = order[:cut]
        plan.append(order)
    return plan


def _targets(drafter: Eagle3Drafter, batch: Batch, j: int) -> tuple[Tensor, Tensor]:
    """Step-j target positions u = sub + j + 1 [B, S] and which of them carry a loss [B, S]."""
    T = batch.input_ids.shape[1]
    u = batch.sub + j + 1
    uc = u.clamp(max=T - 1)
    ok = batch.sub_ok & (u < batch.lengths[:, None]) & batch.loss_mask.gather(1, uc)
    ok &= drafter.t2d[batch.top1.gather(1, uc)]
    return uc, ok


def ttt_loss(drafter: Eagle3Drafter, batch: Batch, n_steps: int, decay: float, soft: bool = True,
             feature: float = 0.0) -> tuple[Tensor, list[dict[str, float]]]:
    """Weighted training-time-test loss of one batch and per-step statistics.

    Returns ``(loss, stats)``: ``loss = sum_j decay**j * (mean CE_j + feature * FL_j)``
    where ``FL_j`` = SmoothL1 of step ``j``'s pre-norm output [n, H] against ``batch.last``
    (``h_N`` at the step's target positions; only computed when ``feature`` > 0);
    ``stats[j]`` has the step's ``loss``, ``acc`` (draft argmax == target argmax, on the
    first 256 positions), ``n`` (positions) and, with ``feature`` > 0, ``feature_loss``.
    """
    if feature > 0 and batch.last is None:
        raise ValueError("ttt_loss(feature > 0) needs the records' h_N: load them with load_records(..., last=True)")
    fused = drafter.fuse(batch.hidden)
    outs = drafter.unroll(fused, batch.input_ids, batch.lengths, n_steps, sub=batch.sub)
    t2d = drafter.target_to_draft
    total = fused.new_zeros((), dtype=torch.float32)
    stats = []
    for j, out in enumerate(outs):
        u, ok = _targets(drafter, batch, j)
        n = int(ok.sum())
        if n == 0:
            stats.append({"loss": float("nan"), "acc": float("nan"), "n": 0,
                          **({"feature_loss": float("nan")} if feature > 0 else {})})
            continue
        rows, cols = ok.nonzero(as_tuple=True)
        uu = u[rows, cols]
        logp = torch.log_softmax(drafter.logits(out[rows, cols]).float(), dim=-1)  # [n, Vd]
        label = t2d[batch.top1[rows, uu]]
        acc = (logp[:256].detach().argmax(-1) == label[:256]).float().mean()  # a subsample: argmax over Vd is costly
        if soft:
            ids = t2d[batch.topk_ids[rows, uu]]  # [n, k], -1 outside the draft vocab
            w = torch.where(ids >= 0, batch.topk_logprobs[rows, uu].exp(), 0.0)
            w = w / w.sum(-1, keepdim=True)
            ce = -(w * logp.gather(1, ids.clamp(min=0))).sum(-1).mean()
        else:
            ce = F.nll_loss(logp, label)
        stat = {"loss": float(ce.detach()), "acc": float(acc), "n": n}
        if feature > 0:
            fl = F.smooth_l1_loss(out[rows, cols].float(), batch.last[rows, uu].float())  # mean over [n, H]
            ce = ce + feature * fl
            stat["feature_loss"] = float(fl.detach())
        total = total + decay ** j * ce
        stats.append(stat)
    return total, stats


def _continue_from(drafter: Eagle3Drafter, parent: Path, layers: Sequence[int]) -> None:
    """Start ``drafter`` from the weights of the finished drafter in ``parent`` (``cfg.init_from``:
    continued training). The parent must read the same layers and have the same draft vocabulary
    (both follow from the capture and the config); otherwise, or when it has not finished, this
    raises naming the fix. The frozen embeddings stay the target's."""
    from activation_wave.models.drafter import load_drafter

    if not (parent / "train_log.json").exists():
        raise ValueError(f"draft.init_from = {parent.name!r}: no finished drafter at {parent}; train that drafter "
                         "first (it is the earlier stage of this one), or set draft.init_from to ''")
    base = load_drafter(parent)
    if list(base.spec.layers) != list(layers) or not torch.equal(base.draft_to_target.cpu(),
                                                                  drafter.draft_to_target.cpu()):
        raise ValueError(f"draft.init_from = {parent.name!r} reads layers {list(base.spec.layers)} with another "
                         f"draft vocabulary or layers than this drafter ({list(layers)}); continue a drafter of "
                         "the same layers, capture and draft.draft_vocab")
    state = {k: v for k, v in base.state_dict().items() if not k.startswith("embed_tokens")}
    missing, unexpected = drafter.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if not k.startswith("embed_tokens")]:
        raise ValueError(f"draft.init_from = {parent.name!r}: its weights do not fit this drafter (missing "
                         f"{missing}, unexpected {unexpected}); continue a drafter of the same recipe")


def _lr_at(step: int, total: int, base: float, schedule: str = "cosine", warmup_frac: float = 0.05) -> float:
    """``cosine``: linear warm-up over ``warmup_frac`` of the steps (at least one), then cosine
    decay to 10% of ``base``; ``constant``: ``base`` at every step."""
    if schedule == "constant":
        return base
    if schedule != "cosine":
        raise ValueError(f"unknown lr schedule {schedule!r}: use 'cosine' or 'constant' (draft.lr_schedule)")
    warm = max(1, int(warmup_frac * total))
    if step < warm:
        return base * (step + 1) / warm
    frac = (step - warm) / max(1, total - warm)
    return base * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def train_drafter(target: Target, cache: CaptureCache, layers: Sequence[int], cfg: DraftConfig,
                  out_dir: str | Path, *, progress: bool = True, records_fraction: float | None = None) -> Path:
    """Train an EAGLE-3-style head on the train split of ``cache``; return its folder.

    ``records_fraction`` (default ``cfg.records_fraction``) < 1 trains on that share of
    the train records (a subset drawn with ``cfg.seed``; the draft vocabulary comes from
    the subset too): how tau grows with training data. ``cfg.train_records`` = n > 0 keeps
    the first n train records first (nested data sizes from one capture); ``cfg.max_tokens``
    stops at a budget of training tokens instead of after ``cfg.epochs``.

    Writes ``model.safetensors``, ``config.json``, ``provenance.json`` (via
    :func:`~activation_wave.models.drafter.save_drafter`) and ``train_log.json`` (loss and
    accuracy per unrolled step and per epoch, optimiser-step losses, tokens/s, wall
    time, and the offline acceptance on the eval split). Deterministic for ``cfg.seed``
    at a fixed thread count.
    """
    from activation_wave.models.prompts import eos_ids
    from activation_wave.decode.offline import offline_acceptance

    t_start = time.time()
    records_fraction = cfg.records_fraction if records_fraction is None else records_fraction
    layers = layer_ids(layers, cache.n_layers)  # a no-op for ids checked where they entered
    if cache.manifest["model"]["fingerprint"] != target.fingerprint:
        raise ValueError(f"cache {cache.path} was captured from target {cache.manifest['model']['fingerprint']}, "
                         f"not from the given target {target.fingerprint}; capture it with this target")
    out_dir = Path(out_dir)
    store = torch.bfloat16 if cfg.dtype == "bf16" else torch.float32
    eval_depth = cfg.eval_depth or cfg.ttt_steps
    with threads(cfg.threads):
        # read from the shards a batch at a time: memory does not grow with the data
        on_disk = DiskRecords(cache, layers, "train", dtype=store, last=cfg.feature_loss > 0)
        if not len(on_disk):
            raise ValueError(f"cache {cache.path} has no train-split records to train a drafter on")
        if not 0.0 < records_fraction <= 1.0:
            raise ValueError(f"records_fraction must be in (0, 1], got {records_fraction}")
        keep = list(range(min(len(on_disk), cfg.train_records or len(on_disk))))
        if records_fraction < 1.0:
            n_keep = max(1, round(records_fraction * len(keep)))
            pick = torch.randperm(len(keep), generator=torch.Generator().manual_seed(cfg.seed))[:n_keep]
            keep = sorted(pick.tolist())
        records = on_disk.view(keep)
        meta = records.view(hidden=False)  # what the vocabulary and the counts read
        vocab = target.vocab_size
        draft_ids = draft_vocab_for(meta, vocab, cfg.draft_vocab, always=sorted(eos_ids(target)))
        device = next(target.model.parameters()).device
        drafter = Eagle3Drafter.from_target(target.model, layers, draft_ids, seed=cfg.seed, fused_norm=cfg.fused_norm,
                                            head_init=cfg.head_init, norm_init=cfg.norm_init,
                                            block_init=cfg.block_init).to(device).train()
        if cfg.init_from:
            _continue_from(drafter, cache.path / "drafters" / cfg.init_from, layers)
        params = drafter.trainable_parameters()
        opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.0)
        lengths = records.lengths()
        batches = make_batches(lengths, cfg.batch_tokens)
        gen = torch.Generator().manual_seed(cfg.seed)
        plan = _plan(batches, lengths, cfg.epochs, cfg.max_tokens, gen)
        total_steps = sum(len(p) for p in plan)
        n_loss = covered = 0
        in_vocab = drafter.t2d.cpu()
        for r in meta:  # one more pass over the records' metadata
            n_loss += int(r.loss_mask.sum())
            covered += int(in_vocab[r.top1[r.loss_mask]].sum())
        if covered == 0:
            raise ValueError(f"none of the {n_loss} training positions has its target token in the draft vocabulary "
                             f"of {len(draft_ids)} tokens (draft.draft_vocab = {cfg.draft_vocab}), so there is nothing "
                             f"to learn; raise it, e.g. --set draft.draft_vocab={min(vocab, 8192)}")
        log: dict[str, Any] = {
            "layers": layers, "config": asdict(cfg), "records_fraction": records_fraction,
            "n_records": len(records), "n_batches": len(batches),
            "n_tokens": sum(lengths), "n_loss_tokens": n_loss,
            "max_tokens": cfg.max_tokens, "steps": total_steps, **({"init_from": cfg.init_from} if cfg.init_from else {}),
            "tokens_trained": sum(sum(lengths[i] for i in batches[b]) for p in plan for b in p),
            "draft_vocab_coverage": covered / max(1, n_loss),
            "threads": torch.get_num_threads(), "history": [], "epochs": [],
        }
        autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.dtype == "bf16")
        has_eval = any(r.get("split") == "eval" for r in cache.records)
        bar = progress_bar(total=total_steps, desc=f"draft {list(layers)}", unit="batch", disable=not progress)
        step = 0
        # where the optimisation time goes (summed over steps): reading and collating the batch
        # (shards on disk for DiskRecords), forward + loss, backward, clip + optimiser step
        split = {"data_s": 0.0, "forward_s": 0.0, "backward_s": 0.0, "optimizer_s": 0.0}
        for epoch, order in enumerate(plan):
            sums = [[0.0, 0.0, 0] for _ in range(cfg.ttt_steps)]
            feature_sums = [0.0] * cfg.ttt_steps
            t_epoch, tokens = time.time(), 0
            for bi in order:
                t0 = time.perf_counter()
                batch = collate([records[i] for i in batches[bi]], cfg.ttt_steps).to(device)
                t1 = time.perf_counter()
                split["data_s"] += t1 - t0
                for g in opt.param_groups:
                    g["lr"] = _lr_at(step, total_steps, cfg.lr, cfg.lr_schedule, cfg.warmup_frac)
                with autocast:
                    loss, stats = ttt_loss(drafter, batch, cfg.ttt_steps, cfg.step_decay, cfg.soft_targets,
                                           cfg.feature_loss)
                if not torch.isfinite(loss.detach()):
                    raise TrainingDiverged(
                        f"drafter training on layers {list(layers)} diverged: the loss is {float(loss.detach())} at "
                        f"epoch {epoch + 1}, step {step + 1} of {total_steps} (draft.lr = {cfg.lr:g}); nothing was "
                        f"saved. Lower the learning rate, e.g. --set draft.lr={min(cfg.lr / 10, 3e-4):g}")
                t2 = time.perf_counter()
                split["forward_s"] += t2 - t1
                opt.zero_grad(set_to_none=True)
                if not loss.requires_grad:  # no position of this batch has a target in the draft vocabulary
                    step += 1
                    bar.update(1)
                    continue
                loss.backward()
                t3 = time.perf_counter()
                split["backward_s"] += t3 - t2
                if cfg.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
                opt.step()
                split["optimizer_s"] += time.perf_counter() - t3
                step += 1
                for j, s in enumerate(stats):
                    if s["n"]:
                        sums[j][0] += s["loss"] * s["n"]
                        sums[j][1] += s["acc"] * s["n"]
                        sums[j][2] += s["n"]
                        if cfg.feature_loss > 0:
                            feature_sums[j] += s["feature_loss"] * s["n"]
                tokens += stats[0]["n"]
                log["history"].append(round(float(loss.detach()), 5))
                bar.update(1)
                bar.set_postfix(loss=f"{float(loss.detach()):.3f}", acc0=f"{stats[0]['acc']:.2f}",
                                tok_s=f"{tokens / (time.time() - t_epoch):.0f}")
            dt = time.time() - t_epoch
            log["epochs"].append({
                "epoch": epoch, "wall_s": round(dt, 2), "loss_tokens": tokens,
                "tokens_per_s": round(tokens / dt, 1),
                "loss_by_step": [round(a / max(1, n), 4) for a, _, n in sums],
                "acc_by_step": [round(c / max(1, n), 4) for _, c, n in sums],
                "lr_last": opt.param_groups[0]["lr"],
            })
            if cfg.feature_loss > 0:  # the regression term per step, before the lambda weight
                log["epochs"][-1]["feature_loss_by_step"] = [round(f / max(1, n), 5)
                                                             for f, (_, _, n) in zip(feature_sums, sums)]
            if cfg.eval_every and (epoch + 1) % cfg.eval_every == 0 and epoch + 1 < len(plan) and has_eval:
                drafter.eval()
                ev = offline_acceptance(drafter, cache, depth=eval_depth, split="eval", threshold=cfg.eval_threshold)
                log["epochs"][-1]["eval_tau_offline"] = round(ev["tau_offline"], 4)
                log["epochs"][-1]["eval_acceptance"] = [round(a, 4) for a in ev["acceptance_by_position"]]
                drafter.train()
        bar.close()
        train_s = sum(e["wall_s"] for e in log["epochs"])  # optimisation only, without periodic evals
        drafter.eval()
        log["train_wall_s"] = round(train_s, 2)
        log["time_split"] = {k: round(v, 6) for k, v in split.items()}
        # Response (loss) positions processed per second of training, all epochs.
        log["tokens_per_s"] = round(sum(e["loss_tokens"] for e in log["epochs"]) / max(1e-9, train_s), 1)
        if has_eval:
            log["eval"] = offline_acceptance(drafter, cache, depth=eval_depth, split="eval",
                                             threshold=cfg.eval_threshold)
        log["wall_s"] = round(time.time() - t_start, 2)
    provenance = {
        "target_fingerprint": target.fingerprint, "target": target.name, "target_provenance": target.provenance,
        "data_hash": cache.manifest["data_hash"], "cache": str(cache.path), "draft_config": asdict(cfg),
        "layers": layers, "layer_convention": "hidden_states index (vLLM)",
        # 2: index N was the last block before the final norm (1: transformers' normed entry)
        "capture_schema": cache.manifest["schema_version"],
        "train": {k: log[k] for k in ("n_records", "n_loss_tokens", "draft_vocab_coverage", "tokens_per_s",
                                      "train_wall_s")},
    }
    save_drafter(drafter, out_dir, provenance)
    from activation_wave.core import files

    files.write_json(out_dir / "train_log.json", log, indent=1)  # last: marks the drafter finished
    return out_dir
