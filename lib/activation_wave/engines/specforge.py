"""SpecForge 0.2.0: the hand-off of a layer set to EAGLE-3 drafter training at GPU scale.

The study trains its own small drafters on a CPU; a production drafter for an 8B target is
trained on GPUs, and SpecForge (the SGLang team's trainer) is where that happens.
``wave export --engine specforge --run-dir D`` writes one SpecForge training run for a target
and the layers ``wave select`` recommends (or ``--layers``)::

    D/draft_config.json   SpecForge's EAGLE-3 draft config for the target (LlamaForCausalLMEagle3):
                          the target's fields SpecForge's own generator copies, one decoder layer,
                          the draft vocabulary, and the layer ids twice (nested eagle_config ids =
                          hidden_states - 1, which SpecForge and SGLang read; top level = hidden_states,
                          which vLLM and llama.cpp read), plus ``activation_wave_export`` (the target's N)
    D/run.yaml            the run config SpecForge's ``specforge train --config`` validates (strict
                          pydantic schema): offline features, local trainer on --gpus GPUs, the
                          profile's drafter settings (:data:`MAPPING`)
    D/data/prompts.jsonl  SpecForge's conversation jsonl: one user turn per train-split prompt of
                          the study (team, HumanEval, the ShareGPT corpus); the target's responses
                          are SpecForge's own step (launch.sh step 1), not shipped
    D/launch.sh           the steps: responses (SGLang + regenerate_train_data.py), hidden states
                          (prepare_hidden_states.py), training (torchrun), export (specforge export)
    D/specforge_run.json  the manifest, written last: what made the run, sha256 of every file, the
                          settings as mapped, and what SpecForge's own code said of it (:func:`check_run`)

Every file goes through :mod:`activation_wave.core.files`; a folder the study did not make is
never written into. :func:`check_run` imports SpecForge 0.2.0 from its wheel (``pip download
specforge==0.2.0 --no-deps``, cached under ``$WAVE_CACHE/wheels``; never installed: it pins other
torch and transformers versions) and runs its own code on the folder: its CLI's argument
parser and launch planner on the training command, its config schema on run.yaml, its
draft-config loader and capture-layer resolution on draft_config.json, its model class (on the
meta device) against the tensors the study's loader expects, and its conversation reader on the
data. Those pure-Python parts import without SGLang or a GPU.

A checkpoint SpecForge saves (``{run_id}-step{N}/training_state.pt``, or the folder ``specforge
export`` writes) is read back by ``wave speculate --draft`` through
:func:`activation_wave.models.drafter.load_specforge_drafter`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from activation_wave.core import files
from activation_wave.core.layers import NESTED_KEY, TOP_LEVEL_KEY, text_config, to_convention
from activation_wave.models.drafter import ARCHITECTURE, SPECFORGE_EXPORT_KEY, SPECFORGE_RUN_MANIFEST

SPECFORGE_VERSION = "0.2.0"
WHEEL = f"specforge-{SPECFORGE_VERSION}-py3-none-any.whl"
#: sha256 of the registry's wheel, checked before its code is run.
WHEEL_SHA256 = "fbc79517adf483c6a8beea52561b1a8c8c8a99a54c820b47d2033a73966b55b0"
#: The commit of SpecForge's repository whose specforge/config/schema.py is the wheel's: the
#: two data scripts launch.sh calls (not in the wheel) were read there.
REPO_COMMIT = "abd0346d"
#: Which SpecForge the hand-off targets. "0.2.0" on the registry has named two codebases (the
#: per-method training scripts, then, from 2026-07, one ``specforge train --config run.yaml``
#: with a strict schema); the wheel's sha256 names the one read here.
CODEBASE = (f"specforge {SPECFORGE_VERSION}, the wheel with sha256 {WHEEL_SHA256}: the `specforge train --config "
            "run.yaml` codebase (strict pydantic schema specforge/config/schema.py, SGLang as the only target "
            "backend), not the earlier per-method training scripts that shipped under the same version")
RUN_SCHEMA = 1
MANIFEST = SPECFORGE_RUN_MANIFEST
#: The files a run folder holds when written (the manifest last); launch.sh adds data/train.jsonl,
#: cache/ and outputs/.
RUN_FILES = ("draft_config.json", "run.yaml", "data/prompts.jsonl", "launch.sh", MANIFEST)
#: The study's prompt sets the training data is built from (train split only).
STUDY_SOURCES = ("team", "humaneval", "corpus")
DEFAULT_GPUS = 8
#: The most GPUs one training run is planned for (torchrun's nproc_per_node on one node: a larger
#: number is a typo, and would be written into launch.sh and run.yaml as it is).
MAX_GPUS = 64
OUTPUT_DIR = "outputs"
EXPORT_DIR = "outputs/export"

#: The target fields SpecForge 0.2.0 copies into a draft config it derives from a target
#: (specforge/training/model_loading.py ``_TARGET_ARCHITECTURE_FIELDS``); the draft config
#: written here copies the same (tests/test_specforge.py compares with SpecForge's generator).
TARGET_FIELDS = ("vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                 "max_position_embeddings", "rms_norm_eps", "hidden_act", "initializer_range", "attention_bias",
                 "attention_dropout", "head_dim", "rope_theta", "rope_scaling", "bos_token_id", "eos_token_id",
                 "pad_token_id", "sliding_window", "use_sliding_window", "max_window_layers")

#: config.json of targets whose hub copy may be unreachable where the run is planned (the paper
#: profile's), transcribed from the released file; a local or cached copy wins.
KNOWN_TARGET_CONFIGS: dict[str, dict[str, Any]] = {
    "meta-llama/Llama-3.1-8B-Instruct": {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
        "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
        "max_position_embeddings": 131072, "mlp_bias": False, "num_attention_heads": 32, "num_hidden_layers": 32,
        "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256},
}

#: SpecForge chat template (specforge/data/template.py) by a marker of the tokenizer's own template.
TEMPLATE_MARKERS = (("<|start_header_id|>", "llama3"), ("<|header_start|>", "llama4"), ("<|im_start|>", "qwen"),
                    ("<start_of_turn>", "gemma"))
#: SpecForge 0.2.0's chat templates (specforge/data/template.py, TEMPLATE_REGISTRY, read in the
#: wheel): ``--chat-template`` must name one, else step 2 of launch.sh fails on the GPU machine.
SPECFORGE_TEMPLATES = ("custom", "llama3", "llama4", "qwen", "lfm", "phi3", "phi4", "phi4-mini", "gpt-oss-naive",
                       "gpt-oss", "deepseek-r1-distill", "qwen3-thinking", "qwen3-instruct", "qwen3-next-thinking",
                       "kimi-k2-thinking", "kimi-k2-instruct", "kimi-k3-thinking", "deepseek-v3", "deepseek-v2",
                       "ling-flash-2.0", "deepseek-v32", "glm-5.2", "gemma", "longcat", "longcat_xml", "qwen3.5",
                       "inkling-thinking")
#: The chat template of targets known without their tokenizer.
KNOWN_TEMPLATES = {"meta-llama/Llama-3.1-8B-Instruct": "llama3", "meta-llama/Llama-3.1-70B-Instruct": "llama3"}

#: How the study's drafter settings reach SpecForge 0.2.0: (study key, where in the run, how).
#: The optimiser's settings (:data:`FROM_SPECFORGE`) take SpecForge's own defaults, not the profile's.
MAPPING: tuple[tuple[str, str, str], ...] = (
    ("draft.epochs", "run.yaml training.num_epochs", "same (the profile's training budget)"),
    ("draft.lr", "run.yaml training.learning_rate", "SpecForge's default unless given with --set"),
    ("draft.lr_schedule", "run.yaml training.lr_scheduler", "SpecForge's default unless given with --set"),
    ("draft.warmup_frac", "run.yaml training.warmup_ratio", "SpecForge's default unless given with --set"),
    ("draft.grad_clip", "run.yaml training.max_grad_norm", "SpecForge's default unless given with --set (it has "
                                                           "no 0 = off)"),
    ("draft.ttt_steps", "run.yaml training.ttt_length", "SpecForge's default unless given with --set"),
    ("draft.seed", "run.yaml training.seed", "same"),
    ("draft.batch_tokens", "run.yaml training.accumulation_steps",
     "batch_size 1 sequence per GPU; accumulation = ceil(batch_tokens / (max_length x GPUs)), tokens per step "
     "at most that (sequences are shorter than max_length)"),
    ("draft.draft_vocab", "draft_config.json draft_vocab_size", "same, capped at the target's vocabulary"),
    ("draft.fused_norm", "draft_config.json fc_norm", "same (SpecForge's fc_norm is the study's fuse_norm)"),
    ("capture.max_length", "run.yaml data.max_length", "same"),
    ("data.max_new_tokens", "launch.sh step 1 --max-tokens", "same"),
)
#: Study settings SpecForge 0.2.0 has no key for, with SpecForge's fixed behaviour; a profile whose
#: value differs is exported with a warning (the run trains SpecForge's way).
FIXED: dict[str, tuple[Any, str]] = {
    "draft.step_decay": (0.8, "SpecForge weights step i's loss 0.8^i (Eagle3TrainStrategy ploss_decay)"),
    "draft.soft_targets": (True, "SpecForge trains on the target's distribution over the draft vocabulary"),
    "draft.head_init": ("random", "SpecForge starts lm_head at random"),
    "draft.norm_init": ("ones", "SpecForge starts the norms at one"),
    "draft.block_init": ("random", "SpecForge starts the decoder layer at random"),
    "draft.feature_loss": (0.0, "SpecForge has no feature-regression term"),
}


#: SpecForge 0.2.0's own defaults for what run.yaml sets: its schema's (``TrainingConfig`` and
#: ``DataConfig`` in specforge/config/schema.py, read in the wheel of :data:`WHEEL_SHA256`).
SPECFORGE_DEFAULTS: dict[str, Any] = {
    "training.num_epochs": 1, "training.batch_size": 1, "training.accumulation_steps": 1,
    "training.learning_rate": 1e-4, "training.lr_scheduler": "cosine", "training.warmup_ratio": 0.015,
    "training.max_grad_norm": 0.5, "training.ttt_length": 7, "training.save_interval": 0,
    "training.log_interval": 50, "training.seed": 42, "data.max_length": 2048}
#: Where SpecForge's EAGLE-3 recipe for the paper profile's target (examples/configs/
#: llama3.1-8b-eagle3-offline.yaml in its repository) sets other values than its schema.
SPECFORGE_RECIPE: dict[str, Any] = {"training.num_epochs": 10, "training.seed": 0, "training.save_interval": 1000,
                                    "data.max_length": 4096}
#: Study settings the run takes from :data:`SPECFORGE_DEFAULTS`, not from the profile: the
#: optimiser's, which the study chose for its own drafters (135M-1.5B targets, a CPU; chapter 10's
#: recipe study measured them there only). A value given with ``--set`` is used as given, and
#: so is one the study measured a reason for at scale (:data:`MEASURED`).
FROM_SPECFORGE: dict[str, str] = {"draft.lr": "training.learning_rate", "draft.lr_schedule": "training.lr_scheduler",
                                  "draft.warmup_frac": "training.warmup_ratio",
                                  "draft.grad_clip": "training.max_grad_norm", "draft.ttt_steps": "training.ttt_length"}
#: Study settings of :data:`FROM_SPECFORGE` with a measured reason to keep the profile's value in
#: a SpecForge run (key -> the reason, naming the measurement). None so far.
MEASURED: dict[str, str] = {}
NOT_CARRIED = ("the profile's value was chosen for the study's CPU drafters and not measured at this scale, so the run "
               "uses SpecForge's own default (give --set {key}=... to choose another)")
#: Why a value of the run differs from :data:`SPECFORGE_DEFAULTS` where the study sets it.
WHY_DIFFERS: dict[str, str] = {
    "training.num_epochs": "the profile's training budget (draft.epochs)",
    "training.seed": "the profile's seed (draft.seed)",
    "training.accumulation_steps": "the profile's tokens per optimiser step (draft.batch_tokens): ceil(batch_tokens "
                                   "/ (max_length x GPUs)) sequences of one per GPU",
    "training.save_interval": "a checkpoint every 1000 steps, as SpecForge's recipe (the schema's 0 saves none "
                              "before the end)",
    "data.max_length": "the profile's capture.max_length, the study's sequence length",
}


class SpecForgeError(ValueError):
    """A SpecForge export that cannot be written as asked; the message names the fix."""


# ----------------------------------------------------------------------------- the target


def target_config(model: str) -> tuple[dict[str, Any], str, str]:
    """(the target's decoder config as a dict, the ``target_model_path`` SpecForge loads, where
    the config came from), without loading weights.

    Aliases read their GGUF header and train on their hub original (SpecForge and SGLang load
    transformers models, not GGUF files); a folder its config.json; a hub id the local HF cache
    or the hub, else :data:`KNOWN_TARGET_CONFIGS`.
    """
    from activation_wave.models.targets import ALIASES, TargetLoadError, _hub_cached, hub_access, resolve_alias

    path = Path(model).expanduser()
    if model in ALIASES:
        from transformers import AutoConfig

        gguf = resolve_alias(model)
        cfg = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name).to_dict()
        return dict(text_config(cfg)), ALIASES[model]["hub_equivalent"], f"GGUF header of {model}"
    if path.suffix == ".gguf":
        raise SpecForgeError(f"--model {model}: SpecForge trains on a transformers model (a hub id or a folder with "
                             "config.json and weights), not a .gguf file; give the model it was converted from")
    if path.is_dir():
        cfg_file = path / "config.json"
        if not cfg_file.is_file():
            raise SpecForgeError(f"--model {model}: the folder has no config.json; give a transformers model folder")
        try:
            cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise SpecForgeError(f"{cfg_file} is not valid JSON ({exc}); restore the model folder") from None
        return dict(text_config(cfg)), model, f"{cfg_file}"
    if model in KNOWN_TARGET_CONFIGS and not _hub_cached(model):
        return dict(KNOWN_TARGET_CONFIGS[model]), model, "the released config.json, transcribed in engines/specforge.py"
    from transformers import AutoConfig

    try:
        cfg = AutoConfig.from_pretrained(model, **({} if hub_access(model) else {"local_files_only": True}))
    except (OSError, ValueError, TargetLoadError) as exc:
        raise SpecForgeError(f"--model {model}: could not read its config ({str(exc).splitlines()[0]}); give a local "
                             "model folder or a reachable hub id") from None
    return dict(text_config(cfg.to_dict())), model, "the HF hub (or its local cache)"


def chat_template_for(model: str, tokenizer_template: str | None = None) -> str | None:
    """SpecForge's chat-template name for ``model`` (its data step's ``--chat-template``): known
    targets by id, else by a marker of the tokenizer's own template; None when neither says."""
    from activation_wave.models.targets import ALIASES

    name = ALIASES.get(model, {}).get("hub_equivalent", model)
    if name in KNOWN_TEMPLATES:
        return KNOWN_TEMPLATES[name]
    for marker, template in TEMPLATE_MARKERS:
        if tokenizer_template and marker in tokenizer_template:
            return template
    return None


