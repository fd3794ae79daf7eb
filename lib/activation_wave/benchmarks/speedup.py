"""Speculative decoding against plain and prompt-lookup decoding, in one run; and its levers.

:func:`run` (``speculative_decoding``): the benchmark drafter (the EAGLE-3 default layers,
the recipe of the profile's ``bench`` section) decodes held-out prompts with
:func:`~activation_wave.decode.comparison.compare_online`, the same comparison as chapter 6:
plain decoding at T = 0 and T = 1, prompt lookup at T = 0, the drafter's chain at T = 0
and T = 1 and its tree at T = 0 (``spec.tree_topk > 0``), interleaved prompt by prompt,
``bench.rounds`` times (at least 5 in the default profile: one round's speedup moves by
several percent on a shared machine, so the spread over rounds and an interval of their
mean are reported with the pooled figure). Reported: tokens/s of each, the speedups, tau, whether
speculative greedy equals plain greedy on every prompt, tau offline on the same prompts,
the cost-model components with the predicted speedup, and the drafter's training speed.
With ``bench.drafter=data_scale`` (issue 41) the data-scale design's strongest drafter decodes
beside the benchmark drafter in the same rounds (chain at T = 0; ``adopted`` in the entry:
its speedup over plain and over the benchmark drafter, its own cost model and outcome score),
so the pages built on the benchmark drafter keep it and the two are compared on the same runs.

:func:`run_precision` (``speculative_decoding_bf16``) casts the target to a lower
precision; :func:`run_data_scaling` (``drafter_data_scaling``) measures how tau grows
with the drafter's training data.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from activation_wave.decode.comparison import OnlineComparison, compare_online, held_out_prompts, method_name
from activation_wave.core.config import DraftConfig, SpecConfig, StudyConfig, load_config
from activation_wave.decode.rounds import SpecResult, merge_results
from activation_wave.models.drafter import load_drafter
from activation_wave.draft.experiment import drafter_dir, train_or_load
from activation_wave.core.layers import eagle3_default_layers
from activation_wave.study.steps import Captured, load_results, run_capture
from activation_wave.core.stats import repeat_spread

#: The benchmark drafter's name in the comparison (its methods: ``spec_chain_t0``, ...).
DRAFTER = "spec"
#: An adopted drafter's name (``bench.drafter`` other than ``recipe``; issue 41): it decodes
#: beside the recipe drafter in the same interleaved run, chain at T = 0 only.
ADOPTED = "adopted"


def _summary(res: SpecResult) -> dict[str, Any]:
    """The figures of one pooled method that the results file keeps."""
    out: dict[str, Any] = {"tokens": res.new_tokens, "wall_s": round(res.wall_s, 3),
                           "tokens_per_s": res.tokens_per_s, "prompt_runs": res.n_prompts}
    if res.method.startswith("eagle3"):
        out.update(tau=res.tau, rounds=res.target_forwards, acceptance_by_position=res.acceptance_by_position)
    return out


def _subset(res: SpecResult, keep: set[str]) -> SpecResult:
    """The pooled result restricted to the prompts in ``keep``."""
    return merge_results([dataclasses.replace(res, per_prompt=[p for p in res.per_prompt if p["id"] in keep])])


def _study_drafters(cfg: StudyConfig, root: str | None = None) -> dict[str, Any] | None:
    """Training time and throughput of chapter 6's drafters under this profile, as the
    study's last run recorded them (None before chapter 6 has run; ``root``: the results root)."""
    try:
        runs = load_results("06_eagle3_speedup", cfg, root)["runs"]
    except FileNotFoundError:
        return None
    secs = [r["train_s"] for r in runs if r.get("train_s")]
    tps = [r["tokens_per_s"] for r in runs if r.get("tokens_per_s")]
    return {"drafters": len(runs), "train_s_per_drafter_mean": statistics.fmean(secs) if secs else None,
            "tokens_per_s_mean": statistics.fmean(tps) if tps else None,
            "config": {k: getattr(cfg.draft, k) for k in ("epochs", "ttt_steps", "batch_tokens", "threads", "workers")},
            "note": "the drafters page's drafters, trained by `wave study` (two at once when draft.workers = 2)"}


