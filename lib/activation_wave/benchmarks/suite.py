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


def _timings(profile: str) -> dict[str, Any]:
    """The profile's recorded notebook times (``data/results/<profile>/timings.json``), {} when none."""
    from activation_wave.core.results import RESULTS_ROOT

    try:
        doc = json.loads((RESULTS_ROOT / profile / "timings.json").read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}

#: Benchmarks a plain ``wave bench`` skips: they take hours (the recipe study trains about
#: 40 drafters; the 1.5B llama.cpp runs need its drafters and about half an hour), so they
#: run only when named, e.g. ``wave bench --only recipe``.
OPT_IN = ("recipe", "llamacpp_1.5b", "data_scale", "llamacpp_ceiling", "large_drafter", "large_drafter_indist",
          "large_drafter_indist_all", "large_drafter_indist_cont", "large_drafter_indist_samples",
          "large_drafter_indist_steps", "vllm", "c2_layer_test", "vllm_1.5b")


def entries() -> dict[str, Entry]:
    """Every benchmark by name, in the order ``wave bench`` runs them."""
    from activation_wave.benchmarks import speedup as decoding
    from activation_wave.benchmarks import llamacpp_ceiling as ceiling
    from activation_wave.benchmarks import llamacpp_speed as llamacpp
    from activation_wave.benchmarks import metric_speed as metrics
    from activation_wave.benchmarks import pipeline_cost as pipeline
    from activation_wave.benchmarks import data_scale, large_drafter, layer_test_1p5b, recipe
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
            # issue 64: vLLM on the 1.5B target (fp32) with the layer test's default drafter, n-gram (~2 h)
            "vllm_1.5b": vllm_speed.run_large,
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
            # issue 65, fourteenth amendment: C2 again, six 1.5B drafters that draft (about 3.5 h; resumable)
            "c2_layer_test": layer_test_1p5b.run,
            "llamacpp_1.5b": llamacpp.run_sizes,
            # issue 42: the round's terms, predicted next to measured, and the ceiling per depth (~30 min)
            "llamacpp_ceiling": ceiling.run,
            # the recipe study (issue 25): many drafters, resumable; writes <results>/recipe.json too
            "recipe": recipe.run,
            # issue 41: drafters on thousands of distinct prompts and H7; resumable; writes <results>/data_scale.json
            "data_scale": data_scale.run}


