"""The recipe benchmark (``wave bench --only recipe``, issue 25): which training changes
make the benchmark drafter stronger per CPU-minute.

Pre-registered in ``book/chapters/10_drafter_recipe`` (committed before training). Each
**arm** is a one-factor change of a **base** recipe (:data:`ARMS`: a mapping of arm name
to the :class:`~activation_wave.core.config.DraftConfig` fields it overrides, or
``samples_per_prompt`` for a data arm). The base (``bench.recipe_base``):

* ``screen`` (default): the benchmark drafter's recipe (:func:`~activation_wave.benchmarks.speedup.bench_draft`:
  ``bench.draft_epochs`` epochs, or ``bench.recipe_epochs``; ``bench.draft_ttt_steps`` steps;
  ``bench.draft_batch_tokens``; the profile's ``draft.lr`` and ``draft.draft_vocab``) on the
  greedy responses only: the full recipe (six sampled responses per train prompt) costs
  about an hour of CPU per drafter, too much to screen 20 arms at 2 seeds on 2 cores;
* ``bench``: the same with ``bench.samples_per_prompt`` sampled responses.

Every arm (base included) trains the EAGLE-3 default triple ``[2, N//2, N-3]`` with seeds
``seed .. seed + bench.recipe_seeds - 1`` through the drafter cache
(:func:`~activation_wave.draft.experiment.run_jobs`: an interrupted run retrains only the
unfinished drafters), ``draft.workers`` at a time with ``bench.threads`` threads each.

**Outcome** (chapter 6's pre-registered one): per-prompt offline tau on the eval split at
the online chain depth and draft threshold (``bench.depth``, ``bench.draft_threshold``),
scored on the base capture (:func:`~activation_wave.study.chapters.drafter_predictors.per_prompt_tau`),
seeds averaged per prompt. Each arm's delta against the base is the mean per-prompt
difference with a 95% paired bootstrap interval over prompts and a two-sided p; the
screened arms' p-values are Holm-corrected together (:mod:`activation_wave.core.stats`).

**Combined arm** (only when ``combined`` is in ``bench.recipe_arms``): after the screen,
every arm whose delta interval lies above 0, merged (:func:`combine`); of arms that set the
same field (two vocabulary sizes, head-target vs head-frozen) the one with the larger delta.
It is selected on the same eval prompts, so its p-value is reported raw and left out of
the Holm family.

**Stage 2, the confirmation (R2, R3)** (only with ``combined`` in ``bench.recipe_arms``, and
at least one arm that helps): the combined overrides (the data arm's left out: stage 2's data
is fixed) on today's benchmark data (``bench.samples_per_prompt`` sampled responses per train
prompt), against today's benchmark recipe on the same data, ``bench.recipe_seeds`` seeds
each (:func:`run_confirm`). R2: the paired delta combined - today on the outcome, one test at
alpha 0.05. R3 (descriptive): the training CPU-minutes each learning curve needs to reach
:data:`R3_TAU`, chapter 9's offline tau of today's benchmark drafter, whose curve is logged at
the online depth with *no* draft threshold, as that tau was.

**Cost:** per drafter, training CPU-seconds = ``train_wall_s x threads`` (optimisation
only; the periodic evaluations are not counted), averaged over seeds; for a data arm also
the capture of its added records (the capture's ``seconds_this_run`` x the added records'
share of its tokens, one process). Response generation is not timed by the response cache
(the default profile's responses are committed files), so it is not counted; arms on the
base data count 0.

**Learning curve:** each drafter logs eval tau every ``bench.recipe_eval_every`` epochs at
the online depth and threshold (``draft.eval_depth``, ``draft.eval_threshold``; pooled over
records, tokens per verify round): ``(epoch, cumulative train CPU-s, tau)`` per arm, seeds
averaged.

Writes ``data/results/<profile>/<model>/recipe.json`` and returns a compact summary for
``data/results/benchmarks.json``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from activation_wave.core.config import RECIPE_ARMS, RECIPE_SHRINK_ORDER, ConfigError, DraftConfig, StudyConfig
from activation_wave.core.stats import (N_BOOT, finite_values, hierarchical_bootstrap, holm, mean_ci,
                                       min_detectable_delta, paired_bootstrap, seed_mean)
from activation_wave.draft.experiment import ScoreOnTrain
from activation_wave.models.capture import CaptureCache
from activation_wave.models.targets import Target
from activation_wave.study.chapters.drafter_recipe import MIN_PROMPTS, curve_fit, verdict

NAME = "recipe"
BASE = "base"
COMBINED = "combined"
TODAY = "today"
#: R3's mark: chapter 9's offline tau of today's benchmark drafter (depth 3, no draft
#: threshold), fixed in the pre-registration.
R3_TAU = 1.74
#: The commit that registered the screen (``sec-recipe-prereg``) and its two amendments, each before
#: any drafter of the study was scored on the outcome.
PRE_REGISTRATION = {"commit": "20c249b1e8f64ee5da446ff007b65c428df3d16e",
                    "amendments": {"fp32 base": "31132e00d133851889652b8d6ee897f357ae9c10",
                                   "shrunk by the whole order": "4ea3c9622b076bedfa2b07b2468a0664c435ef90"},
                    "page": "book/chapters/10_drafter_recipe (sec-recipe-prereg)"}
#: Resamples of the seed-sensitivity bootstrap (seeds within each arm, then prompts).
N_BOOT_SEEDS = 50_000
#: ``draft_vocab`` value of the full-vocabulary arm: the target's vocabulary size, known at run time.
FULL_VOCAB = "full"
#: The override that is not a DraftConfig field: sampled responses per train prompt (a data arm).
DATA_KEY = "samples_per_prompt"


@dataclass(frozen=True)
class Scale:
    """An override relative to the base: ``base value x factor`` (the learning-rate arms)."""

    factor: float

    def __str__(self) -> str:
        return f"base x {self.factor:g}"


#: Arm name -> overrides of the base recipe (DraftConfig fields, or ``samples_per_prompt``).
#: Every name of :data:`activation_wave.core.config.RECIPE_ARMS` but ``combined``, in run order.
ARMS: dict[str, dict[str, Any]] = {
    "head-target": {"head_init": "target"},
    "head-frozen": {"head_init": "target_frozen"},
    "norm-target": {"norm_init": "target"},
    "block-target": {"block_init": "target_last"},
    "vocab-1k": {"draft_vocab": 1024},
    "vocab-4k": {"draft_vocab": 4096},
    "vocab-16k": {"draft_vocab": 16384},
    "vocab-full": {"draft_vocab": FULL_VOCAB},
    "ttt-1": {"ttt_steps": 1},
    "ttt-5": {"ttt_steps": 5},
    "decay-1": {"step_decay": 1.0},
    "hard": {"soft_targets": False},
    "feature-reg": {"feature_loss": 0.1},
    "lr-high": {"lr": Scale(3.0)},
    "lr-low": {"lr": Scale(1 / 3)},
    "lr-constant": {"lr_schedule": "constant"},
    "batch-1k": {"batch_tokens": 1024},
    "batch-4k": {"batch_tokens": 4096},
    "epochs-5": {"epochs": 5},
    "epochs-20": {"epochs": 20},
    "samples-1": {DATA_KEY: 1},
}


@dataclass(frozen=True)
class Recipe:
    """One arm as trained: its name, resolved overrides, drafter config (seed = the first) and data."""

    name: str
    overrides: dict[str, Any]
    draft: DraftConfig
    samples_per_prompt: int

    def seeds(self, n: int) -> list[DraftConfig]:
        """The arm's drafter configs for ``n`` seeds (``draft.seed``, ``draft.seed + 1``, ...)."""
        return [dataclasses.replace(self.draft, seed=self.draft.seed + i) for i in range(n)]