def bench_config(profile: str = "default", samples_per_prompt: int | None = None,
                 overrides: dict[str, Any] | None = None) -> StudyConfig:
    """The profile's config (with ``overrides``) with the benchmark drafter's data:
    ``bench.samples_per_prompt`` sampled responses per train prompt, or
    ``samples_per_prompt``. Nothing else changes, so the greedy responses and chapter 6's
    capture stay shared."""
    cfg = load_config(profile, overrides)
    n = cfg.bench.samples_per_prompt if samples_per_prompt is None else samples_per_prompt
    return load_config(profile, {**(overrides or {}), "data.samples_per_prompt": n})


def bench_draft(cfg: StudyConfig) -> DraftConfig:
    """The benchmark drafter's training config: the profile's ``draft`` with the ``bench`` recipe."""
    b = cfg.bench
    return dataclasses.replace(cfg.draft, threads=b.train_threads or b.threads, epochs=b.draft_epochs,
                               ttt_steps=b.draft_ttt_steps, batch_tokens=b.draft_batch_tokens)


def bench_spec(cfg: StudyConfig) -> SpecConfig:
    """The benchmark's decoding config: the profile's ``spec`` with the ``bench`` settings."""
    b = cfg.bench
    return dataclasses.replace(cfg.spec, threads=b.threads, depth=b.depth, draft_threshold=b.draft_threshold,
                               max_new_tokens=b.max_new_tokens)


#: Where an adopted drafter comes from: ``cfg -> (weight folder, train log, what was chosen)``
#: (``benchmarks.data_scale.strongest``; passed in by ``wave bench``, which knows both benchmarks).
Adopt = Callable[..., tuple[str, dict[str, Any], dict[str, Any]]]


def _benchmark_drafter(cfg: StudyConfig, progress: bool) -> tuple[Captured, str, dict[str, Any]]:
    """The capture with the benchmark's data, and the benchmark drafter on the EAGLE-3
    default layers (trained once, then loaded from the drafter cache), with its log."""
    cap = run_capture(bench_config(cfg.profile, overrides=_overrides(cfg)), progress=progress)
    path, log = train_or_load(cap.target, cap.cache, eagle3_default_layers(cap.target.n_layers), bench_draft(cfg),
                              progress=progress)
    return cap, str(path), log


def _adopted_drafter(cfg: StudyConfig, progress: bool, adopt: Adopt | None
                     ) -> tuple[str, dict[str, Any], dict[str, Any]] | None:
    """With ``bench.drafter`` other than ``recipe``: the drafter ``adopt`` gives (weight folder,
    train log, what was chosen), to decode beside the recipe drafter; None with ``recipe``."""
    if cfg.bench.drafter == "recipe":
        return None
    if adopt is None:
        raise ValueError(f"bench.drafter={cfg.bench.drafter} is adopted by `wave bench --only "
                         "speculative_decoding`; called directly, pass adopt= (benchmarks.data_scale.strongest)")
    path, log, choice = adopt(cfg, progress=progress)
    return path, log, {"benchmark": cfg.bench.drafter, **choice}


def _overrides(cfg: StudyConfig) -> dict[str, Any]:
    """``cfg`` as dotted overrides of its own profile (so derived configs keep ``--set`` values)."""
    base = load_config(cfg.profile).to_dict()
    out: dict[str, Any] = {"model": cfg.model} if cfg.model != base["model"] else {}
    for section, values in cfg.to_dict().items():
        if isinstance(values, dict):
            out.update({f"{section}.{k}": v for k, v in values.items() if base[section][k] != v})
    return out


def _data_summary(cfg: StudyConfig, cache: Any) -> dict[str, Any]:
    """What the drafter was trained on: greedy and sampled train records of the capture."""
    from activation_wave.models.prompts import SAMPLE_MARK

    train = [r for r in cache.records if r["split"] == "train"]
    return {"samples_per_prompt": cfg.data.samples_per_prompt, "sample_temperature": cfg.data.sample_temperature,
            "train_records": len(train), "sampled_train_records": sum(SAMPLE_MARK in r["id"] for r in train),
            "eval_records": sum(r["split"] == "eval" for r in cache.records)}


