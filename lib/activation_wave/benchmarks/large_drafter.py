"""A 1.5B drafter worth measuring in llama.cpp (``wave bench --only large_drafter``; issue 42).

Chapter 11's C1 drafter (the default triple of the third model, ``third.model``) trained two
epochs on 128 prompts and accepts almost nothing (outcome tau 1.00), so C1 measured an
untrained drafter. This benchmark trains the same triple the way issue 41 trains SmolLM2's:
on the 128 base train prompts plus the first :data:`N_CORPUS` corpus prompts
(:mod:`activation_wave.models.corpus`), each answered greedily by the 1.5B target in
llama.cpp (:data:`ENGINE`, committed under ``data/responses/``), for :data:`BUDGET` training
tokens with :data:`RECIPE`. The design is registered in chapter 11 (its second amendment)
before the drafter trains. That drafter fell short of the target, so its training continues
in stages (:data:`STAGES`, :func:`stage_configs`; the third to seventh amendments): each
starts from an earlier stage's weights and trains :data:`STAGE_TOKENS` more, in order, until
a stage reaches the target or all have run; every stage is scored, and the entry's
``stages`` is the curve (tokens and CPU-minutes summed along each stage's line of parents).
Before stage 4 a short probe (:data:`PROBE`, fifth amendment) chose its learning rate.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from activation_wave.core.config import DataConfig, DraftConfig, StudyConfig
from activation_wave.study.chapters.cpu_payoff import LARGE as NAME
from activation_wave.study.chapters.cpu_payoff import LARGE_METHOD as METHOD
from activation_wave.study.chapters.cpu_payoff import LARGE_TARGET

__all__ = ["NAME", "N_CORPUS", "BUDGET", "RECIPE", "STAGE_TOKENS", "STAGES", "ENGINE", "METHOD",
           "PROBE", "INDIST", "run_indist", "indist_verdict", "INDIST_ALL", "run_indist_all", "indist_prompts",
           "indist_generation_config", "INDIST_CONT", "CONT_STAGE", "cont_config", "run_indist_cont", "INDIST_SAMPLES",
           "SAMPLES", "samples_generation_config", "run_indist_samples", "INDIST_STEPS", "STEPS_BATCH_TOKENS",
           "steps_config", "run_indist_steps",
           "generation_config", "drafter_config", "stage_configs", "probe_configs", "probe_verdict", "lineage", "run",
           "trained"]

#: Corpus prompts added to the third model's 128 base train prompts (8x the base).
N_CORPUS = 896
#: Training tokens (summed over the optimiser's steps; ``DraftConfig.max_tokens``), about five epochs.
BUDGET = 1_000_000
#: The recipe screen's base (chapter 10), with bf16 autocast: 2.8x fp32's training speed on a CPU with
#: bf16 units (the ``training_precision`` benchmark); one drafter, so both cores train it (threads are
#: part of a drafter's key, so they are fixed here, not read from the machine).
RECIPE = {"draft_vocab": 4096, "ttt_steps": 3, "step_decay": 0.8, "lr": 0.003, "lr_schedule": "cosine",
          "warmup_frac": 0.05, "batch_tokens": 2048, "soft_targets": True, "dtype": "bf16", "epochs": 1,
          "seed": 0, "eval_every": 0, "samples_per_prompt": 0, "threads": 2}
#: Continued training: stage 1 is the second amendment's drafter; stage k > 1 starts from the
#: weights of stage ``from`` (``DraftConfig.init_from``) and trains :data:`STAGE_TOKENS` more with
#: :data:`RECIPE` and the overrides given. Stage 2 (third amendment) runs the recipe's schedule
#: again (a fresh warm-up to lr 0.003); stage 3 (fourth amendment, registered after stage 2 lost
#: ground, replacing the third amendment's stage 3 before it finished) continues stage 1 at the
#: floor its schedule ended on, lr 0.0003, constant. Stage 4 (fifth amendment) continues stage 3 at
#: the lr :data:`PROBE` chose (0.0003: at 0.001 the probe's training loss was 1.48 higher). Stage 5
#: (sixth amendment) continues stage 4 in the same way, seed 4; it gained nothing beyond noise, and
#: the seventh amendment withdrew the sixth's stages 6 to 8 before they trained: the line ends here.
STAGE_TOKENS = 1_000_000
STAGES: tuple[dict[str, Any], ...] = ({}, {"from": 1, "seed": 1},
                                      {"from": 1, "seed": 2, "lr": 3e-4, "lr_schedule": "constant"},
                                      {"from": 3, "seed": 3, "lr": 3e-4, "lr_schedule": "constant"},
                                      {"from": 4, "seed": 4, "lr": 3e-4, "lr_schedule": "constant"})
#: The fifth amendment's learning-rate probe: from stage ``from``'s weights, one pass over the
#: records (``tokens``, seed ``seed``: the same batches in the same order) at each constant lr of
#: ``lrs``; :func:`probe_verdict` picks the next stage's lr from the training losses. Probe drafters
#: are not scored and enter no ledger.
PROBE: dict[str, Any] = {"from": 3, "seed": 3, "lrs": (3e-4, 1e-3), "tokens": 170_000}
#: How the corpus prompts' responses are generated: two one-thread llama-servers on the target's
#: GGUF, one request at a time each (a response does not depend on what else is in flight).
ENGINE = {"engine": "llamacpp", "engine_slots": 1, "engine_servers": 2, "engine_threads": 1}


def generation_config(dcfg: StudyConfig) -> StudyConfig:
    """The config that generates the corpus responses: the third drafters' data config
    (their ``max_new_tokens``) on the corpus source, greedy, :data:`ENGINE`."""
    data = DataConfig(**{**dataclasses.asdict(dcfg.data), "sources": ("corpus",), "samples_per_prompt": 0,
                         "max_prompts_per_source": 0, **ENGINE})
    return dataclasses.replace(dcfg, data=data)


def drafter_config(dcfg: StudyConfig) -> DraftConfig:
    """The drafter's recipe: :data:`RECIPE` and :data:`BUDGET` on the third drafters' config (its ledger)."""
    return dataclasses.replace(dcfg.draft, **RECIPE, max_tokens=BUDGET, train_records=0, records_fraction=1.0)


def stage_configs(dcfg: StudyConfig, cache: Any, layers: Sequence[int], n: int = len(STAGES)) -> list[DraftConfig]:
    """The first ``n`` stages' configs (:data:`STAGES`): stage 1 is :func:`drafter_config`; a
    later one continues its ``from`` stage (its folder in ``cache``'s drafters, ``cache`` having
    the ``path`` of the training capture) for :data:`STAGE_TOKENS` tokens with its overrides."""
    from activation_wave.draft.experiment import drafter_dir

    cfgs = [drafter_config(dcfg)]
    for spec in STAGES[1:n]:
        over = {k: v for k, v in spec.items() if k != "from"}
        cfgs.append(dataclasses.replace(cfgs[0], max_tokens=STAGE_TOKENS, **over,
                                        init_from=drafter_dir(cache, layers, cfgs[spec["from"] - 1]).name))
    return cfgs


def probe_configs(dcfg: StudyConfig, cache: Any, layers: Sequence[int]) -> list[DraftConfig]:
    """The :data:`PROBE` drafters: each continues stage ``PROBE["from"]`` at one of its learning
    rates, constant, for ``PROBE["tokens"]`` tokens, with no ledger."""
    from activation_wave.draft.experiment import drafter_dir

    parent = stage_configs(dcfg, cache, layers, PROBE["from"])[-1]
    return [dataclasses.replace(parent, max_tokens=PROBE["tokens"], seed=PROBE["seed"], lr=lr, lr_schedule="constant",
                                ledger="", init_from=drafter_dir(cache, layers, parent).name) for lr in PROBE["lrs"]]


def probe_verdict(histories: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The probe's rule (fifth amendment) on the per-batch training losses of its drafters, in
    the order of ``PROBE["lrs"]`` (low, high): over the pass's second half, paired by batch, the
    high lr is chosen when the 95% interval of (high - low) lies below 0, else the low one."""
    import numpy as np

    from activation_wave.core.stats import paired_bootstrap

    low, high = (np.asarray(h, dtype=float) for h in histories)
    n = min(len(low), len(high))
    half = slice(n // 2, n)
    d = dataclasses.asdict(paired_bootstrap(high[half], low[half], seed=0))
    lr_low, lr_high = PROBE["lrs"]
    return {"from": PROBE["from"], "seed": PROBE["seed"], "tokens": PROBE["tokens"], "lrs": list(PROBE["lrs"]),
            "batches": n - n // 2, "loss_second_half": [round(float(low[half].mean()), 4),
                                                        round(float(high[half].mean()), 4)],
            "delta_high_minus_low": {k: d[k] for k in ("mean", "lo", "hi", "p", "n")},
            "chosen": lr_high if d["hi"] < 0 else lr_low}


