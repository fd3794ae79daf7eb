"""Chapter 6's experiment: one drafter per layer set and seed, same data, same budget.

Every drafter is trained on the train split of one capture cache and evaluated
offline on its eval split (accepted length of chain drafts at T = 0, from the cached
greedy responses). Trained drafters are cached under the capture folder, keyed by the
layer set, the draft config and the seed, so a rerun trains only what changed; a
folder without its ``train_log.json`` (an interrupted training) is trained again.
With ``DraftConfig.ledger`` set, each drafter's log and offline scores are also kept in
the committed ledger (:mod:`activation_wave.draft.ledger`): a drafter found there counts
as trained and its scores are read back, so only a step that needs its weights trains it
again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import warnings
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from activation_wave.models.capture import CaptureCache
from activation_wave.core.config import DraftConfig
from activation_wave.models.targets import Target
from activation_wave.core.progress import PartFiles, progress_bar, show_parts


#: Fields that choose *which* drafters the experiment trains, or how many at once, not how one
#: is trained (``samples_per_prompt`` chooses the capture, whose folder holds the drafters).
_NOT_IN_KEY = ("n_seeds", "control_seeds", "n_random", "sweep_stride", "sweep_fraction", "sweep_seed_every",
               "norm_arm", "samples_per_prompt", "workers", "ledger")
#: Fields added after drafters were cached: left out of the key at their default value, so
#: those drafters keep their folders.
_KEY_IF_SET = {"records_fraction": 1.0, "fused_norm": False, "head_init": "random", "norm_init": "ones",
               "block_init": "random", "feature_loss": 0.0, "lr_schedule": "cosine", "warmup_frac": 0.05,
               "eval_depth": 0, "eval_threshold": 0.0, "max_tokens": 0,
               "train_records": 0, "init_from": ""}



@dataclass(frozen=True)
class ScoreOnTrain:
    """Score each drafter right after it trains, while its weights are on this machine, and
    keep the score in the ledger (``DraftConfig.ledger``): a run stopped, or moved to
    another machine, before its scoring step then never trains a drafter again to score it
    (:func:`score_drafters` reads the score back). The settings are :func:`score_drafters`'."""

    cache_path: str  # the capture whose eval split scores the drafter (may differ from the training capture)
    depth: int
    threshold: float = 0.0
    threads: int = 1


@dataclass(frozen=True)
class DrafterJob:
    """One drafter of the design: its set, layers, arm and full training config (seed included)."""

    set: str
    layers: tuple[int, ...]
    arm: str  # "triples" (default, rules, controls), "sweep" (single layers), "norm" (per-layer RMSNorm)
    config: DraftConfig

def drafter_dir(cache: CaptureCache, layers: Sequence[int], cfg: DraftConfig) -> Path:
    """Where the drafter for (cache, layers, config incl. seed) lives; the ids are sorted first,
    so [15, 2, 27] and [2, 15, 27] are one drafter (sorted ids keep the keys they always had)."""
    train = {k: v for k, v in asdict(cfg).items()
             if k not in _NOT_IN_KEY and not (k in _KEY_IF_SET and v == _KEY_IF_SET[k])}
    ids = sorted(map(int, layers))
    key = hashlib.sha256(json.dumps({"layers": ids, "cfg": train}, sort_keys=True).encode())
    return cache.path / "drafters" / f"L{'-'.join(map(str, ids))}-{key.hexdigest()[:12]}"


def train_or_load(target: Target, cache: CaptureCache, layers: Sequence[int], cfg: DraftConfig, *,
                  progress: bool = False, weights: bool = True) -> tuple[Path, dict[str, Any]]:
    """Train the drafter unless a finished one with the same key exists; return (folder, train log).

    ``weights=False``: a drafter in the ledger (``cfg.ledger``) counts as finished without its
    weights (the folder may not exist); its ledger log is returned. A trained or loaded drafter
    missing from the ledger is entered."""
    from activation_wave.draft import ledger
    from activation_wave.draft.training import train_drafter

    out = drafter_dir(cache, layers, cfg)
    log_path = out / "train_log.json"
    entry = ledger.read(cfg.ledger, out)
    if not log_path.exists():
        if entry is not None and not weights:
            return out, entry["train_log"]
        if out.exists():
            shutil.rmtree(out)  # interrupted earlier: start over
        tmp = out.with_name(out.name + ".partial")
        if tmp.exists():
            shutil.rmtree(tmp)
        ledger.check_writable(cfg.ledger, out)  # a read-only ledger is refused before the training, not after
        train_drafter(target, cache, list(layers), cfg, tmp, progress=progress)
        tmp.rename(out)
    log = json.loads(log_path.read_text())
    if cfg.ledger:
        digest = ledger.weights_digest(out)
        if entry is None or entry.get("weights_digest") != digest:
            if entry is not None:
                warnings.warn(f"drafter {out.name} here has other weights than the ledger's (trained on another CPU "
                              "or thread count); the ledger now describes these weights and their scores are "
                              "computed again", stacklevel=2)
            ledger.record_training(cfg.ledger, out, sorted(map(int, layers)), asdict(cfg), log, digest)
    return out, log