# ----------------------------------------------------------------------------- recipes


def base_recipe(cfg: StudyConfig) -> Recipe:
    """The base recipe of ``cfg.bench.recipe_base`` (see the module docstring), with the
    learning-curve evaluations at the online depth and threshold."""
    from activation_wave.benchmarks.speedup import bench_draft

    b = cfg.bench
    draft = dataclasses.replace(bench_draft(cfg), epochs=b.recipe_epochs or b.draft_epochs,
                                eval_every=b.recipe_eval_every, eval_depth=b.depth, eval_threshold=b.draft_threshold)
    return Recipe(BASE, {}, draft, 0 if b.recipe_base == "screen" else b.samples_per_prompt)


def resolve(overrides: Mapping[str, Any], base: Recipe, vocab_size: int) -> dict[str, Any]:
    """``overrides`` with relative values made absolute (:class:`Scale`, :data:`FULL_VOCAB`)."""
    out = {}
    for key, value in overrides.items():
        if isinstance(value, Scale):
            value = getattr(base.draft, key) * value.factor
        elif value == FULL_VOCAB and key == "draft_vocab":
            value = int(vocab_size)
        out[key] = value
    return out


def apply(name: str, overrides: Mapping[str, Any], base: Recipe) -> Recipe:
    """The base recipe with resolved ``overrides``; a field that is neither a DraftConfig field
    nor ``samples_per_prompt``, or a value out of range, raises :class:`ConfigError`."""
    fields = {f.name for f in dataclasses.fields(DraftConfig)}
    bad = sorted(set(overrides) - fields - {DATA_KEY})
    if bad:
        raise ConfigError(f"recipe arm {name!r} overrides unknown field(s) {bad}; arms may set draft fields "
                          f"({', '.join(sorted(fields))}) or {DATA_KEY}")
    draft = dataclasses.replace(base.draft, **{k: v for k, v in overrides.items() if k != DATA_KEY})
    return Recipe(name, dict(overrides), draft, int(overrides.get(DATA_KEY, base.samples_per_prompt)))