def run(cfg: StudyConfig, *, progress: bool = True, adopt: Adopt | None = None) -> dict[str, Any]:
    """The decoding benchmark under ``cfg`` (see the module docstring); a JSON-able dict
    (``adopt``: see :func:`_adopted_drafter`).

    Every figure pools the ``bench.rounds`` interleaved runs over all prompts (tokens and
    seconds summed); ``by_round`` keeps each round's speedups and ``round_spread`` their
    range, standard deviation and a 95% interval of their mean (how much the shared machine
    moved them)."""
    from activation_wave.decode.offline import offline_acceptance
    from activation_wave.decode.costs import cost_model
    from activation_wave.decode.timing import measure_costs

    t_start = time.time()
    b, spec = cfg.bench, bench_spec(cfg)
    cap, path, train_log = _benchmark_drafter(cfg, progress)
    adopted = _adopted_drafter(cfg, progress, adopt)
    target, cache = cap.target, cap.cache
    drafter = load_drafter(path, target)
    drafters = {DRAFTER: drafter} | ({ADOPTED: load_drafter(adopted[0], target)} if adopted else {})
    picked = held_out_prompts(target, cap.cfg.data, b.n_prompts, spec.seed)
    ids = [p.id for p, _ in picked]
    cmp = compare_online(target, drafters, [(p.id, tok) for p, tok in picked], spec, rounds=b.rounds,
                         progress=progress, kinds={ADOPTED: ("chain_t0",)})
    out = _comparison_figures(cmp, {p.id: p.source for p, _ in picked})
    out = {"model": target.name, "profile": cfg.profile, "drafter": path, "layers": list(drafter.spec.layers),
           "spec": dataclasses.asdict(spec), "n_prompts": len(ids), "prompt_ids": ids,
           "prompt_sources": {src: sum(p.source == src for p, _ in picked) for src in sorted({p.source for p, _ in picked})},
           **out}
    off = offline_acceptance(drafter, cache, spec.depth, split="eval", max_new_tokens=spec.max_new_tokens, ids=ids)
    out["tau_offline_t0"] = off["tau_offline"]
    out["tau_online_minus_offline"] = out["tau_t0"] - off["tau_offline"]
    out["acceptance_offline"] = off["acceptance_by_position"]

    context = int(statistics.median(len(tok) for _, tok in picked)) + spec.max_new_tokens // 2
    extra = [spec.tree_size + 1] if spec.tree_topk > 0 else []
    costs = measure_costs(target, drafter, context=context, depth=spec.depth, extra_sizes=extra,
                          n_threads=b.threads, kernels=spec.kernels)
    out["cost_model"] = {"components_ms": costs, "predicted_chain_t0": cost_model(out["tau_t0"], costs, spec.depth),
                         "measured_chain_t0": out["speedup_vs_plain_t0"]}
    if extra:
        out["cost_model"]["predicted_tree_t0"] = cost_model(out["tau_tree_t0"], costs, spec.depth,
                                                            verify_tokens=extra[0])
    out["drafter_training"] = {k: train_log.get(k) for k in ("tokens_per_s", "train_wall_s", "n_loss_tokens",
                                                            "threads")}
    out["drafter_training"]["unit"] = "response positions (loss tokens) per second, all unrolled steps"
    out["study_drafters"] = _study_drafters(cfg)
    out["command"] = f"wave bench --profile {cfg.profile} --only speculative_decoding" + "".join(
        f" --set {k}={v}" for k, v in _overrides(cfg).items())
    out["drafter_config"] = {k: train_log.get("config", {}).get(k)
                             for k in ("draft_vocab", "ttt_steps", "epochs", "lr", "dtype", "max_tokens", "train_records")}
    out["drafter_eval_offline"] = {k: (train_log.get("eval") or {}).get(k) for k in ("tau_offline",
                                                                                     "acceptance_by_position")}
    out["drafter_data"] = _data_summary(cap.cfg, cache)
    out["drafter_outcome"] = _outcome_score(cfg, target, cache, path)
    if adopted:
        apath, alog, choice = adopted
        acosts = measure_costs(target, drafters[ADOPTED], context=context, depth=spec.depth, n_threads=b.threads,
                               kernels=spec.kernels)
        out["adopted"] = adopted_figures(cmp, acosts, spec.depth) | {
            "drafter": apath, "adopted_from": choice, "layers": list(drafters[ADOPTED].spec.layers),
            "drafter_outcome": _outcome_score(cfg, target, cache, apath),
            "drafter_training": {k: alog.get(k) for k in ("tokens_per_s", "train_wall_s", "n_loss_tokens", "threads")},
            "drafter_config": {k: alog.get("config", {}).get(k) for k in ("draft_vocab", "ttt_steps", "epochs", "lr",
                                                                          "dtype", "max_tokens", "train_records")}}
    out["torch_threads"] = b.threads
    out["seconds"] = round(time.time() - t_start, 1)
    return out


