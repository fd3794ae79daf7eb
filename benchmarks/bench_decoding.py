"""Speculative decoding on SmolLM2-135M against plain and prompt-lookup decoding, in one run.

Measured side by side, interleaved prompt by prompt (so load from other processes on a
shared machine hits every method alike), on held-out (eval-split) prompts of the
profile's capture:

* plain decoding (transformers ``generate``) at T = 0 and T = 1;
* speculative decoding with the drafter (chain, and the dynamic tree if
  ``spec.tree_topk > 0``) at T = 0, and chain at T = 1;
* prompt-lookup decoding (transformers, ``prompt_lookup_num_tokens``) at T = 0.

Reported: tokens/s of each, the ratios ``speedup_vs_plain_t0``, ``speedup_vs_plain_t1``,
``speedup_vs_prompt_lookup_t0``, ``tau_t0`` (and the tree's), whether speculative greedy
equals plain greedy on every prompt, tau offline on the same prompts, the cost-model
components (verify of 1..depth+1 tokens, a draft step, a drafted chain) with the
predicted speedup, and the drafter's training tokens/s.

Run: ``python -m benchmarks.bench_decoding --drafter DIR`` (or without ``--drafter`` to
train one on the profile's capture with ``draft`` settings; reused on later runs).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch


def _summary(res: Any) -> dict[str, Any]:
    """The figures of one pooled method that the results file keeps."""
    out: dict[str, Any] = {"tokens": res.new_tokens, "wall_s": round(res.wall_s, 3),
                           "tokens_per_s": res.tokens_per_s, "prompts": res.n_prompts}
    if res.method.startswith("eagle3"):
        out.update(tau=res.tau, rounds=res.target_forwards, acceptance_by_position=res.acceptance_by_position)
    return out


def _subset(res: Any, keep: set[str]) -> Any:
    """The pooled result restricted to the prompts in ``keep``."""
    from activation_wave.speculative import merge_results

    return merge_results([dataclasses.replace(res, per_prompt=[p for p in res.per_prompt if p["id"] in keep])])


def _held_out(cache: Any, n_prompts: int) -> tuple[list[dict[str, Any]], dict[str, list[int]]]:
    """``n_prompts`` eval-split records spread evenly over the split (it is ordered by
    source: code first, then chat), and their prompts' token ids by record id."""
    ev = [r for r in cache.records if r["split"] == "eval"]
    recs = [ev[round(i * (len(ev) - 1) / max(1, n_prompts - 1))] for i in range(min(n_prompts, len(ev)))]
    want = {r["id"] for r in recs}
    prompts = {r.id: r.input_ids[: r.prompt_len].tolist() for r in cache.iter_records([], split="eval") if r.id in want}
    return recs, prompts


def _study_drafters(cfg: Any) -> dict[str, Any] | None:
    """Training time and throughput of chapter 6's drafters under this profile, as the
    study's last run recorded them (None before chapter 6 has run)."""
    from activation_wave.pipeline import load_results

    try:
        runs = load_results("06_eagle3_speedup", cfg)["runs"]
    except FileNotFoundError:
        return None
    secs = [r["train_s"] for r in runs if r.get("train_s")]
    tps = [r["tokens_per_s"] for r in runs if r.get("tokens_per_s")]
    return {"drafters": len(runs), "train_s_per_drafter_mean": statistics.fmean(secs) if secs else None,
            "tokens_per_s_mean": statistics.fmean(tps) if tps else None,
            "config": {k: getattr(cfg.draft, k) for k in ("epochs", "ttt_steps", "batch_tokens", "threads", "workers")},
            "note": "chapter 6's drafters, trained by `wave study` (two at once when draft.workers = 2)"}


