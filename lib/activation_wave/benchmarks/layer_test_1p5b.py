"""C2 again: the layer test on Qwen2.5-Coder-1.5B with drafters that draft
(``wave bench --only c2_layer_test``; issue 65, the fourteenth amendment of the CPU-payoff
pre-registration, ``book/lab/cpu_payoff.md``, section ``lab-cpu-c2-again``).

C2 as first registered compared two drafters trained on 128 responses for one epoch; the
default's accepted no draft, so C2 was not testable. The amendment re-states it with the eighth
amendment's drafter design (:func:`~activation_wave.benchmarks.large_drafter.drafter_config`: the
128 base train records, 1,000,000 training tokens): the default triple against the combined
rule's set (:data:`SETS`), seeds :data:`SEEDS` each, scored on the third model's held-out
prompts. Drafters train one at a time, each scored into the drafter ledger as it finishes, so a
stopped run resumes where it stopped; the seed-0 drafter of the default triple is the eighth
amendment's own drafter, read from the ledger.

The entry holds every drafter's tau and its instrument check (:data:`MIN_PROMPTS`), each set's
seed-averaged per-prompt tau, and the paired difference from the default with Holm across the
sets; :func:`activation_wave.study.chapters.cpu_payoff.evaluate_hypotheses` words C2 from it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

NAME = "c2_layer_test"
#: The registered sets, default first (the fourteenth amendment). The exhaustive rule's [4, 5, 27]
#: was to be added only if the budget allowed; it was not added (see the lab record).
SETS = ("eagle3-default", "combined")
SEEDS = (0, 1, 2)
#: Instrument check: a drafter's outcome tau must exceed 1 on at least this many eval prompts.
MIN_PROMPTS = 16
#: The commit that registered this design (the fourteenth amendment).
REGISTRATION = "46f05e8"

__all__ = ["NAME", "SETS", "SEEDS", "MIN_PROMPTS", "REGISTRATION", "jobs", "training_order", "summarize", "run"]


def jobs(sets: Mapping[str, Sequence[int]], dconf: Any, seeds: Sequence[int] = SEEDS) -> list[tuple[str, list[int], Any]]:
    """The design's drafters as ``(set, layers, config)``, in :func:`training_order`."""
    return [(name, [int(i) for i in sets[name]], dataclasses.replace(dconf, seed=s))
            for name, s in training_order(list(sets), seeds)]


def training_order(names: Sequence[str], seeds: Sequence[int] = SEEDS) -> list[tuple[str, int]]:
    """Seed by seed, the sets in order within a seed: a run stopped part way has (nearly) as
    many seeds of each set.

    >>> training_order(["a", "b"], (0, 1))
    [('a', 0), ('b', 0), ('a', 1), ('b', 1)]
    """
    return [(name, s) for s in seeds for name in names]


def _drafter_row(name: str, layers: Sequence[int], seed: int, key: str, tau: np.ndarray, pooled: float,
                 log: Mapping[str, Any], cpu: str | None) -> dict[str, Any]:
    """One drafter of the entry: its outcome tau (mean of its per-prompt taus, with its interval),
    how many prompts it accepted a draft on, the instrument check and its training cost."""
    from activation_wave.core.stats import bootstrap_mean_ci

    ok = tau[np.isfinite(tau)]
    accepting = int((ok > 1.0).sum())
    wall = float(log.get("train_wall_s") or 0.0)
    threads = int((log.get("config") or {}).get("threads") or 1)
    return {"set": name, "layers": list(layers), "seed": seed, "drafter": key, "tau": round(float(ok.mean()), 4),
            "tau_ci": [round(float(x), 4) for x in bootstrap_mean_ci(ok, seed=0)], "tau_pooled": round(pooled, 4),
            "prompts": int(ok.size), "prompts_accepting": accepting, "instrument_ok": accepting >= MIN_PROMPTS,
            "train_cpu_min": round(wall * threads / 60, 1), "cpu": cpu,
            "training": {"train_wall_s": round(wall, 1), "threads": threads, "tokens": log.get("n_tokens"),
                         "records": log.get("n_records")}}