def tokenizer_template(model: str) -> str | None:
    """The chat template text of a local model's tokenizer (a folder's tokenizer_config.json,
    or an alias's GGUF metadata), None when there is none to read offline."""
    from activation_wave.models.targets import ALIASES, read_gguf, resolve_alias

    path = Path(model).expanduser()
    if path.is_dir():
        try:
            doc = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        tpl = doc.get("chat_template")
        return tpl if isinstance(tpl, str) else json.dumps(tpl) if tpl else None
    if model in ALIASES:
        try:
            reader = read_gguf(resolve_alias(model))
            field = reader.fields.get("tokenizer.chat_template")
            return bytes(field.parts[field.data[0]]).decode("utf-8", "replace") if field is not None else None
        except Exception:  # noqa: BLE001 - a header we cannot read names no template
            return None
    return None


# ----------------------------------------------------------------------------- the run's files


def _rope(target: Mapping[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """(rope_theta, rope_scaling or None) of a target config, transformers 4 or 5 style."""
    params = target.get("rope_parameters") if isinstance(target.get("rope_parameters"), dict) else {}
    theta = float(target.get("rope_theta") or params.get("rope_theta") or 10000.0)
    scaling = target.get("rope_scaling") or {k: v for k, v in params.items() if k != "rope_theta"}
    if not scaling or scaling.get("rope_type", scaling.get("type", "default")) == "default":
        return theta, None
    return theta, {k: v for k, v in scaling.items() if k != "rope_theta"}


def draft_config(target: Mapping[str, Any], layers: Sequence[int], *, draft_vocab: int, fused_norm: bool = False,
                 target_path: str = "") -> dict[str, Any]:
    """SpecForge's EAGLE-3 draft config for ``target`` (its decoder config) reading ``layers``
    (hidden_states indices): the fields SpecForge's generator copies (:data:`TARGET_FIELDS`, RoPE
    as ``rope_theta`` + ``rope_scaling``), one decoder layer, ``draft_vocab_size`` (capped at the
    target's vocabulary), the ids in both conventions, and the study's block (the target's N)."""
    ids = [int(i) for i in layers]
    out: dict[str, Any] = {k: target[k] for k in TARGET_FIELDS if target.get(k) is not None}
    theta, scaling = _rope(target)
    out.pop("rope_scaling", None)
    out["rope_theta"] = theta
    if scaling:
        out["rope_scaling"] = scaling
    hidden, heads = int(target["hidden_size"]), int(target["num_attention_heads"])
    out.setdefault("head_dim", hidden // heads)
    vocab = int(target["vocab_size"])
    out.update({
        "architectures": [ARCHITECTURE], "model_type": "llama", "num_hidden_layers": 1, "tie_word_embeddings": False,
        "use_cache": True, "pad_token_id": out.get("pad_token_id", 0), "draft_vocab_size": min(int(draft_vocab), vocab),
        "target_hidden_size": hidden, "torch_dtype": "bfloat16",
        **({"fc_norm": True} if fused_norm else {}),
        "eagle_config": {"use_aux_hidden_state": True, NESTED_KEY: to_convention(ids, "specforge")},
        TOP_LEVEL_KEY: ids,
        SPECFORGE_EXPORT_KEY: {"schema": RUN_SCHEMA, "target": target_path,
                               "target_num_hidden_layers": int(target["num_hidden_layers"]),
                               "hidden_states_layers": ids,
                               "convention": "top-level ids = hidden_states indices (vLLM, llama.cpp); "
                                             "eagle_config ids = index - 1 (SpecForge, SGLang)"},
    })
    return out


def batch_plan(batch_tokens: int, max_length: int, gpus: int) -> dict[str, int]:
    """SpecForge's batch settings for the study's ``draft.batch_tokens`` (tokens per optimiser
    step): one sequence of at most ``max_length`` tokens per GPU and step, accumulated.

    >>> batch_plan(16384, 2048, 8)
    {'batch_size': 1, 'accumulation_steps': 1, 'max_tokens_per_step': 16384}
    >>> batch_plan(16384, 512, 2)
    {'batch_size': 1, 'accumulation_steps': 16, 'max_tokens_per_step': 16384}
    """
    acc = max(1, math.ceil(batch_tokens / (max_length * gpus)))
    return {"batch_size": 1, "accumulation_steps": acc, "max_tokens_per_step": acc * max_length * gpus}


def optimiser_settings(cfg: Any, given: Collection[str] = ()) -> dict[str, dict[str, Any]]:
    """The values of :data:`FROM_SPECFORGE`'s study keys a run uses: SpecForge's default, or the
    profile's when the key is in ``given`` (set with ``--set``) or :data:`MEASURED`. Per key:
    ``value`` (the run's), ``profile`` (the profile's), ``source`` and ``why``.

    >>> from activation_wave.core.config import load_config
    >>> s = optimiser_settings(load_config("paper", {}))
    >>> s["draft.lr"]["value"], s["draft.lr"]["profile"], s["draft.lr"]["source"]
    (0.0001, 0.0003, 'SpecForge default')
    >>> optimiser_settings(load_config("paper", {}), given={"draft.lr"})["draft.lr"]["value"]
    0.0003
    """
    out = {}
    for key, where in FROM_SPECFORGE.items():
        profile = getattr(cfg.draft, key.split(".", 1)[1])
        if key in given:
            out[key] = {"value": profile, "profile": profile, "source": "--set", "why": "given with --set"}
        elif key in MEASURED:
            out[key] = {"value": profile, "profile": profile, "source": "measured", "why": MEASURED[key]}
        else:
            out[key] = {"value": SPECFORGE_DEFAULTS[where], "profile": profile, "source": "SpecForge default",
                        "why": "SpecForge's own default" if profile == SPECFORGE_DEFAULTS[where]
                        else NOT_CARRIED.format(key=key)}
    return out


def run_config(cfg: Any, *, target_path: str, chat_template: str, gpus: int, run_id: str,
               given: Collection[str] = ()) -> dict[str, Any]:
    """run.yaml: SpecForge 0.2.0's run config (``specforge.config.Config``) for the study's
    ``cfg`` (:data:`MAPPING`; the optimiser's settings :func:`optimiser_settings`, with ``given``
    the study keys set with ``--set``): offline features from launch.sh step 2, one local
    trainer node."""
    d = cfg.draft
    opt = {k: v["value"] for k, v in optimiser_settings(cfg, given).items()}
    if opt["draft.grad_clip"] <= 0:
        raise SpecForgeError(f"draft.grad_clip = {opt['draft.grad_clip']}: SpecForge 0.2.0 always clips "
                             "(max_grad_norm > 0); give a bound, e.g. --set draft.grad_clip=0.5")
    batch = batch_plan(d.batch_tokens, cfg.capture.max_length, gpus)
    return {
        "model": {"target_model_path": target_path, "draft_model_config": "draft_config.json",
                  "torch_dtype": "bfloat16"},
        "data": {"hidden_states_path": "cache/hidden_states", "max_length": cfg.capture.max_length,
                 "chat_template": chat_template, "cache_dir": "cache"},
        "training": {"strategy": "eagle3", "num_epochs": d.epochs, "batch_size": batch["batch_size"],
                     "accumulation_steps": batch["accumulation_steps"], "learning_rate": opt["draft.lr"],
                     "lr_scheduler": opt["draft.lr_schedule"], "warmup_ratio": opt["draft.warmup_frac"],
                     "max_grad_norm": opt["draft.grad_clip"], "ttt_length": opt["draft.ttt_steps"],
                     "save_interval": 1000, "log_interval": 50, "seed": d.seed},
        "deployment": {"mode": "local_colocated", "trainer": {"nnodes": 1, "nproc_per_node": gpus}},
        "run_id": run_id,
        "output_dir": OUTPUT_DIR,
    }


def differences(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each value of ``run`` (a :func:`run_config`) that is not SpecForge's own default
    (:data:`SPECFORGE_DEFAULTS`), with SpecForge's recipe value where it has one and why."""
    out = []
    for key, default in SPECFORGE_DEFAULTS.items():
        section, name = key.split(".")
        value = run.get(section, {}).get(name)
        if value is None or value == default:
            continue
        row = {"setting": f"run.yaml {key}", "run": value, "specforge_default": default,
               "why": WHY_DIFFERS.get(key, "given with --set")}
        if key in SPECFORGE_RECIPE:
            row["specforge_recipe"] = SPECFORGE_RECIPE[key]
        out.append(row)
    return out


def settings(cfg: Any, *, gpus: int, vocab: int | None = None, given: Collection[str] = ()) -> dict[str, Any]:
    """The study's settings as the run carries them (``mapped``: one row per :data:`MAPPING`
    entry with the profile's value and, for the optimiser's, the value the run uses, its source
    and why: :func:`optimiser_settings`), those SpecForge fixes (``fixed``: value, SpecForge's,
    why, and whether they differ), and every value of run.yaml that is not SpecForge's default
    (``differences``: :func:`differences`)."""
    values = {"draft.epochs": cfg.draft.epochs, "draft.lr": cfg.draft.lr, "draft.lr_schedule": cfg.draft.lr_schedule,
              "draft.warmup_frac": cfg.draft.warmup_frac, "draft.grad_clip": cfg.draft.grad_clip,
              "draft.ttt_steps": cfg.draft.ttt_steps, "draft.seed": cfg.draft.seed,
              "draft.batch_tokens": cfg.draft.batch_tokens,
              "draft.draft_vocab": min(cfg.draft.draft_vocab, vocab) if vocab else cfg.draft.draft_vocab,
              "draft.fused_norm": cfg.draft.fused_norm, "capture.max_length": cfg.capture.max_length,
              "data.max_new_tokens": cfg.data.max_new_tokens}
    opt = optimiser_settings(cfg, given)
    mapped = [{"study": k, "value": values[k], "specforge": where, "how": how,
               **({"used": opt[k]["value"], "source": opt[k]["source"], "why": opt[k]["why"]} if k in opt else
                  {"used": values[k], "source": "profile"})} for k, where, how in MAPPING]
    fixed = []
    for key, (theirs, why) in FIXED.items():
        ours = getattr(cfg.draft, key.split(".", 1)[1])
        fixed.append({"study": key, "value": ours, "specforge": theirs, "why": why, "differs": ours != theirs})
    run = run_config(cfg, target_path="", chat_template="", gpus=gpus, run_id="", given=given)
    return {"mapped": mapped, "fixed": fixed, "gpus": gpus, "differences": differences(run),
            "not_carried": [{"study": r["study"], "profile": r["value"], "used": r["used"], "why": r["why"]}
                            for r in mapped if r["source"] == "SpecForge default" and r["value"] != r["used"]],
            "batch": batch_plan(cfg.draft.batch_tokens, cfg.capture.max_length, gpus)}


def training_prompts(data_cfg: Any, sources: Sequence[str] = STUDY_SOURCES) -> list[Any]:
    """The train-split prompts of ``sources`` (study prompt sources: ``team``, ``humaneval``,
    ``corpus``, a .jsonl path), every one of each source, exact duplicates dropped; the eval
    split stays out (the study's held-out prompts measure the drafter)."""
    from activation_wave.models.prompts import load_prompts

    every = load_prompts(dataclasses.replace(data_cfg, sources=tuple(sources), max_prompts_per_source=0))
    seen: set[str] = set()
    out = []
    for p in every:
        key = p.text.strip()
        if p.split == "train" and key and key not in seen:
            seen.add(key)
            out.append(p)
    if not out:
        raise SpecForgeError(f"--sources {','.join(sources)}: no train-split prompt; name a source with train prompts, "
                             f"e.g. --sources {','.join(STUDY_SOURCES)}")
    return out


def conversations(prompts: Sequence[Any]) -> str:
    """SpecForge's conversation jsonl (what specforge.utils.safe_conversations_generator and
    regenerate_train_data.py read): one ``{"id", "conversations": [{"role": "user", "content"}]}``
    per prompt, plus its source and category."""
    return "".join(json.dumps({"id": p.id, "conversations": [{"role": "user", "content": p.text}],
                               "source": p.source, "category": p.category}, ensure_ascii=False) + "\n"
                   for p in prompts)


def train_argv(gpus: int) -> list[str]:
    """The training command SpecForge's launcher plans for run.yaml (specforge/launch_plan.py):
    torchrun with one process per GPU, or the CLI itself for one GPU (it then runs in process)."""
    if gpus == 1:
        return ["python", "-m", "specforge.cli", "train", "--config", "run.yaml", "--role", "all"]
    return ["torchrun", "--standalone", "--nproc_per_node", str(gpus), "--module", "specforge.cli", "train",
            "--config", "run.yaml", "--role", "all"]


def launch_script(*, target_path: str, layers: Sequence[int], gpus: int, chat_template: str, max_length: int,
                  max_new_tokens: int, n_prompts: int, sources: Sequence[str], command: str) -> str:
    """launch.sh: the four steps of the run, each callable alone (``bash launch.sh train``).
    Every path and user string goes through :func:`~activation_wave.engines.quoting.shell` (a
    word) or :func:`~activation_wave.engines.quoting.comment` (a comment line): control
    characters are refused, so no text ends its line."""
    from activation_wave.engines.quoting import comment, shell

    q = shell
    sf_ids = to_convention(layers, "specforge")
    train = " ".join(train_argv(gpus))
    return f"""#!/usr/bin/env bash
# activation_wave SpecForge run: an EAGLE-3 drafter for {comment(target_path, what="the target")} reading hidden_states layers
# {list(layers)} (SpecForge's ids, "output of block i": {sf_ids}). Written by
#   {comment(command, what="the command")}
# Run it on a GPU machine ({gpus} GPUs) in an environment with SpecForge {SPECFORGE_VERSION} and SGLang
# (pip install specforge=={SPECFORGE_VERSION}: it pins torch 2.11.0, transformers 5.8.1 and sglang 0.5.14,
# so not the study's environment; the wheel read here has sha256 {WHEEL_SHA256[:16]}..., the
# `specforge train --config` codebase: "{SPECFORGE_VERSION}" has also named the older per-method scripts),
# with a checkout of SpecForge's repository for steps 1 and 2
# (SPECFORGE_REPO; their scripts are not in the wheel).
#
#   bash launch.sh           # every step in order
#   bash launch.sh train     # one step: responses | capture | train | export
#
# Checked by the study with SpecForge {SPECFORGE_VERSION}'s own code (specforge_run.json, "check"): its
# argument parser and launcher plan step 3's command for run.yaml, its config schema accepts
# run.yaml, its draft-config loader reads draft_config.json and resolves the layers step 2
# captures ({sf_ids}), its conversation reader reads data/prompts.jsonl. Steps 1 and 2 call
# repository scripts read at commit {REPO_COMMIT} (the one whose specforge/config/schema.py is the
# wheel's); the study does not check their flags.
set -euo pipefail
cd "$(dirname "${{BASH_SOURCE[0]}}")"
SPECFORGE_REPO="${{SPECFORGE_REPO:-SpecForge}}"
PORT="${{PORT:-30000}}"
TARGET={q(target_path, what="the target")}

responses() {{
    # 1. The target's responses: SpecForge's own step. The study ships prompts only: {n_prompts} user
    #    turns, the train split of {comment(", ".join(sources), what="--sources")} (eval prompts stay held out). Greedy (T = 0,
    #    as the study's drafters), up to {max_new_tokens} new tokens, from an SGLang server of the target.
    #    The paper profile names ShareGPT and UltraChat from the hub: to add them, run
    #    "$SPECFORGE_REPO/scripts/prepare_data.py" --dataset sharegpt (and ultrachat) and append their
    #    rows to data/prompts.jsonl first.
    python -m sglang.launch_server --model-path "$TARGET" --port "$PORT" --dtype bfloat16 &
    SERVER=$!
    trap 'kill "${{SERVER:-}}" 2>/dev/null || true' EXIT
    until curl -sf "http://localhost:$PORT/health" >/dev/null; do
        kill -0 "$SERVER" 2>/dev/null || {{ echo "launch.sh: the SGLang server stopped; see its log above" >&2; exit 1; }}
        sleep 10
    done
    python "$SPECFORGE_REPO/scripts/regenerate_train_data.py" --model "$TARGET" --server-address "localhost:$PORT" \\
        --temperature 0 --max-tokens {max_new_tokens} --concurrency 64 \\
        --input-file-path data/prompts.jsonl --output-file-path data/train.jsonl --resume
    kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; trap - EXIT
}}

capture() {{
    # 2. The target's hidden states at the draft config's layers ({sf_ids}) and its final state.
    torchrun --nproc_per_node {gpus} "$SPECFORGE_REPO/scripts/prepare_hidden_states.py" \\
        --target-model-path "$TARGET" --draft-model-config draft_config.json --data-path data/train.jsonl \\
        --output-path cache/hidden_states --chat-template {q(chat_template, what="--chat-template")} --max-length {max_length} --tp-size 1
}}

train() {{
    # 3. Training (run.yaml): `specforge train --config run.yaml` plans and runs exactly this.
    {train}
}}

export_draft() {{
    # 4. The last checkpoint as a draft folder SGLang and vLLM load. The study reads either:
    #    wave speculate --draft {OUTPUT_DIR} (the checkpoint) or --draft {EXPORT_DIR} (this folder).
    specforge export --to sglang --checkpoint {OUTPUT_DIR} --draft-config draft_config.json --output-dir {EXPORT_DIR}
}}

case "${{1:-all}}" in
    responses) responses ;;
    capture) capture ;;
    train) train ;;
    export) export_draft ;;
    all) responses; capture; train; export_draft ;;
    *) echo "usage: bash launch.sh [all|responses|capture|train|export]" >&2; exit 2 ;;
esac
"""


def run_yaml(doc: Mapping[str, Any], *, command: str) -> str:
    """run.yaml's text: a header naming its maker (a comment line:
    :func:`~activation_wave.engines.quoting.comment`), then the config (keys in SpecForge's
    order) through ``yaml.safe_dump``, which quotes every string; each string is first checked
    for control characters (:func:`~activation_wave.engines.quoting.check_text`)."""
    import yaml

    from activation_wave.engines.quoting import check_text, comment

    def walk(value: Any, key: str) -> None:
        if isinstance(value, str):
            check_text(value, what=f"run.yaml {key}")
        elif isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{key}.{k}" if key else str(k))

    walk(doc, "")
    return (f"# SpecForge {SPECFORGE_VERSION} run config (specforge train --config run.yaml), written by activation_wave:\n"
            f"#   {comment(command, what='the command')}\n# specforge_run.json says how each value maps the study's profile.\n"
            + yaml.safe_dump(dict(doc), sort_keys=False, default_flow_style=False))


# ----------------------------------------------------------------------------- the folder


def _manifest_owned(path: Path) -> str | None:
    """Guard of a run folder's manifest: a JSON object this module wrote."""
    why = files.json_with("schema", "producer", "engine")(path)
    if why is not None:
        return why
    doc = json.loads(path.read_bytes())
    return None if doc.get("producer") == "activation_wave" and doc.get("engine") == "specforge" else \
        "not a SpecForge run of activation_wave"


def check_run_dir(run_dir: Path, *, force: bool = False, create: bool = True) -> Path:
    """``--run-dir`` can receive a run: absent or empty (created when ``create``), or a run folder
    this command wrote (its manifest) holding nothing but its files; with ``force``, a run folder
    of ours that SpecForge has written into too (its files are replaced, SpecForge's outputs kept).
    A folder the study did not make is refused, ``force`` or not, and so is one inside the
    package's source tree. A run of ours interrupted before its manifest (its files, no manifest)
    is written again with ``force``. Checked before any work."""
    from activation_wave.engines.quoting import check_text

    check_text(run_dir, what="--run-dir")
    flag = f"--run-dir {run_dir}"
    if run_dir.is_symlink():
        raise SpecForgeError(f"{flag} is a symbolic link; give a plain folder path")
    if run_dir.exists() and not run_dir.is_dir():
        raise SpecForgeError(f"{flag} is a file; give a folder path (it is created), e.g. --run-dir runs/specforge")
    try:
        where = run_dir.resolve()
    except (OSError, RuntimeError) as exc:  # a loop of links among its parents
        raise SpecForgeError(f"{flag} cannot be resolved ({exc}); remove the link loop or give another folder") from None
    source = Path(__file__).resolve().parents[1]  # the activation_wave package
    if where == source or source in where.parents:
        raise SpecForgeError(f"{flag} is inside the package's source tree ({source}); give a folder outside it, e.g. "
                             "--run-dir runs/specforge")
    present = sorted(p.name for p in run_dir.iterdir()) if run_dir.is_dir() else []
    if not present:
        if create:
            run_dir.mkdir(parents=True, exist_ok=True)
        return run_dir
    manifest = run_dir / MANIFEST
    why = _manifest_owned(manifest) if manifest.is_file() else f"no {MANIFEST}"
    if why is not None and not manifest.is_file() and _interrupted_run(run_dir, present):
        if force:
            return run_dir
        raise SpecForgeError(f"{flag} holds an export interrupted before its manifest ({MANIFEST}) was written; add "
                             "--force to write it again, or give a new folder")
    if why is not None:
        raise SpecForgeError(f"{flag} is a non-empty folder the study did not make ({why}); give a new or empty folder")
    ours = {f.split("/")[0] for f in RUN_FILES}
    others = [n for n in present if n not in ours]
    data_others = [n for n in (sorted(p.name for p in (run_dir / "data").iterdir()) if (run_dir / "data").is_dir()
                               else []) if n != "prompts.jsonl"]
    theirs = others + [f"data/{n}" for n in data_others]
    if theirs and not force:
        raise SpecForgeError(f"{flag} is a run SpecForge has written into ({', '.join(theirs[:3])}): rewriting its files "
                             "would pair them with outputs of another run; give a new --run-dir, or add --force to "
                             "replace the study's files and keep SpecForge's")
    return run_dir


def check_args(*, model: str, gpus: int, chat_template: str | None, sources: Sequence[str],
               command: str = "") -> None:
    """The flags of an export besides ``--run-dir``, checked before any work (the CLI calls it
    first; :func:`export_specforge` again): no control character in any text written into the
    run (:func:`~activation_wave.engines.quoting.check_text`), ``--gpus`` in 1..:data:`MAX_GPUS`,
    ``--chat-template`` one of SpecForge's (:data:`SPECFORGE_TEMPLATES`), ``--sources`` naming
    at least one prompt source. Raises :class:`SpecForgeError` naming the flag and the fix."""
    from activation_wave.core.config import ConfigError, check_source
    from activation_wave.engines.quoting import check_texts

    check_texts([("--model", model), ("--chat-template", chat_template),
                 *(("--sources", s) for s in sources), ("the command", command)])
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_GPUS:
        raise SpecForgeError(f"--gpus {gpus}: give the number of GPUs of the training machine, 1..{MAX_GPUS} (one "
                             "node; torchrun starts one process per GPU), e.g. --gpus 8")
    if chat_template is not None and chat_template not in SPECFORGE_TEMPLATES:
        raise SpecForgeError(f"--chat-template {chat_template!r} is not a SpecForge {SPECFORGE_VERSION} chat template; "
                             f"name one of {', '.join(SPECFORGE_TEMPLATES)} (or leave it out: it is read from the "
                             "tokenizer)")
    if not sources:
        raise SpecForgeError("--sources names no prompt set; give one or more of "
                             f"{','.join(STUDY_SOURCES)} or a .jsonl file, e.g. --sources {','.join(STUDY_SOURCES)}")
    for src in sources:
        try:
            check_source(src)
        except ConfigError as exc:
            problem = re.split(r"[:;] use ", str(exc).split(": ", 1)[-1])[0]  # check_source's words, not its --set fix
            raise SpecForgeError(f"--sources {src!r}: {problem}; give one or more of {','.join(STUDY_SOURCES)}, a "
                                 ".jsonl file or hub:<org>/<dataset>, e.g. --sources team,humaneval") from None


def _interrupted_run(run_dir: Path, present: Sequence[str]) -> bool:
    """Whether ``run_dir`` holds only files an export of ours writes before its manifest, with a
    draft_config.json that carries the study's block (an export stopped before its last file)."""
    ours = {f.split("/")[0] for f in RUN_FILES}
    if not set(present) <= ours:
        return False
    data = run_dir / "data"
    if data.exists() and (not data.is_dir() or any(p.name != "prompts.jsonl" for p in data.iterdir())):
        return False
    try:
        doc = json.loads((run_dir / "draft_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get(SPECFORGE_EXPORT_KEY), dict)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def export_specforge(cfg: Any, run_dir: str | Path, *, layers: Sequence[int], basis: str,
                     gpus: int = DEFAULT_GPUS, sources: Sequence[str] = STUDY_SOURCES,
                     chat_template: str | None = None, force: bool = False, command: str = "",
                     check: bool = True, target: tuple[dict[str, Any], str, str] | None = None,
                     given: Collection[str] = ()) -> dict[str, Any]:
    """Write a SpecForge 0.2.0 training run for ``cfg.model`` reading ``layers`` into ``run_dir``
    (see the module docstring) and return its manifest.

    ``basis`` says where the layers came from (``wave select``'s recommendation, or given).
    ``given``: the study keys set with ``--set``; the optimiser's others take SpecForge's
    defaults (:func:`optimiser_settings`), and the manifest's ``settings`` names every value
    that differs from SpecForge's own and why.
    ``target`` is :func:`target_config`'s triple when the caller has it. With ``check`` and the
    wheel in the cache (:func:`wheel_path`), SpecForge's own code checks the folder
    (:func:`check_run`) before the manifest is written, and a check that fails raises. Raises
    :class:`SpecForgeError` for a layer set SpecForge cannot train (not 3 layers, or one it
    cannot capture), a setting it cannot take, or a folder it may not write.
    """
    from activation_wave.core.layers import check_layers
    from activation_wave.core.results import git_commit
    from activation_wave.engines.conventions import engine_report
    from activation_wave.engines.quoting import check_text

    run_dir = check_run_dir(Path(run_dir), force=force, create=False)
    check_args(model=cfg.model, gpus=gpus, chat_template=chat_template, sources=sources, command=command)
    tcfg, target_path, source = target or target_config(cfg.model)
    check_text(target_path, what="the target's path")
    n = int(tcfg["num_hidden_layers"])
    ids = list(check_layers(layers, n, what="--layers"))
    problems = engine_report(ids, n, model_type=str(tcfg.get("model_type", "llama")))["specforge"]["problems"]
    if problems:
        raise SpecForgeError(f"layers {ids} cannot be trained in SpecForge {SPECFORGE_VERSION}: {problems[0]}; give "
                             "3 layers among hidden_states 1..N-1 (--layers)")
    template = chat_template or chat_template_for(cfg.model, tokenizer_template(cfg.model))
    if template is None:
        raise SpecForgeError(f"no SpecForge chat template known for {cfg.model}: name the one matching its tokenizer "
                             "with --chat-template (llama3, qwen, gemma, ...; specforge/data/template.py lists them)")
    prompts = training_prompts(cfg.data, sources)
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(target_path).name.lower())
    run_id = f"wave-{slug}-l{'-'.join(map(str, ids))}"
    vocab = int(tcfg["vocab_size"])
    texts = {
        "data/prompts.jsonl": conversations(prompts),
        "draft_config.json": json.dumps(draft_config(tcfg, ids, draft_vocab=cfg.draft.draft_vocab,
                                                     fused_norm=cfg.draft.fused_norm, target_path=target_path),
                                        indent=1) + "\n",
        "run.yaml": run_yaml(run_config(cfg, target_path=target_path, chat_template=template, gpus=gpus,
                                        run_id=run_id, given=given), command=command),
        "launch.sh": launch_script(target_path=target_path, layers=ids, gpus=gpus, chat_template=template,
                                   max_length=cfg.capture.max_length, max_new_tokens=cfg.data.max_new_tokens,
                                   n_prompts=len(prompts), sources=sources, command=command),
    }
    # only now is the folder made; its write lock is held until the manifest is written, so a second
    # export into it is refused (files.Busy) instead of pairing its files with this one's
    with files.folder_lock(run_dir, wait=False, flag="--run-dir"):
        check_run_dir(run_dir, force=force, create=False)  # again, under the lock: what is there now
        for name, text in texts.items():  # the folder is ours (check_run_dir): its files may be replaced
            # a hand-off: readable on the GPU box (the user's umask, as every file the study writes)
            files.write_text(run_dir / name, text, files.anything, force=True, executable=name == "launch.sh")
        by_source: dict[str, int] = {}
        for p in prompts:
            by_source[p.source] = by_source.get(p.source, 0) + 1
        manifest: dict[str, Any] = {
            "schema": RUN_SCHEMA, "producer": "activation_wave", "engine": "specforge",
            "specforge": {"version": SPECFORGE_VERSION, "wheel_sha256": WHEEL_SHA256, "code": CODEBASE,
                          "repo_commit_of_scripts": REPO_COMMIT},
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "git_commit": git_commit(), "command": command,
            "profile": cfg.profile,
            "target": {"model": cfg.model, "target_model_path": target_path, "config_source": source, "n_layers": n,
                       "model_type": tcfg.get("model_type"), "vocab_size": vocab, "hidden_size": tcfg.get("hidden_size")},
            "layers": {"hidden_states": ids, "specforge": to_convention(ids, "specforge"), "basis": basis},
            "settings": settings(cfg, gpus=gpus, vocab=vocab, given=given),
            "data": {"file": "data/prompts.jsonl", "records": len(prompts), "by_source": by_source,
                     "split": "train (eval prompts held out)", "chat_template": template,
                     "responses": "regenerated by the target in launch.sh step 1 (SpecForge's regenerate_train_data.py, "
                                  f"greedy, up to {cfg.data.max_new_tokens} tokens): SpecForge's own step"},
            "run": {"run_id": run_id, "output_dir": OUTPUT_DIR, "export_dir": EXPORT_DIR, "gpus": gpus,
                    "train": train_argv(gpus), "launch": "bash launch.sh"},
            "files": {"draft_config": "draft_config.json", "run_config": "run.yaml", "data": "data/prompts.jsonl",
                      "launch": "launch.sh"},
            "sha256": {name: _sha256(text.encode("utf-8")) for name, text in texts.items()},
            "check": None,
        }
        if check:
            wheel = wheel_path()
            if wheel is not None:
                result = check_run(run_dir, expected=manifest, wheel=wheel)
                manifest["check"] = result
                if not result.get("ok"):
                    raise SpecForgeError(f"SpecForge {SPECFORGE_VERSION}'s own code rejects the run written to {run_dir}: "
                                         f"{result.get('error') or result}; the manifest was not written")
            else:
                manifest["check"] = {"ok": None, "why": f"SpecForge {SPECFORGE_VERSION}'s wheel is not in the cache "
                                                        f"($WAVE_CACHE/wheels/{WHEEL}): bash scripts/setup_specforge.sh "
                                                        "fetches it"}
        files.write_json(run_dir / MANIFEST, manifest, _manifest_owned, force=False, flag="--run-dir", indent=1)
        return manifest


def handoff(cfg: Any, *, vocab: int | None = None, gpus: int = DEFAULT_GPUS) -> dict[str, Any]:
    """What ``wave export --engine specforge`` would write for ``cfg`` (no model, no data read):
    the command, the files, the settings as mapped. ``wave dry-run --profile paper`` prints it."""
    run_dir = f"runs/specforge-{cfg.profile}"
    return {
        "command": f"wave export --engine specforge --profile {cfg.profile} --run-dir {run_dir}",
        "layers": f"the set `wave select --profile {cfg.profile}` recommends on this target's capture (or --layers)",
        "writes": {
            "draft_config.json": f"SpecForge's EAGLE-3 draft config for {cfg.model}: one decoder layer, draft vocabulary "
                                 f"{min(cfg.draft.draft_vocab, vocab) if vocab else cfg.draft.draft_vocab}, the layer ids "
                                 "nested (hidden_states - 1, SpecForge/SGLang) and top level (vLLM, llama.cpp)",
            "run.yaml": "the run config SpecForge's schema validates (offline features, torchrun on the GPUs)",
            "data/prompts.jsonl": f"user turns of the study's train prompts ({', '.join(STUDY_SOURCES)}); the target's "
                                  "responses are SpecForge's step 1",
            "launch.sh": "responses (SGLang), hidden states, training (torchrun), export",
            MANIFEST: "what made the run, sha256 of each file, and SpecForge 0.2.0's own check of it",
        },
        "train": " ".join(train_argv(gpus)),
        "settings": settings(cfg, gpus=gpus, vocab=vocab),
        "then": f"bash {run_dir}/launch.sh on the GPU machine; wave speculate --draft {run_dir} reads its checkpoint",
    }


def handoff_text(h: Mapping[str, Any]) -> list[str]:
    """The lines ``wave dry-run`` prints for :func:`handoff`."""
    s = {r["study"]: r.get("used", r["value"]) for r in h["settings"]["mapped"]}
    b = h["settings"]["batch"]
    lines = [f"  hand-off  drafters at scale train in SpecForge {SPECFORGE_VERSION}: {h['command']}",
             f"            layers: {h['layers']}",
             f"            writes " + "; ".join(f"{k}" for k in h["writes"]),
             f"            train: {h['train']} (epochs {s['draft.epochs']}, lr {s['draft.lr']:g}, ttt {s['draft.ttt_steps']}, "
             f"max length {s['capture.max_length']}, draft vocab {s['draft.draft_vocab']}, {b['batch_size']} sequence x "
             f"{b['accumulation_steps']} accumulation x {h['settings']['gpus']} GPUs per step)"]
    differ = [f"{r['study']} {r['value']} (SpecForge: {r['specforge']})" for r in h["settings"]["fixed"] if r["differs"]]
    if differ:
        lines.append(f"            not carried (SpecForge fixes them): {', '.join(differ)}")
    own = [f"{r['study']} {r['used']:g} (profile {r['profile']:g})" if isinstance(r["used"], float) else
           f"{r['study']} {r['used']} (profile {r['profile']})" for r in h["settings"].get("not_carried", [])]
    if own:
        lines.append(f"            SpecForge's own defaults, not the CPU drafters' (not measured at scale): {', '.join(own)}")
    lines.append(f"            then: {h['then']}")
    return lines


# ----------------------------------------------------------------------------- SpecForge's own check


def wheel_dir() -> Path:
    """Where the SpecForge wheel is cached: ``$WAVE_CACHE/wheels`` (outside git)."""
    from activation_wave.core.paths import cache_root

    return cache_root() / "wheels"


def wheel_path() -> Path | None:
    """The cached SpecForge 0.2.0 wheel when present and its sha256 is :data:`WHEEL_SHA256`, else None."""
    path = wheel_dir() / WHEEL
    if not path.is_file():
        return None
    from activation_wave.core.hashing import file_sha256

    return path if file_sha256(path) == WHEEL_SHA256 else None


def fetch_wheel() -> Path:
    """Download SpecForge 0.2.0's wheel into :func:`wheel_dir` with pip (no dependencies, nothing
    installed) and check its sha256. The one step that needs the package registry."""
    if (found := wheel_path()) is not None:
        return found
    wheel_dir().mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"specforge=={SPECFORGE_VERSION}",
                    "-d", str(wheel_dir())], check=True)
    found = wheel_path()
    if found is None:
        raise RuntimeError(f"{wheel_dir() / WHEEL} does not have the sha256 {WHEEL_SHA256}; delete it and fetch again")
    return found


def check_run(run_dir: str | Path, *, expected: Mapping[str, Any] | None = None, wheel: Path | None = None,
              timeout: float = 600) -> dict[str, Any]:
    """Run SpecForge 0.2.0's own code on a run folder, in a child Python whose import path starts
    with the wheel (nothing installed; TorchDynamo off, as SpecForge's modules are decorated with
    ``torch.compile``). ``expected`` is the run's manifest (written or about to be). Returns
    :func:`check_in_process`'s report, ``ok`` False with ``error`` when SpecForge refused."""
    wheel = wheel or wheel_path()
    if wheel is None:
        return {"ok": None, "why": f"no SpecForge {SPECFORGE_VERSION} wheel in {wheel_dir()} (bash scripts/setup_specforge.sh)"}
    run_dir = Path(run_dir).resolve()
    if expected is None:
        expected = json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from activation_wave.engines.specforge import check_in_process; "
            "print('SPECFORGE-CHECK ' + json.dumps(check_in_process(sys.argv[2], json.loads(sys.argv[3]))))")
    env = {**os.environ, "TORCHDYNAMO_DISABLE": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", code, str(wheel), str(run_dir),
                           json.dumps({"run": expected["run"], "target": expected["target"],
                                       "layers": expected["layers"], "data": expected["data"]})],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=run_dir)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("SPECFORGE-CHECK "):
            return json.loads(line[len("SPECFORGE-CHECK "):])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"ok": False, "error": f"the check did not finish (exit {proc.returncode}): {tail[:300]}"}


