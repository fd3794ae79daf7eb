"""Strict, frozen configuration: one dataclass per pipeline step, grouped per profile.

A profile (``smoke``, ``default``, ``paper``) is a YAML file in ``profiles/`` with one
section per step. Each section becomes a frozen dataclass; unknown keys are rejected
with a message that lists the known ones. Overrides come as dotted keys, from the CLI
(``--set capture.batch_size=4``) or from a papermill parameters cell.

>>> cfg = load_config("smoke", {"data.max_new_tokens": 16})
>>> cfg.data.max_new_tokens
16
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar, get_type_hints

import yaml

from activation_wave.core.paths import PROFILE_DIR

PROFILES = ("smoke", "default", "paper")

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value or key is wrong; the message says how to fix it.

    ``key`` (``section.name``) and ``expected`` (e.g. ``">= 1"``) are set for a value
    out of range, so a caller can name its own flag for that key.
    """

    def __init__(self, message: str, *, key: str | None = None, expected: str | None = None):
        super().__init__(message)
        self.key = key
        self.expected = expected


@dataclass(frozen=True)
class Bound:
    """The interval a numeric config value must lie in (``None``: unbounded on that side).

    >>> str(Bound(0, 1, high_open=True)), Bound(0, 1, high_open=True).contains(1.0)
    ('in [0, 1)', False)
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def contains(self, x: float) -> bool:
        """Whether ``x`` lies in the interval (NaN never does)."""
        if x != x:  # NaN
            return False
        if self.low is not None and (x <= self.low if self.low_open else x < self.low):
            return False
        return not (self.high is not None and (x >= self.high if self.high_open else x > self.high))

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {_num(self.low)}"
        if self.low is None:
            return f"{'<' if self.high_open else '<='} {_num(self.high)}"
        return f"in {'(' if self.low_open else '['}{_num(self.low)}, {_num(self.high)}{')' if self.high_open else ']'}"


def _num(x: float | None) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


AT_LEAST_1 = Bound(1)
NON_NEGATIVE = Bound(0)
POSITIVE = Bound(0, low_open=True)
QUANTILE = Bound(0, 1, high_open=True)
PROBABILITY = Bound(0, 1)
FRACTION = Bound(0, 1, low_open=True)  # a share that must not be empty
SEED = Bound(0, 2**32 - 1)  # what numpy and torch generators accept
#: Above T = 10 a softmax is nearly uniform: decoding would return random tokens.
TEMPERATURE = Bound(0, 10)
#: A larger AdamW learning rate only diverges (training stops at a non-finite loss anyway).
LEARNING_RATE = Bound(0, 1, low_open=True)
#: Cached next-token log-probs per position: the soft targets use the top 8; 256 keeps a
#: shard's top-k tensors (8 bytes per entry per position) far below its hidden states.
TOPK = Bound(1, 256)
def _cpus() -> int:
    """CPUs this process may run on (its affinity mask; the machine's count where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: Threads of one process, from the machine: more than 4 per CPU only oversubscribes it, and
#: a count like 10000 makes OpenMP abort with no message. Checked with the other bounds, so
#: ``wave dry-run`` refuses it too; 0 (where allowed) leaves torch's own setting.
MAX_THREADS = 4 * _cpus()
THREADS = Bound(0, MAX_THREADS)
THREADS_AT_LEAST_1 = Bound(1, MAX_THREADS)
#: Fewer draft tokens than this leave nearly every target token outside the draft vocabulary.
#: No upper end here: the target decides (its vocabulary size takes every token; above it, check_fit refuses).
DRAFT_VOCAB = Bound(16)

#: Selection methods (:func:`activation_wave.select.selection.select_layers`); listed here so that
#: ``select.method`` is checked with every other value, by dry-run and every step alike.
SELECTION_METHODS = ("entropy-greedy", "combined", "exhaustive", "cka-diverse", "eagle3-default", "last-k",
                     "evenly-spaced", "random")
#: Arms of the recipe benchmark (``wave bench --only recipe``), one-factor changes of its base
#: recipe, in run order; their overrides live in :mod:`activation_wave.benchmarks.recipe`.
#: ``combined`` (built from the screen's winners) runs last, and only when listed.
RECIPE_ARMS = ("head-target", "head-frozen", "norm-target", "block-target", "vocab-1k", "vocab-4k", "vocab-16k",
               "vocab-full", "ttt-1", "ttt-5", "decay-1", "hard", "feature-reg", "lr-high", "lr-low", "lr-constant",
               "batch-1k", "batch-4k", "epochs-5", "epochs-20", "samples-1", "combined")
#: The pre-registered shrink order of the screen (10_drafter_recipe): the first named is dropped first.
RECIPE_SHRINK_ORDER = ("vocab-full", "epochs-20", "block-target", "batch-4k", "batch-1k", "lr-constant", "lr-low",
                       "decay-1", "ttt-5")
#: The arms the default profile runs: every arm but vocab-4k (its base recipe, draft_vocab 4096)
#: and the arms of the shrink order, all nine dropped by the budget amendment of 2026-12-03
#: (10_drafter_recipe, decided from training times before any drafter was scored).
#: ``--set bench.recipe_arms=...`` runs any of them again.
DEFAULT_RECIPE_ARMS = (tuple(a for a in RECIPE_ARMS if a not in ("vocab-4k", "combined", *RECIPE_SHRINK_ORDER))
                       + ("combined",))
#: Prompt sources besides a .jsonl path and ``hub:<dataset>[:<split>]``.
NAMED_SOURCES = ("humaneval", "team", "corpus")
_HUB_SOURCE = re.compile(r"hub:[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?(:[\w.-]+)?")


def check_source(source: str) -> str:
    """Raise :class:`ConfigError` unless ``source`` names a prompt source: ``humaneval``,
    ``team``, ``hub:<dataset>[:<split>]`` or an existing ``.jsonl`` / ``.json`` file.

    >>> check_source("team")
    'team'
    >>> check_source("bogus")
    Traceback (most recent call last):
    ...
    activation_wave.core.config.ConfigError: data.sources: 'bogus' is not a prompt source: use 'humaneval', 'team', an existing .jsonl file or 'hub:<org>/<dataset>[:<split>]', e.g. --set data.sources=team
    """
    fix = "use 'humaneval', 'team', an existing .jsonl file or 'hub:<org>/<dataset>[:<split>]', e.g. --set data.sources=team"
    if source in NAMED_SOURCES:
        return source
    if source.startswith("hub:"):
        if not _HUB_SOURCE.fullmatch(source):
            raise ConfigError(f"data.sources: {source!r} is not a hub dataset name; {fix}", key="data.sources",
                              expected="a prompt source")
        return source
    path = Path(source).expanduser()
    if path.suffix in (".jsonl", ".json") or path.exists():
        if not path.exists():
            raise ConfigError(f"data.sources: prompt file {source} does not exist; {fix}", key="data.sources",
                              expected="a prompt source")
        if path.is_dir():
            raise ConfigError(f"data.sources: {source} is a folder, not a prompt file; {fix}", key="data.sources",
                              expected="a prompt source")
        return source
    raise ConfigError(f"data.sources: {source!r} is not a prompt source: {fix}", key="data.sources",
                      expected="a prompt source")


def validate(section: Any) -> None:
    """Check a section's values: their types (an int field holds an int, not a bool or a
    float; a float field a finite number), its ``BOUNDS`` and its ``CHOICES``; raise
    :class:`ConfigError` naming the key, the value, the valid range and how to set it.

    Runs in every section's ``__post_init__``, so a config built from a profile, from
    ``--set``, from notebook overrides, in Python or by ``dataclasses.replace`` is checked alike.
    """
    where = _SECTION_NAMES.get(type(section), type(section).__name__)
    defaults = {f.name: f.default for f in fields(section)}
    hints = get_type_hints(type(section))
    for f in fields(section):
        value, typ, key = getattr(section, f.name), hints[f.name], f"{where}.{f.name}"
        inner = typ.__args__[0] if getattr(typ, "__origin__", None) is tuple else None
        for v in (value if inner is not None and isinstance(value, tuple) else [value]):
            want = inner or typ
            number = {int: numbers.Integral, float: numbers.Real}.get(want)  # numpy scalars too
            ok = (isinstance(v, number) and not isinstance(v, bool)) if number else isinstance(v, want)
            if inner is not None and not isinstance(value, tuple):
                ok = False
            if not ok:
                raise ConfigError(f"{key} = {value!r} has the wrong type: expected {getattr(typ, '__name__', typ)}; "
                                  f"e.g. --set {key}={value_text(defaults[f.name]) if inner is None else 'a,b'}",
                                  key=key, expected=str(getattr(typ, "__name__", typ)))
            if want is float and not math.isfinite(v):
                bound = section.BOUNDS.get(f.name)
                expected = f"{bound} and finite" if bound else "finite"
                raise ConfigError(f"{key} = {v!r} is out of range: it must be {expected} (default "
                                  f"{defaults[f.name]!r}); set a valid value, e.g. --set {key}="
                                  f"{value_text(defaults[f.name]) if inner is None else '...'}", key=key, expected=expected)
    for name, bound in section.BOUNDS.items():
        value = getattr(section, name)
        for v in (value if isinstance(value, tuple) else [value]):
            if isinstance(v, (int, float)) and not bound.contains(v):
                example = value_text(defaults[name]) if not isinstance(value, tuple) else ",".join(
                    map(value_text, defaults[name]))
                raise ConfigError(
                    f"{where}.{name} = {value!r} is out of range: it must be {bound} (default {defaults[name]!r}); "
                    f"set a valid value, e.g. --set {where}.{name}={example}", key=f"{where}.{name}",
                    expected=str(bound))
    for name, choices in section.CHOICES.items():
        value = getattr(section, name)
        if value not in choices:
            raise ConfigError(f"{where}.{name} = {value!r} is not one of {list(choices)}; "
                              f"e.g. --set {where}.{name}={choices[0]}", key=f"{where}.{name}",
                              expected=f"one of {list(choices)}")


_INT_TEXT = re.compile(r"[+-]?[0-9]+")
#: Every integer value lives in 64 bits (seeds, counts, sizes); longer digit strings are typos.
_INT64 = Bound(-(2**63), 2**63 - 1)
_FLOAT_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0", "-0")  # -0: JSON reads it as 0


def value_text(value: Any) -> str:
    """A YAML / JSON scalar as the text that, typed after ``--set key=``, means the same value.

    >>> value_text(True), value_text(None), value_text(2.0), value_text(1e400), value_text(7)
    ('true', 'null', '2.0', 'inf', '7')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _too_many_digits(where: str, digits: int) -> None:
    raise ConfigError(f"{where}: a whole number of {digits} digits is out of range: integers here fit in 64 bits "
                      f"(at most 18 digits); give one in the key's range, e.g. --set {where}=3", key=where,
                      expected="an integer of at most 18 digits")


def parse_value(value: Any, typ: Any, where: str) -> Any:
    """THE parser of one config value, shared by profiles (YAML), ``--set`` (text) and
    notebook ``overrides`` (JSON), so that all three accept and reject alike.

    A YAML / JSON scalar is first written as the text that means it on the command line
    (:func:`value_text`: ``true``, ``2.0``, ``null``), then every value is parsed as text:
    ints are ASCII digits with an optional sign (no ``1_5``, no ``2.0``, no ``true``: a bool
    or a float is never truncated to an int), floats are decimal or ``inf``/``nan`` (the
    bounds then reject those), bools are true/false/yes/no/1/0 (and ``-0``, which JSON reads as
    0), lists are comma-separated
    (or a YAML / JSON list) with no empty item.

    >>> parse_value("16", int, "k"), parse_value(" 0.5 ", float, "q"), parse_value("a,b", tuple[str, ...], "s")
    (16, 0.5, ('a', 'b'))
    >>> parse_value(True, int, "select.k")
    Traceback (most recent call last):
    ...
    activation_wave.core.config.ConfigError: select.k: expected an integer (a whole number, without '_' or a decimal point), got True; e.g. --set select.k=3
    """
    if getattr(typ, "__origin__", None) is tuple:
        inner = typ.__args__[0]
        if isinstance(value, (list, tuple)):
            if any(isinstance(v, (list, tuple, dict)) for v in value):
                raise ConfigError(f"{where}: expected a flat list, got {value!r}; e.g. --set {where}=a,b", key=where,
                                  expected="a flat list")
            items = [value_text(v) for v in value]
        elif isinstance(value, dict):
            raise ConfigError(f"{where}: expected a list, got {value!r}; e.g. --set {where}=a,b", key=where,
                              expected="a list")
        else:
            text = value_text(value)
            items = text.split(",") if text.strip() else []
        if any(not v.strip() for v in items):
            raise ConfigError(f"{where}: empty item in {value!r}; remove the extra comma (e.g. --set {where}=a,b)",
                              key=where, expected="a list without empty items")
        return tuple(parse_value(v, inner, where) for v in items)
    if isinstance(value, (list, tuple, dict)):
        raise ConfigError(f"{where}: expected one value, got {value!r}", key=where, expected="one value")
    if isinstance(value, int) and not isinstance(value, bool) and not _INT64.contains(value):
        digits = int(value.bit_length() * math.log10(2)) + 1  # int -> str refuses past 4300 digits: judged by size
        if typ is int:
            _too_many_digits(where, digits)
        if typ is float:
            value = "-inf" if value < 0 else "inf"  # what a float of it is; the bounds refuse it
        elif digits > 4000:
            value = f"<a whole number of {digits} digits>"
    text = value_text(value).strip()
    if typ is str:
        return text
    if typ is bool and text.lower() in _TRUE + _FALSE:
        return text.lower() in _TRUE
    if typ is int and _INT_TEXT.fullmatch(text):
        digits = len(text.lstrip("+-").lstrip("0"))
        if digits > 18:  # beyond a 64-bit integer (and, past 4300 digits, beyond what int() parses)
            _too_many_digits(where, digits)
        return int(text)
    if typ is float and (_FLOAT_TEXT.fullmatch(text) or _INT_TEXT.fullmatch(text)):
        return float(text)
    words = {bool: "true or false", int: "an integer", float: "a number"}
    example = {bool: "true", int: "3", float: "0.5"}
    hint = " (a whole number, without '_' or a decimal point)" if typ is int else ""
    raise ConfigError(f"{where}: expected {words.get(typ, typ)}{hint}, got {value!r}; e.g. --set {where}="
                      f"{example.get(typ, '...')}", key=where, expected=words.get(typ, str(typ)))


def from_dict(cls: type[T], data: Mapping[str, Any], *, where: str = "") -> T:
    """Build a frozen dataclass from a mapping, rejecting unknown keys."""
    hints = get_type_hints(cls)
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {unknown} in section {where or cls.__name__}; known keys: {sorted(names)}"
        )
    kwargs = {k: parse_value(v, hints[k], f"{where}.{k}" if where else k) for k, v in data.items()}
    return cls(**kwargs)


@dataclass(frozen=True)
class DataConfig:
    """Which prompts, and how the target's responses to them are generated."""

    sources: tuple[str, ...] = ("humaneval", "team")  # humaneval | team | path/to.jsonl | hub:<dataset>
    max_prompts_per_source: int = 0  # 0 = all
    max_new_tokens: int = 128
    batch_size: int = 8
    seed: int = 0
    # Extra drafter training data: this many sampled responses per train-split prompt
    # (temperature below), captured after the greedy ones. 0 = greedy responses only.
    samples_per_prompt: int = 0
    sample_temperature: float = 0.7
    # What generates the responses: "pytorch" (the target itself, in batches of batch_size)
    # or "llamacpp" (a llama-server on the model's GGUF, the same weights: for targets too
    # slow to generate with in PyTorch on a CPU, e.g. qwen2.5-coder-1.5b; needs
    # scripts/setup_llamacpp.sh), with engine_slots requests in flight and engine_threads
    # threads. The engine and its slots are part of the responses' key; each record names
    # the engine that wrote it.
    engine: str = "pytorch"
    engine_slots: int = 1
    engine_threads: int = 2
    # llama-servers sharing each batch (not in the responses' key: with one slot each, a response is
    # decoded alone whatever the number of servers); two one-thread servers use 2 cores best
    engine_servers: int = 1

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "max_prompts_per_source": NON_NEGATIVE, "max_new_tokens": AT_LEAST_1, "batch_size": AT_LEAST_1,
        "seed": SEED, "samples_per_prompt": NON_NEGATIVE, "sample_temperature": TEMPERATURE,
        "engine_slots": AT_LEAST_1, "engine_threads": THREADS_AT_LEAST_1, "engine_servers": AT_LEAST_1}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"engine": ("pytorch", "llamacpp")}

    def __post_init__(self) -> None:
        validate(self)
        for source in self.sources:
            check_source(source)
        if not self.sources:
            raise ConfigError("data.sources is empty; name at least one source, e.g. --set data.sources=team",
                              key="data.sources", expected="a non-empty list")
        if self.samples_per_prompt > 0 and not self.sample_temperature > 0:
            raise ConfigError(f"data.samples_per_prompt = {self.samples_per_prompt} needs data.sample_temperature > 0, "
                              f"got {self.sample_temperature}; e.g. --set data.sample_temperature=0.7",
                              key="data.sample_temperature", expected="> 0")