def _span(seconds: float) -> str:
    """A duration as a reader plans with it.

    >>> _span(50), _span(814.5), _span(6420)
    ('1 min', '14 min', '1 h 47 min')
    """
    minutes = round(seconds / 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{max(minutes, 1)} min"


def _drafters_in(entry: Any) -> list[dict[str, Any]]:
    """The drafters a recorded entry used, each a ``{"drafter": cache key, "training": {...}}``
    (train log summary with ``train_wall_s``), found wherever the entry records them."""
    found: dict[str, dict[str, Any]] = {}

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            if isinstance(x.get("drafter"), str) and isinstance(x.get("training"), dict):
                found.setdefault(x["drafter"], x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(entry)
    return list(found.values())


#: The notebook whose longest recorded run (``data/results/<profile>/timings.json``) is the capture
#: a fresh clone makes before its drafters can train.
CAPTURE_NOTEBOOK = "00_data_and_capture"


def expected_duration(name: str, doc: dict[str, Any], timings: dict[str, Any] | None = None) -> dict[str, Any]:
    """How long benchmark ``name`` should take on this machine, from its recorded run in the
    benchmarks file ``doc``: the run's own ``wall_s`` (which did not train the drafters it found
    in the cache), plus, for each drafter it used that is not on this machine, that drafter's
    recorded training time (they train one after the other), plus the capture they train on
    when that is missing too (``timings``' longest record of :data:`CAPTURE_NOTEBOOK`, as ``wave
    study`` estimates it). ``seconds`` None: no recorded run.

    >>> doc = {"vllm": {"wall_s": 814.5, "measured": "2026-12-06T06:32:26", "machine": {"cpu": "Xeon", "cpus": 2},
    ...        "layer_sets": {"default": {"drafter": "capture/c1/drafters/a", "training": {"train_wall_s": 2667.0}}}}}
    >>> e = expected_duration("vllm", doc, {"longest": {"00_data_and_capture": {"seconds": 993.3}}})
    >>> e["seconds"], e["parts"]["drafters"], e["parts"]["capture"]
    (4474.8, 2667.0, 993.3)
    """
    from activation_wave.core.results import cache_path

    entry = doc.get(name)
    if not isinstance(entry, dict) or not isinstance(entry.get("wall_s"), (int, float)):
        return {"name": name, "seconds": None}
    run = float(entry["wall_s"])
    missing = [d for d in _drafters_in(entry) if not cache_path(d["drafter"]).exists()]
    train = sum(float(d["training"].get("train_wall_s") or 0.0) for d in missing)
    captures = {str(Path(d["drafter"]).parents[1]) for d in missing}  # capture/<id>/drafters/<id>
    capture = 0.0
    if captures and not all(cache_path(c).exists() for c in captures):
        capture = float(((timings or {}).get("longest", {}).get(CAPTURE_NOTEBOOK) or {}).get("seconds") or 0.0)
    machine = entry.get("machine") or {}
    return {"name": name, "seconds": round(run + train + capture, 1),
            "parts": {"run": run, "drafters": round(train, 1), "capture": capture},
            "drafters": len(_drafters_in(entry)),
            "drafters_to_train": [d["drafter"] for d in missing], "recorded": entry.get("measured"),
            "cpu": machine.get("cpu"), "cpus": machine.get("cpus")}


def expected_text(e: dict[str, Any]) -> str:
    """One line of :func:`expected_duration` for ``wave bench`` to print before a benchmark starts.

    >>> print(expected_text({"name": "vllm", "seconds": 4474.8, "parts": {"run": 814.5, "drafters": 2667.0,
    ...     "capture": 993.3}, "drafters_to_train": ["a"], "recorded": "2026-12-06T06:32:26", "cpu": "Xeon", "cpus": 2}))
    [bench] vllm: expected about 1 h 15 min here: its recorded run 14 min (2026-12-06, Xeon, 2 CPUs), with 1 drafter to train first (44 min as recorded) and the capture (17 min, chapter 0's longest recorded run)
    >>> expected_text({"name": "x", "seconds": None})
    '[bench] x: no recorded run, so no estimate'
    """
    if e["seconds"] is None:
        return f"[bench] {e['name']}: no recorded run, so no estimate"
    p = e["parts"]
    where = ", ".join(str(x) for x in ((e.get("recorded") or "")[:10], e.get("cpu"),
                                        f"{e['cpus']} CPUs" if e.get("cpus") else None) if x)
    text = f"[bench] {e['name']}: expected about {_span(e['seconds'])} here: its recorded run {_span(p['run'])}"
    text += f" ({where})" if where else ""
    extra = []
    n = len(e.get("drafters_to_train") or [])
    if n:
        extra.append(f"{n} drafter{'s' if n != 1 else ''} to train first ({_span(p['drafters'])} as recorded)")
    if p.get("capture"):
        extra.append(f"the capture ({_span(p['capture'])}, chapter 0's longest recorded run)")
    if extra:
        return text + ", with " + " and ".join(extra)
    return text + (", its drafters already in the cache" if e.get("drafters") else "")


def selected(only: list[str] | None = None) -> list[str]:
    """The benchmarks a ``wave bench`` run does, in order: ``only``, or every one but :data:`OPT_IN`."""
    known = entries()
    unknown = sorted(set(only or []) - set(known))
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; choose from {sorted(known)}")
    return [n for n in known if (n in only if only else n not in OPT_IN)]


def estimates(cfg: StudyConfig, out: Path = BENCHMARKS_FILE, only: list[str] | None = None) -> list[str]:
    """:func:`expected_text` of every benchmark a ``wave bench`` run would do (``wave bench --estimate``)."""
    doc = load_benchmarks(out)
    return [expected_text(expected_duration(n, doc, _timings(cfg.profile))) for n in selected(only)]


def run_benchmarks(cfg: StudyConfig, out: Path = BENCHMARKS_FILE, only: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmarks (or ``only`` some) with ``cfg`` and merge them into ``out``; without
    ``only``, every benchmark except the :data:`OPT_IN` ones."""
    known = entries()
    todo = selected(only)
    doc = load_benchmarks(out)
    doc["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__,
                      "torch_threads": torch.get_num_threads(), **cpu_model()}
    for name, fn in known.items():
        if name not in todo:
            continue
        print(expected_text(expected_duration(name, load_benchmarks(out), _timings(cfg.profile))), flush=True)
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