#: The benchmark's drafter: the profile's ``draft`` section with these changes. Ten
#: epochs instead of the study's two: the study compares layer sets at equal budget, the
#: benchmark wants the best drafter this machine can train in ~10-15 minutes.
DRAFT_OVERRIDES: dict[str, Any] = {"epochs": 10, "ttt_steps": 3, "batch_tokens": 2048}
#: The benchmark drafter's data: the profile's greedy responses plus this many sampled
#: responses (``data.sample_temperature``) per train prompt. Chapter 6 trains on the
#: greedy ones alone; :func:`run_data_scaling` measures what the extra data buys.
DATA_OVERRIDES: dict[str, Any] = {"samples_per_prompt": 6}
#: Decoding settings measured best on this machine (see the report in chapter 6):
#: depth 3 with a dynamic length, one thread.
SPEC_OVERRIDES: dict[str, Any] = {"depth": 3, "draft_threshold": 0.15, "max_new_tokens": 96}


def bench_config(profile: str = "default", samples_per_prompt: int | None = None) -> Any:
    """The profile's config with the benchmark drafter's data (:data:`DATA_OVERRIDES`, or
    ``samples_per_prompt`` sampled responses per train prompt)."""
    from activation_wave.config import load_config

    n = DATA_OVERRIDES["samples_per_prompt"] if samples_per_prompt is None else samples_per_prompt
    return load_config(profile, {"data.samples_per_prompt": n})


def _data_summary(cfg: Any, cache: Any) -> dict[str, Any]:
    """What the drafter was trained on: greedy and sampled train records of the capture."""
    from activation_wave.data import SAMPLE_MARK

    train = [r for r in cache.records if r["split"] == "train"]
    return {"samples_per_prompt": cfg.data.samples_per_prompt, "sample_temperature": cfg.data.sample_temperature,
            "train_records": len(train), "sampled_train_records": sum(SAMPLE_MARK in r["id"] for r in train),
            "eval_records": sum(r["split"] == "eval" for r in cache.records)}