def adopted_figures(cmp: OnlineComparison, costs: dict[str, Any], depth: int) -> dict[str, Any]:
    """The adopted drafter's figures from the run it shared with the recipe drafter: its online
    tau and speedup over plain (pooled, per round, the rounds' spread), its speedup over the
    recipe drafter on the same prompt runs, whether its greedy output equals plain's, and the
    cost model from its own measured components with the break-even tau of this machine."""
    from activation_wave.decode.costs import cost_model

    a, r = method_name(ADOPTED, "chain_t0"), method_name(DRAFTER, "chain_t0")
    s = _summary(cmp.pooled[a])
    return {"tau_t0": s["tau"], "tokens_per_s": s["tokens_per_s"], "acceptance_by_position": s["acceptance_by_position"],
            "speedup_vs_plain_t0": cmp.speedup(a, "plain_t0"), "speedup_vs_recipe_drafter_t0": cmp.speedup(a, r),
            "lossless_t0_chain": _lossless(cmp, a),
            **_round_figures(cmp, {"speedup_vs_plain": (a, "plain_t0"), "speedup_vs_recipe_drafter": (a, r)}),
            "cost_model": {"components_ms": costs, "predicted_chain_t0": cost_model(s["tau"], costs, depth),
                           "measured_chain_t0": cmp.speedup(a, "plain_t0")}}


def _lossless(cmp: OnlineComparison, method: str) -> str:
    """How many of the comparison's prompt runs ``method`` decoded exactly as plain greedy did."""
    rounds = len(cmp.per_round)
    return (f"{cmp.identical(method)}/{len(cmp.prompt_ids) * rounds} prompt runs ({rounds} rounds) identical to "
            "plain greedy")