def is_trained(cache: CaptureCache, layers: Sequence[int], cfg: DraftConfig) -> bool:
    """Whether the drafter is finished in the cache or entered in the ledger."""
    from activation_wave.draft import ledger

    out = drafter_dir(cache, layers, cfg)
    return (out / "train_log.json").exists() or ledger.read(cfg.ledger, out) is not None


def ensure_weights(target: Target, paths: Sequence[str | Path], ledger_root: str, *, workers: int = 1,
                   progress: bool = False) -> None:
    """Train again, from their ledger entries, the drafters among ``paths`` whose weights are not
    in the cache (each on the capture its folder lies in), ``workers`` at a time."""
    from activation_wave.draft import ledger

    jobs = []
    for p in map(Path, paths):
        if (p / "train_log.json").exists():
            continue
        entry = ledger.read(ledger_root, p)
        if entry is None:
            raise FileNotFoundError(f"drafter {p} is neither in the cache nor in the ledger {ledger_root!r}; "
                                    "train it first (run_jobs)")
        cfg = DraftConfig(**entry["config"])
        cache = CaptureCache(p.parent.parent)
        if drafter_dir(cache, entry["layers"], cfg) != p:
            raise ValueError(f"ledger entry of {p.name} describes another drafter (its key is "
                             f"{drafter_dir(cache, entry['layers'], cfg).name}); delete the entry to rebuild it")
        jobs.append((cache, entry["layers"], cfg))
    for cache in {str(c.path): c for c, _, _ in jobs}.values():
        _train_missing(target, cache, [(ids, c) for cc, ids, c in jobs if cc.path == cache.path], workers, progress,
                       weights=True)


def tau_with_ci(eval_log: Mapping[str, Any], *, seed: int = 0) -> dict[str, float]:
    """Offline tau and a 95% bootstrap interval over eval records (tokens / rounds, resampled by record)."""
    per = [p for p in eval_log["per_record"] if p["rounds"]]
    tokens = np.array([p["tokens"] for p in per], float)
    rounds = np.array([p["rounds"] for p in per], float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(per), size=(2000, len(per)))
    # tau = tokens per verify round; the first token of each response comes from the
    # prompt's forward (not a verify), hence the -1 per record, as in offline_acceptance
    boots = (tokens[idx] - 1).sum(1) / rounds[idx].sum(1)
    return {"tau": float(eval_log["tau_offline"]), "tau_lo": float(np.quantile(boots, 0.025)),
            "tau_hi": float(np.quantile(boots, 0.975)), "eval_records": len(per)}


@lru_cache(maxsize=1)
def _worker_target(model: str, dtype: str) -> Target:
    """The target of a pool worker, loaded once per process (a GGUF target takes seconds)."""
    from activation_wave.models.targets import load_target

    return load_target(model, dtype=dtype)


def _train_in_worker(model: str, dtype: str, cache_path: str, layers: list[int], cfg: DraftConfig,
                     score: ScoreOnTrain | None = None, part: Mapping[str, str] | None = None) -> str:
    """Process-pool job: train one drafter with this process's target and the cache (and score it).
    ``part``: the environment entry (:meth:`~activation_wave.core.progress.PartFiles.env`) under
    which this job's bars report their counts to the parent's line."""
    import os

    os.environ.update(part or {})
    try:
        target = _worker_target(model, dtype)
        path, _ = train_or_load(target, CaptureCache(cache_path), layers, cfg)
        if score is not None:
            _score_into_ledger(target, path, cfg.ledger, score)
    finally:
        for key in part or {}:
            os.environ.pop(key, None)
    return str(path)


def _score_into_ledger(target: Target, path: str | Path, ledger_root: str, score: ScoreOnTrain) -> None:
    """Enter the :class:`ScoreOnTrain` score of the trained drafter in ``path`` in the ledger
    (:func:`score_drafters`: kept if the ledger holds it already; nothing without a ledger)."""
    if ledger_root:
        score_drafters(target, CaptureCache(score.cache_path), [path], depth=score.depth, threshold=score.threshold,
                       threads=score.threads, ledger=ledger_root)