def plan(arms: Sequence[str], base: Recipe, vocab_size: int) -> tuple[list[Recipe], list[dict[str, str]]]:
    """The screened arms' recipes in run order (``combined`` left out), and the arms skipped
    because they equal the base recipe under this profile (e.g. vocab-4k when the base
    draft vocabulary is 4096), each with the reason."""
    recipes, skipped = [], []
    for name in arms:
        if name == COMBINED:
            continue
        if name not in ARMS:
            raise ConfigError(f"bench.recipe_arms: unknown arm {name!r}; choose from {', '.join(RECIPE_ARMS)}",
                              key="bench.recipe_arms")
        r = apply(name, resolve(ARMS[name], base, vocab_size), base)
        if r.draft == base.draft and r.samples_per_prompt == base.samples_per_prompt:
            skipped.append({"name": name, "why": f"same as the base recipe ({ARMS[name]})"})
        else:
            recipes.append(r)
    return recipes, skipped


def shrunk(arms: Sequence[str]) -> list[str]:
    """The arms of the pre-registered shrink order that ``arms`` leaves out, in the order they
    were dropped (the first dropped first).

    >>> shrunk(["head-target", "ttt-5", "combined"])[:2], len(shrunk(["ttt-5"]))
    (['vocab-full', 'epochs-20'], 8)
    """
    return [a for a in RECIPE_SHRINK_ORDER if a not in arms]


def helps(row: Mapping[str, Any], alpha: float = 0.05) -> bool:
    """R1's verdict "helps" (:func:`~activation_wave.study.chapters.drafter_recipe.verdict`, the
    page's wording of the same rule): delta > 0 with Holm-adjusted p < ``alpha`` on at least
    :data:`MIN_PROMPTS` prompts."""
    return verdict(row, alpha) == "helps"


