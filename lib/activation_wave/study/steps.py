"""The study's steps glued together: config -> target -> responses -> capture -> results.

Notebooks and the CLI call these same functions, so a chapter and ``wave capture``
always see the same cache. Results are small JSON files under a results folder
(``data/results/<profile>/<model>/`` by default), one per chapter.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from activation_wave.models.capture import CaptureCache, capture
from activation_wave.core.config import ConfigError, StudyConfig, json_int, load_config
from activation_wave.core.paths import cache_root
from activation_wave.models.prompts import (Response, TorchGenerator, generate_responses, load_prompts,
                                           sampled_responses)
from activation_wave.models.targets import Target, load_target
from activation_wave.core.results import load_result, save_result



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


def release_targets() -> None:
    """Forget every memoised target and collect it, so that a process that hands the model to
    engines of its own (vLLM loads the 1.5B target in fp32, about 9 GB each) does not hold a
    third copy beside them."""
    import gc

    _target.cache_clear()
    gc.collect()


def target_named(name: str) -> Target:
    """The loaded target of a model name (memoised per process, shared with :func:`get_target`)."""
    return _target(name)


@dataclass
class Captured:
    """Everything the analysis chapters need: target, (greedy) responses and the capture cache
    (which also holds the sampled responses when ``data.samples_per_prompt`` > 0)."""

    cfg: StudyConfig
    target: Target
    responses: list[Response]
    cache: CaptureCache
    responses_path: Path


def response_generator(cfg: StudyConfig, target: Target) -> contextlib.AbstractContextManager[Any]:
    """What ``data.engine`` names as a context: the PyTorch target's generator, or a
    llama-server on the model's GGUF (started only if a response is missing)."""
    if cfg.data.engine == "pytorch":
        return contextlib.nullcontext(TorchGenerator(target, cfg.data.batch_size))
    from activation_wave.engines.llamacpp_generate import ServerGenerator, gguf_of_model

    work = cache_root() / "llamacpp-responses"
    work.mkdir(parents=True, exist_ok=True)
    return ServerGenerator(gguf_of_model(cfg.model), slots=cfg.data.engine_slots, threads=cfg.data.engine_threads,
                           workdir=work, servers=cfg.data.engine_servers)


def run_capture(cfg: StudyConfig, *, regenerate: bool = False, progress: bool = True) -> Captured:
    """Prompts -> target responses (cached) -> hidden-state capture (cached).

    The config is checked against the loaded model first (:func:`activation_wave.study.estimate.check_fit`,
    as ``wave dry-run`` does from the model's shape), before anything is generated or written."""
    from activation_wave.study.estimate import check_before_load, check_fit, shape_of

    check_before_load(cfg)  # from the config alone, before any weights are loaded
    prompts = load_prompts(cfg.data)  # a bad prompt file is refused before the model loads
    target = get_target(cfg)
    check_fit(cfg, shape_of(target.model.config))
    with response_generator(cfg, target) as gen:
        responses, rpath = generate_responses(target, prompts, cfg.data, regenerate=regenerate, progress=progress,
                                              generator=gen)
        # sampled responses (train split only, if the config asks for any) go after the greedy ones
        sampled, _ = sampled_responses(target, prompts, cfg.data, regenerate=regenerate, progress=progress,
                                       generator=gen)
    records = responses + sampled
    captured = records[: cfg.capture.max_records] if cfg.capture.max_records > 0 else records
    cache = capture(target, captured, cfg.capture, progress=progress)
    return Captured(cfg=cfg, target=target, responses=responses, cache=cache, responses_path=rpath)


def save_results(name: str, payload: Any, cfg: StudyConfig, root: str | Path | None = None) -> Path:
    """Alias of :func:`results.save_result` (kept for the chapters not yet on result objects)."""
    return save_result(name, payload, cfg, root)


def load_results(name: str, cfg: StudyConfig, root: str | Path | None = None) -> dict[str, Any]:
    """The raw mapping of a results file (see :func:`results.load_result`)."""
    return load_result(name, cfg, root)


def notebook_config(profile: str, model: str = "", overrides: str | Mapping[str, Any] = "{}") -> StudyConfig:
    """The config of a chapter from its papermill parameters (primitives only).

    ``model=""`` keeps the profile's model; ``overrides`` is a JSON object of dotted
    keys, e.g. ``'{"metrics.token_budget": 2048}'``. A parameter papermill injected that the
    notebook does not define (``-p modle ...``) raises instead of running on the defaults.
    """
    from activation_wave.study.notebooks import check_notebook_parameters

    check_notebook_parameters()
    for name, value in (("profile", profile), ("model", model)):
        if not isinstance(value, str):
            raise ConfigError(f"-p {name} {value!r}: the {name} parameter must be a string, e.g. -p {name} "
                              f"{'smoke' if name == 'profile' else 'smollm2-135m'}")
    if not isinstance(overrides, (str, Mapping)):
        raise ConfigError(f"-p overrides {overrides!r}: must be a JSON object of dotted keys (a string), "
                          """e.g. -p overrides '{"capture.batch_size": 4}'""")
    try:
        extra = json.loads(overrides, parse_int=json_int) if isinstance(overrides, str) else dict(overrides)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"overrides {overrides!r} is not valid JSON ({exc.msg}); pass an object of dotted keys, "
                          """e.g. -p overrides '{"capture.batch_size": 4}'""") from None
    if not isinstance(extra, dict):
        raise ConfigError(f"overrides {overrides!r} must be a JSON object of dotted keys, "
                          """e.g. -p overrides '{"capture.batch_size": 4}'""")
    return load_config(profile, extra, model=model or None)


def open_chapter(profile: str, model: str = "", overrides: str | Mapping[str, Any] = "{}", *,
                 capture: bool = True, threads: int | None = 1) -> tuple[StudyConfig, Captured | None]:
    """A chapter's one setup call: its config (:func:`notebook_config`), torch's thread
    count for the eigen-heavy statistics (one thread is faster on a small shared CPU;
    ``None`` leaves torch's own count, for a chapter that scores drafters in-process),
    and the capture (cached; its summary printed), unless ``capture=False``."""
    from activation_wave.measure.entropy import set_compute_threads

    cfg = notebook_config(profile, model, overrides)
    if threads is not None:
        set_compute_threads(threads)
    if not capture:
        return cfg, None
    cap = run_capture(cfg, progress=False)
    print(cap.cache.summary())
    return cfg, cap