def _worker_init() -> None:
    """A pool worker's start: its progress bars stay silent (the parent's bar counts its jobs),
    and on Linux it is sent SIGTERM when its parent dies, so a killed study leaves no
    orphan still training (which would spend the CPU a resumed run needs)."""
    import ctypes
    import signal
    import sys

    from activation_wave.core.progress import silence_relay

    silence_relay()
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _pool(workers: int) -> Any:
    """A pool of ``workers`` fresh processes (spawn: fork would copy torch's thread pools),
    started by :func:`_worker_init`."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_worker_init)


def _dtype(target: Target) -> str:
    return str(next(target.model.parameters()).dtype).removeprefix("torch.")


def _train_missing(target: Target, cache: CaptureCache, jobs: list[tuple[list[int], DraftConfig]], workers: int,
                   progress: bool, *, weights: bool = False, score: ScoreOnTrain | None = None) -> None:
    """Train the drafters of ``jobs`` that are not cached yet (nor in the ledger, unless
    ``weights``), ``workers`` processes at a time; with ``score``, each is scored where it
    trained as soon as it is done (:class:`ScoreOnTrain`).

    Each worker trains with ``cfg.threads`` threads, so ``workers=2, threads=1`` keeps
    two cores busy with two drafters; a drafter is bit-identical to one trained alone
    at the same thread count.
    """
    done = ((lambda ids, c: (drafter_dir(cache, ids, c) / "train_log.json").exists()) if weights
            else (lambda ids, c: is_trained(cache, ids, c)))
    todo = [(ids, c) for ids, c in jobs if not done(ids, c)]
    todo = list({str(drafter_dir(cache, ids, c)): (ids, c) for ids, c in todo}.values())
    show = progress and bool(todo)
    bar = progress_bar(total=len(todo), desc="training drafters", unit="drafter", disable=not show)
    if show:
        _heartbeat(bar)  # say at once what started (a drafter can take most of an hour)
    if workers <= 1 or len(todo) <= 1:
        for ids, c in todo:
            # in this process: the drafter's own batch bar is the log's only sign of life while it trains
            path, _ = train_or_load(target, cache, ids, c, progress=show)
            if score is not None:
                _score_into_ledger(target, path, c.ledger, score)
            bar.update()
    else:
        # each worker's drafter reports its batches through a file, so the heartbeat line says how
        # far every drafter training at once is, not only how many are done
        with _pool(workers) as pool, PartFiles() as board:
            futures = {pool.submit(_train_in_worker, target.name, _dtype(target), str(cache.path), ids, c, score,
                                   board.env(i)): i for i, (ids, c) in enumerate(todo)}
            for fut in completed_with_heartbeat(list(futures), bar if show else None, parts=board):
                fut.result()  # re-raise a worker's error here
                board.done(futures[fut])
                bar.update()
    bar.close()


#: Seconds between progress lines while no drafter finishes (a top-budget drafter trains for
#: up to an hour on a 2-core AVX2 machine; a log silent that long looks hung). Each line
#: carries every running drafter's batches (:class:`~activation_wave.core.progress.PartFiles`).
HEARTBEAT_S = 60.0


def _heartbeat(bar: Any) -> None:
    """Show ``bar``'s line now with its elapsed time: a new line in a plain log
    (:meth:`~activation_wave.core.progress.LineProgress.announce`), a redraw of tqdm's."""
    (bar.announce if hasattr(bar, "announce") else bar.refresh)()