def run(*, profile: str = "default", drafter_dir: str | None = None, layers: list[int] | None = None,
        n_prompts: int = 16, threads: int = 1, rounds: int = 2, progress: bool = True,
        draft_overrides: dict[str, Any] | None = None, **spec_overrides: Any) -> dict[str, Any]:
    """Run the decoding benchmark; returns a JSON-able dict (see the module docstring).

    The interleaved run over all prompts is repeated ``rounds`` times; the figures pool
    every round (tokens and seconds summed), and ``by_round`` keeps each round's
    speedups, which shows how much the shared machine moved them.

    ``spec_overrides`` replace fields of the profile's ``spec`` section on top of
    :data:`SPEC_OVERRIDES` (``depth=4``, ``tree_topk=2``, ``tree_size=5``,
    ``kernels="hf"``...); ``draft_overrides`` those of ``draft`` on top of
    :data:`DRAFT_OVERRIDES` when a drafter is trained. ``threads=1`` because on this
    shared 2-core machine two threads were measured several times slower under load.
    """
    from activation_wave.drafter import load_drafter
    from activation_wave.layers import eagle3_default_layers
    from activation_wave.experiment import train_or_load
    from activation_wave.pipeline import run_capture
    from activation_wave.speculative import (
        cost_model,
        measure_costs,
        merge_results,
        offline_acceptance,
        plain_generate,
        prompt_lookup_generate,
        run_interleaved,
        speculate,
    )

    t_start = time.time()
    cfg = bench_config(profile)
    spec = dataclasses.replace(cfg.spec, threads=threads, **{**SPEC_OVERRIDES, **spec_overrides})
    draft = dataclasses.replace(cfg.draft, threads=threads, **{**DRAFT_OVERRIDES, **(draft_overrides or {})})
    cap = run_capture(cfg, progress=progress)
    target, cache = cap.target, cap.cache

    # the drafter: given, or trained once on this capture and reused (the study's drafter cache)
    if drafter_dir is None:
        drafter_dir = str(train_or_load(target, cache, layers or eagle3_default_layers(target.n_layers), draft,
                                        progress=progress)[0])
    drafter = load_drafter(drafter_dir, target)
    log_path = Path(drafter_dir) / "train_log.json"
    train_log = json.loads(log_path.read_text()) if log_path.exists() else {}

    recs, prompts = _held_out(cache, n_prompts)
    ids = [r["id"] for r in recs if r["id"] in prompts]

    t0_spec = dataclasses.replace(spec, temperature=0.0, tree_topk=0)
    t1_spec = dataclasses.replace(spec, temperature=1.0, tree_topk=0)
    methods: dict[str, Any] = {
        "plain_t0": lambda p, c: plain_generate(target, [p], c(t0_spec)),
        "spec_chain_t0": lambda p, c: speculate(target, drafter, [p], c(t0_spec)),
        "prompt_lookup_t0": lambda p, c: prompt_lookup_generate(target, [p], c(t0_spec)),
        "plain_t1": lambda p, c: plain_generate(target, [p], c(t1_spec)),
        "spec_chain_t1": lambda p, c: speculate(target, drafter, [p], c(t1_spec)),
    }
    if spec.tree_topk > 0:
        tree_spec = dataclasses.replace(spec, temperature=0.0)
        methods["spec_tree_t0"] = lambda p, c: speculate(target, drafter, [p], c(tree_spec), tree=True)

    per_round = [run_interleaved(methods, [(pid, prompts[pid]) for pid in ids], progress=progress)
                 for _ in range(rounds)]
    pooled = {name: merge_results([r[name] for r in per_round]) for name in methods}
    merged = {name: _summary(r) for name, r in pooled.items()}
    source = {r["id"]: r["source"] for r in recs}
    by_source: dict[str, dict[str, Any]] = {}
    for src in sorted(set(source.values())):
        sub = {name: _summary(_subset(r, {p for p in ids if source[p] == src})) for name, r in pooled.items()}
        by_source[src] = {"prompts": sub["plain_t0"]["prompts"],
                          "tokens_per_s": {name: m["tokens_per_s"] for name, m in sub.items()},
                          "speedup_vs_plain_t0": sub["spec_chain_t0"]["tokens_per_s"] / sub["plain_t0"]["tokens_per_s"],
                          "tau_t0": sub["spec_chain_t0"]["tau"]}
        if "spec_tree_t0" in sub:
            by_source[src]["speedup_tree_vs_plain_t0"] = (sub["spec_tree_t0"]["tokens_per_s"]
                                                          / sub["plain_t0"]["tokens_per_s"])
            by_source[src]["tau_tree_t0"] = sub["spec_tree_t0"]["tau"]
    tps = {name: m["tokens_per_s"] for name, m in merged.items()}
    equal_chain = sum(a == b for a, b in zip(pooled["spec_chain_t0"].token_ids, pooled["plain_t0"].token_ids))
    runs = f"{len(ids) * rounds} prompt runs ({rounds} rounds)"
    out: dict[str, Any] = {
        "model": target.name, "profile": profile, "drafter": drafter_dir, "layers": list(drafter.spec.layers),
        "spec": dataclasses.asdict(spec), "n_prompts": len(ids), "prompt_ids": ids,
        "prompt_sources": {src: sum(r["source"] == src for r in recs) for src in sorted({r["source"] for r in recs})},
        "tokens_per_s": tps, "methods": merged, "by_source": by_source,
        "speedup_vs_plain_t0": tps["spec_chain_t0"] / tps["plain_t0"],
        "speedup_vs_plain_t1": tps["spec_chain_t1"] / tps["plain_t1"],
        "speedup_vs_prompt_lookup_t0": tps["spec_chain_t0"] / tps["prompt_lookup_t0"],
        "prompt_lookup_vs_plain_t0": tps["prompt_lookup_t0"] / tps["plain_t0"],
        "tau_t0": merged["spec_chain_t0"]["tau"], "tau_t1": merged["spec_chain_t1"]["tau"],
        "lossless_t0_chain": f"{equal_chain}/{runs} identical to plain greedy",
        "rounds": rounds,
        "by_round": [{f"speedup_vs_{base}": r[fast].tokens_per_s / r[base].tokens_per_s
                      for fast, base in (("spec_chain_t0", "plain_t0"), ("spec_chain_t1", "plain_t1"),
                                         ("spec_chain_t0", "prompt_lookup_t0"))}
                     for r in per_round],
    }
    if "spec_tree_t0" in pooled:
        equal_tree = sum(a == b for a, b in zip(pooled["spec_tree_t0"].token_ids, pooled["plain_t0"].token_ids))
        out["lossless_t0_tree"] = f"{equal_tree}/{runs} identical to plain greedy"
        out["tau_tree_t0"] = merged["spec_tree_t0"]["tau"]
        out["speedup_tree_vs_plain_t0"] = tps["spec_tree_t0"] / tps["plain_t0"]
        out["speedup_tree_vs_prompt_lookup_t0"] = tps["spec_tree_t0"] / tps["prompt_lookup_t0"]

    off = offline_acceptance(drafter, cache, spec.depth, split="eval", max_new_tokens=spec.max_new_tokens, ids=ids)
    out["tau_offline_t0"] = off["tau_offline"]
    out["tau_online_minus_offline"] = out["tau_t0"] - off["tau_offline"]
    out["acceptance_offline"] = off["acceptance_by_position"]

    context = int(statistics.median(len(prompts[p]) for p in ids)) + spec.max_new_tokens // 2
    extra = [spec.tree_size + 1] if spec.tree_topk > 0 else []
    costs = measure_costs(target, drafter, context=context, depth=spec.depth, extra_sizes=extra,
                          n_threads=threads, kernels=spec.kernels)
    out["cost_model"] = {"components_ms": costs,
                         "predicted_chain_t0": cost_model(out["tau_t0"], costs, spec.depth),
                         "measured_chain_t0": out["speedup_vs_plain_t0"]}
    if extra:
        out["cost_model"]["predicted_tree_t0"] = cost_model(out["tau_tree_t0"], costs, spec.depth,
                                                            verify_tokens=extra[0])
    out["drafter_training"] = {k: train_log.get(k) for k in ("tokens_per_s", "train_wall_s", "n_loss_tokens",
                                                            "threads")}
    out["drafter_training"]["unit"] = "response positions (loss tokens) per second, all unrolled steps"
    out["study_drafters"] = _study_drafters(cfg)
    out["command"] = (f"python -m benchmarks.bench_decoding --profile {profile} --drafter {drafter_dir} "
                      f"--n-prompts {n_prompts} --threads {threads} --rounds {rounds}"
                      + "".join(f" --set {k}={v}" for k, v in spec_overrides.items()))
    out["drafter_config"] = {k: train_log.get("config", {}).get(k) for k in ("draft_vocab", "ttt_steps", "epochs", "lr")}
    out["drafter_eval_offline"] = {k: (train_log.get("eval") or {}).get(k) for k in ("tau_offline",
                                                                                     "acceptance_by_position")}
    out["drafter_data"] = _data_summary(cfg, cache)
    out["torch_threads"] = threads
    out["seconds"] = round(time.time() - t_start, 1)
    return out