@dataclass(frozen=True)
class CaptureConfig:
    """The forward pass that records every layer's hidden states."""

    batch_size: int = 8
    max_length: int = 512
    records_per_shard: int = 32
    topk: int = 8  # top-k next-token log-probs kept per position (soft targets for drafters)
    dtype: str = "auto"  # auto = fp16 unless a value overflows it, then bf16 / fp32
    max_records: int = 0  # capture all layers for the first n records only (0 = all); see `wave dry-run`
    # hidden_states indices to keep (empty = every layer and the normed last entry): a drafter-only
    # capture of many records keeps just the layers its drafters read (the data-scale benchmark)
    layers: tuple[int, ...] = ()

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "batch_size": AT_LEAST_1, "max_length": Bound(2), "records_per_shard": AT_LEAST_1, "topk": TOPK,
        "max_records": NON_NEGATIVE}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"dtype": ("auto", "fp16", "bf16", "fp32")}

    def __post_init__(self) -> None:
        if isinstance(self.layers, list):  # a manifest's params (JSON) give a list
            object.__setattr__(self, "layers", tuple(self.layers))
        validate(self)


@dataclass(frozen=True)
class MetricsConfig:
    """Entropy, CKA and filtering statistics over a seeded token subsample."""

    token_budget: int = 4096
    alpha: float = 1.0
    seed: int = 0
    filter_quantile: float = 0.5
    n_bootstrap: int = 50
    drop_first: int = 0  # drop this many first response positions (sink question)
    massive_factor: float = 20.0  # sink question: a token is massive above this x the layer's median norm
    n_bootstrap_pooled: int = 10  # replicates of pooled (dataset) statistics: each costs L eigenproblems

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "token_budget": Bound(2), "alpha": NON_NEGATIVE, "seed": SEED, "filter_quantile": QUANTILE,
        "n_bootstrap": NON_NEGATIVE, "drop_first": NON_NEGATIVE, "massive_factor": POSITIVE,
        "n_bootstrap_pooled": NON_NEGATIVE}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class SelectConfig:
    """Layer selection."""

    k: int = 3
    method: str = "combined"
    alpha: float = 2.0
    lam: float = 1.0
    filtered: bool = True
    n_random: int = 6
    n_bootstrap: int = 20
    seed: int = 0
    stability_tokens: int = 1024  # tokens per bootstrap replicate of a selection (cost ~ n^2)

    # ``k`` <= N, the model's candidate layers, is checked once the model is known (estimate.check_fit).
    BOUNDS: ClassVar[dict[str, Bound]] = {
        "k": AT_LEAST_1, "alpha": NON_NEGATIVE, "lam": NON_NEGATIVE, "n_random": NON_NEGATIVE,
        "n_bootstrap": NON_NEGATIVE, "seed": SEED, "stability_tokens": Bound(2)}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __post_init__(self) -> None:
        validate(self)
        if self.method not in SELECTION_METHODS:  # here, so dry-run and every step reject it alike
            raise ConfigError(f"unknown selection method {self.method!r} (select.method = {self.method!r}); choose one "
                              f"of {', '.join(SELECTION_METHODS)}, e.g. --method combined", key="select.method")
        if self.method == "eagle3-default" and self.k != 3:
            raise ConfigError(f"select.method = eagle3-default is the fixed triple [2, N//2, N-3], but select.k = "
                              f"{self.k}; use --set select.k=3 or another method", key="select.k", expected="3")