def _plan(cfg: StudyConfig, *, progress: bool) -> dict[str, Any]:
    """The pieces every step shares: the third drafters' config and capture (base train records and
    the eval split), the default triple, and the corpus prompts."""
    from activation_wave.models.prompts import corpus_prompts
    from activation_wave.select.across_models import third_drafter_config
    from activation_wave.study.chapters import cpu_payoff as cpu
    from activation_wave.study.steps import run_capture

    if not cfg.third.model:
        raise ValueError(f"the {cfg.profile} profile names no third model (third.model); "
                         "the large drafter is the third model's")
    dcfg = third_drafter_config(cfg)
    cap = run_capture(dcfg, progress=progress)
    sets, _ = cpu.drafter_sets(cfg)
    prompts = corpus_prompts()
    if len(prompts) < N_CORPUS:
        raise ValueError(f"the large drafter needs {N_CORPUS} corpus prompts, the corpus has {len(prompts)}; "
                         f"rebuild it with more (scripts/build_corpus.py --n {N_CORPUS})")
    return {"dcfg": dcfg, "cap": cap, "layers": tuple(sets[cpu.DEFAULT_SET]), "prompts": prompts[:N_CORPUS],
            "base_train": [r for r in cap.responses if r.split == "train"]}


def _training_capture(plan: dict[str, Any], corpus: list[Any], *, progress: bool, open_: bool = True) -> Any:
    """The capture the drafter trains on (the base train records, then the corpus's; the triple's
    layers only); ``open_=False``: its folder by key alone, found without capturing."""
    from activation_wave.benchmarks.data_scale import training_capture
    from activation_wave.models.capture import capture

    cap_cfg, records, unopened = training_capture(plan["cap"].target, plan["dcfg"], plan["base_train"], corpus,
                                                  plan["layers"])
    return capture(plan["cap"].target, records, cap_cfg, progress=progress) if open_ else unopened


