"""The benchmark runner: every entry of ``wave bench`` into one summary file.

Each entry records the figure, the baseline measured *in the same run* (a shared
machine is noisy, so only side-by-side ratios mean anything), their ratio, the target
where the issue set one, and the peak resident memory of the step. Every entry takes the
run's :class:`~activation_wave.core.config.StudyConfig`; its ``bench`` section holds the
benchmarks' settings, so ``wave bench --profile P --set bench.rounds=3`` works like every
other command. Paths under the cache root (drafter folders) are written as cache-relative
keys (:func:`~activation_wave.core.results.cache_key`); :func:`~activation_wave.core.results.cache_path`
finds them on any machine.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from activation_wave.core.config import StudyConfig
from activation_wave.core.results import BENCHMARKS_FILE, load_benchmarks, merge_benchmarks, without_cache_root
from activation_wave.benchmarks.peak import PeakRSS, cpu_model


Entry = Callable[[StudyConfig], dict[str, Any]]

#: Benchmarks a plain ``wave bench`` skips: they take hours (the recipe study trains about
#: 40 drafters; the 1.5B llama.cpp runs need its drafters and about half an hour), so they
#: run only when named, e.g. ``wave bench --only recipe``.
OPT_IN = ("recipe", "llamacpp_1.5b", "data_scale", "llamacpp_ceiling", "large_drafter", "large_drafter_indist",
          "large_drafter_indist_all", "large_drafter_indist_cont", "large_drafter_indist_samples",
          "large_drafter_indist_steps", "vllm")


def entries() -> dict[str, Entry]:
    """Every benchmark by name, in the order ``wave bench`` runs them."""
    from activation_wave.benchmarks import speedup as decoding
    from activation_wave.benchmarks import llamacpp_ceiling as ceiling
    from activation_wave.benchmarks import llamacpp_speed as llamacpp
    from activation_wave.benchmarks import metric_speed as metrics
    from activation_wave.benchmarks import pipeline_cost as pipeline
    from activation_wave.benchmarks import data_scale, large_drafter, recipe
    from activation_wave.benchmarks import vllm_speed

    return {"capture_throughput": pipeline.bench_capture, "memory_scaling": pipeline.bench_memory,
            "default_profile": pipeline.bench_default_profile,
            "metrics": lambda cfg: metrics.run(threads=cfg.bench.threads),
            "speculative_decoding": lambda cfg: decoding.run(
                cfg, adopt=data_scale.strongest if cfg.bench.drafter == "data_scale" else None), "speculative_decoding_bf16": decoding.run_precision,
            "training_precision": decoding.run_training_precision,
            "drafter_data_scaling": decoding.run_data_scaling,
            # needs the optional llama.cpp build (scripts/setup_llamacpp.sh)
            "llamacpp": lambda cfg: llamacpp.run(profile=cfg.profile, model=cfg.model),
            # issue 57: the drafters in vLLM (CPU); needs the optional vLLM environment (scripts/setup_vllm.sh)
            "vllm": vllm_speed.run,
            # chapter 11: the third architecture's target (1.5B) and the study's, side by side
            # issue 42: a 1.5B drafter trained on the corpus (responses, capture, training: hours; resumable)
            "large_drafter": large_drafter.run,
            # issue 42, eighth amendment: stage 1's recipe on the base train records alone (~40 min)
            "large_drafter_indist": large_drafter.run_indist,
            # issue 42, ninth amendment: the same on every train prompt of the sources (~196 answered by
            # llama.cpp, captured, trained: about an hour)
            "large_drafter_indist_all": large_drafter.run_indist_all,
            # issue 42, eleventh amendment: the ninth's drafter trained on from its weights (~40 min)
            "large_drafter_indist_cont": large_drafter.run_indist_cont,
            # issue 42, twelfth amendment: 2 sampled answers of the target to each base train prompt beside
            # the eighth's records (answered by llama.cpp, captured, trained: about 75 minutes)
            "large_drafter_indist_samples": large_drafter.run_indist_samples,
            # issue 42, thirteenth amendment: the twelfth's drafter with batches of 256 tokens (~55 min)
            "large_drafter_indist_steps": large_drafter.run_indist_steps,
            "llamacpp_1.5b": llamacpp.run_sizes,
            # issue 42: the round's terms, predicted next to measured, and the ceiling per depth (~30 min)
            "llamacpp_ceiling": ceiling.run,
            # the recipe study (issue 25): many drafters, resumable; writes <results>/recipe.json too
            "recipe": recipe.run,
            # issue 41: drafters on thousands of distinct prompts and H7; resumable; writes <results>/data_scale.json
            "data_scale": data_scale.run}


def run_benchmarks(cfg: StudyConfig, out: Path = BENCHMARKS_FILE, only: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmarks (or ``only`` some) with ``cfg`` and merge them into ``out``; without
    ``only``, every benchmark except the :data:`OPT_IN` ones."""
    known = entries()
    unknown = sorted(set(only or []) - set(known))
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; choose from {sorted(known)}")
    doc = load_benchmarks(out)
    doc["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                      "torch_threads": torch.get_num_threads(), **cpu_model()}
    for name, fn in known.items():
        if (only and name not in only) or (not only and name in OPT_IN):
            continue
        print(f"[bench] {name} ...", flush=True)
        t0 = time.time()
        with PeakRSS() as mem:
            result = fn(cfg)
        result.setdefault("peak_rss_mib", round(mem.peak))
        result["wall_s"] = round(time.time() - t0, 1)
        result["measured"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        result["machine"] = doc["machine"]  # entries of one file may come from different machines
        doc[name] = without_cache_root(result)  # drafter folders as cache keys, not this machine's paths
        # atomic (a full disk keeps the previous file), and merged into the file as it is now: an
        # entry another run wrote meanwhile is kept
        doc = merge_benchmarks(out, {"machine": doc["machine"], name: doc[name]})
        print(f"[bench] {name}: {json.dumps(result)[:300]}", flush=True)
    return doc