def run_precision(*, profile: str = "default", dtype: str = "bfloat16", n_prompts: int = 8, threads: int = 1,
                  progress: bool = True) -> dict[str, Any]:
    """The lower-precision lever: the same drafter and prompts with the target's weights in
    ``dtype`` (cast from the fp32 target), against fp32, interleaved in one run.

    Methods: plain (transformers ``generate``) and speculative chain decoding at T = 0, each
    with the fp32 and the ``dtype`` target. Reports tokens/s, the speedups within each
    precision, how many prompts give identical tokens (speculative vs plain in the same
    precision; ``dtype`` plain vs fp32 plain), and the verify costs of 1..depth+1 tokens
    in both precisions (what makes the round cheaper or not).
    """
    import copy

    from activation_wave.drafter import load_drafter
    from activation_wave.experiment import train_or_load
    from activation_wave.layers import eagle3_default_layers
    from activation_wave.pipeline import run_capture
    from activation_wave.speculative import measure_costs, plain_generate, run_interleaved, set_kernels, speculate

    t_start = time.time()
    cfg = bench_config(profile)
    spec = dataclasses.replace(cfg.spec, threads=threads, **SPEC_OVERRIDES, temperature=0.0, tree_topk=0)
    draft = dataclasses.replace(cfg.draft, threads=threads, **DRAFT_OVERRIDES)
    cap = run_capture(cfg, progress=progress)
    fp32, cache = cap.target, cap.cache
    drafter_dir = train_or_load(fp32, cache, eagle3_default_layers(fp32.n_layers), draft, progress=progress)[0]
    drafter = load_drafter(drafter_dir, fp32)
    set_kernels(fp32.model, "hf")  # a clean copy (no packed weights), then cast
    low = dataclasses.replace(fp32, model=copy.deepcopy(fp32.model).to(getattr(torch, dtype)))

    recs, found = _held_out(cache, n_prompts)
    prompts = [(r["id"], found[r["id"]]) for r in recs if r["id"] in found]
    methods: dict[str, Any] = {}
    for tag, tgt in (("fp32", fp32), (dtype, low)):
        methods[f"plain_{tag}"] = lambda p, c, t=tgt: plain_generate(t, [p], c(spec))
        methods[f"spec_chain_{tag}"] = lambda p, c, t=tgt: speculate(t, drafter, [p], c(spec))
    pooled = run_interleaved(methods, prompts, progress=progress)
    tps = {name: r.tokens_per_s for name, r in pooled.items()}

    def same(a: str, b: str) -> str:
        n = sum(x == y for x, y in zip(pooled[a].token_ids, pooled[b].token_ids))
        return f"{n}/{len(prompts)} prompts identical"

    context = int(statistics.median(len(p) for _, p in prompts)) + spec.max_new_tokens // 2
    verify = {tag: measure_costs(t, None, context=context, depth=spec.depth, n_threads=threads,
                                 kernels=spec.kernels)["verify_ms"] for tag, t in (("fp32", fp32), (dtype, low))}
    return {
        "model": fp32.name, "profile": profile, "dtype": dtype, "drafter": str(drafter_dir),
        "layers": list(drafter.spec.layers), "n_prompts": len(prompts), "prompt_ids": [p for p, _ in prompts],
        "spec": dataclasses.asdict(spec), "tokens_per_s": tps,
        "tau": {name: r.tau for name, r in pooled.items() if name.startswith("spec")},
        "speedup_fp32": tps["spec_chain_fp32"] / tps["plain_fp32"],
        f"speedup_{dtype}": tps[f"spec_chain_{dtype}"] / tps[f"plain_{dtype}"],
        f"plain_{dtype}_vs_fp32": tps[f"plain_{dtype}"] / tps["plain_fp32"],
        f"spec_{dtype}_vs_plain_fp32": tps[f"spec_chain_{dtype}"] / tps["plain_fp32"],
        "identical": {"spec_vs_plain_fp32": same("spec_chain_fp32", "plain_fp32"),
                      f"spec_vs_plain_{dtype}": same(f"spec_chain_{dtype}", f"plain_{dtype}"),
                      f"plain_{dtype}_vs_plain_fp32": same(f"plain_{dtype}", "plain_fp32")},
        "verify_ms": verify, "verify_context": context,
        "verify_4_over_step": {tag: v[min(4, max(v))] / v[1] for tag, v in verify.items()},
        "note": f"the {dtype} target is the fp32 target cast in memory (same file and provenance); "
                "the drafter is the fp32 one, fed the cast target's hidden states",
        "seconds": round(time.time() - t_start, 1),
    }