def completed_with_heartbeat(futures: Sequence[Future[Any]], bar: Any | None,
                             every: float | None = None, parts: PartFiles | None = None) -> Iterator[Future[Any]]:
    """The ``futures`` as they complete (:func:`concurrent.futures.as_completed`), showing
    ``bar``'s line (:func:`_heartbeat`) after every ``every`` seconds (default
    :data:`HEARTBEAT_S`) in which none completed, with the counts the jobs report through
    ``parts``; ``bar=None`` stays silent."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=HEARTBEAT_S if every is None else every, return_when=FIRST_COMPLETED)
        if parts is not None and bar is not None:
            show_parts(bar, parts.parts())
        if not done and bar is not None:
            _heartbeat(bar)
        yield from done


def run_sets(target: Target, cache: CaptureCache, sets: Mapping[str, Sequence[int]], cfg: DraftConfig,
             seeds: Sequence[int], *, progress: bool = True) -> list[dict[str, Any]]:
    """Train (or load) a drafter for every named set and seed; one row per drafter.

    Missing drafters are trained ``cfg.workers`` at a time (see :func:`_train_missing`).
    """
    jobs = [(name, list(ids), dataclasses.replace(cfg, seed=s)) for name, ids in sets.items() for s in seeds]
    return run_jobs(target, cache, jobs, cfg.workers, progress=progress)


def run_jobs(target: Target, cache: CaptureCache, jobs: Sequence[tuple[str, Sequence[int], DraftConfig]],
             workers: int, *, progress: bool = True, score: ScoreOnTrain | None = None) -> list[dict[str, Any]]:
    """Train (or load) one drafter per ``(set name, layers, config)``; one row per drafter, in order.

    Missing drafters are trained ``workers`` at a time, and with ``score`` scored as each
    finishes (see :func:`_train_missing`).
    """
    _train_missing(target, cache, [(list(ids), c) for _, ids, c in jobs], workers, progress, score=score)
    rows = []
    for name, ids, c in jobs:
        ids, seed = list(ids), c.seed
        path, log = train_or_load(target, cache, ids, c, weights=False)
        ev = log.get("eval", {})
        row = {"set": name, "layers": ids, "k": len(ids), "seed": seed, "path": str(path),
               "train_s": log.get("train_wall_s"), "tokens_per_s": log.get("tokens_per_s"),
               "acceptance_by_position": ev.get("acceptance_by_position"),
               "final_loss_by_step": log["epochs"][-1]["loss_by_step"] if log.get("epochs") else None,
               "final_acc_by_step": log["epochs"][-1]["acc_by_step"] if log.get("epochs") else None,
               "train_log": log}
        if ev:
            row.update(tau_with_ci(ev, seed=seed))
        rows.append(row)
    return rows


def _score(target: Target, cache: CaptureCache, path: str, depth: int, threshold: float, n_threads: int) -> dict[str, Any]:
    """Offline acceptance of the drafter in ``path`` on ``cache``'s eval split, with ``n_threads`` threads."""
    from activation_wave.models.drafter import load_drafter
    from activation_wave.decode.kernels import threads
    from activation_wave.decode.offline import offline_acceptance

    with threads(n_threads):
        return offline_acceptance(load_drafter(path, target), cache, depth, "eval", threshold=threshold)


def _score_in_worker(model: str, dtype: str, cache_path: str, path: str, depth: int, threshold: float,
                     n_threads: int) -> dict[str, Any]:
    """Process-pool job: :func:`_score` with this process's target."""
    return _score(_worker_target(model, dtype), CaptureCache(cache_path), path, depth, threshold, n_threads)


def score_drafters(target: Target, cache: CaptureCache, paths: Sequence[str | Path], *, depth: int,
                   threshold: float = 0.0, workers: int = 1, threads: int = 1, ledger: str = "",
                   progress: bool = False) -> list[dict[str, Any]]:
    """:func:`~activation_wave.decode.offline.offline_acceptance` of every drafter in ``paths`` on the
    eval split of ``cache`` (chain depth ``depth``, draft threshold ``threshold``), in order.

    ``workers`` > 1 scores that many drafters at once in worker processes, as
    :func:`run_jobs` trains them (chapter 6 scores 70 drafters; one process would leave the
    second core idle). Each drafter is scored with ``threads`` threads wherever it runs, so
    the results equal serial scoring exactly. Each worker loads the target by name once
    (``target.name`` must load with :func:`~activation_wave.models.targets.load_target`).
    With a ``ledger``, scores it holds are read back, the drafters it lacks scores for are
    trained again where their weights are missing (:func:`ensure_weights`), and every new
    score is entered.
    """
    from concurrent.futures import as_completed

    from activation_wave.draft import ledger as ledger_mod

    paths = [str(p) for p in paths]
    key = ledger_mod.score_key(cache.path, depth, threshold)
    results: dict[int, dict[str, Any]] = {}
    for i, p in enumerate(paths):
        kept = ledger_mod.read_score(ledger, p, key) if ledger else None
        if kept is not None:
            results[i] = kept
    todo = [i for i in range(len(paths)) if i not in results]
    if ledger:
        ensure_weights(target, [paths[i] for i in todo], ledger, workers=workers, progress=progress)
    bar = progress_bar(total=len(todo), desc="scoring drafters", unit="drafter", disable=not progress or not todo)

    def done(i: int, ev: dict[str, Any]) -> None:
        results[i] = ev
        if ledger:
            ledger_mod.record_score(ledger, paths[i], key, ev)
        bar.update()

    if workers <= 1 or len(todo) <= 1:
        for i in todo:
            done(i, _score(target, cache, paths[i], depth, threshold, threads))
    else:
        with _pool(workers) as pool:
            futures = {pool.submit(_score_in_worker, target.name, _dtype(target), str(cache.path), paths[i], depth,
                                   threshold, threads): i for i in todo}
            for fut in as_completed(futures):
                done(futures[fut], fut.result())  # re-raise a worker's error here
    bar.close()
    return [results[i] for i in range(len(paths))]