@dataclass(frozen=True)
class DraftConfig:
    """EAGLE-3-style draft head and its training."""

    # draft vocabulary: the most frequent response tokens; the target's vocabulary size (no more)
    # size means all tokens (the full head, d2t all zero)
    draft_vocab: int = 8192
    ttt_steps: int = 7
    step_decay: float = 0.8
    epochs: int = 2
    lr: float = 3e-4
    batch_tokens: int = 2048
    seed: int = 0
    soft_targets: bool = True  # cached top-k log-probs renormalised over the draft vocab (False: top1 label)
    fused_norm: bool = False  # RMSNorm each captured layer before fc, so large-norm deep layers do not dominate
    dtype: str = "bf16"  # matmul precision of training: bf16 (autocast, fp32 master weights; fast only on CPUs with bf16 units) | fp32
    grad_clip: float = 0.5  # max gradient norm (0 = off)
    # Warm starts and loss / schedule variants (issue 25's recipe arms); the defaults are the
    # recipe every drafter trained before them, and leave its cache key unchanged.
    head_init: str = "random"  # random | target (lm_head = the target's rows of the draft vocab) | target_frozen
    norm_init: str = "ones"  # ones | target (the final norm starts from the target's final norm)
    block_init: str = "random"  # random | target_last (midlayer from the target's last block; see from_target)
    feature_loss: float = 0.0  # lambda of the added SmoothL1(step output, target's pre-norm h_N) term (EAGLE-1/2)
    lr_schedule: str = "cosine"  # cosine (linear warm-up, then cosine decay to 10%) | constant (no warm-up, no decay)
    warmup_frac: float = 0.05  # cosine: share of the optimiser steps spent warming up
    eval_depth: int = 0  # chain depth of the logged eval acceptance (eval_every and the final one; 0 = ttt_steps)
    eval_threshold: float = 0.0  # draft threshold of the logged eval acceptance (0 = fixed depth)
    threads: int = 0  # torch intra-op threads while training (0 = leave torch's setting)
    eval_every: int = 0  # also log eval-split offline acceptance every n epochs (0 = only at the end)
    records_fraction: float = 1.0  # share of the train records a drafter trains on (a subset drawn with seed)
    # training tokens (summed over optimiser steps) to stop at, instead of whole epochs (0 = epochs x all);
    # a budget short of a whole epoch ends with a seeded subset of that epoch's batches
    max_tokens: int = 0
    # train on the capture's first n train-split records only (0 = all): nested data sizes from one capture
    train_records: int = 0
    # continued training: the folder name (in the same capture's drafters/) of a finished drafter of
    # the same layers and draft vocabulary whose weights this one starts from ("" = a fresh start)
    init_from: str = ""
    samples_per_prompt: int = 0  # chapter 6: sampled responses per train prompt added to the drafters' data
    n_seeds: int = 2  # chapter 6: drafters for the default and each selection rule's set (seeds seed, seed+1, ...)
    control_seeds: int = 2  # chapter 6: drafters for each control triple (last-k, the random triples)
    n_random: int = 4  # chapter 6: how many of chapter 5's random triples get drafters
    sweep_stride: int = 3  # chapter 6: single-layer drafters every n layers from 1 (0 = none)
    sweep_fraction: float = 1.0  # chapter 6: records_fraction of the single-layer drafters
    sweep_seed_every: int = 0  # chapter 6: a second seed on every n-th single layer (0 = none)
    norm_arm: bool = False  # chapter 6: each triple also once with a per-layer RMSNorm before fc (fused_norm)
    workers: int = 1  # chapter 6: drafters trained at once, each in its own process (use with threads: 1)
    # committed folder of trained drafters' logs and scores, repo-relative ("" = none): a study
    # resumes on a machine without the drafter cache (activation_wave.draft.ledger)
    ledger: str = ""

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "draft_vocab": DRAFT_VOCAB, "ttt_steps": AT_LEAST_1, "step_decay": POSITIVE, "epochs": AT_LEAST_1,
        "lr": LEARNING_RATE, "batch_tokens": AT_LEAST_1, "seed": SEED, "grad_clip": NON_NEGATIVE,
        "threads": THREADS, "eval_every": NON_NEGATIVE, "n_seeds": AT_LEAST_1, "sweep_stride": NON_NEGATIVE,
        "workers": AT_LEAST_1, "records_fraction": FRACTION, "samples_per_prompt": NON_NEGATIVE,
        "control_seeds": AT_LEAST_1, "n_random": NON_NEGATIVE, "sweep_fraction": FRACTION,
        "sweep_seed_every": NON_NEGATIVE, "feature_loss": NON_NEGATIVE, "warmup_frac": QUANTILE,
        "eval_depth": NON_NEGATIVE, "eval_threshold": PROBABILITY, "max_tokens": NON_NEGATIVE,
        "train_records": NON_NEGATIVE}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "dtype": ("bf16", "fp32"), "head_init": ("random", "target", "target_frozen"), "norm_init": ("ones", "target"),
        "block_init": ("random", "target_last"), "lr_schedule": ("cosine", "constant")}

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class SpecConfig:
    """Speculative decoding evaluation."""

    depth: int = 4
    temperature: float = 0.0
    max_new_tokens: int = 64
    max_prompts: int = 16
    tree_topk: int = 0  # 0 = chain drafting
    seed: int = 0
    tree_size: int = 16  # draft tokens kept in a dynamic tree (used when tree_topk > 0)
    prompt_lookup_tokens: int = 10  # baseline: transformers' prompt_lookup_num_tokens
    threads: int = 0  # torch intra-op threads while decoding (0 = leave torch's setting)
    kernels: str = "fast"  # target while decoding: fast (MKL-packed linears, GQA-packed SDPA; same outputs) | hf
    draft_threshold: float = 0.0  # chain: stop drafting when the product of draft probabilities < this (0 = fixed depth)

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "depth": AT_LEAST_1, "temperature": TEMPERATURE, "max_new_tokens": AT_LEAST_1, "max_prompts": AT_LEAST_1,
        "tree_topk": NON_NEGATIVE, "seed": SEED, "tree_size": AT_LEAST_1, "prompt_lookup_tokens": AT_LEAST_1,
        "threads": THREADS, "draft_threshold": PROBABILITY}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"kernels": ("fast", "hf")}

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class CrossConfig:
    """The second architecture of the cross-model chapter, on a smaller prompt set."""

    model: str = "gemma3-270m"
    max_prompts_per_source: int = 12
    max_new_tokens: int = 32
    batch_size: int = 4
    # Chapter 7's drafters on this model (chapters/cross_drafters.py): trained on its own
    # greedy responses to the study's prompts (``drafter_prompts_per_source``, 0 = all, up to
    # ``drafter_max_new_tokens``, generated in batches of ``data.batch_size``) with the
    # study's ``draft`` recipe: one per block output 1, 1 + stride, ... (0 = none) and the
    # default and best rule's triple with ``drafter_seeds`` seeds each.
    drafter_prompts_per_source: int = 0
    drafter_max_new_tokens: int = 128
    drafter_seeds: int = 2
    drafter_sweep_stride: int = 1

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "max_prompts_per_source": NON_NEGATIVE, "max_new_tokens": AT_LEAST_1, "batch_size": AT_LEAST_1,
        "drafter_prompts_per_source": NON_NEGATIVE, "drafter_max_new_tokens": AT_LEAST_1,
        "drafter_seeds": AT_LEAST_1, "drafter_sweep_stride": NON_NEGATIVE}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class ThirdConfig:
    """The third architecture: chapters 1-5 rerun on ``model`` ("" = none) on its own prompt
    set (``max_prompts_per_source`` per source, up to ``max_new_tokens``), its responses
    generated by ``engine`` (``data.engine``: a target too slow to generate with in PyTorch
    uses llama.cpp on the same GGUF) and captured ``capture_batch_size`` records at a time.

    Its drafters (chapter 11, "Where does EAGLE-3 pay on a CPU?"): the EAGLE-3 default and
    the best rule's triple, ``drafter_seeds`` seeds each, trained with the study's ``draft``
    recipe for ``drafter_epochs`` epochs on the target's greedy responses to the study's
    prompt sources (``drafter_prompts_per_source`` per source, up to
    ``drafter_max_new_tokens``; 0 = all), generated by ``engine`` with
    ``drafter_engine_slots`` requests in flight. ``drafter_seeds`` 0: no drafters."""

    model: str = ""
    max_prompts_per_source: int = 12
    max_new_tokens: int = 32
    engine: str = "pytorch"
    capture_batch_size: int = 2
    drafter_prompts_per_source: int = 0
    drafter_max_new_tokens: int = 96
    drafter_epochs: int = 1
    drafter_seeds: int = 0
    drafter_engine_slots: int = 1

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "max_prompts_per_source": NON_NEGATIVE, "max_new_tokens": AT_LEAST_1, "capture_batch_size": AT_LEAST_1,
        "drafter_prompts_per_source": NON_NEGATIVE, "drafter_max_new_tokens": AT_LEAST_1,
        "drafter_epochs": AT_LEAST_1, "drafter_seeds": NON_NEGATIVE, "drafter_engine_slots": AT_LEAST_1}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"engine": ("pytorch", "llamacpp")}

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class StrengthConfig:
    """Drafter strength (the page after chapter 6, ``06_strength``): chapter 6's layer sets
    retrained at a stronger budget, the recipe screen's base (``bench``'s recipe for
    ``bench.recipe_epochs`` epochs on the greedy responses), and compared with chapter 6's
    one-epoch drafters (H5); the per-layer norm at that budget (H6).

    ``sets``: chapter 6's sets compared with the default (names of ``06_predictors``);
    ``norm_sets``: the triples trained also with the per-layer norm; ``seeds`` per set at the
    top budget (0 = the page only reads what exists). Dropped by the pre-registered shrink and
    exploratory when set: ``middle`` (the screen's epochs-5 arm, ``middle_seeds`` seeds) and
    ``singles`` (single layers, ``middle_seeds`` seeds at the top budget)."""

    sets: tuple[str, ...] = ("combined", "cka-diverse", "last-k", "random-0")
    norm_sets: tuple[str, ...] = ("eagle3-default", "combined")
    seeds: int = 3
    middle: bool = False
    middle_seeds: int = 2
    singles: tuple[int, ...] = ()

    BOUNDS: ClassVar[dict[str, Bound]] = {"seeds": NON_NEGATIVE, "middle_seeds": AT_LEAST_1}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __post_init__(self) -> None:
        validate(self)
        if any(i < 1 for i in self.singles):
            raise ConfigError(f"strength.singles = {list(self.singles)}: layer ids are block outputs 1..N; "
                              "e.g. --set strength.singles=23,27", key="strength.singles",
                              expected="layer ids >= 1")