def run_data_scaling(*, profile: str = "default", fractions: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0),
                     samples: tuple[int, ...] | None = None, threads: int = 1, progress: bool = True) -> dict[str, Any]:
    """How the benchmark drafter's offline tau grows with its training data: the same
    recipe (:data:`DRAFT_OVERRIDES`) on seeded shares (``fractions``) of the greedy train
    records, then on all of them plus ``samples`` sampled responses per train prompt,
    evaluated on the whole (greedy) eval split (chain depth ``ttt_steps``, T = 0).
    ``samples`` defaults to 1, 2, 4 and the benchmark drafter's own count
    (:data:`DATA_OVERRIDES`), whose point is that drafter (same cache key, no retraining).

    The fit ``tau = a + b * log2(loss tokens)`` over the greedy shares gives the gain per
    doubling of the data; each sampled point also carries the tau that fit predicted for
    its size, so the prediction is checked on data it did not see. Not a timing."""
    import numpy as np

    from activation_wave.experiment import drafter_dir, train_or_load
    from activation_wave.layers import eagle3_default_layers
    from activation_wave.pipeline import run_capture
    from activation_wave.training import train_drafter

    t_start = time.time()
    cfg = bench_config(profile, 0)
    draft = dataclasses.replace(cfg.draft, threads=threads, **DRAFT_OVERRIDES)
    cap = run_capture(cfg, progress=progress)
    target, cache = cap.target, cap.cache
    layers = eagle3_default_layers(target.n_layers)

    def point(out: Path, fraction: float, n_samples: int) -> dict[str, Any]:
        log = json.loads((out / "train_log.json").read_text())
        return {"fraction": fraction, "samples_per_prompt": n_samples, "records": log["n_records"],
                "loss_tokens": log["n_loss_tokens"], "tau_offline": log["eval"]["tau_offline"],
                "acceptance_by_position": log["eval"]["acceptance_by_position"],
                "train_acc_last_epoch": log["epochs"][-1]["acc_by_step"][0],
                "train_wall_s": log.get("train_wall_s"), "drafter": str(out)}

    points = []
    for f in sorted(fractions):
        if f >= 1.0:
            out = train_or_load(target, cache, layers, draft, progress=progress)[0]
        else:  # kept beside the full drafter, keyed by the fraction
            full = drafter_dir(cache, layers, draft)
            out = full.with_name(f"{full.name}-frac{f:g}")
            if not (out / "train_log.json").exists():
                train_drafter(target, cache, layers, draft, out, progress=progress, records_fraction=f)
        points.append(point(out, f, 0))
    x = np.log2([p["loss_tokens"] for p in points])
    y = np.array([p["tau_offline"] for p in points])
    b, a = np.polyfit(x, y, 1) if len(points) > 1 else (float("nan"), float("nan"))
    if samples is None:
        samples = tuple(sorted({1, 2, 4, DATA_OVERRIDES["samples_per_prompt"]}))
    for n in samples:
        more = run_capture(bench_config(profile, n), progress=progress).cache
        pt = point(train_or_load(target, more, layers, draft, progress=progress)[0], 1.0, n)
        pt["tau_predicted"] = float(a + b * np.log2(pt["loss_tokens"]))
        points.append(pt)
    return {"model": target.name, "profile": profile, "layers": layers, "points": points,
            "tau_per_doubling": float(b), "fit": {"a": float(a), "b": float(b),
                                                 "form": "tau_offline = a + b * log2(loss tokens)",
                                                 "over": "the shares of the greedy train records"},
            "sample_temperature": cfg.data.sample_temperature,
            "draft": {k: getattr(draft, k) for k in ("epochs", "ttt_steps", "batch_tokens", "lr", "draft_vocab")},
            "eval_records": sum(r["split"] == "eval" for r in cache.records), "seconds": round(time.time() - t_start, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="default")
    ap.add_argument("--drafter", default=None, help="drafter folder (default: train one on the profile's capture)")
    ap.add_argument("--n-prompts", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2, help="interleaved runs over all prompts, pooled")
    ap.add_argument("--set", action="append", default=[], help="spec field override, e.g. --set tree_topk=4")
    ap.add_argument("--out", default=None, help="write the result JSON here")
    args = ap.parse_args()
    from activation_wave.config import SpecConfig, _coerce
    from typing import get_type_hints

    hints = get_type_hints(SpecConfig)
    overrides = {}
    for item in args.set:
        k, _, v = item.partition("=")
        overrides[k] = _coerce(v, hints[k], f"spec.{k}")
    res = run(profile=args.profile, drafter_dir=args.drafter, n_prompts=args.n_prompts, threads=args.threads,
              rounds=args.rounds, **overrides)
    text = json.dumps(res, indent=1, default=float)
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