def check_in_process(run_dir: str | Path, expected: Mapping[str, Any]) -> dict[str, Any]:
    """SpecForge's own code on ``run_dir`` (call with the wheel first on ``sys.path``):

    * ``parser``: ``specforge.cli.main`` (its argparse parser, config loader and launcher) on the
      training command's arguments plus ``--plan``; exit 0, and the plan's command equals ours;
    * ``config``: ``specforge.config.load_config`` (strict pydantic schema) on run.yaml, then
      ``resolve_run`` (the algorithm registry's run checks);
    * ``draft_config``: ``resolve_draft_config`` on draft_config.json, ``resolve_offline_capture``
      (the capture layers launch.sh step 2 uses) equal to the study's ids - 1, and SpecForge's
      ``LlamaForCausalLMEagle3`` built on the meta device holding the tensors
      :func:`~activation_wave.models.drafter.load_specforge_drafter` maps, by name and shape;
    * ``data``: ``specforge.utils.safe_conversations_generator`` reads every record, each a user turn;
    * ``chat_template``: the name is in SpecForge's template registry.
    """
    import contextlib
    import io
    import types

    import torch

    from activation_wave.models.drafter import expected_state_shapes, specforge_spec

    run_dir = Path(run_dir)
    os.chdir(run_dir)
    report: dict[str, Any] = {"ok": False, "specforge": SPECFORGE_VERSION}
    try:
        import specforge.cli
        from specforge.application import resolve_offline_capture, resolve_run
        from specforge.config import load_config
        from specforge.data.template import TEMPLATE_REGISTRY
        from specforge.modeling.auto import AutoDraftModel
        from specforge.training.model_loading import resolve_draft_config
        from specforge.utils import safe_conversations_generator

        report["imported_from"] = Path(specforge.cli.__file__).parents[1].name
        argv = list(expected["run"]["train"])
        sf_args = argv[argv.index("specforge.cli") + 1:]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = specforge.cli.main([*sf_args, "--plan"])
        plan = json.loads(out.getvalue())
        cmds = plan.get("commands") or []
        planned = list(cmds[0]["argv"]) if cmds else None
        # SpecForge spells torchrun as `<python> -m torch.distributed.run`; compare what follows.
        ours = argv[1:] if argv[0] == "torchrun" else None
        theirs = planned[3:] if planned and planned[1:3] == ["-m", "torch.distributed.run"] else None
        same = (ours == theirs) if ours is not None else (plan.get("kind") == "worker" and not cmds)
        report["parser"] = {"argv": [*sf_args, "--plan"], "exit": rc, "plan_kind": plan.get("kind"),
                            "plan_role": plan.get("role"), "same_as_launch": same,  # its interpreter's path left out
                            "planned": None if planned is None else ["python", *planned[1:]]}
        cfg = load_config("run.yaml")
        resolved = resolve_run(cfg)
        report["config"] = {"valid": True, "mode": cfg.mode, "deployment": cfg.deployment.mode,
                            "training": cfg.training.model_dump(include={
                                "strategy", "num_epochs", "batch_size", "accumulation_steps", "learning_rate",
                                "lr_scheduler", "warmup_ratio", "max_grad_norm", "ttt_length", "seed"}),
                            "data": cfg.data.model_dump(include={"hidden_states_path", "max_length", "chat_template"}),
                            "algorithm": resolved.algorithm.name}
        provider = resolved.algorithm.providers.model.draft_config
        dcfg = resolve_draft_config(cfg, provider=provider)
        n = int(expected["target"]["n_layers"])
        capture = resolve_offline_capture(cfg, target_config=types.SimpleNamespace(num_hidden_layers=n))
        want = list(expected["layers"]["specforge"])
        with torch.device("meta"):
            model = AutoDraftModel.from_config(dcfg)
        theirs_shapes = {("fuse_norm." + k[len("fc_norm."):] if k.startswith("fc_norm.") else k): tuple(v.shape)
                         for k, v in model.state_dict().items() if "embed" not in k}
        raw = json.loads(Path(cfg.model.draft_model_config).read_text(encoding="utf-8"))
        mine = expected_state_shapes(specforge_spec(raw, where="draft_config.json", n_layers=n))
        report["draft_config"] = {
            "architecture": type(model).__name__, "draft_vocab_size": int(dcfg.draft_vocab_size),
            "capture_method": capture.capture_method, "capture_layers": list(capture.capture_layers),
            "expected_layers": want, "layers_match": list(capture.capture_layers) == want,
            "tensors": len(theirs_shapes), "tensors_match_study_loader": theirs_shapes == mine,
            "tensor_differences": sorted(set(theirs_shapes.items()) ^ set(mine.items()))[:6]}
        rows = list(safe_conversations_generator(expected["data"]["file"]))
        users = sum(1 for r in rows if [m.get("role") for m in r["conversations"]] == ["user"])
        report["data"] = {"reader": "specforge.utils.safe_conversations_generator", "records": len(rows),
                          "user_turns": users, "expected": expected["data"]["records"]}
        names = TEMPLATE_REGISTRY.get_all_template_names()
        tpl = cfg.data.chat_template
        report["chat_template"] = {"name": tpl, "registered": tpl in names}
        checks = [rc == 0, same, report["draft_config"]["layers_match"], report["draft_config"]["tensors_match_study_loader"],
                  len(rows) == users == expected["data"]["records"], tpl in names]
        report["ok"] = all(checks)
        if not report["ok"]:
            report["error"] = "see the report's fields marked false"
    except Exception as exc:  # noqa: BLE001 - SpecForge's refusal, whatever its type, is the report
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        report["error"] = f"{type(exc).__name__}: {'; '.join(lines[:4])[:500]}"  # pydantic names the field on line 2
    return report


def check_text(check: Mapping[str, Any] | None) -> str:
    """One line on SpecForge's own check of a run (for the CLI)."""
    if not check or check.get("ok") is None:
        return f"not checked: {(check or {}).get('why', 'no check run')}"
    if not check.get("ok"):
        return f"REJECTED by SpecForge {SPECFORGE_VERSION}: {check.get('error')}"
    p, d = check["parser"], check["draft_config"]
    return (f"accepted by SpecForge {SPECFORGE_VERSION}'s own code: `specforge {' '.join(p['argv'])}` exits "
            f"{p['exit']} and plans the launch command; run.yaml valid ({check['config']['mode']}, "
            f"{check['config']['algorithm']}); capture layers {d['capture_layers']}; {d['tensors']} draft tensors as "
            f"the study's loader maps them; {check['data']['records']} conversations read")