def combine(rows: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The combined arm's overrides and the arms it merges: every arm that *helps* as the
    pre-registration defines it (:func:`helps`: delta > 0 at Holm-adjusted p < 0.05),
    largest ``delta`` first; a row that sets a field an earlier (better) row already set is
    left out (two vocabulary sizes, head-target vs head-frozen, two learning rates).

    >>> combine([{"name": "a", "overrides": {"lr": 1}, "delta": 0.1, "p_holm": 0.01},
    ...          {"name": "b", "overrides": {"lr": 2}, "delta": 0.2, "p_holm": 0.001},
    ...          {"name": "c", "overrides": {"epochs": 5}, "delta": 0.05, "p_holm": 0.04},
    ...          {"name": "d", "overrides": {"ttt_steps": 1}, "delta": 0.3, "p_holm": 0.2},
    ...          {"name": "e", "overrides": {"hard": 1}, "delta": -0.3, "p_holm": 0.001}])
    ({'lr': 2, 'epochs': 5}, ['b', 'c'])
    """
    winners = sorted((r for r in rows if helps(r)), key=lambda r: -r["delta"])
    merged: dict[str, Any] = {}
    names = []
    for r in winners:
        if set(r["overrides"]) & set(merged):
            continue
        merged.update(r["overrides"])
        names.append(r["name"])
    return merged, names


# ----------------------------------------------------------------------------- statistics



def compare(base_tau: np.ndarray, arm_taus: Mapping[str, np.ndarray], *, n_boot: int = N_BOOT,
            seed: int = 0) -> list[dict[str, Any]]:
    """Each arm against the base on the same prompts: per-prompt tau ``[seeds, prompts]``
    averaged over seeds, its mean and 95% bootstrap interval over prompts, and the paired
    delta (arm - base) with its 95% paired bootstrap interval and two-sided p; ``p_holm``
    Holm-corrects the arms given here together. One row per arm, in order. Each row carries
    its p's Monte Carlo error (``p_mcse``, ``p_holm_mcse``) and its realised minimum detectable
    delta at 80% power (``mde``: unadjusted; ``mde_holm``: at the strictest Holm level of the family).

    >>> base = np.array([[1.0, 1.2, 1.4, 1.1], [1.0, 1.2, 1.4, 1.3]])
    >>> row = compare(base, {"up": base + 0.1}, n_boot=500)[0]
    >>> round(row["delta"], 3), row["delta_lo"] > 0, row["n_seeds"], row["n_prompts"]
    (0.1, True, 2, 4)
    """
    rows = []
    for name, tau in arm_taus.items():
        tau = np.atleast_2d(np.asarray(tau, float))
        mean = seed_mean(tau)
        t, lo, hi = mean_ci(list(mean), seed=seed)
        d = paired_bootstrap(tau, base_tau, n_boot=n_boot, seed=seed)
        rows.append({"name": name, "n_seeds": int(tau.shape[0]), "n_prompts": d.n, "tau": t, "lo": lo, "hi": hi,
                     "delta": d.mean, "delta_lo": d.lo, "delta_hi": d.hi, "p": d.p, "p_mcse": d.p_mcse,
                     "n_boot": d.n_boot, "sd": d.sd, "mde": min_detectable_delta(d.sd, d.n),
                     "mde_holm": min_detectable_delta(d.sd, d.n, alpha=0.05 / len(arm_taus)),
                     "per_prompt_tau": finite_values(mean), "per_seed_tau": [finite_values(r) for r in tau]})
    for row, p in zip(rows, holm([r["p"] for r in rows])):
        row["p_holm"] = p
        row["p_holm_mcse"] = row["p_mcse"] * (min(p, 1.0) / row["p"] if row["p"] else 1.0)
    return rows


def seed_sensitivity(base_tau: np.ndarray, arm_taus: Mapping[str, np.ndarray], registered: Sequence[Mapping[str, Any]],
                     *, n_boot: int = N_BOOT_SEEDS, seed: int = 0) -> list[dict[str, Any]]:
    """A labelled sensitivity analysis beside R1 (not a test of its own): each screened arm's
    delta against the base with :func:`~activation_wave.core.stats.hierarchical_bootstrap`
    (each arm's and the base's seeds resampled, then the prompts), Holm across the same arms,
    and whether R1's verdict word changes.

    >>> base = np.array([[1.0, 1.2, 1.4, 1.1], [1.0, 1.3, 1.4, 1.2]])
    >>> reg = compare(base, {"up": base + 0.1}, n_boot=500)
    >>> seed_sensitivity(base, {"up": base + 0.1}, reg, n_boot=500)[0]["registered_verdict"]
    'no verdict (n = 4 prompts)'
    """
    reg = {r["name"]: r for r in registered}
    names = [n for n in arm_taus if n in reg]
    ds = [hierarchical_bootstrap([(1.0, arm_taus[n]), (-1.0, base_tau)], n_boot=n_boot, seed=seed) for n in names]
    rows = []
    for n, d, p in zip(names, ds, holm([d.p for d in ds])):
        row = {"name": n, "delta": d.mean, "delta_lo": d.lo, "delta_hi": d.hi, "p": d.p, "p_holm": p,
               "p_mcse": d.p_mcse, "n_prompts": d.n, "n_boot": d.n_boot}
        row |= {"verdict": verdict(row), "registered_verdict": verdict(reg[n]), "registered_p_holm": reg[n]["p_holm"]}
        rows.append(row | {"changed": row["verdict"] != row["registered_verdict"]})
    return rows


# ----------------------------------------------------------------------------- cost and curves


def train_cpu_s(log: Mapping[str, Any]) -> float:
    """Training CPU-seconds of one drafter: optimisation wall time x torch threads."""
    return float(log["train_wall_s"]) * int(log.get("threads") or 1)


def learning_curve(logs: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """``(epoch, cumulative train CPU-s, eval tau)`` at every evaluated epoch (the final one
    from the log's ``eval``), averaged over the drafters (seeds) of ``logs``."""
    per_epoch: dict[int, list[tuple[float, float]]] = {}
    for log in logs:
        threads, cum = int(log.get("threads") or 1), 0.0
        last = len(log["epochs"])
        for e in log["epochs"]:
            cum += float(e["wall_s"]) * threads
            epoch = int(e["epoch"]) + 1
            tau = e.get("eval_tau_offline")
            if epoch == last and log.get("eval"):
                tau = log["eval"]["tau_offline"]
            if tau is not None:
                per_epoch.setdefault(epoch, []).append((cum, float(tau)))
    return [{"epoch": e, "cpu_s": round(float(np.mean([c for c, _ in v])), 2),
             "tau_offline": round(float(np.mean([t for _, t in v])), 4)} for e, v in sorted(per_epoch.items())]


def data_cpu_s(cache: CaptureCache, base: CaptureCache) -> float:
    """Capture seconds of the records ``cache`` holds beyond ``base`` (0 when it is the base
    capture): the capture's ``seconds_this_run`` x their share of its tokens."""
    if cache.path == base.path:
        return 0.0
    have = {r["id"] for r in base.records}
    lengths = [(r["id"] in have, r["length"]) for r in cache.records]
    total = sum(n for _, n in lengths)
    extra = sum(n for shared, n in lengths if not shared)
    return float(cache.manifest.get("seconds_this_run") or 0.0) * extra / max(1, total)


# ----------------------------------------------------------------------------- the run


CacheFor = Callable[[int], CaptureCache]


def _train(target: Target, recipes: Sequence[Recipe], seeds: int, layers: Sequence[int], caches: CacheFor,
           workers: int, progress: bool,
           score: ScoreOnTrain | None = None) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Train (or load) every recipe's drafters, grouped by capture; arm -> [(folder, train log)].
    ``score`` (the outcome's settings): each drafter is scored as soon as it trains, so that
    its score reaches the ledger while its weights are still on this machine."""
    from activation_wave.draft.experiment import run_jobs

    out: dict[str, list[tuple[str, dict[str, Any]]]] = {r.name: [] for r in recipes}
    for samples in sorted({r.samples_per_prompt for r in recipes}):
        group = [r for r in recipes if r.samples_per_prompt == samples]
        jobs = [(r.name, list(layers), c) for r in group for c in r.seeds(seeds)]
        for row in run_jobs(target, caches(samples), jobs, workers, progress=progress, score=score):
            out[row["set"]].append((row["path"], row["train_log"]))
    return out


def _score_on_train(cfg: StudyConfig, base_cache: CaptureCache) -> ScoreOnTrain:
    """The outcome's scoring settings (:func:`_score`'s), for scoring each drafter as it trains."""
    b = cfg.bench
    return ScoreOnTrain(str(base_cache.path), b.depth, b.draft_threshold, b.threads)


def _score(target: Target, base_cache: CaptureCache, trained: dict[str, list[tuple[str, dict[str, Any]]]],
           layers: Sequence[int], cfg: StudyConfig, workers: int, progress: bool) -> tuple[tuple[str, ...],
                                                                                         dict[str, np.ndarray]]:
    """Per-prompt outcome tau of every drafter on the base capture's eval split: ``{arm: [seeds, prompts]}``.

    Scoring trains again, on this machine, a drafter whose weights are gone; when its new
    weights differ, the ledger's train log is replaced, and so is its log in ``trained``
    (in place), so that the cost columns describe the drafters that were scored."""
    from activation_wave.draft import ledger
    from activation_wave.study.chapters.drafter_predictors import FoundDrafter, per_prompt_tau

    found = [FoundDrafter(name, tuple(layers), int(log["config"]["seed"]), path)
             for name, runs in trained.items() for path, log in runs]
    ids, taus, _ = per_prompt_tau(target, base_cache, found, depth=cfg.bench.depth,
                                  threshold=cfg.bench.draft_threshold, workers=workers, threads=cfg.bench.threads,
                                  ledger=cfg.draft.ledger, progress=progress)
    for name, runs in trained.items():
        for i, (path, log) in enumerate(runs):
            entry = ledger.read(cfg.draft.ledger, path) if cfg.draft.ledger else None
            runs[i] = (path, entry["train_log"] if entry else log)
    return ids, taus


def _runs_summary(runs: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """What a results file keeps of one recipe's drafters (``(folder, train log)`` per seed):
    training CPU-seconds (seed mean), the learning curve, the folders."""
    logs = [log for _, log in runs]
    return {"cpu_s": round(float(np.mean([train_cpu_s(log) for log in logs])), 2), "curve": learning_curve(logs),
            "drafters": [path for path, _ in runs]}


def _arm_row(row: dict[str, Any], recipe: Recipe, runs: Sequence[tuple[str, dict[str, Any]]], cache: CaptureCache,
             base_cache: CaptureCache) -> dict[str, Any]:
    return {"name": recipe.name, "overrides": recipe.overrides, **{k: v for k, v in row.items() if k != "name"},
            **_runs_summary(runs), "cpu_s_data": round(data_cpu_s(cache, base_cache), 2)}


def run_recipe(cfg: StudyConfig, target: Target, caches: CacheFor, *, progress: bool = True) -> dict[str, Any]:
    """The recipe study with a loaded ``target`` and ``caches(samples_per_prompt)`` -> the
    capture with that many sampled responses per train prompt; returns the results document
    (what :func:`run` saves). Resumable: trained drafters come from the drafter cache."""
    from activation_wave.core.layers import eagle3_default_layers

    t0 = time.time()
    b = cfg.bench
    base = base_recipe(cfg)
    recipes, skipped = plan(b.recipe_arms, base, target.vocab_size)
    layers = eagle3_default_layers(target.n_layers)
    workers = base.draft.workers
    base_cache = caches(base.samples_per_prompt)
    # one pool per capture (workers load the target once); the bar counts the drafters still to train
    on_train = _score_on_train(cfg, base_cache)
    trained = _train(target, [base, *recipes], b.recipe_seeds, layers, caches, workers, progress, on_train)
    ids, taus = _score(target, base_cache, trained, layers, cfg, workers, progress)
    screened = compare(taus[BASE], {r.name: taus[r.name] for r in recipes})
    sensitivity = seed_sensitivity(taus[BASE], {r.name: taus[r.name] for r in recipes}, screened)
    arms = [_arm_row(row, r, trained[r.name], caches(r.samples_per_prompt), base_cache)
            for row, r in zip(screened, recipes)]
    combined: dict[str, Any] = {"run": False}
    if COMBINED in b.recipe_arms:
        overrides, names = combine(arms)
        combined = {"run": len(names) >= 2, "from": names, "overrides": overrides}
        if len(names) < 2:
            combined["why"] = ("no arm helps under R1 (delta > 0 at Holm p < 0.05)" if not names else
                               f"only {names[0]} helps under R1: the combined arm would repeat it")
        else:
            rc = apply(COMBINED, overrides, base)
            trained.update(_train(target, [rc], b.recipe_seeds, layers, caches, workers, progress, on_train))
            _, ct = _score(target, base_cache, {COMBINED: trained[COMBINED]}, layers, cfg, workers, progress)
            row = compare(taus[BASE], {COMBINED: ct[COMBINED]})[0]
            row["p_holm"] = None  # selected on these prompts: outside the Holm family, p is optimistic
            arms.append({**_arm_row(row, rc, trained[COMBINED], caches(rc.samples_per_prompt), base_cache),
                         "post_hoc": True})
    confirm: dict[str, Any] = {"run": False, "pending": True,
                               "why": "this run's bench.recipe_arms leave out the combined arm"}
    if COMBINED in b.recipe_arms:
        names = combined["from"]
        confirm = stage2_skip(combined["overrides"], names, b.samples_per_prompt) or run_confirm(
            cfg, target, caches, base_cache, combined["overrides"], names, progress=progress)
    base_mean = seed_mean(taus[BASE])
    tau, lo, hi = mean_ci(list(base_mean))
    base_runs = trained[BASE]
    best = max(arms, key=lambda a: a["delta"], default=None)
    return {
        "model": target.name, "profile": cfg.profile, "layers": layers, "pre_registration": PRE_REGISTRATION,
        "outcome": (f"per-prompt offline tau on the {len(ids)} eval prompts at chain depth {b.depth} and draft "
                    f"threshold {b.draft_threshold:g} (the online settings), seeds averaged per prompt; delta = arm - "
                    "base with a 95% paired bootstrap interval over prompts, two-sided p, Holm over the screened "
                    "arms (the combined arm is post hoc: raw p only)"),
        "base": {"name": b.recipe_base, "config": dataclasses.asdict(base.draft),
                 "samples_per_prompt": base.samples_per_prompt, "n_seeds": b.recipe_seeds, "tau": tau, "lo": lo,
                 "hi": hi, **_runs_summary(base_runs), "cpu_s_data": 0.0, "per_prompt_tau": finite_values(base_mean),
                 "per_seed_tau": [finite_values(r) for r in np.atleast_2d(taus[BASE])]},
        "arms": arms, "seed_sensitivity": sensitivity, "skipped": skipped, "shrunk": shrunk(b.recipe_arms), "combined": combined, "confirm": confirm,
        "prompt_ids": list(ids),
        "best": None if best is None else best["name"],
        "cost_note": ("cpu_s: training CPU-seconds per drafter (train_wall_s x threads, periodic evals excluded), "
                      "mean over seeds; cpu_s_data: capture seconds of a data arm's added records (share of its "
                      "capture's seconds_this_run by tokens); response generation is not timed (committed response "
                      "files), so it is not counted; arms on the base data count 0"),
        "curve_note": "curve: eval tau pooled over records at the online depth and threshold, seeds averaged",
        "seconds": round(time.time() - t0, 1),
    }


def stage2_skip(overrides: Mapping[str, Any], names: Sequence[str], today_samples: int) -> dict[str, Any] | None:
    """Why stage 2 does not run, or None when it does: no arm helps, or only the data arm
    does (stage 2's data is fixed at today's, ``today_samples`` sampled responses per train
    prompt, so its combined recipe would be today's recipe, compared with itself).

    >>> stage2_skip({}, [], 6)["why"]
    "no arm helps under R1: today's recipe stays"
    >>> stage2_skip({"samples_per_prompt": 1}, ["samples-1"], 6)["why"].split(":")[0]
    'only the data arm helps under R1 (samples-1)'
    >>> stage2_skip({"samples_per_prompt": 1, "lr": 0.009}, ["samples-1", "lr-high"], 6) is None
    True
    """
    if not names:
        return {"run": False, "why": "no arm helps under R1: today's recipe stays"}
    if not {k: v for k, v in overrides.items() if k != DATA_KEY}:
        return {"run": False, "why": (f"only the data arm helps under R1 ({', '.join(names)}): stage 2 trains on "
                                      f"today's data ({today_samples} sampled responses per train prompt), so its "
                                      "combined recipe would be today's recipe compared with itself; today's recipe "
                                      "stays, and it already uses the data lever")}
    return None


def confirm_recipes(cfg: StudyConfig, overrides: Mapping[str, Any]) -> tuple[Recipe, Recipe]:
    """Stage 2's two recipes: today's benchmark recipe on its full data and the combined
    ``overrides`` (resolved; a data override is dropped, the data being fixed) on the same
    data; both log their learning curve at the online depth with no draft threshold (R3)."""
    base = base_recipe(cfg)
    draft = dataclasses.replace(base.draft, epochs=cfg.bench.draft_epochs, eval_threshold=0.0)
    today = Recipe(TODAY, {}, draft, cfg.bench.samples_per_prompt)
    return today, apply(COMBINED, {k: v for k, v in overrides.items() if k != DATA_KEY}, today)


def cpu_minutes_to(curve: Sequence[Mapping[str, float]], mark: float) -> float | None:
    """Training CPU-minutes at which a learning curve first reaches ``mark`` (linear between
    the evaluated epochs), or ``None`` if it never does.

    >>> cpu_minutes_to([{"cpu_s": 60, "tau_offline": 1.5}, {"cpu_s": 180, "tau_offline": 1.8}], 1.74)
    2.6
    """
    prev = None
    for pt in curve:
        if pt["tau_offline"] >= mark:
            if prev is None or pt["tau_offline"] == prev["tau_offline"]:
                return round(pt["cpu_s"] / 60, 3)
            frac = (mark - prev["tau_offline"]) / (pt["tau_offline"] - prev["tau_offline"])
            return round((prev["cpu_s"] + frac * (pt["cpu_s"] - prev["cpu_s"])) / 60, 3)
        prev = pt
    return None


def run_confirm(cfg: StudyConfig, target: Target, caches: CacheFor, base_cache: CaptureCache,
                overrides: Mapping[str, Any], names: Sequence[str], *, progress: bool = True) -> dict[str, Any]:
    """Stage 2 (see the module docstring): train today's and the combined recipe on the full
    data, score both on ``base_cache``'s eval split (the screen's prompts), R2 and R3."""
    from activation_wave.core.layers import eagle3_default_layers

    b = cfg.bench
    today, comb = confirm_recipes(cfg, overrides)
    layers = eagle3_default_layers(target.n_layers)
    trained = _train(target, [today, comb], b.recipe_seeds, layers, caches, today.draft.workers, progress,
                     _score_on_train(cfg, base_cache))
    _, taus = _score(target, base_cache, trained, layers, cfg, today.draft.workers, progress)
    row = compare(taus[TODAY], {COMBINED: taus[COMBINED]})[0]
    t_mean = seed_mean(taus[TODAY])
    t, lo, hi = mean_ci(list(t_mean))
    arms = {}
    for r in (today, comb):
        runs = _runs_summary(trained[r.name])
        arms[r.name] = {"overrides": r.overrides, "samples_per_prompt": r.samples_per_prompt, **runs,
                        "fit": curve_fit(runs["curve"]), "cpu_min_to_mark": cpu_minutes_to(runs["curve"], R3_TAU)}
    arms[TODAY].update(tau=t, lo=lo, hi=hi, per_prompt_tau=finite_values(t_mean))
    arms[COMBINED].update({k: row[k] for k in ("tau", "lo", "hi", "per_prompt_tau")})
    supported = row["delta"] > 0 and row["p"] < 0.05 and row["n_prompts"] >= MIN_PROMPTS
    reach_t, reach_c = arms[TODAY]["cpu_min_to_mark"], arms[COMBINED]["cpu_min_to_mark"]
    return {"run": True, "from": list(names), "n_seeds": b.recipe_seeds, "arms": arms,
            "r2": {k: row[k] for k in ("delta", "delta_lo", "delta_hi", "p", "n_prompts")} | {
                "verdict": "supported" if supported else "not supported"},
            "r3": {"mark": R3_TAU, "today_cpu_min": reach_t, "combined_cpu_min": reach_c,
                   "half_of_today": (None if reach_t is None or reach_c is None else reach_c <= reach_t / 2),
                   "note": "descriptive; curves at the online depth, no draft threshold, seeds averaged"}}


def ledger_taus(ledger_root: str, drafters: Sequence[str], ids: Sequence[str], key: str) -> np.ndarray:
    """Per-prompt outcome tau ``[seeds, prompts]`` of ``drafters`` as their ledger entries hold
    it under score ``key`` (:func:`~activation_wave.draft.ledger.score_key`), prompts in the
    order of ``ids`` (NaN: no verify round); a drafter without that score raises ``ValueError``."""
    from activation_wave.draft import ledger

    where = {p: i for i, p in enumerate(ids)}
    rows = []
    for path in drafters:
        score = ledger.read_score(ledger_root, path, key)
        if score is None:
            raise ValueError(f"the drafter ledger {ledger_root} holds no score {key!r} of {path}: run "
                             "`wave bench --only recipe` to score it")
        tau = np.full(len(ids), np.nan)
        for rec in score["per_record"]:
            if rec["id"] in where:
                tau[where[rec["id"]]] = rec["tau"] if rec["rounds"] else np.nan
        rows.append(tau)
    return np.stack(rows)


def reanalyse(doc: Mapping[str, Any], ledger_root: str, depth: int, threshold: float) -> dict[str, Any]:
    """The analysis of a recipe results document again, from the per-prompt scores its drafters
    hold in the ledger (no capture, no target): R1's rows (:func:`compare`, now with each p's
    Monte Carlo error and each arm's realised MDE), the seed sensitivity and the registration's
    commit. Everything else (costs, curves, stage 2) is kept; ``reanalysed`` says what changed."""
    from activation_wave.draft.ledger import score_key

    ids = doc["prompt_ids"]
    key = score_key(Path(doc["base"]["drafters"][0]).parent.parent.name, depth, threshold)
    base_tau = ledger_taus(ledger_root, doc["base"]["drafters"], ids, key)
    screened = [a for a in doc["arms"] if not a.get("post_hoc")]
    taus = {a["name"]: ledger_taus(ledger_root, a["drafters"], ids, key) for a in screened}
    rows = {r["name"]: r for r in compare(base_tau, taus)}
    arms = [{**a, **{k: v for k, v in rows[a["name"]].items() if k != "name"}} if a["name"] in rows else a
            for a in doc["arms"]]
    return {**doc, "pre_registration": PRE_REGISTRATION, "arms": arms,
            "base": {**doc["base"], "per_seed_tau": [finite_values(r) for r in base_tau]},
            "seed_sensitivity": seed_sensitivity(base_tau, taus, list(rows.values())),
            "reanalysed": {"by": "activation_wave.benchmarks.recipe.reanalyse", "from": f"the drafter ledger, score {key}",
                           "why": "issue 44: 200,000 resamples with each p's Monte Carlo error, realised MDEs, the "
                                  "seed-sensitivity analysis and the registration's commit; the drafters, their scores "
                                  "and costs are the screen's", "screen_git_commit": doc.get("git_commit"),
                           "screen_written": doc.get("written")}}


def summary(doc: Mapping[str, Any], path: Path | str) -> dict[str, Any]:
    """The compact ``recipe`` entry of ``benchmarks.json``."""
    from activation_wave.core.results import to_jsonable

    arms = doc["arms"]
    return to_jsonable({"model": doc["model"], "profile": doc["profile"], "results_file": str(path),
            "base": {k: doc["base"][k] for k in ("name", "tau", "lo", "hi", "cpu_s")},
            "best": doc["best"], "arms": [{k: a[k] for k in ("name", "tau", "delta", "delta_lo", "delta_hi", "p_holm",
                                                             "cpu_s")} for a in arms],
            "improved": [a["name"] for a in arms if helps(a)],
            "n_seeds": doc["base"]["n_seeds"], "eval_prompts": len(doc["prompt_ids"]), "seconds": doc["seconds"]})


def run(cfg: StudyConfig, *, progress: bool = True) -> dict[str, Any]:
    """``wave bench --only recipe``: capture (cached), :func:`run_recipe`, save ``recipe.json``;
    returns the :func:`summary` for ``benchmarks.json``."""
    from activation_wave.benchmarks.speedup import _overrides, bench_config
    from activation_wave.core.results import REPO_ROOT, save_result
    from activation_wave.study.steps import run_capture

    extra = _overrides(cfg)
    caches: dict[int, CaptureCache] = {}
    target: list[Target] = []

    def cache_for(samples: int) -> CaptureCache:
        if samples not in caches:
            cap = run_capture(bench_config(cfg.profile, samples, extra), progress=progress)
            caches[samples] = cap.cache
            target[:] = [cap.target]
        return caches[samples]

    cache_for(base_recipe(cfg).samples_per_prompt)
    doc = run_recipe(cfg, target[0], cache_for, progress=progress)
    path = save_result(NAME, doc, cfg)
    return summary(doc, path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)