def _committed_capture(plan: dict[str, Any]) -> tuple[list[Any], Any] | None:
    """The committed corpus responses and the corpus drafters' training capture by key alone
    (unopened); None while a response is missing. Nothing is generated or captured."""
    from activation_wave.benchmarks.data_scale import _done_responses

    done = _done_responses(plan["cap"].target, plan["prompts"], generation_config(plan["dcfg"]).data)
    if any(p.id not in done for p in plan["prompts"]):
        return None
    corpus = [done[p.id] for p in plan["prompts"]]
    return corpus, _training_capture(plan, corpus, progress=False, open_=False)


def _paired(a: Any, b: Any) -> dict[str, Any]:
    """The paired bootstrap of per-prompt taus ``a - b`` as the entry keeps it (mean, lo, hi, p, n)."""
    from activation_wave.core.stats import paired_bootstrap

    d = dataclasses.asdict(paired_bootstrap(a, b, seed=0))
    return {key: d[key] for key in ("mean", "lo", "hi", "p", "n")}


def _per_prompt(taus: dict[str, Any]) -> dict[str, list[float | None]]:
    """Each drafter's per-prompt taus for the entry (first seed; NaN, no verify round: None)."""
    return {k: [None if v != v else round(float(v), 5) for v in t[0]] for k, t in taus.items()}


