"""Capture: one forward pass per record, every layer's hidden states, cached on disk.

For each record (chat-templated prompt + the target's response) the cache holds, at
every position ``t``:

* ``h.{i}``: ``hidden_states[i][t]`` for every layer index ``i`` in ``0..N`` (see
  :mod:`activation_wave.core.layers`), fp16 unless a value overflows it (then bf16).
  ``h.{N}`` is the output of the last block *before* the final norm (the input of that
  norm, recorded by :func:`last_block_output`): the tensor vLLM (and llama.cpp, where the
  target's graph exposes it) capture for index N. transformers' own ``hidden_states[N]``
  has the norm applied; it is kept as ``h.normed`` (:data:`NORMED`) for analyses that
  label it as such, and is never a layer index;
* ``input_ids``, ``record`` (index into the manifest's record list), ``position``;
* ``loss_mask``: True where the hidden state at ``t`` predicts a *response* token,
  i.e. ``prompt_len - 1 <= t <= len - 2``; the statistics and drafter losses use these;
* ``next_entropy``: entropy (nats) of the target's next-token distribution at ``t``;
* ``top1``, ``topk_ids``, ``topk_logprobs``: the target's argmax and top-k log-probs.

The next-token statistics are computed where they are used, at the ``loss_mask``
positions: the LM head and the softmax run on those rows only (a prompt is often
longer than its response). Elsewhere ``next_entropy`` is NaN, ``top1`` and
``topk_ids`` are -1 and ``topk_logprobs`` is -inf (``manifest["stats_at"]``).

On disk: ``shard_XXXXX.safetensors`` holding a fixed group of records, each with a
``.json`` sidecar (its sha256) written after it, and ``manifest.json`` written last
(schema version, model fingerprint, data hash, parameters, shapes, shard hashes).
A shard whose sidecar is missing or whose hash does not match is recomputed, so an
interrupted run resumes and a corrupted shard is rebuilt. Only one shard is in memory
at a time.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from activation_wave.core import files
from activation_wave.core.config import CaptureConfig
from activation_wave.core.layers import check_capture_layers
from activation_wave.models.prompts import Response
from activation_wave.core.hashing import file_sha256
from activation_wave.core.paths import cache_root
from activation_wave.models.targets import Target
from activation_wave.core.progress import progress_bar

#: 2: ``h.{N}`` is the pre-norm output of the last block and ``h.normed`` the normed
#: entry; 1: ``h.{N}`` was transformers' normed ``hidden_states[N]``.
SCHEMA_VERSION = 2
FP16_MAX = 65504.0
#: Cache key suffix of transformers' normed last entry ``hidden_states[N]`` (``h.normed``),
#: usable wherever a layer id is (``iter_shards``, ``sample_tokens``) for labelled analyses.
NORMED = "normed"
#: Attribute names of the final norm on ``model.base_model``, by model family.
FINAL_NORM_NAMES = ("norm", "final_layernorm", "ln_f", "final_layer_norm", "norm_f")


class CacheError(RuntimeError):
    """A capture cache is missing, incomplete or does not match its manifest."""


def stale_schema_message(where: Path, found: Any) -> str:
    """Why a cache of another schema cannot be read, and the fix."""
    why = (" (schema 1 stored transformers' normed hidden_states[N] as h.N; schema 2 stores the pre-norm "
           "last block there, as engines capture it, and the normed entry as h.normed)") if found == 1 else ""
    return (f"{where}: capture schema {found} != {SCHEMA_VERSION}{why}; the cache is stale: rerun `wave capture` "
            "(or the study step that captures) to rebuild it")


# ----------------------------------------------------------------------------- forward


def final_norm(model: Any) -> torch.nn.Module:
    """The norm applied after the last decoder block (``model.base_model.norm`` for Llama,
    Gemma, Mistral, Qwen; ``ln_f`` for GPT-2 ...). Raises ValueError naming the fix."""
    base = getattr(model, "base_model", model)
    for owner in (base, getattr(base, "decoder", None)):
        for name in FINAL_NORM_NAMES:
            mod = getattr(owner, name, None) if owner is not None else None
            if isinstance(mod, torch.nn.Module):
                return mod
    raise ValueError(f"{type(model).__name__}: no final norm found (looked for {', '.join(FINAL_NORM_NAMES)} "
                     "on model.base_model); add its attribute name to capture.FINAL_NORM_NAMES")


@contextmanager
def last_block_output(model: Any) -> Iterator[list[torch.Tensor]]:
    """Record the input of the final norm during one forward: the last block's output
    before the norm ``[B, T, H]``, which is what vLLM captures for index N.

    >>> with last_block_output(model) as box:               # doctest: +SKIP
    ...     out = model(ids, output_hidden_states=True)
    >>> hs = engine_hidden_states(out.hidden_states, box)  # doctest: +SKIP
    """
    box: list[torch.Tensor] = []
    handle = final_norm(model).register_forward_pre_hook(lambda _mod, args: box.append(args[0]))
    try:
        yield box
    finally:
        handle.remove()


def engine_hidden_states(hidden_states: Sequence[torch.Tensor], box: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """``hidden_states`` (N + 1 entries) with the last one replaced by the pre-norm output
    recorded in ``box`` (:func:`last_block_output`): index 0..N then means what engines capture."""
    if len(box) != 1:
        raise RuntimeError(f"the final norm ran {len(box)} times in one forward (expected once); "
                           "this model's last entry cannot be recorded with a norm hook")
    return (*hidden_states[:-1], box[0])


def pad_right(seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids [B, W] right-padded with 0 and their attention mask (1 on real tokens)."""
    ids = torch.zeros((len(seqs), max(len(s) for s in seqs)), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.as_tensor(list(s))
        mask[i, : len(s)] = 1
    return ids, mask


@torch.no_grad()
def forward_batch(model: Any, seqs: Sequence[Sequence[int]], prompt_lens: Sequence[int], topk: int = 8) -> dict[str, torch.Tensor]:
    """Run one right-padded batch and return the per-position tensors of all its tokens.

    Returns a dict of tensors over the concatenated real positions of all sequences
    (``T = sum(len(s))``): ``hidden`` [N+2, T, H] float32 (``hidden_states`` 0..N with N
    taken before the final norm, then transformers' normed entry), ``input_ids`` [T],
    ``position`` [T], ``loss_mask`` [T] bool, ``next_entropy`` [T], ``top1`` [T],
    ``topk_ids`` [T, k], ``topk_logprobs`` [T, k], ``seq`` [T] (index in the batch).
    """
    device = next(model.parameters()).device
    ids, mask = pad_right(seqs)
    width = ids.shape[1]
    # the decoder alone: the LM head runs below on the rows whose statistics are kept
    with last_block_output(model) as box:
        out = model.base_model(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True,
                               use_cache=False)
    keep = mask.bool()
    # [N+2, T, H]: hidden_states 0..N (N pre-norm), then transformers' normed last entry
    states = (*engine_hidden_states(out.hidden_states, box), out.hidden_states[-1])
    hidden = torch.stack([h.float().cpu()[keep] for h in states])
    pos = torch.arange(width).expand(len(seqs), width)[keep]
    seq = torch.arange(len(seqs)).unsqueeze(1).expand(len(seqs), width)[keep]
    lens = torch.tensor([len(s) for s in seqs])[seq]
    plens = torch.tensor(list(prompt_lens))[seq]
    loss_mask = (pos >= plens - 1) & (pos <= lens - 2)
    last = out.last_hidden_state[keep.to(device)][loss_mask.to(device)]  # [n_loss, H]
    ent, vals, idx = _next_token_stats(head_logits(model, last).float().cpu(), topk)
    T = len(pos)
    entropy = torch.full((T,), math.nan)
    top_values = torch.full((T, topk), -math.inf)
    top_indices = torch.full((T, topk), -1, dtype=torch.long)
    entropy[loss_mask], top_values[loss_mask], top_indices[loss_mask] = ent, vals, idx
    return {"hidden": hidden, "input_ids": ids[keep], "position": pos, "loss_mask": loss_mask,
            "next_entropy": entropy, "top1": top_indices[:, 0], "topk_ids": top_indices.to(torch.int32),
            "topk_logprobs": top_values, "seq": seq}


def head_logits(model: Any, last_hidden: torch.Tensor) -> torch.Tensor:
    """The causal LM's logits from its decoder's final (normed) hidden states: the
    output embedding, then the final logit soft-capping where the model has one
    (Gemma 2/3), exactly as ``model(...)`` computes them."""
    logits = model.get_output_embeddings()(last_hidden)
    cap = getattr(model.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def _next_token_stats(logits: torch.Tensor | Sequence[torch.Tensor], topk: int, rows: int = 256,
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Entropy (nats) and top-k log-probs of each row of ``logits`` ([T, V], or a list of
    [n_i, V] pieces taken in order).

    Works in blocks of rows so the [rows, V] temporaries stay small, with one
    exponential per logit: ``e = exp(x - max)``, ``lse = max + log sum e`` and
    ``H = lse - sum(e * x) / sum(e)`` (the last sum as a batched dot product).
    """
    pieces = [logits] if isinstance(logits, torch.Tensor) else list(logits)
    ent, vals, idx = [], [], []
    for piece in pieces:
        for block in piece.split(rows):
            m = block.amax(dim=-1, keepdim=True)
            e = (block - m).exp_()
            z = e.sum(dim=-1, keepdim=True)
            lse = m + z.log()
            dot = torch.bmm(e.unsqueeze(1), block.unsqueeze(2)).view(-1, 1)
            ent.append((lse - dot / z).squeeze(-1))
            v, i = block.topk(topk, dim=-1)
            vals.append(v - lse)
            idx.append(i)
    return torch.cat(ent), torch.cat(vals), torch.cat(idx)


def _storage_dtype(x: torch.Tensor, policy: str) -> torch.dtype:
    if policy == "fp32":
        return torch.float32
    if policy == "bf16":
        return torch.bfloat16
    if policy == "fp16":
        return torch.float16
    return torch.float16 if float(x.abs().max()) < FP16_MAX else torch.bfloat16


# ----------------------------------------------------------------------------- writing


def data_hash(responses: Sequence[Response]) -> str:
    """Hash of the exact token sequences captured."""
    h = hashlib.sha256()
    for r in responses:
        h.update(json.dumps([r.id, r.prompt_ids, r.response_ids]).encode())
    return h.hexdigest()[:16]


def cache_dir_for(target: Target, responses: Sequence[Response], cfg: CaptureConfig) -> Path:
    params = asdict(cfg)
    if not cfg.layers:  # every layer: the key every capture had before a subset could be asked for
        del params["layers"]
    key = hashlib.sha256(json.dumps({"model": target.fingerprint, "data": data_hash(responses),
                                     "cfg": params, "schema": SCHEMA_VERSION}, sort_keys=True).encode()).hexdigest()[:16]
    return cache_root() / "capture" / f"{target.slug}-{key}"


def _write_shard(target: Target, recs: Sequence[Response], first: int, cfg: CaptureConfig, path: Path) -> dict[str, Any]:
    """Forward a group of records in batches and write one shard atomically."""
    parts: list[dict[str, torch.Tensor]] = []
    for b in range(0, len(recs), cfg.batch_size):
        batch = recs[b:b + cfg.batch_size]
        seqs = [(r.prompt_ids + r.response_ids)[: cfg.max_length] for r in batch]
        out = forward_batch(target.model, seqs, [len(r.prompt_ids) for r in batch], cfg.topk)
        out["record"] = (out.pop("seq") + first + b).to(torch.int32)
        if cfg.layers:  # keep only the asked layers, before the shard's batches pile up
            out["hidden"] = out["hidden"][list(cfg.layers)]
        parts.append(out)
    cat = {k: torch.cat([p[k] for p in parts], dim=1 if k == "hidden" else 0) for k in parts[0]}
    hidden = cat.pop("hidden")
    tensors: dict[str, torch.Tensor] = {}
    dtypes = {}
    # 0..N, then the normed last entry; or the asked subset
    names = list(cfg.layers) if cfg.layers else [*range(hidden.shape[0] - 1), NORMED]
    for i, name in enumerate(names):
        dt = _storage_dtype(hidden[i], cfg.dtype)
        tensors[f"h.{name}"] = hidden[i].to(dt).contiguous()
        dtypes[name] = str(dt).removeprefix("torch.")
    tensors.update({
        "input_ids": cat["input_ids"].to(torch.int32), "record": cat["record"],
        "position": cat["position"].to(torch.int32), "loss_mask": cat["loss_mask"].to(torch.uint8),
        "next_entropy": cat["next_entropy"].float(), "top1": cat["top1"].to(torch.int32),
        "topk_ids": cat["topk_ids"], "topk_logprobs": cat["topk_logprobs"].float(),
    })
    tmp = path.with_suffix(".tmp")
    try:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
    except SafetensorError as exc:  # disk full, quota, I/O error: an OSError the CLI reports in one line
        tmp.unlink(missing_ok=True)
        raise os_error_of(exc, tmp) from None
    os.replace(tmp, path)
    info = {"file": path.name, "schema_version": SCHEMA_VERSION, "sha256": file_sha256(path),
            "records": [first, first + len(recs)],
            "n_tokens": int(hidden.shape[1]), "n_loss_tokens": int(cat["loss_mask"].sum()), "dtypes": dtypes}
    side = path.with_suffix(".json")
    files.write_json(side, info, indent=None)
    return info


os_error_of = files.os_error_of  # the OSError inside a safetensors write error


def response_positions(r: Response, max_length: int) -> int:
    """Positions of ``r`` that predict a response token once truncated to ``max_length``
    (the ``loss_mask`` count: ``prompt_len - 1 <= t <= len - 2``)."""
    length = min(len(r.prompt_ids) + len(r.response_ids), max_length)
    return max(0, length - len(r.prompt_ids))


def warn_truncated(responses: Sequence[Response], max_length: int) -> int:
    """Warn (one line on stderr) about records that ``max_length`` truncation leaves with no
    response position, so they add nothing to the statistics or drafters; returns their count."""
    empty = [r for r in responses if r.response_ids and response_positions(r, max_length) == 0]
    if empty:
        longest = max(len(r.prompt_ids) for r in empty)
        print(f"[capture] warning: {len(empty)} of {len(responses)} records keep no response position after "
              f"truncation to capture.max_length = {max_length} (prompts up to {longest} tokens); raise it, e.g. "
              f"--set capture.max_length={longest + 64}, or shorten those prompts", file=sys.stderr)
    return len(empty)


def capture(target: Target, responses: Sequence[Response], cfg: CaptureConfig, *, out_dir: Path | None = None,
            progress: bool = True, max_shards: int | None = None) -> CaptureCache:
    """Capture (or reuse) the hidden-state cache of ``responses``; returns the open cache.

    ``max_shards`` stops after writing that many new shards (used to simulate an
    interruption in tests); the manifest is only written once every shard is valid.
    """
    if cfg.topk > target.vocab_size:
        raise ValueError(f"capture.topk = {cfg.topk} is larger than the vocabulary of {target.name} ({target.vocab_size} "
                         f"tokens); choose at most {target.vocab_size}, e.g. --set capture.topk=8")
    check_capture_layers(cfg.layers, target.n_layers, model=target.name)  # as dry-run and check_fit do
    out = out_dir or cache_dir_for(target, responses, cfg)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _capture_into(out, target, responses, cfg, progress=progress, max_shards=max_shards)
    except BaseException:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # a capture that failed before its first shard leaves no empty folder
        raise


def _capture_into(out: Path, target: Target, responses: Sequence[Response], cfg: CaptureConfig, *,
                  progress: bool, max_shards: int | None) -> CaptureCache:
    """:func:`capture` into the existing folder ``out``."""
    dhash = data_hash(responses)
    manifest_path = out / "manifest.json"
    if manifest_path.exists():
        try:
            cache = CaptureCache(out)
            if cache.manifest["data_hash"] == dhash and cache.manifest["model"]["fingerprint"] == target.fingerprint:
                cache.verify()
                return cache
        except CacheError as exc:
            print(f"[capture] {exc}; rebuilding the affected shards", file=sys.stderr)
        manifest_path.unlink(missing_ok=True)
    files.check_writable(out)  # a read-only cache fails here, not after the first shard's forward passes
    warn_truncated(responses, cfg.max_length)
    n = len(responses)
    groups = [(i, responses[i:i + cfg.records_per_shard]) for i in range(0, n, cfg.records_per_shard)]
    shards = []
    written = 0
    t0 = time.time()
    bar = progress_bar(groups, desc="capture", unit="shard", disable=not progress)
    for idx, (first, recs) in enumerate(bar):
        path = out / f"shard_{idx:05d}.safetensors"
        side = path.with_suffix(".json")
        info = json.loads(side.read_text()) if side.exists() else None
        valid = (info is not None and info.get("schema_version") == SCHEMA_VERSION and path.exists()
                 and info.get("records") == [first, first + len(recs)] and file_sha256(path) == info["sha256"])
        if not valid:
            if max_shards is not None and written >= max_shards:
                bar.close()
                raise KeyboardInterrupt(f"stopped after {written} new shards (max_shards)")
            info = _write_shard(target, recs, first, cfg, path)
            written += 1
        elif hasattr(bar, "resumed"):  # a shard kept from an earlier run costs no time: not in the estimate
            bar.resumed()
        shards.append(info)
    bar.close()
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "model": {"name": target.name, "fingerprint": target.fingerprint, "provenance": target.provenance,
                  "n_layers": target.n_layers, "hidden_size": target.hidden_size, "vocab_size": target.vocab_size},
        "layer_convention": "hidden_states index: 0 = embeddings, i = output of block i-1, N = last block before "
                            f"the final norm (as engines capture it); h.{NORMED} = transformers' normed hidden_states[N]",
        "stats_at": "loss_mask positions (NaN / -1 / -inf elsewhere)",
        "data_hash": dhash,
        "params": asdict(cfg),
        "records": [{"id": r.id, "category": r.category, "split": r.split, "source": r.source,
                     "prompt_len": len(r.prompt_ids), "length": min(len(r.prompt_ids) + len(r.response_ids), cfg.max_length)}
                    for r in responses],
        "shards": shards,
        "n_tokens": sum(s["n_tokens"] for s in shards),
        "n_loss_tokens": sum(s["n_loss_tokens"] for s in shards),
        "seconds_this_run": round(time.time() - t0, 2),
    }
    files.write_json(manifest_path, manifest, indent=1)  # written last: the cache is complete
    return CaptureCache(out)


# ----------------------------------------------------------------------------- reading


@dataclass
class CaptureRecord:
    """All cached tensors of one record (prompt + response), hidden states as float32."""

    index: int
    id: str
    split: str
    category: str
    prompt_len: int
    input_ids: torch.Tensor  # [T] long
    hidden: dict[int, torch.Tensor]  # layer index -> [T, H] float32
    loss_mask: torch.Tensor  # [T] bool: position predicts a response token
    next_entropy: torch.Tensor  # [T]
    top1: torch.Tensor  # [T] long
    topk_ids: torch.Tensor  # [T, k] long
    topk_logprobs: torch.Tensor  # [T, k]


@dataclass
class TokenSample:
    """A seeded subsample of tokens: hidden states of the requested layers + metadata."""

    layers: list[int]
    hidden: np.ndarray  # [L, n, H] float32
    record: np.ndarray  # [n]
    position: np.ndarray  # [n]
    next_entropy: np.ndarray  # [n]
    split: np.ndarray  # [n] of "train"/"eval"
    category: np.ndarray  # [n]


_META = ("input_ids", "record", "position", "loss_mask", "next_entropy", "top1", "topk_ids", "topk_logprobs")


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fixed, platform-independent hash of uint64 keys."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return x


def _span(ids: Sequence[int]) -> str:
    """``0..30`` for a contiguous run of layer ids, else the list."""
    ids = list(ids)
    return f"{ids[0]}..{ids[-1]}" if ids == list(range(ids[0], ids[-1] + 1)) else str(ids)


class CaptureCache:
    """Read access to a finished capture folder (manifest present and consistent)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        mpath = self.path / "manifest.json"
        if not mpath.exists():
            raise CacheError(f"{self.path} has no manifest.json: the capture did not finish; rerun `wave capture`")
        try:
            self.manifest: dict[str, Any] = json.loads(mpath.read_text())
        except json.JSONDecodeError as exc:
            raise CacheError(f"{mpath} is corrupted ({exc}); rerun `wave capture` to rebuild it") from None
        found = self.manifest.get("schema_version")
        if found != SCHEMA_VERSION:
            raise CacheError(stale_schema_message(mpath, found))
        for s in self.manifest["shards"]:
            if not (self.path / s["file"]).exists():
                raise CacheError(f"shard {s['file']} listed in the manifest is missing")

    @property
    def n_layers(self) -> int:
        return int(self.manifest["model"]["n_layers"])

    @property
    def layer_ids(self) -> list[int]:
        """The hidden_states indices this capture holds: all of 0..N, or the subset it was asked for."""
        return list(self.manifest["params"].get("layers") or range(self.n_layers + 1))

    def check_layers(self, layers: Sequence[int]) -> None:
        """Raise :class:`CacheError` naming the layers this capture lacks (a layer-subset capture)."""
        have = set(self.layer_ids) | ({NORMED} if not self.manifest["params"].get("layers") else set())
        missing = sorted({i for i in layers if i not in have}, key=str)
        if missing:
            raise CacheError(f"capture {self.path.name} holds layers {self.layer_ids}, not {missing}; capture them "
                             f"(capture.layers) or use a full capture")

    @property
    def records(self) -> list[dict[str, Any]]:
        return self.manifest["records"]

    def verify(self) -> None:
        """Check every shard's sha256 against the manifest; raise CacheError on mismatch."""
        for s in self.manifest["shards"]:
            if file_sha256(self.path / s["file"]) != s["sha256"]:
                side = (self.path / s["file"]).with_suffix(".json")
                side.unlink(missing_ok=True)  # forces a rebuild of this shard
                raise CacheError(f"shard {s['file']} does not match its recorded sha256 (corrupted)")

    def summary(self) -> str:
        m = self.manifest
        return (f"{m['model']['name']}: {len(m['records'])} records, {m['n_tokens']} tokens "
                f"({m['n_loss_tokens']} response positions), layers {_span(self.layer_ids)}, "
                f"{len(m['shards'])} shards, {self.disk_bytes() / 2**20:.0f} MiB at {self.shown_path()}")

    def shown_path(self) -> str:
        """Where the capture lies, as a page may print it: relative to the cache root
        (``<cache>/capture/<id>``), so that no executed page carries a machine's path; a
        capture outside the root shows its folder's name only (the CLI prints the full path)."""
        from activation_wave.core.paths import cache_root

        try:
            return f"<cache>/{self.path.resolve().relative_to(cache_root().resolve()).as_posix()}"
        except (ValueError, OSError):
            return f"<elsewhere>/{self.path.name}"

    def disk_bytes(self) -> int:
        return sum((self.path / s["file"]).stat().st_size for s in self.manifest["shards"])

    def iter_shards(self, layers: Sequence[int] | None = None, fields: Sequence[str] = _META) -> Iterator[dict[str, torch.Tensor]]:
        """Yield one shard at a time: requested fields and ``h.{i}`` of requested layers (float32)."""
        self.check_layers(layers or [])
        for s in self.manifest["shards"]:
            with safe_open(str(self.path / s["file"]), framework="pt") as fh:
                out = {k: fh.get_tensor(k) for k in fields}
                for i in layers or []:
                    out[f"h.{i}"] = fh.get_tensor(f"h.{i}").float()
            yield out

    def iter_records(self, layers: Sequence[int], split: str | None = None) -> Iterator[CaptureRecord]:
        """Yield records one by one (optionally one split) with the given layers' hidden states."""
        recs = self.records
        for shard in self.iter_shards(layers):
            rec = shard["record"].long()
            for r in torch.unique_consecutive(rec).tolist():
                meta = recs[r]
                if split is not None and meta["split"] != split:
                    continue
                sel = rec == r
                yield CaptureRecord(
                    index=r, id=meta["id"], split=meta["split"], category=meta["category"], prompt_len=meta["prompt_len"],
                    input_ids=shard["input_ids"][sel].long(), hidden={i: shard[f"h.{i}"][sel] for i in layers},
                    loss_mask=shard["loss_mask"][sel].bool(), next_entropy=shard["next_entropy"][sel],
                    top1=shard["top1"][sel].long(), topk_ids=shard["topk_ids"][sel].long(),
                    topk_logprobs=shard["topk_logprobs"][sel])

    def sample_tokens(self, n: int, *, seed: int = 0, layers: Sequence[int] | None = None,
                      split: str | None = None, min_position: int = 0, mask: str = "loss") -> TokenSample:
        """A seeded subsample of at most ``n`` response positions (``loss_mask``), memory O(n).

        Each position gets a hash key from (seed, record id, position), so the sample
        does not depend on sharding or batch order; the ``n`` smallest keys are kept.
        ``min_position`` drops positions that many tokens into the response or earlier
        (``min_position=1`` drops the first response position).

        ``mask="all"`` samples from every position of prompt and response instead
        (the first sequence token, the classic attention sink, included); there
        ``min_position`` counts from the start of the sequence (``1`` drops position 0).
        """
        if mask not in ("loss", "all"):
            raise ValueError(f"mask={mask!r}: choose 'loss' (response positions) or 'all' (every position)")
        layers = list(self.layer_ids if layers is None else layers)
        recs = self.records
        keys, where = [], []
        seed_mix = np.uint64(_mix64(np.array([seed + 0x9E3779B97F4A7C15 % 2**63], dtype=np.uint64))[0])
        rec_hash = {i: int(hashlib.sha1(r["id"].encode()).hexdigest()[:12], 16) for i, r in enumerate(recs)}
        for si, shard in enumerate(self.iter_shards([], fields=("record", "position", "loss_mask"))):
            rec = shard["record"].numpy().astype(np.int64)
            pos = shard["position"].numpy().astype(np.int64)
            plen = np.array([recs[r]["prompt_len"] for r in rec])
            if mask == "loss":
                ok = shard["loss_mask"].numpy().astype(bool) & (pos - (plen - 1) >= min_position)
            else:
                ok = pos >= min_position
            if split is not None:
                ok &= np.array([recs[r]["split"] == split for r in rec])
            idx = np.nonzero(ok)[0]
            rh = np.array([rec_hash[r] for r in rec[idx]], dtype=np.uint64)
            with np.errstate(over="ignore"):
                k = _mix64(rh * np.uint64(1_000_003) + pos[idx].astype(np.uint64) + seed_mix)
            keys.append(k)
            where.append(np.stack([np.full(len(idx), si), idx], 1))
        allk = np.concatenate(keys) if keys else np.zeros(0, np.uint64)
        allw = np.concatenate(where) if where else np.zeros((0, 2), np.int64)
        chosen = allw[np.argsort(allk, kind="stable")[:n]]
        chosen = chosen[np.lexsort((chosen[:, 1], chosen[:, 0]))]  # shard order, then position
        H = self.manifest["model"]["hidden_size"]
        hidden = np.zeros((len(layers), len(chosen), H), np.float32)
        meta = {k: np.zeros(len(chosen), dt) for k, dt in (("record", np.int64), ("position", np.int64), ("next_entropy", np.float32))}
        filled = 0
        for si, shard in enumerate(self.iter_shards(layers, fields=("record", "position", "next_entropy"))):
            rows = chosen[chosen[:, 0] == si, 1]
            if len(rows) == 0:
                continue
            sl = slice(filled, filled + len(rows))
            for li, layer in enumerate(layers):
                hidden[li, sl] = shard[f"h.{layer}"][rows].numpy()
            for k in meta:
                meta[k][sl] = shard[k][rows].numpy()
            filled += len(rows)
        return TokenSample(layers=layers, hidden=hidden, record=meta["record"], position=meta["position"],
                           next_entropy=meta["next_entropy"],
                           split=np.array([recs[r]["split"] for r in meta["record"]]),
                           category=np.array([recs[r]["category"] for r in meta["record"]]))


def norm_profile(hidden: np.ndarray, position: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per layer: median and max token L2 norm, and the largest |coordinate|.

    ``hidden`` is [L, n, H]. Massive activations (a few coordinates thousands of times
    larger than the rest, usually at the first tokens) show up as max >> median.
    """
    norms = np.linalg.norm(hidden.astype(np.float64), axis=-1)  # [L, n]
    return {"median_norm": np.median(norms, axis=1), "max_norm": norms.max(axis=1),
            "p99_norm": np.quantile(norms, 0.99, axis=1), "max_abs": np.abs(hidden).max(axis=(1, 2))}