def summarize(names: Sequence[str], layers: Mapping[str, Sequence[int]], taus: Mapping[str, np.ndarray], *,
              ok: Mapping[str, bool], n_boot: int = 10_000, alpha: float = 0.05) -> dict[str, Any]:
    """Each set's seed-averaged per-prompt tau (mean and interval over prompts) and every other
    set's paired difference from the first (``names[0]``, the default): bootstrap interval, p,
    Holm p across the compared sets, and the smallest difference the design detects at the
    strictest Holm level. ``taus``: set -> ``[seeds, prompts]``; ``ok``: whether every drafter of
    the set passed the instrument check (a set that did not is not compared)."""
    from activation_wave.core.stats import bootstrap_mean_ci, holm, min_detectable_delta, paired_bootstrap, seed_mean

    ref = names[0]
    sets = {}
    for name in names:
        m = seed_mean(taus[name])
        m = m[np.isfinite(m)]
        sets[name] = {"layers": list(layers[name]), "seeds": int(np.asarray(taus[name]).shape[0]),
                      "tau": round(float(m.mean()), 4),
                      "tau_ci": [round(float(x), 4) for x in bootstrap_mean_ci(m, seed=0)], "prompts": int(m.size),
                      "instrument_ok": bool(ok[name])}
    rivals = [n for n in names[1:] if ok[n] and ok[ref]]
    deltas = {n: paired_bootstrap(taus[n], taus[ref], n_boot=n_boot, seed=0) for n in rivals}
    p_holm = dict(zip(rivals, holm([d.p for d in deltas.values()]))) if rivals else {}
    comparisons = {}
    for n, d in deltas.items():  # d.sd: of the seed-averaged per-prompt differences
        comparisons[n] = {"mean": d.mean, "lo": d.lo, "hi": d.hi, "p": d.p, "p_holm": p_holm[n], "n": d.n,
                          "sd": round(d.sd, 4),
                          "mde": round(min_detectable_delta(d.sd, d.n, alpha=alpha / len(rivals)), 4)}
    return {"reference": ref, "sets": sets, "comparisons": comparisons,
            "not_compared": [n for n in names[1:] if n not in rivals]}


def run(cfg: Any, *, progress: bool = True) -> dict[str, Any]:
    """Train (or read from the ledger) the design's drafters one at a time, each scored into the
    ledger as it finishes; then every drafter's per-prompt tau on the eval prompts and C2's
    paired comparison; the benchmark entry."""
    from activation_wave.benchmarks import large_drafter as ld
    from activation_wave.core.results import cache_key
    from activation_wave.draft import ledger
    from activation_wave.draft.experiment import ScoreOnTrain, run_jobs
    from activation_wave.study.chapters import cpu_payoff as cpu
    from activation_wave.study.chapters.drafter_predictors import FoundDrafter, per_prompt_tau

    t0 = time.time()
    plan = ld._plan(cfg, progress=progress)
    dcfg, cap = plan["dcfg"], plan["cap"]
    all_sets, _ = cpu.drafter_sets(cfg)
    missing = [s for s in SETS if s not in all_sets]
    if missing:
        raise ValueError(f"the third model's layer selection has no set {missing}; run its layer-selection page "
                         "(wave study --only 07b_qwen) first")
    sets = {s: all_sets[s] for s in SETS}
    b = cfg.bench
    score = ScoreOnTrain(str(cap.cache.path), b.depth, b.draft_threshold, b.threads)
    dconf = ld.drafter_config(dcfg)
    rows = []
    for i, job in enumerate(jobs(sets, dconf), start=1):  # one at a time: each enters the ledger
        if progress:
            print(f"[{NAME}] drafter {i}/{len(SETS) * len(SEEDS)}: {job[0]} {job[1]} seed {job[2].seed}", flush=True)
        rows += run_jobs(cap.target, cap.cache, [job], 1, progress=progress, score=score)
    tag = [f"{r['set']}/{r['seed']}" for r in rows]  # each drafter scored on its own, then stacked per set
    found = [FoundDrafter(t, r["layers"], r["seed"], r["path"]) for t, r in zip(tag, rows)]
    ids, each, pooled = per_prompt_tau(cap.target, cap.cache, found, depth=b.depth, threshold=b.draft_threshold,
                                       threads=b.threads, ledger=dcfg.draft.ledger, progress=progress)
    taus = {s: np.stack([each[t][0] for t, r in zip(tag, rows) if r["set"] == s]) for s in SETS}
    drafters = []
    for t, r in zip(tag, rows):
        entry = ledger.read(dcfg.draft.ledger, r["path"]) or {}
        drafters.append(_drafter_row(r["set"], r["layers"], r["seed"], cache_key(r["path"]), each[t][0], pooled[t],
                                     r["train_log"], (entry.get("cpu") or {}).get("model")))
    ok = {s: all(d["instrument_ok"] for d in drafters if d["set"] == s) for s in SETS}
    summary = summarize(SETS, sets, taus, ok=ok)
    return {"figure": summary["comparisons"].get(SETS[1], {}).get("mean"),
            "unit": f"delta outcome tau, {SETS[1]} minus {SETS[0]} (offline, depth {b.depth}, draft threshold "
                    f"{b.draft_threshold}, {len(ids)} eval prompts, seeds averaged per prompt)",
            "model": cfg.third.model, "profile": cfg.profile, "registration": REGISTRATION,
            "command": f"wave bench --profile {cfg.profile} --only {NAME}",
            "pre_registration": "book/lab/cpu_payoff (lab-cpu-c2-again, fourteenth amendment)",
            "recipe": {k: getattr(dconf, k) for k in ld.RECIPE}, "budget_tokens": ld.BUDGET,
            "min_prompts": MIN_PROMPTS, **summary, "drafters": drafters,
            "train_cpu_min": round(sum(d["train_cpu_min"] for d in drafters), 1),
            "eval_prompt_ids": list(ids),
            "per_prompt_tau": {s: [[None if v != v else round(float(v), 5) for v in row] for row in taus[s]]
                               for s in SETS},
            "seconds": round(time.time() - t0, 1)}
