"""Benchmarks of the pipeline's steps: capture throughput, streaming memory, the whole profile."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterator

import psutil
import torch

from activation_wave.core.config import StudyConfig
from activation_wave.core.paths import REPO_ROOT
from activation_wave.decode.timing import rotated_medians
from activation_wave.benchmarks.peak import PeakRSS


def bench_capture(cfg: StudyConfig) -> dict[str, Any]:
    """Capture (all hidden states + entropy + shard write) vs a plain forward, same batches.

    The records are the first ``bench.capture_records`` of the profile's responses (the study's real
    prompt/response mix; the capture runs the LM head on response positions only, the
    plain forward on every position, as ``model(...)`` does)."""
    import tempfile

    from activation_wave.models.capture import _write_shard, pad_right
    from activation_wave.core.config import CaptureConfig
    from activation_wave.models.prompts import generate_responses, load_prompts
    from activation_wave.study.steps import get_target

    n_records, batch_size, repeats = cfg.bench.capture_records, cfg.bench.capture_batch_size, cfg.bench.capture_repeats
    target = get_target(cfg)
    responses, _ = generate_responses(target, load_prompts(cfg.data), cfg.data, progress=False)
    recs = responses[:n_records]
    ccfg = CaptureConfig(batch_size=batch_size, records_per_shard=n_records)
    tokens = sum(len(r.prompt_ids) + len(r.response_ids) for r in recs)
    tmp = Path(tempfile.mkdtemp())

    def batches() -> Iterator[dict[str, torch.Tensor]]:
        for b in range(0, len(recs), batch_size):
            ids, mask = pad_right([r.prompt_ids + r.response_ids for r in recs[b:b + batch_size]])
            yield {"input_ids": ids, "attention_mask": mask, "use_cache": False}

    @torch.no_grad()
    def plain() -> None:
        for kw in batches():
            target.model(**kw)

    @torch.no_grad()
    def decoder() -> None:
        for kw in batches():
            target.model.base_model(**kw)

    def full() -> None:
        _write_shard(target, recs, 0, ccfg, tmp / "shard.safetensors")

    plain()  # warm-up
    with PeakRSS() as mem:
        t = rotated_medians({"plain": plain, "decoder": decoder, "capture": full}, repeats)
    t_cap, t_plain, t_dec = t["capture"], t["plain"], t["decoder"]
    return {"figure": round(tokens / t_cap, 1), "unit": "tokens/s with all hidden states, entropy and shard write",
            "baseline": round(tokens / t_plain, 1), "baseline_unit": "tokens/s of a plain forward (logits only)",
            "ratio": round(t_plain / t_cap, 3), "target": ">= 0.85", "peak_rss_mib": round(mem.peak),
            # the capture runs the LM head on response positions only; against the decoder
            # alone (no LM head anywhere) the ratio is the pure cost of capturing
            "decoder_only_tokens_per_s": round(tokens / t_dec, 1), "ratio_vs_decoder_only": round(t_dec / t_cap, 3),
            "tokens": tokens, "response_tokens": sum(len(r.response_ids) for r in recs), "profile": cfg.profile,
            "layers": target.n_layers + 1, "repeats": repeats}


def bench_memory(cfg: StudyConfig,
                 checkpoints: tuple[int, ...] = (10_000, 30_000, 100_000, 300_000, 1_000_000)) -> dict[str, Any]:
    """Resident memory of streaming statistics (entropy + minibatch CKA, all layers) as the
    token count grows to ``bench.memory_tokens``, cycling over the profile's capture cache;
    baseline: the memory that holding the same tokens at once would need (``[L, n, d]``
    float32)."""
    from activation_wave.study.steps import run_capture
    from activation_wave.measure.streaming import streaming_stats

    n_tokens = cfg.bench.memory_tokens
    cache = run_capture(cfg, progress=False).cache
    proc = psutil.Process()
    curve: dict[int, float] = {}
    base = proc.memory_info().rss / 2**20
    marks = sorted({c for c in checkpoints if c < n_tokens} | {n_tokens})

    def on_chunk(seen: int) -> None:
        rss = proc.memory_info().rss / 2**20
        while marks and seen >= marks[0]:
            curve[marks.pop(0)] = round(rss, 1)
            print(f"[bench] memory_scaling: {seen:,} tokens, {rss:.0f} MiB resident", flush=True)

    t0 = time.time()
    out = streaming_stats(cache, n_tokens, on_chunk=on_chunk)
    L, d = len(out["layers"]), cache.manifest["model"]["hidden_size"]
    in_memory = {n: round(L * n * d * 4 / 2**20, 1) for n in curve}
    growth = curve[max(curve)] - curve[min(curve)]
    return {"figure": curve, "unit": "resident MiB after n streamed tokens (all layers, entropy + minibatch CKA)",
            "baseline": in_memory, "baseline_unit": "MiB to hold the same tokens at once, [L, n, d] float32",
            "ratio": round(in_memory[max(in_memory)] / curve[max(curve)], 1),
            "growth_mib_from_first_to_last": round(growth, 1), "rss_before_mib": round(base, 1),
            "tokens": out["n_tokens"], "distinct_tokens_in_cache": cache.manifest["n_loss_tokens"],
            "seconds": round(time.time() - t0, 1), "target": "flat in token count"}


def bench_default_profile(cfg: StudyConfig | None = None,
                          path: Path = REPO_ROOT / "data" / "results" / "default" / "timings.json") -> dict[str, Any]:
    """The whole default profile's wall time, read from the file ``wave study --profile default``
    keeps (``timings.json``; not rerun here: it takes hours), so this entry, the README and
    chapter 9 cite the same numbers. Two sums, labelled:

    * ``figure`` / ``minutes``: each notebook's *longest* recorded execution (``longest``),
      the run that filled its caches: what a fresh clone pays (runs on different days, so an
      estimate, not one timed run);
    * ``last_runs_minutes``: each notebook's *last* execution (``notebooks``), which reuses
      whatever its caches held.

    ``cfg`` is not used (the entry reads the default profile's timings whatever the run's profile)."""
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `wave study --profile default` first")
    doc = json.loads(path.read_text())
    last = doc.get("notebooks", {})
    longest = {nb: max(s, doc.get("longest", {}).get(nb, {}).get("seconds", s)) for nb, s in last.items()}
    total, total_last = sum(longest.values()), sum(last.values())
    return {"figure": round(total, 1),
            "unit": "s, sum of each default-profile notebook's longest (cold-cache) execution on this machine",
            "baseline": None, "ratio": None, "minutes": round(total / 60, 1), "per_notebook_s": longest,
            "last_runs_s": round(total_last, 1), "last_runs_minutes": round(total_last / 60, 1),
            "last_runs_unit": "s, sum of each notebook's last execution (warm caches where they held)",
            "per_notebook_last_s": last,
            "excludes": "the one-time generation of the committed responses (~70 min) and the book build (~1 min)",
            "target": "a few hours at most on 2 cores", "source": str(path.relative_to(REPO_ROOT)),
            "last_run": doc.get("last_run")}