def _round_figures(cmp: OnlineComparison, pairs: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """Each named speedup ``{name: (method, baseline)}`` round by round (``by_round``) and how far
    the shared machine moved it between rounds (``round_spread``: range, sd and a 95% Student-t
    interval of the mean over rounds; NaN -> null with one round)."""
    per = {name: cmp.round_speedups(fast, base) for name, (fast, base) in pairs.items()}
    return {"by_round": [{name: v[i] for name, v in per.items()} for i in range(len(cmp.per_round))],
            "round_spread": {name: dataclasses.asdict(repeat_spread(v)) for name, v in per.items()}}


def per_prompt_runs(cmp: OnlineComparison) -> list[dict[str, Any]]:
    """Every prompt run of an online comparison, so that a claim about it can be checked: per
    round and prompt id, each method's generated tokens, wall seconds and verify rounds, and for
    the T = 0 methods whether its tokens equal plain greedy's on that run."""
    def plain(name: str) -> str | None:
        return "plain_t0" if name.endswith("_t0") and name != "plain_t0" else None

    return [row for i, rnd in enumerate(cmp.per_round) for row in _prompt_rows(rnd, cmp.prompt_ids, plain, round=i)]


def _prompt_rows(results: dict[str, SpecResult], ids: list[str], plain: Callable[[str], str | None],
                 **labels: Any) -> list[dict[str, Any]]:
    """One row per prompt id of one interleaved run: ``labels``, the id, and per method its
    tokens, wall seconds and verify rounds, with ``identical_to_plain`` (its tokens equal those of
    the method ``plain(name)`` on the same prompt) where ``plain`` names one."""
    by = {name: {p["id"]: p for p in res.per_prompt} for name, res in results.items()}
    out = []
    for pid in ids:
        row: dict[str, Any] = {**labels, "id": pid}
        for name, runs in by.items():
            p, ref = runs[pid], plain(name)
            row[name] = {"tokens": len(p["token_ids"]), "wall_s": round(float(p["wall_s"]), 4), "rounds": p.get("rounds")}
            if ref:
                row[name]["identical_to_plain"] = p["token_ids"] == by[ref][pid]["token_ids"]
        out.append(row)
    return out


def _outcome_score(cfg: StudyConfig, target: Any, cache: Any, path: str) -> dict[str, Any]:
    """The benchmark drafter on the study's pre-registered outcome (chapter 6's): offline tau per
    eval prompt at ``bench.depth`` and ``bench.draft_threshold``, read from the ledger where it
    holds the score; its mean over prompts with a bootstrap interval."""
    from activation_wave.core.stats import mean_ci
    from activation_wave.study.chapters.drafter_predictors import FoundDrafter, per_prompt_tau

    b = cfg.bench
    ids, taus, _ = per_prompt_tau(target, cache, [FoundDrafter("benchmark", (), 0, path)], depth=b.depth,
                                  threshold=b.draft_threshold, threads=b.threads, ledger=cfg.draft.ledger)
    per = [None if not np.isfinite(v) else float(v) for v in taus["benchmark"][0]]
    tau, lo, hi = mean_ci(per)
    return {"tau": tau, "lo": lo, "hi": hi, "n_prompts": sum(v is not None for v in per), "depth": b.depth,
            "draft_threshold": b.draft_threshold, "prompt_ids": list(ids), "per_prompt": per,
            "what": "the pre-registered outcome of the drafters page (offline tau per eval prompt, mean over prompts)"}


def _comparison_figures(cmp: OnlineComparison, source: dict[str, str]) -> dict[str, Any]:
    """The benchmark's figures of an online comparison: pooled, by prompt source, by round."""
    m = lambda kind: method_name(DRAFTER, kind)  # noqa: E731
    merged = {name: _summary(r) for name, r in cmp.pooled.items()}
    tps = {name: s["tokens_per_s"] for name, s in merged.items()}
    tree = m("tree_t0") in cmp.pooled
    by_source: dict[str, dict[str, Any]] = {}
    for src in sorted(set(source.values())):
        sub = {name: _summary(_subset(r, {p for p in cmp.prompt_ids if source[p] == src}))
               for name, r in cmp.pooled.items()}
        # distinct prompts of this source, and how many times they were decoded (once a round)
        by_source[src] = {"prompts": sum(source[p] == src for p in cmp.prompt_ids),
                          "prompt_runs": sub["plain_t0"]["prompt_runs"],
                          "tokens_per_s": {name: s["tokens_per_s"] for name, s in sub.items()},
                          "speedup_vs_plain_t0": sub[m("chain_t0")]["tokens_per_s"] / sub["plain_t0"]["tokens_per_s"],
                          "tau_t0": sub[m("chain_t0")]["tau"]}
        if tree:
            by_source[src]["speedup_tree_vs_plain_t0"] = (sub[m("tree_t0")]["tokens_per_s"]
                                                          / sub["plain_t0"]["tokens_per_s"])
            by_source[src]["tau_tree_t0"] = sub[m("tree_t0")]["tau"]
    pairs = ((m("chain_t0"), "plain_t0"), (m("chain_t1"), "plain_t1"), (m("chain_t0"), "prompt_lookup_t0"))
    out: dict[str, Any] = {
        "tokens_per_s": tps, "methods": merged, "by_source": by_source,
        "speedup_vs_plain_t0": cmp.speedup(m("chain_t0"), "plain_t0"),
        "speedup_vs_plain_t1": cmp.speedup(m("chain_t1"), "plain_t1"),
        "speedup_vs_prompt_lookup_t0": cmp.speedup(m("chain_t0"), "prompt_lookup_t0"),
        "prompt_lookup_vs_plain_t0": cmp.speedup("prompt_lookup_t0", "plain_t0"),
        "tau_t0": merged[m("chain_t0")]["tau"], "tau_t1": merged[m("chain_t1")]["tau"],
        "lossless_t0_chain": _lossless(cmp, m("chain_t0")), "rounds": len(cmp.per_round),
        **_round_figures(cmp, {f"speedup_vs_{base}": (fast, base) for fast, base in pairs}),
    }
    out["per_prompt"] = per_prompt_runs(cmp)
    if tree:
        out["lossless_t0_tree"] = _lossless(cmp, m("tree_t0"))
        out["tau_tree_t0"] = merged[m("tree_t0")]["tau"]
        out["speedup_tree_vs_plain_t0"] = cmp.speedup(m("tree_t0"), "plain_t0")
        out["speedup_tree_vs_prompt_lookup_t0"] = cmp.speedup(m("tree_t0"), "prompt_lookup_t0")
    return out


def run_precision(cfg: StudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """The lower-precision lever: the benchmark drafter and ``bench.precision_prompts``
    held-out prompts with the target's weights in ``bench.precision_dtype`` (cast from the
    fp32 target), against fp32, interleaved in one run.

    Methods: plain (transformers ``generate``) and speculative chain decoding at T = 0, each
    with the fp32 and the ``dtype`` target. Reports tokens/s, the speedups within each
    precision, how many prompts give identical tokens (speculative vs plain in the same
    precision; ``dtype`` plain vs fp32 plain), and the verify costs of 1..depth+1 tokens
    in both precisions (what makes the round cheaper or not).
    """
    import copy

    from activation_wave.decode.baselines import plain_generate
    from activation_wave.decode.kernels import set_kernels
    from activation_wave.decode.speculative import speculate
    from activation_wave.decode.timing import measure_costs, run_interleaved

    t_start = time.time()
    dtype, threads = cfg.bench.precision_dtype, cfg.bench.threads
    spec = dataclasses.replace(bench_spec(cfg), temperature=0.0, tree_topk=0)
    cap, drafter_dir, _ = _benchmark_drafter(cfg, progress)
    fp32 = cap.target
    drafter = load_drafter(drafter_dir, fp32)
    set_kernels(fp32.model, "hf")  # a clean copy (no packed weights), then cast
    low = dataclasses.replace(fp32, model=copy.deepcopy(fp32.model).to(getattr(torch, dtype)))

    prompts = [(p.id, tok) for p, tok in held_out_prompts(fp32, cap.cfg.data, cfg.bench.precision_prompts, spec.seed)]
    methods: dict[str, Any] = {}
    for tag, tgt in (("fp32", fp32), (dtype, low)):
        methods[f"plain_{tag}"] = lambda p, c, t=tgt: plain_generate(t, [p], c(spec))
        methods[f"spec_chain_{tag}"] = lambda p, c, t=tgt: speculate(t, drafter, [p], c(spec))
    pooled = run_interleaved(methods, prompts, progress=progress)
    tps = {name: r.tokens_per_s for name, r in pooled.items()}

    # per prompt, each run checked against the plain run it names: a speculative run against plain
    # in its own precision, plain in the lower precision against plain fp32
    against = {f"spec_chain_{t}": f"plain_{t}" for t in ("fp32", dtype)} | {f"plain_{dtype}": "plain_fp32"}
    rows = _prompt_rows(pooled, [p for p, _ in prompts], against.get)

    def same(method: str) -> str:
        return f"{sum(r[method]['identical_to_plain'] for r in rows)}/{len(prompts)} prompts identical"

    context = int(statistics.median(len(p) for _, p in prompts)) + spec.max_new_tokens // 2
    verify = {tag: measure_costs(t, None, context=context, depth=spec.depth, n_threads=threads,
                                 kernels=spec.kernels)["verify_ms"] for tag, t in (("fp32", fp32), (dtype, low))}
    return {
        "model": fp32.name, "profile": cfg.profile, "dtype": dtype, "drafter": str(drafter_dir),
        "layers": list(drafter.spec.layers), "n_prompts": len(prompts), "prompt_ids": [p for p, _ in prompts],
        "spec": dataclasses.asdict(spec), "tokens_per_s": tps,
        "tau": {name: r.tau for name, r in pooled.items() if name.startswith("spec")},
        "speedup_fp32": tps["spec_chain_fp32"] / tps["plain_fp32"],
        f"speedup_{dtype}": tps[f"spec_chain_{dtype}"] / tps[f"plain_{dtype}"],
        f"plain_{dtype}_vs_fp32": tps[f"plain_{dtype}"] / tps["plain_fp32"],
        f"spec_{dtype}_vs_plain_fp32": tps[f"spec_chain_{dtype}"] / tps["plain_fp32"],
        "identical": {"spec_vs_plain_fp32": same("spec_chain_fp32"),
                      f"spec_vs_plain_{dtype}": same(f"spec_chain_{dtype}"),
                      f"plain_{dtype}_vs_plain_fp32": same(f"plain_{dtype}")},
        "verify_ms": verify, "verify_context": context,
        "verify_4_over_step": {tag: v[min(4, max(v))] / v[1] for tag, v in verify.items()},
        "per_prompt": rows,
        "note": f"the {dtype} target is the fp32 target cast in memory (same file and provenance); "
                "the drafter is the fp32 one, fed the cast target's hidden states",
        "seconds": round(time.time() - t_start, 1),
    }




#: Environment that makes torch and oneDNN use AVX2 kernels only, as on a CPU without bf16
#: units: bf16 matmuls are then emulated (what chapter 6 met on an AVX2-only CPU).
AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def precision_speeds(cfg: StudyConfig, fraction: float, rounds: int) -> dict[str, Any]:
    """Training tokens/s of the benchmark drafter's recipe (one epoch, the EAGLE-3 default
    triple, a ``fraction`` of the greedy capture's train records) in fp32 and in bf16
    autocast, alternating ``rounds`` times (fp32, bf16, fp32, ...), in this process."""
    import tempfile

    from activation_wave.draft.training import train_drafter

    cap = run_capture(bench_config(cfg.profile, 0, _overrides(cfg)), progress=False)
    layers = eagle3_default_layers(cap.target.n_layers)
    base = dataclasses.replace(bench_draft(cfg), epochs=1, records_fraction=fraction, eval_every=0, ledger="")
    runs: dict[str, list[float]] = {"fp32": [], "bf16": []}
    positions = 0
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for dtype in runs:
                out = train_drafter(cap.target, cap.cache, layers, dataclasses.replace(base, dtype=dtype),
                                    Path(tmp) / f"{dtype}-{r}", progress=False)
                log = json.loads((out / "train_log.json").read_text())
                runs[dtype].append(float(log["tokens_per_s"]))
                positions = int(log["n_loss_tokens"])
    med = {k: statistics.median(v) for k, v in runs.items()}
    return {"model": cap.target.name, "layers": layers, "threads": base.threads, "loss_positions": positions,
            "tokens_per_s": runs, "median": med, "ratio_fp32_over_bf16": med["fp32"] / med["bf16"]}


def run_training_precision(cfg: StudyConfig, *, fraction: float = 0.03, rounds: int = 2,
                           avx2_only: bool = True, progress: bool = True) -> dict[str, Any]:
    """Why the profiles train drafters in fp32: bf16 autocast against fp32 training
    (:func:`precision_speeds`), on this CPU as it is and, with ``avx2_only``, once more in a
    child process limited to AVX2 kernels (:data:`AVX2_ONLY`), as on a CPU without bf16 units.
    ``figure`` / ``baseline``: fp32 / bf16 tokens/s on this CPU as it is; ``ratio`` their ratio;
    the CPU and whether it has bf16 units come from :func:`~activation_wave.benchmarks.peak.cpu_model`."""
    import os
    import subprocess
    import sys

    from activation_wave.benchmarks.peak import cpu_model

    if progress:
        print("[bench] training_precision: this CPU as it is", flush=True)
    native = precision_speeds(cfg, fraction, rounds)
    out = {"profile": cfg.profile, **cpu_model(), "records_fraction": fraction, "rounds": rounds, "native": native,
           "figure": native["median"]["fp32"], "baseline": native["median"]["bf16"],
           "ratio": native["ratio_fp32_over_bf16"],
           "note": "training tokens/s (loss positions per second of optimisation, evals excluded), fp32 and bf16 "
                   "autocast alternated in one run; ratio = fp32 / bf16 on this CPU as it is; avx2_only: the same "
                   f"in a child process with {AVX2_ONLY} (bf16 emulated, as on a CPU without bf16 units)"}
    if avx2_only:
        if progress:
            print("[bench] training_precision: limited to AVX2 kernels (a child process)", flush=True)
        code = ("import json, sys; from activation_wave.core.config import load_config; "
                "from activation_wave.benchmarks.speedup import precision_speeds; "
                "a = json.loads(sys.argv[1]); "
                "print(json.dumps(precision_speeds(load_config(a['profile'], a['overrides']), a['fraction'], a['rounds'])))")
        arg = json.dumps({"profile": cfg.profile, "overrides": _overrides(cfg), "fraction": fraction, "rounds": rounds})
        proc = subprocess.run([sys.executable, "-c", code, arg], env={**os.environ, **AVX2_ONLY}, capture_output=True,
                              text=True, check=True)
        out["avx2_only"] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def run_data_scaling(cfg: StudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """How the benchmark drafter's offline tau grows with its training data: the same
    recipe (:func:`bench_draft`) on seeded shares (``bench.scaling_fractions``) of the
    greedy train records, then on all of them plus ``bench.scaling_samples`` sampled
    responses per train prompt, evaluated on the whole (greedy) eval split (chain depth
    ``ttt_steps``, T = 0). The point with ``bench.samples_per_prompt`` samples is the
    benchmark drafter itself (same cache key, no retraining).

    The fit ``tau = a + b * log2(loss tokens)`` over the greedy shares gives the gain per
    doubling of the data; each sampled point also carries the tau that fit predicted for
    its size, so the prediction is checked on data it did not see. Not a timing."""
    import numpy as np

    from activation_wave.draft.training import train_drafter

    t_start = time.time()
    extra = _overrides(cfg)
    greedy = bench_config(cfg.profile, 0, extra)
    draft = bench_draft(cfg)
    cap = run_capture(greedy, progress=progress)
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
    for f in sorted(cfg.bench.scaling_fractions):
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
    for n in cfg.bench.scaling_samples:
        more = run_capture(bench_config(cfg.profile, n, extra), progress=progress).cache
        pt = point(train_or_load(target, more, layers, draft, progress=progress)[0], 1.0, n)
        pt["tau_predicted"] = float(a + b * np.log2(pt["loss_tokens"]))
        points.append(pt)
    return {"model": target.name, "profile": cfg.profile, "layers": layers, "points": points,
            "tau_per_doubling": float(b), "fit": {"a": float(a), "b": float(b),
                                                 "form": "tau_offline = a + b * log2(loss tokens)",
                                                 "over": "the shares of the greedy train records"},
            "sample_temperature": greedy.data.sample_temperature,
            "draft": {k: getattr(draft, k) for k in ("epochs", "ttt_steps", "batch_tokens", "lr", "draft_vocab")},
            "eval_records": sum(r["split"] == "eval" for r in cache.records), "seconds": round(time.time() - t_start, 1)}