@dataclass(frozen=True)
class BenchConfig:
    """``wave bench``: the benchmark drafter's recipe, its decoding runs and the study's targets.

    The benchmark drafter is the profile's ``draft`` section with ``draft_epochs``,
    ``draft_ttt_steps`` and ``draft_batch_tokens`` (it should be the best drafter this
    machine trains in minutes, while chapter 6 compares sets at equal budget), trained on
    the greedy responses plus ``samples_per_prompt`` sampled ones per train prompt; it
    decodes with the profile's ``spec`` section with ``depth``, ``draft_threshold`` and
    ``max_new_tokens``, one thread per process (``threads``). The drafter trains with
    ``train_threads`` torch threads (0 = ``threads``): timing decodes on one core says
    nothing about how many cores training may use."""

    draft_epochs: int = 10
    draft_ttt_steps: int = 3
    draft_batch_tokens: int = 2048
    samples_per_prompt: int = 6
    depth: int = 3
    draft_threshold: float = 0.15
    max_new_tokens: int = 96
    n_prompts: int = 16  # held-out prompts of the decoding benchmark
    rounds: int = 5  # interleaved runs over all prompts: pooled, and their spread and interval
    threads: int = 1
    train_threads: int = 0  # the benchmark drafter's training threads (0 = threads)
    speedup_target: float = 1.2  # the study's target for the best drafter at T = 0 (issue 5)
    precision_dtype: str = "bfloat16"  # the lower-precision lever
    precision_prompts: int = 8
    scaling_fractions: tuple[float, ...] = (0.125, 0.25, 0.5, 1.0)  # shares of the greedy train records
    scaling_samples: tuple[int, ...] = (1, 2, 4, 6)  # sampled responses per train prompt
    memory_tokens: int = 1_000_000  # tokens streamed by the memory benchmark
    capture_records: int = 16  # records of the capture-throughput benchmark
    capture_batch_size: int = 8
    capture_repeats: int = 6
    # The recipe benchmark (issue 25): each arm trains the EAGLE-3 default triple with
    # recipe_seeds seeds (seed, seed + 1, ...). recipe_base "screen" = the benchmark drafter's
    # recipe on the greedy responses only; "bench" = with bench.samples_per_prompt sampled ones.
    recipe_arms: tuple[str, ...] = DEFAULT_RECIPE_ARMS
    recipe_seeds: int = 2
    recipe_base: str = "screen"
    recipe_epochs: int = 0  # the base recipe's epochs (0 = draft_epochs)
    recipe_eval_every: int = 1  # learning curve: eval tau every n epochs (0 = only the final one)
    # the decoding benchmark's drafter: "recipe" = trained here with the recipe above; "data_scale" = the
    # data-scale design's strongest default-triple drafter by its outcome (issue 41; needs that design run)
    drafter: str = "recipe"

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "draft_epochs": AT_LEAST_1, "draft_ttt_steps": AT_LEAST_1, "draft_batch_tokens": AT_LEAST_1,
        "samples_per_prompt": NON_NEGATIVE, "depth": AT_LEAST_1, "draft_threshold": PROBABILITY,
        "max_new_tokens": AT_LEAST_1, "n_prompts": AT_LEAST_1, "rounds": AT_LEAST_1, "threads": THREADS_AT_LEAST_1,
        "train_threads": THREADS,
        "speedup_target": POSITIVE, "precision_prompts": AT_LEAST_1, "scaling_fractions": FRACTION,
        "scaling_samples": AT_LEAST_1, "memory_tokens": AT_LEAST_1, "capture_records": AT_LEAST_1,
        "capture_batch_size": AT_LEAST_1, "capture_repeats": AT_LEAST_1, "recipe_seeds": AT_LEAST_1,
        "recipe_epochs": NON_NEGATIVE, "recipe_eval_every": NON_NEGATIVE}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"precision_dtype": ("bfloat16", "float16"),
                                                     "recipe_base": ("screen", "bench"),
                                                     "drafter": ("recipe", "data_scale")}

    def __post_init__(self) -> None:
        validate(self)
        for name in ("scaling_fractions", "scaling_samples"):
            if not getattr(self, name):
                raise ConfigError(f"bench.{name} is empty; give at least one value, e.g. --set bench.{name}="
                                  + ",".join(map(value_text, getattr(BenchConfig(), name))),
                                  key=f"bench.{name}", expected="a non-empty list")
        unknown = [a for a in self.recipe_arms if a not in RECIPE_ARMS]
        if unknown or not self.recipe_arms or len(set(self.recipe_arms)) < len(self.recipe_arms):
            what = (f"unknown arm(s) {unknown}" if unknown else "an empty list" if not self.recipe_arms
                    else "a repeated arm")
            raise ConfigError(f"bench.recipe_arms = {list(self.recipe_arms)} has {what}; choose from "
                              f"{', '.join(RECIPE_ARMS)}, e.g. --set bench.recipe_arms=head-target,lr-constant",
                              key="bench.recipe_arms", expected=f"arms from {list(RECIPE_ARMS)}")


