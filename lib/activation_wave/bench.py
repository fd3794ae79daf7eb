"""``wave bench``: every benchmark of the study, one summary file.

Each entry records the figure, the baseline measured *in the same run* (this machine
is shared and noisy, so only side-by-side ratios mean anything), their ratio, the
target where the issue set one, and the peak resident memory of the step. Timings
alternate the measured and the baseline runs (ABAB...) and keep the median.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import psutil
import torch

from . import bench_llamacpp
from .data import REPO_ROOT


class PeakRSS:
    """Sample this process's resident memory in a thread; ``peak`` in MiB."""

    def __init__(self, interval: float = 0.02):
        self.interval, self.peak, self._stop = interval, 0.0, threading.Event()
        self._proc = psutil.Process()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss / 2**20)
            time.sleep(self.interval)

    def __enter__(self) -> "PeakRSS":
        self.peak = self._proc.memory_info().rss / 2**20
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._t.join()


def side_by_side(measured: Callable[[], Any], baseline: Callable[[], Any], repeats: int = 3) -> tuple[float, float]:
    """Median wall time of two callables, run alternately ``repeats`` times each."""
    t = rotated_medians({"baseline": baseline, "measured": measured}, repeats, rotate=False)
    return t["measured"], t["baseline"]


def rotated_medians(fns: dict[str, Callable[[], Any]], repeats: int = 3, rotate: bool = True) -> dict[str, float]:
    """Median wall time of each callable over ``repeats`` rounds; every round runs all of
    them back to back (in an order rotated by the round when ``rotate``), so that load
    from other processes falls on all of them alike."""
    names = list(fns)
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        k = r % len(names) if rotate else 0
        for n in names[k:] + names[:k]:
            t = time.perf_counter()
            fns[n]()
            times[n].append(time.perf_counter() - t)
    return {n: statistics.median(v) for n, v in times.items()}


def bench_capture(model: str = "smollm2-135m", profile: str = "default", n_records: int = 16, batch_size: int = 8,
                  repeats: int = 6) -> dict[str, Any]:
    """Capture (all hidden states + entropy + shard write) vs a plain forward, same batches.

    The records are the first ``n_records`` of the profile's responses (the study's real
    prompt/response mix; the capture runs the LM head on response positions only, the
    plain forward on every position, as ``model(...)`` does)."""
    import tempfile

    from .capture import _write_shard, pad_right
    from .config import CaptureConfig, load_config
    from .data import generate_responses, load_prompts
    from .models import load_target

    cfg = load_config(profile, model=model)
    target = load_target(model)
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
            "tokens": tokens, "response_tokens": sum(len(r.response_ids) for r in recs), "profile": profile,
            "layers": target.n_layers + 1, "repeats": repeats}


def bench_memory(model: str = "smollm2-135m", profile: str = "default",
                 n_tokens: int = int(os.environ.get("WAVE_BENCH_MEMORY_TOKENS", 1_000_000)),
                 checkpoints: tuple[int, ...] = (10_000, 30_000, 100_000, 300_000, 1_000_000)) -> dict[str, Any]:
    """Resident memory of streaming statistics (entropy + minibatch CKA, all layers) as the
    token count grows to ``n_tokens``, cycling over the profile's capture cache; baseline:
    the memory that holding the same tokens at once would need (``[L, n, d]`` float32)."""
    from .config import load_config
    from .pipeline import run_capture
    from .streaming import streaming_stats

    cfg = load_config(profile, model=model)
    cache = run_capture(cfg, progress=False).cache
    proc = psutil.Process()
    curve: dict[int, float] = {}
    base = proc.memory_info().rss / 2**20
    marks = sorted(c for c in checkpoints if c <= n_tokens)

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


def bench_default_profile(path: Path = REPO_ROOT / "data" / "results" / "default" / "timings.json") -> dict[str, Any]:
    """The whole default profile's wall time, as ``wave study --profile default`` measured
    it (each notebook's last execution; not rerun here: it takes over an hour)."""
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `wave study --profile default` first")
    doc = json.loads(path.read_text())
    per = doc.get("notebooks", {})
    total = sum(per.values())
    return {"figure": round(total, 1), "unit": "s, sum of the default profile's notebook executions on this machine",
            "baseline": None, "ratio": None, "minutes": round(total / 60, 1), "per_notebook_s": per,
            "excludes": "the one-time generation of the committed responses (~70 min) and the book build (~1 min)",
            "target": "a few hours at most on 2 cores", "source": str(path.relative_to(REPO_ROOT)),
            "last_run": doc.get("last_run")}


def _entries() -> dict[str, Callable[[], dict[str, Any]]]:
    entries: dict[str, Callable[[], dict[str, Any]]] = {"capture_throughput": bench_capture,
                                                        "memory_scaling": bench_memory,
                                                        "default_profile": bench_default_profile}
    entries["llamacpp"] = bench_llamacpp.run  # needs scripts/setup_llamacpp.sh
    try:
        from benchmarks import bench_metrics  # type: ignore[import-not-found]

        entries["metrics"] = bench_metrics.run
    except ImportError:
        pass
    try:
        from benchmarks import bench_decoding  # type: ignore[import-not-found]

        entries["speculative_decoding"] = bench_decoding.run
        entries["speculative_decoding_bf16"] = bench_decoding.run_precision
        entries["drafter_data_scaling"] = bench_decoding.run_data_scaling
    except ImportError:
        pass
    return entries


def run_benchmarks(out: Path = REPO_ROOT / "data" / "results" / "benchmarks.json", only: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmarks (or ``only`` some) and merge them into ``out``."""
    import sys

    sys.path.insert(0, str(REPO_ROOT))
    doc = json.loads(out.read_text()) if out.exists() else {}
    doc["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                      "torch_threads": torch.get_num_threads()}
    for name, fn in _entries().items():
        if only and name not in only:
            continue
        print(f"[bench] {name} ...", flush=True)
        t0 = time.time()
        with PeakRSS() as mem:
            result = fn()
        result.setdefault("peak_rss_mib", round(mem.peak))
        result["wall_s"] = round(time.time() - t0, 1)
        result["measured"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        doc[name] = result
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1))
        print(f"[bench] {name}: {json.dumps(result)[:300]}", flush=True)
    return doc