def run(cfg: StudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """Generate (or read) the responses, capture the triple's layers, train (or read from the
    ledger), score against the toy drafter on the same eval prompts; the benchmark entry."""
    from activation_wave.core.results import cache_key
    from activation_wave.core.stats import bootstrap_mean_ci, paired_bootstrap
    from activation_wave.draft.experiment import ScoreOnTrain, run_jobs, train_or_load
    from activation_wave.models.prompts import generate_responses
    from activation_wave.study.chapters import cpu_payoff as cpu
    from activation_wave.study.chapters.drafter_predictors import FoundDrafter, per_prompt_tau
    from activation_wave.study.steps import response_generator

    t0 = time.time()
    plan = _plan(cfg, progress=progress)
    dcfg, cap, layers = plan["dcfg"], plan["cap"], plan["layers"]
    gen_cfg = generation_config(dcfg)
    t_gen = time.time()
    with response_generator(gen_cfg, cap.target) as gen:
        corpus, rpath = generate_responses(cap.target, plan["prompts"], gen_cfg.data, progress=progress, generator=gen)
    gen_s = time.time() - t_gen
    t_cap = time.time()
    cache = _training_capture(plan, corpus, progress=progress)
    cap_s = time.time() - t_cap
    b = cfg.bench
    score = ScoreOnTrain(str(cap.cache.path), b.depth, b.draft_threshold, b.threads)
    toy = cpu.trained_drafters(cfg, names=(cpu.DEFAULT_SET,), weights=False)[cpu.DEFAULT_SET]
    stages: list[dict[str, Any]] = []
    per_prompt: dict[int, Any] = {}  # stage -> its per-prompt taus, for a stage's difference from its parent
    for k, dconf in enumerate(stage_configs(dcfg, cache, layers), start=1):  # the target stops them early
        (row,) = run_jobs(cap.target, cache, [(cpu.DEFAULT_SET, layers, dconf)], 1, progress=progress, score=score)
        found = [FoundDrafter("corpus", layers, 0, row["path"]), FoundDrafter("toy", layers, 0, toy)]
        ids, taus, pooled = per_prompt_tau(cap.target, cap.cache, found, depth=b.depth, threshold=b.draft_threshold,
                                           threads=b.threads, ledger=dcfg.draft.ledger, progress=progress)
        log = row["train_log"]
        parent = stages[STAGES[k - 1]["from"] - 1] if k > 1 else None
        own_min = round((log.get("train_wall_s") or 0.0) * RECIPE["threads"] / 60, 1)
        delta = dataclasses.asdict(paired_bootstrap(taus["corpus"], taus["toy"], seed=0))
        stages.append({"stage": k, "from": parent and parent["stage"], "drafter": cache_key(row["path"]),
                       "lr": dconf.lr, "lr_schedule": dconf.lr_schedule, "seed": dconf.seed,
                       "tokens": (parent["tokens"] if parent else 0) + (dconf.max_tokens or 0),
                       "stage_cpu_min": own_min,
                       "train_cpu_min": round((parent["train_cpu_min"] if parent else 0.0) + own_min, 1),
                       "train_s": round(log.get("train_wall_s") or 0.0, 2), "tau": round(pooled["corpus"], 4),
                       "tau_ci": list(bootstrap_mean_ci(taus["corpus"][0], seed=0)),
                       "delta_vs_toy": _paired(taus["corpus"], taus["toy"])})
        per_prompt[k] = taus["corpus"]
        if parent:
            stages[-1]["delta_vs_parent"] = _paired(taus["corpus"], per_prompt[parent["stage"]])
        if pooled["corpus"] >= LARGE_TARGET:
            break
    lr_probe = None
    if len(stages) >= PROBE["from"] and stages[PROBE["from"] - 1]["tau"] < LARGE_TARGET:  # the probe's stage fell short
        logs = [train_or_load(cap.target, cache, layers, c, progress=progress)[1]
                for c in probe_configs(dcfg, cache, layers)]
        lr_probe = probe_verdict([log_["history"] for log_ in logs])
        if len(STAGES) > PROBE["from"] and STAGES[PROBE["from"]].get("lr") != lr_probe["chosen"]:
            raise ValueError(f"stage {PROBE['from'] + 1} trains at lr {STAGES[PROBE['from']].get('lr')}, the probe "
                             f"chose {lr_probe['chosen']}: set STAGES to the probe's choice (fifth amendment)")
    threads = RECIPE["threads"]
    return {"figure": round(pooled["corpus"], 4), "unit": f"outcome tau (offline, depth {b.depth}, draft threshold "
                                                          f"{b.draft_threshold}, {len(ids)} eval prompts)",
            "baseline": round(pooled["toy"], 4), "baseline_unit": "the same, chapter 11's C1 drafter (toy)",
            "target": f">= {LARGE_TARGET} (issue 42)", "model": cfg.third.model, "layers": list(layers),
            "drafter": cache_key(row["path"]), "toy_drafter": cache_key(toy), "stages": stages,
            "tau_ci": list(bootstrap_mean_ci(taus["corpus"][0], seed=0)), "delta_vs_toy": delta,
            "train_prompts": len(plan["base_train"]) + len(corpus), "corpus_prompts": len(corpus),
            "responses_file": rpath.name, "train_tokens": log.get("n_tokens"), "loss_tokens": log.get("n_loss_tokens"),
            "budget_tokens": stages[-1]["tokens"], "train_s": round(sum(r["train_s"] for r in stages), 2),
            "train_threads": threads, "train_cpu_min": stages[-1]["train_cpu_min"], "stage_tokens": STAGE_TOKENS,
            "all_stages_cpu_min": round(sum(r["stage_cpu_min"] for r in stages), 1),
            "time_split": log.get("time_split"), "recipe": RECIPE, "engine": ENGINE, "lr_probe": lr_probe,
            "generation_s_this_run": round(gen_s, 1), "capture_s_this_run": round(cap_s, 1),
            "capture": {"key": cache.path.name, "records": len(plan["base_train"]) + len(corpus)},
            "eval_prompt_ids": list(ids), "per_prompt_tau": _per_prompt(taus),
            "pre_registration": "book/chapters/11_cpu_payoff (sec-cpu-prereg, second to seventh amendments)",
            "seconds": round(time.time() - t0, 1)}


#: The eighth amendment's benchmark: stage 1's recipe, budget and seed on the base train records
#: alone (the toy drafter's records, in the third model's capture), against stage 1 on the same
#: eval prompts. Nothing is generated or captured beyond what chapter 11 has.
INDIST = "large_drafter_indist"


def indist_verdict(delta: dict[str, Any]) -> str:
    """The eighth amendment's rule on the paired difference (in-distribution - stage 1)."""
    return "beat" if delta["lo"] > 0 else "lose" if delta["hi"] < 0 else "within noise"


def run_indist(cfg: StudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """Train (or read from the ledger) the in-distribution drafter and score it, stage 1 and the
    toy drafter on the same eval prompts (stage 1 and the toy are read from the ledger)."""
    from activation_wave.draft.experiment import drafter_dir

    t0 = time.time()
    plan = _plan(cfg, progress=progress)
    committed = _committed_capture(plan)
    if committed is None:
        raise ValueError("corpus responses are missing, so stage 1 cannot be named: run wave bench --only large_drafter "
                         "first")
    stage1 = str(drafter_dir(committed[1], plan["layers"], drafter_config(plan["dcfg"])))
    out = _indist_entry(cfg, plan, plan["cap"].cache, ("corpus", stage1), "indist", progress=progress)
    rival, delta = out.pop("rival_drafter"), out.pop("delta_vs_rival")
    return {**out, "baseline_unit": "the same, large_drafter's stage 1 (same recipe, budget and seed; corpus records "
                                    "too)", "corpus_drafter": rival, "delta_vs_corpus": delta,
            "pre_registration": "book/chapters/11_cpu_payoff (sec-cpu-prereg, eighth amendment)",
            "seconds": round(time.time() - t0, 1)}


def _indist_entry(cfg: StudyConfig, plan: dict[str, Any], cache: Any, rival: tuple[str, str], name: str, *,
                  progress: bool, dconf: DraftConfig | None = None,
                  extra: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """Train (or read from the ledger) ``dconf`` (default: stage 1's recipe) on the training capture
    ``cache`` and score it, the ``rival`` drafter (name, folder), the toy drafter and any ``extra``
    drafters (name, folder; reported beside, with their paired differences) on the third model's
    eval prompts: the entry's common part, the primary test being the paired difference from the rival."""
    from activation_wave.core.results import cache_key
    from activation_wave.core.stats import bootstrap_mean_ci
    from activation_wave.draft.experiment import ScoreOnTrain, run_jobs
    from activation_wave.study.chapters import cpu_payoff as cpu
    from activation_wave.study.chapters.drafter_predictors import FoundDrafter, per_prompt_tau

    dcfg, cap, layers = plan["dcfg"], plan["cap"], plan["layers"]
    b = cfg.bench
    score = ScoreOnTrain(str(cap.cache.path), b.depth, b.draft_threshold, b.threads)
    dconf = dconf or drafter_config(dcfg)
    (row,) = run_jobs(cap.target, cache, [(cpu.DEFAULT_SET, layers, dconf)], 1, progress=progress, score=score)
    toy = cpu.trained_drafters(cfg, names=(cpu.DEFAULT_SET,), weights=False)[cpu.DEFAULT_SET]
    found = [FoundDrafter(k, layers, 0, path) for k, path in ((name, row["path"]), rival, ("toy", toy), *extra)]
    ids, taus, pooled = per_prompt_tau(cap.target, cap.cache, found, depth=b.depth, threshold=b.draft_threshold,
                                       threads=b.threads, ledger=dcfg.draft.ledger, progress=progress)
    vs_rival = _paired(taus[name], taus[rival[0]])
    log = row["train_log"]
    return {"figure": round(pooled[name], 4), "unit": f"outcome tau (offline, depth {b.depth}, draft threshold "
                                                      f"{b.draft_threshold}, {len(ids)} eval prompts)",
            "baseline": round(pooled[rival[0]], 4), "toy": round(pooled["toy"], 4),
            "target": f">= {LARGE_TARGET} (issue 42)", "model": cfg.third.model, "layers": list(layers),
            "drafter": cache_key(row["path"]), "rival_drafter": cache_key(rival[1]), "toy_drafter": cache_key(toy),
            "tau_ci": list(bootstrap_mean_ci(taus[name][0], seed=0)), "delta_vs_rival": vs_rival,
            "verdict": indist_verdict(vs_rival), "delta_vs_toy": _paired(taus[name], taus["toy"]),
            **{f"{k}_drafter": cache_key(path) for k, path in extra},
            **{k: round(pooled[k], 4) for k, _ in extra},
            **{f"delta_vs_{k}": _paired(taus[name], taus[k]) for k, _ in extra},
            "train_records": log.get("n_records"), "train_tokens": log.get("n_tokens"),
            "optimizer_steps": log.get("steps"),
            "loss_tokens": log.get("n_loss_tokens"), "budget_tokens": dconf.max_tokens,
            "recipe": {k: getattr(dconf, k) for k in RECIPE},
            "train_s": round(log.get("train_wall_s") or 0.0, 2), "train_threads": dconf.threads,
            "train_cpu_min": round((log.get("train_wall_s") or 0.0) * dconf.threads / 60, 1),
            "eval_prompt_ids": list(ids), "per_prompt_tau": _per_prompt(taus)}


#: The ninth amendment's benchmark: the eighth amendment's drafter with every train-split prompt of
#: the third drafters' sources (the base 128 and :func:`indist_prompts`), against the eighth's.
INDIST_ALL = "large_drafter_indist_all"


def indist_prompts(dcfg: StudyConfig) -> list[Any]:
    """The ninth amendment's added prompts: the train-split prompts of the third drafters' sources
    that their base prompts (``max_prompts_per_source`` of each) leave out, in source order."""
    from activation_wave.models.prompts import load_prompts

    base = {p.id for p in load_prompts(dcfg.data)}
    every = load_prompts(dataclasses.replace(dcfg.data, max_prompts_per_source=0))
    return [p for p in every if p.split == "train" and p.id not in base]


def indist_generation_config(dcfg: StudyConfig) -> StudyConfig:
    """The config that answers :func:`indist_prompts`: the third drafters' data config on every
    prompt of its sources, greedy, with the corpus responses' :data:`ENGINE`."""
    data = DataConfig(**{**dataclasses.asdict(dcfg.data), "samples_per_prompt": 0, "max_prompts_per_source": 0,
                         **ENGINE})
    return dataclasses.replace(dcfg, data=data)


def run_indist_all(cfg: StudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """Answer the added prompts (or read the committed answers), capture them after the base
    train records, train stage 1's recipe on them all (or read it from the ledger) and score it
    beside the eighth amendment's drafter and the toy drafter on the same eval prompts."""
    t0 = time.time()
    plan = _plan(cfg, progress=progress)
    out, added, rpath = _added_against_eighth(cfg, plan, _all_responses, "indist_all", progress=progress)
    return {**out, "baseline_unit": "the same, the eighth amendment's drafter (same recipe, budget and seed; the 128 "
                                    "base train records)", "added_prompts": len(added), "responses_file": rpath.name,
            "pre_registration": "book/chapters/11_cpu_payoff (sec-cpu-prereg, ninth amendment)",
            "seconds": round(time.time() - t0, 1)}


def _added_against_eighth(cfg: StudyConfig, plan: dict[str, Any], responses: Callable[..., tuple[list[Any], Any]],
                          name: str, *, progress: bool) -> tuple[dict[str, Any], list[Any], Any]:
    """The ninth and twelfth amendments' common part: ``responses(plan, progress=...)`` (the added
    records and their file or files), captured after the base train records; stage 1's recipe
    trained on them all and scored as ``name`` against the eighth amendment's drafter. Returns the
    entry's common part, the added records and their file(s)."""
    t_gen = time.time()
    added, files = responses(plan, progress=progress)
    gen_s, t_cap = time.time() - t_gen, time.time()
    cache = _training_capture(plan, added, progress=progress)
    cap_s = time.time() - t_cap
    out = _indist_entry(cfg, plan, cache, _eighth(plan), name, progress=progress)
    rival, delta = out.pop("rival_drafter"), out.pop("delta_vs_rival")
    return ({**out, "indist_drafter": rival, "delta_vs_indist": delta,
             "added_response_tokens": sum(len(r.response_ids) for r in added), "engine": ENGINE,
             "generation_s_this_run": round(gen_s, 1), "capture_s_this_run": round(cap_s, 1),
             "capture": {"key": cache.path.name, "records": len(plan["base_train"]) + len(added)}}, added, files)


def _eighth(plan: dict[str, Any]) -> tuple[str, str]:
    """The eighth amendment's drafter as a scored rival: ("indist", its folder: stage 1's recipe in
    the third drafters' capture)."""
    from activation_wave.draft.experiment import drafter_dir

    return "indist", str(drafter_dir(plan["cap"].cache, plan["layers"], drafter_config(plan["dcfg"])))


def _all_responses(plan: dict[str, Any], *, progress: bool) -> tuple[list[Any], Any]:
    """The target's answers to :func:`indist_prompts` (generated in llama.cpp unless committed) and their file."""
    from activation_wave.models.prompts import generate_responses
    from activation_wave.study.steps import response_generator

    dcfg, target = plan["dcfg"], plan["cap"].target
    gen_cfg = indist_generation_config(dcfg)
    with response_generator(gen_cfg, target) as gen:
        return generate_responses(target, indist_prompts(dcfg), gen_cfg.data, progress=progress, generator=gen)


#: The eleventh amendment's benchmark: the ninth amendment's drafter trained on, on the same 324
#: records, from its weights (:data:`CONT_STAGE`, as stage 3 continued stage 1), against that drafter
#: (its parent) and the eighth amendment's.
INDIST_CONT = "large_drafter_indist_cont"
CONT_STAGE: dict[str, Any] = {"seed": 1, "lr": 3e-4, "lr_schedule": "constant", "max_tokens": STAGE_TOKENS}


def cont_config(dcfg: StudyConfig, cache: Any, layers: Sequence[int]) -> DraftConfig:
    """The eleventh amendment's drafter: :func:`drafter_config` with :data:`CONT_STAGE`, continuing
    the ninth amendment's drafter (its folder in the training capture ``cache``)."""
    from activation_wave.draft.experiment import drafter_dir

    parent = drafter_config(dcfg)
    return dataclasses.replace(parent, **CONT_STAGE, init_from=drafter_dir(cache, layers, parent).name)


def run_indist_cont(cfg: StudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """Train (or read from the ledger) the continued drafter on the ninth amendment's 324 records and
    score it beside its parent (the primary test), the eighth amendment's drafter and the toy drafter."""
    from activation_wave.draft.experiment import drafter_dir

    t0 = time.time()
    plan = _plan(cfg, progress=progress)
    dcfg, layers = plan["dcfg"], plan["layers"]
    added, _ = _all_responses(plan, progress=progress)
    cache = _training_capture(plan, added, progress=progress)
    parent = str(drafter_dir(cache, layers, drafter_config(dcfg)))
    dconf = cont_config(dcfg, cache, layers)
    out = _indist_entry(cfg, plan, cache, ("indist_all", parent), "indist_cont", progress=progress, dconf=dconf,
                        extra=(_eighth(plan),))
    rival, delta = out.pop("rival_drafter"), out.pop("delta_vs_rival")
    return {**out, "baseline_unit": "the same, the ninth amendment's drafter (its parent: 1,000,000 tokens of stage 1's "
                                    "recipe on the same 324 records)", "parent_drafter": rival,
            "delta_vs_parent": delta, "continued": CONT_STAGE, "tokens_with_parent": BUDGET + dconf.max_tokens,
            "capture": {"key": cache.path.name, "records": len(plan["base_train"]) + len(added)},
            "pre_registration": "book/chapters/11_cpu_payoff (sec-cpu-prereg, eleventh amendment)",
            "seconds": round(time.time() - t0, 1)}


#: The twelfth amendment's benchmark: the eighth amendment's 128 base train records and
#: :data:`SAMPLES` sampled responses of the target to each of their prompts (llama.cpp, the data
#: config's sample temperature), stage 1's recipe, budget and seed, against the eighth's drafter.
INDIST_SAMPLES = "large_drafter_indist_samples"
SAMPLES = 2


def samples_generation_config(dcfg: StudyConfig) -> StudyConfig:
    """The config that samples the twelfth amendment's responses: the third drafters' data config
    (their prompts, ``max_new_tokens`` and sample temperature) with :data:`SAMPLES` per train prompt
    and the corpus responses' :data:`ENGINE`."""
    return dataclasses.replace(dcfg, data=DataConfig(**{**dataclasses.asdict(dcfg.data),
                                                        "samples_per_prompt": SAMPLES, **ENGINE}))


def _sampled_responses(plan: dict[str, Any], *, progress: bool) -> tuple[list[Any], list[Any]]:
    """The target's :data:`SAMPLES` sampled answers to each base train prompt (generated in
    llama.cpp unless committed) and their files, sample 1 of every prompt first."""
    from activation_wave.models.prompts import load_prompts, sampled_responses
    from activation_wave.study.steps import response_generator

    gen_cfg, target = samples_generation_config(plan["dcfg"]), plan["cap"].target
    with response_generator(gen_cfg, target) as gen:
        return sampled_responses(target, load_prompts(gen_cfg.data), gen_cfg.data, progress=progress, generator=gen)


def run_indist_samples(cfg: StudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """Sample the base train prompts' answers (or read the committed ones), capture them after the
    base train records, train stage 1's recipe on them all (or read it from the ledger) and score
    it beside the eighth amendment's drafter (the primary test) and the toy drafter."""
    t0 = time.time()
    plan = _plan(cfg, progress=progress)
    out, added, paths = _added_against_eighth(cfg, plan, _sampled_responses, "indist_samples", progress=progress)
    return {**out, "baseline_unit": "the same, the eighth amendment's drafter (same recipe, budget and seed; the 128 "
                                    "base train records alone)",
            "samples_per_prompt": SAMPLES, "sample_temperature": plan["dcfg"].data.sample_temperature,
            "added_responses": len(added), "responses_files": [path.name for path in paths],
            "pre_registration": "book/chapters/11_cpu_payoff (sec-cpu-prereg, twelfth amendment)",
            "seconds": round(time.time() - t0, 1)}


#: The thirteenth amendment's benchmark: the twelfth amendment's records and drafter with batches of
#: about :data:`STEPS_BATCH_TOKENS` tokens instead of 2,048 (several times the optimiser steps at the
#: same budget of tokens), against the eighth's drafter, the twelfth's (only the batch differs) beside.
INDIST_STEPS = "large_drafter_indist_steps"
STEPS_BATCH_TOKENS = 256


def steps_config(dcfg: StudyConfig) -> DraftConfig:
    """The thirteenth amendment's drafter: :func:`drafter_config` with batches of :data:`STEPS_BATCH_TOKENS`."""
    return dataclasses.replace(drafter_config(dcfg), batch_tokens=STEPS_BATCH_TOKENS)


def run_indist_steps(cfg: StudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """Train (or read from the ledger) the small-batch drafter on the twelfth amendment's records (its
    committed samples and capture) and score it beside the eighth amendment's drafter (the primary
    test), the twelfth's and the toy drafter."""
    from activation_wave.draft.experiment import drafter_dir

    t0 = time.time()
    plan = _plan(cfg, progress=progress)
    dcfg, layers = plan["dcfg"], plan["layers"]
    added, _ = _sampled_responses(plan, progress=progress)
    cache = _training_capture(plan, added, progress=progress)
    twelfth = ("indist_samples", str(drafter_dir(cache, layers, drafter_config(dcfg))))
    out = _indist_entry(cfg, plan, cache, _eighth(plan), "indist_steps", progress=progress,
                        dconf=steps_config(dcfg), extra=(twelfth,))
    rival, delta = out.pop("rival_drafter"), out.pop("delta_vs_rival")
    return {**out, "baseline_unit": "the same, the eighth amendment's drafter (stage 1's recipe, budget and seed on "
                                    "the 128 base train records, batches of 2,048 tokens)",
            "indist_drafter": rival, "delta_vs_indist": delta,
            "capture": {"key": cache.path.name, "records": len(plan["base_train"]) + len(added)},
            "pre_registration": "book/chapters/11_cpu_payoff (sec-cpu-prereg, thirteenth amendment)",
            "seconds": round(time.time() - t0, 1)}


def trained(cfg: StudyConfig) -> str | None:
    """The weight folder of the large drafter once it has trained: the last stage the measured
    entry trained (made again on this machine from the ledger entries when the weights are
    missing, along its :func:`lineage`); None before it has. Nothing is generated."""
    from activation_wave.draft.experiment import is_trained, train_or_load

    if not cfg.third.model:
        return None
    plan = _plan(cfg, progress=False)
    committed = _committed_capture(plan)
    if committed is None:
        return None
    corpus, unopened = committed
    n = _stages_run(cfg.third.model)
    every = stage_configs(plan["dcfg"], unopened, plan["layers"], n)
    cfgs = [every[k - 1] for k in lineage(n)]
    if not all(is_trained(unopened, plan["layers"], c) for c in cfgs):
        return None
    cache = _training_capture(plan, corpus, progress=False)
    for dconf in cfgs:  # parents first: a stage made again needs its parent's weights
        path, _ = train_or_load(plan["cap"].target, cache, list(plan["layers"]), dconf, weights=True)
    return str(path)


def lineage(stage: int) -> list[int]:
    """The stages whose weights ``stage`` continues, first to last (``[1, 3]`` for stage 3):
    :data:`STAGES` read as the entry's stages are (:func:`~activation_wave.study.chapters.cpu_payoff.stage_lineage`)."""
    from activation_wave.study.chapters.cpu_payoff import stage_lineage

    return [r["stage"] for r in stage_lineage([{"stage": k, "from": spec.get("from")}
                                               for k, spec in enumerate(STAGES[:stage], start=1)])]


def _stages_run(model: str) -> int:
    """How many stages the measured entry of ``model`` trained (1 before the third amendment's
    run, or when the entry is another model's)."""
    from activation_wave.core.results import load_benchmarks

    entry = load_benchmarks().get(NAME) or {}
    return len(entry.get("stages") or [None]) if entry.get("model") == model else 1