@dataclass(frozen=True)
class StudyConfig:
    """Everything one run of the study needs; ``profile`` and ``model`` pick the rest."""

    profile: str = "smoke"
    model: str = "smollm2-135m"
    data: DataConfig = field(default_factory=DataConfig)
    capture: CaptureConfig = field(default_factory=CaptureConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    select: SelectConfig = field(default_factory=SelectConfig)
    draft: DraftConfig = field(default_factory=DraftConfig)
    spec: SpecConfig = field(default_factory=SpecConfig)
    cross: CrossConfig = field(default_factory=CrossConfig)
    third: ThirdConfig = field(default_factory=ThirdConfig)
    bench: BenchConfig = field(default_factory=BenchConfig)
    strength: StrengthConfig = field(default_factory=StrengthConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(f"model = {self.model!r} names no model: give an alias, a hub id, a local folder or a "
                              ".gguf file, e.g. --model smollm2-135m (or --set model=smollm2-135m)", key="model",
                              expected="a model name")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


_SECTIONS = {f.name: f.type for f in fields(StudyConfig) if f.name not in ("profile", "model")}
#: section class -> its name in a profile (``CaptureConfig`` -> ``"capture"``), for messages.
_SECTION_NAMES: dict[type, str] = {}


def _section_types() -> dict[str, type]:
    hints = get_type_hints(StudyConfig)
    return {name: hints[name] for name in _SECTIONS}


_SECTION_NAMES.update({typ: name for name, typ in _section_types().items()})


#: Top-level values that are one value, not a section of keys: how each is set instead.
_SCALARS = {"model": "--model NAME (or --set model=NAME)", "profile": "--profile NAME"}


def _override_key(key: Any) -> tuple[str, str, str]:
    """``section.name`` of a dotted override key, split; :class:`ConfigError` naming the key when
    it is not one: no dot, or a key under a single value (``model.x``, ``capture.batch_size.x``),
    which would otherwise be written *into* that value.

    >>> _override_key("capture.batch_size")
    ('capture', '.', 'batch_size')
    >>> _override_key("model.x")
    Traceback (most recent call last):
    ...
    activation_wave.core.config.ConfigError: override 'model.x': model is one value, not a section with keys; set it with --model NAME (or --set model=NAME), or give a key of a section: bench, capture, cross, data, draft, metrics, select, spec, strength, third
    """
    sections = ", ".join(sorted(_SECTIONS))
    if not isinstance(key, str):
        raise ConfigError(f"override key {key!r} is not text; keys are 'section.key', e.g. capture.batch_size",
                          key=str(key))
    section, dot, name = key.partition(".")
    if section in _SCALARS:
        raise ConfigError(f"override {key!r}: {section} is one value, not a section with keys; set it with "
                          f"{_SCALARS[section]}, or give a key of a section: {sections}", key=key)
    if not name:
        raise ConfigError(f"override {key!r} must be 'section.key' (sections: {sorted(_SECTIONS)}) or 'model'", key=key)
    head = name.partition(".")[0]
    typ = _section_types().get(section)
    if "." in name and typ is not None and head in {f.name for f in fields(typ)}:
        raise ConfigError(f"override {key!r}: {section}.{head} is one value, not a section with keys; set it as "
                          f"--set {section}.{head}=VALUE", key=key)
    return section, dot, name


def load_config(profile: str = "smoke", overrides: Mapping[str, Any] | None = None, *, model: str | None = None) -> StudyConfig:
    """Load a profile and apply dotted-key overrides (``{"capture.batch_size": 4}``).

    ``overrides`` may also hold ``model``. Unknown profiles, sections or keys raise
    :class:`ConfigError` naming the valid choices.
    """
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; choose one of {list(PROFILES)}")
    raw = yaml.safe_load((PROFILE_DIR / f"{profile}.yaml").read_text()) or {}
    raw = {k: dict(v) if isinstance(v, Mapping) else v for k, v in raw.items()}
    for key, value in (overrides or {}).items():
        if key == "model":
            raw["model"] = parse_value(value, str, "model")
            continue
        section, _, name = _override_key(key)
        raw.setdefault(section, {})[name] = value
    if model is not None:
        raw["model"] = model
    types = _section_types()
    unknown = sorted(set(raw) - set(types) - {"model"})
    if unknown:
        raise ConfigError(f"unknown section(s) {unknown}; known sections: {sorted(types)}")
    sections = {name: from_dict(typ, raw.get(name, {}), where=name) for name, typ in types.items()}
    return StudyConfig(profile=profile, model=str(raw.get("model", "smollm2-135m")), **sections)


def json_int(text: str) -> int | str:
    """``parse_int`` of :func:`json.loads` for override objects: a JSON integer too long for
    ``int()`` (over 4300 digits) stays text, so :func:`parse_value` refuses it naming its key
    instead of the JSON reader failing on the whole object.

    >>> json.loads('{"select.k": 3}', parse_int=json_int)
    {'select.k': 3}
    """
    return int(text) if len(text) <= 4000 else text


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """Parse CLI ``--set key=value`` items into a dict."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. --set capture.batch_size=4")
        out[key.strip()] = value.strip()
    return out
