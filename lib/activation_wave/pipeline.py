"""The study's steps glued together: config -> target -> responses -> capture -> results.

Notebooks and the CLI call these same functions, so a chapter and ``wave capture``
always see the same cache. Results are small JSON files under a results folder
(``data/results/<profile>/<model>/`` by default), one per chapter.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .capture import CaptureCache, capture
from .config import StudyConfig, load_config
from .data import REPO_ROOT, Response, generate_responses, load_prompts, sampled_responses
from .models import Target, load_target

RESULTS_ROOT = REPO_ROOT / "data" / "results"


def study_config(profile: str = "smoke", model: str | None = None, **overrides: Any) -> StudyConfig:
    """Config from a papermill parameters cell: ``overrides`` use ``section__key`` names.

    >>> study_config("smoke", data__max_new_tokens=8).data.max_new_tokens
    8
    """
    dotted = {k.replace("__", "."): v for k, v in overrides.items() if v is not None}
    return load_config(profile, dotted, model=model)


@lru_cache(maxsize=4)
def _target(name: str) -> Target:
    return load_target(name)


def get_target(cfg: StudyConfig) -> Target:
    """The loaded target of a config (memoised per process)."""
    return _target(cfg.model)


@dataclass
class Captured:
    """Everything the analysis chapters need: target, (greedy) responses and the capture cache
    (which also holds the sampled responses when ``data.samples_per_prompt`` > 0)."""

    cfg: StudyConfig
    target: Target
    responses: list[Response]
    cache: CaptureCache
    responses_path: Path


def run_capture(cfg: StudyConfig, *, regenerate: bool = False, progress: bool = True) -> Captured:
    """Prompts -> target responses (cached) -> hidden-state capture (cached)."""
    target = get_target(cfg)
    prompts = load_prompts(cfg.data)
    responses, rpath = generate_responses(target, prompts, cfg.data, regenerate=regenerate, progress=progress)
    # sampled responses (train split only, if the config asks for any) go after the greedy ones
    sampled, _ = sampled_responses(target, prompts, cfg.data, regenerate=regenerate, progress=progress)
    records = responses + sampled
    captured = records[: cfg.capture.max_records] if cfg.capture.max_records > 0 else records
    cache = capture(target, captured, cfg.capture, progress=progress)
    return Captured(cfg=cfg, target=target, responses=responses, cache=cache, responses_path=rpath)


def results_dir(cfg: StudyConfig, root: str | Path | None = None) -> Path:
    """Where a run's result files go: ``<root>/<profile>/<model slug>/`` (a relative
    ``root`` is taken from the repository root, wherever the notebook runs)."""
    base = Path(root or os.environ.get("WAVE_RESULTS", RESULTS_ROOT))
    if not base.is_absolute():
        base = REPO_ROOT / base
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(cfg.model).name)
    return base / cfg.profile / slug


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    return obj


def git_commit() -> str | None:
    """``git rev-parse HEAD`` of the study's repository, or None if unavailable."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def save_results(name: str, payload: dict[str, Any], cfg: StudyConfig, root: str | Path | None = None) -> Path:
    """Write ``<results dir>/<name>.json`` atomically with the config and provenance."""
    folder = results_dir(cfg, root)
    folder.mkdir(parents=True, exist_ok=True)
    doc = {"name": name, "config": cfg.to_dict(), "written": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "git_commit": git_commit(), **_jsonable(payload)}
    path = folder / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False))
    os.replace(tmp, path)
    return path


def load_results(name: str, cfg: StudyConfig, root: str | Path | None = None) -> dict[str, Any]:
    """Read a results file written by :func:`save_results` (clear error if absent)."""
    path = results_dir(cfg, root) / f"{name}.json"
    if not path.exists():
        raise FileNotFoundError(f"results file {path} does not exist: run the chapter that writes {name!r} first "
                                f"(`wave study --profile {cfg.profile}`)")
    return json.loads(path.read_text())


def notebook_config(profile: str, model: str = "", overrides: str | Mapping[str, Any] = "{}") -> StudyConfig:
    """The config of a chapter from its papermill parameters (primitives only).

    ``model=""`` keeps the profile's model; ``overrides`` is a JSON object of dotted
    keys, e.g. ``'{"metrics.token_budget": 2048}'``.
    """
    extra = json.loads(overrides) if isinstance(overrides, str) else dict(overrides)
    return load_config(profile, extra, model=model or None)
