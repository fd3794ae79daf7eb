"""Target responses from llama.cpp's ``llama-server``, and how far two engines' greedy responses agree.

The PyTorch target generates a few tokens per second per sequence on this CPU; llama.cpp,
with the GGUF's own kernels and several sequences batched continuously (``--parallel``
slots), is several times faster. So drafter training data can come from llama.cpp, if its
responses are the target's: :func:`greedy_agreement` measures that on held-out prompts.

What matches the PyTorch path (:mod:`activation_wave.models.prompts`):

* the prompt: the same chat-templated token ids (:func:`~activation_wave.models.prompts.chat_template_ids`),
  sent as a token list, so the server applies no template and adds no BOS;
* greedy decoding: the temperature sampler alone at temperature 0, which keeps the arg max
  (the first one on a tie, as ``torch.argmax``); no penalties, no top-k / top-p / min-p;
* sampling: the temperature-scaled distribution with no cut, as ``_generate_batch`` samples;
* the end: at most ``max_new_tokens`` new tokens, the end token kept (finish ``eos``) or the
  limit reached (finish ``length``).

What does not:

* the arithmetic: llama.cpp runs the GGUF's quantized weights with its quantized kernels (on
  a CPU, Q4_1 weights multiply activations rounded to 8 bits), the PyTorch target the same
  weights dequantized to fp32, so greedy paths can part where two logits are close;
* the random numbers: llama.cpp seeds its own generator per request, torch per batch, so
  sampled responses are draws from (nearly) the same distribution, never the same tokens;
* the end tokens: llama.cpp stops on every end-of-generation token of the vocabulary, which
  may be more than the PyTorch path's ``eos_ids``.

Every record names the engine that wrote it (``Response.engine``): server build, GGUF file
and sha256, slots and threads.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from activation_wave.core.hashing import file_sha256_memo
from activation_wave.models.prompts import Prompt, Response

#: llama-server's ``stop_type`` -> the responses files' ``finish``.
FINISH = {"eos": "eos", "limit": "length"}


# ----------------------------------------------------------------------------- requests


def request_body(prompt_ids: Sequence[int], max_new_tokens: int, *, temperature: float = 0.0,
                 seed: int = 0) -> dict[str, Any]:
    """The ``/completion`` request for one response: the prompt as token ids, the
    temperature sampler alone (greedy at 0, else plain temperature sampling), neutral
    penalties, no prompt cache (a cached prefix is evaluated in other batch shapes), and
    the generated token ids returned."""
    if temperature < 0:
        raise ValueError(f"temperature {temperature}: must be >= 0 (0 = greedy)")
    return {"prompt": [int(t) for t in prompt_ids], "n_predict": int(max_new_tokens),
            "temperature": float(temperature), "samplers": ["temperature"], "top_k": 0, "top_p": 1.0,
            "min_p": 0.0, "typical_p": 1.0, "repeat_penalty": 1.0, "presence_penalty": 0.0,
            "frequency_penalty": 0.0, "dry_multiplier": 0.0, "xtc_probability": 0.0, "seed": int(seed),
            "cache_prompt": False, "return_tokens": True, "stream": False}


def _post(url: str, body: dict[str, Any], timeout: float = 1800.0) -> dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def _get(url: str, timeout: float = 30.0) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def parse_reply(reply: dict[str, Any], max_new_tokens: int) -> tuple[list[int], str]:
    """(generated token ids, finish) of one ``/completion`` reply. The server keeps the end
    token in ``tokens``, as the PyTorch path does; a reply past ``max_new_tokens`` (the
    server may finish a multi-byte character) is cut back to it."""
    tokens = [int(t) for t in reply.get("tokens") or []]
    stop = reply.get("stop_type")
    if stop not in FINISH:
        raise ValueError(f"llama-server stopped with stop_type {stop!r} (expected one of {sorted(FINISH)}): a stop "
                         "word or an error; requests here send no stop words")
    if not tokens and int(reply.get("tokens_predicted", 0)) > 0:
        raise ValueError("llama-server returned no token ids: this build ignores `return_tokens`; token ids are "
                         "needed to compare engines")
    if len(tokens) > max_new_tokens:
        return tokens[:max_new_tokens], "length"
    return tokens, FINISH[stop]


# ----------------------------------------------------------------------------- generation


@dataclass
class GenerationRun:
    """What one server generated: per response id its tokens, finish and the server's
    ``timings``; with the wall time of the whole run and the ``engine`` string."""

    engine: str
    slots: int
    tokens: dict[str, list[int]] = field(default_factory=dict)
    finish: dict[str, str] = field(default_factory=dict)
    timings: dict[str, dict[str, Any]] = field(default_factory=dict)
    wall_s: float = 0.0

    def speed(self) -> dict[str, Any]:
        """Generated tokens per wall second over all slots (the throughput that matters for
        data generation), and the per-sequence rate llama.cpp reports (``predicted_ms``)."""
        n = sum(len(t) for t in self.tokens.values())
        ms = sum(float(t.get("predicted_ms", 0.0)) for t in self.timings.values())
        prompt_ms = sum(float(t.get("prompt_ms", 0.0)) for t in self.timings.values())
        return {"responses": len(self.tokens), "new_tokens": n, "wall_s": round(self.wall_s, 2),
                "tokens_per_s": round(n / self.wall_s, 2) if self.wall_s else None,
                "per_sequence_tokens_per_s": round(1000.0 * n / ms, 2) if ms else None,
                "prompt_ms": round(prompt_ms, 1), "slots": self.slots}


def server_engine(url: str, gguf: Path, *, slots: int, threads: int) -> str:
    """The engine string of a running server: its build (``/props`` ``build_info``), the
    GGUF file and sha256, slots and threads."""
    build = str(_get(url + "/props").get("build_info", "unknown build"))
    return (f"llama.cpp llama-server {build}, gguf {gguf.name} sha256 {file_sha256_memo(gguf)}, "
            f"slots {slots}, threads {threads}")


def generate(url: str, items: Sequence[tuple[str, Sequence[int]]], max_new_tokens: int, *, engine: str,
             slots: int = 1, temperature: float = 0.0, seed: int = 0,
             progress: Callable[[int], None] | None = None) -> GenerationRun:
    """One response per (response id, prompt token ids) item from the server at ``url``,
    ``slots`` requests in flight at a time (the server batches them continuously).

    Item ``i`` is sampled with seed ``seed + i``, so a response does not depend on which
    slot served it or when. Returns them by id with the server's timings and the wall time.
    """
    return _serve(url, [(rid, ids, seed + i) for i, (rid, ids) in enumerate(items)], max_new_tokens, engine=engine,
                  slots=slots, temperature=temperature, progress=progress)


def _serve(url: str, requests: Sequence[tuple[str, Sequence[int], int]], max_new_tokens: int, *, engine: str,
           slots: int, temperature: float, progress: Callable[[int], None] | None = None) -> GenerationRun:
    """:func:`generate` of ``(response id, prompt ids, seed)`` requests."""
    if slots < 1:
        raise ValueError(f"slots={slots}: need at least 1")
    run = GenerationRun(engine=engine, slots=slots)

    def one(req: tuple[str, Sequence[int], int]) -> tuple[str, dict[str, Any]]:
        rid, ids, s = req
        return rid, _post(url + "/completion", request_body(ids, max_new_tokens, temperature=temperature, seed=s))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=slots) as pool:
        for rid, reply in pool.map(one, requests):
            run.tokens[rid], run.finish[rid] = parse_reply(reply, max_new_tokens)
            run.timings[rid] = dict(reply.get("timings") or {})
            if progress:
                progress(1)
    run.wall_s = time.perf_counter() - t0
    return run


def to_responses(run: GenerationRun, items: Sequence[tuple[str, Prompt, Sequence[int]]],
                 decode: Callable[[list[int]], str]) -> list[Response]:
    """The run's responses as records of the responses files, in ``items`` order
    ((response id, prompt, prompt ids)); ``decode`` gives each record's text as the PyTorch
    path writes it (``tokenizer.decode(ids, skip_special_tokens=True)``)."""
    return [Response(id=rid, prompt_ids=[int(t) for t in ids], response_ids=run.tokens[rid],
                     finish=run.finish[rid], text=decode(run.tokens[rid]), category=p.category, split=p.split,
                     source=p.source, engine=run.engine)
            for rid, p, ids in items]


def responses_header(gguf: Path, run: GenerationRun, items: Sequence[tuple[str, Prompt, Sequence[int]]],
                     max_new_tokens: int, temperature: float, seed: int) -> dict[str, Any]:
    """The header line of a llama.cpp responses file: a key over the GGUF, the prompts and the
    decoding settings, the model's provenance (as the PyTorch path's header names it) and the engine."""
    sha = file_sha256_memo(gguf)
    settings = {"max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed}
    key = hashlib.sha256(json.dumps({"gguf": sha, "prompts": [[rid, list(map(int, ids))] for rid, _, ids in items],
                                     **settings}, sort_keys=True).encode()).hexdigest()[:16]
    return {"key": key, "model": {"source": "gguf", "file": gguf.name, "sha256": sha, "dtype": "gguf (quantized)"},
            "engine": run.engine, **settings, "speed": run.speed()}


class ServerGenerator:
    """``data.engine: llamacpp``: llama-servers on ``gguf`` as the responses cache's
    :class:`~activation_wave.models.prompts.BatchGenerator`. The servers start on the first
    batch (a fully cached response set starts nothing) and stop on :meth:`close` (or at the
    end of a ``with`` block). ``servers`` servers of ``threads`` threads each share a batch:
    request ``i`` goes to server ``i % servers``, each server takes ``slots`` requests at a
    time; request ``i`` of a batch with seed ``s`` samples with seed ``s + i``. With one slot
    per server a response does not depend on the servers (each is decoded alone), so servers
    only add throughput: on 2 cores, two one-thread servers decode twice what one does.
    ``ctx_per_slot`` bounds prompt plus response."""

    def __init__(self, gguf: Path, *, slots: int = 1, threads: int = 2, workdir: Path,
                 ctx_per_slot: int = 4096, llamacpp: Any = None, servers: int = 1) -> None:
        if servers < 1:
            raise ValueError(f"servers={servers}: need at least 1")
        self.gguf, self.slots, self.threads, self.workdir = gguf, slots, threads, workdir
        self.ctx_per_slot, self._lc, self.servers = ctx_per_slot, llamacpp, servers
        self._stack: Any = None
        self._urls: list[str] = []
        self._engine = ""

    @property
    def engine(self) -> str:
        self._start()
        return self._engine

    def _start(self) -> None:
        if self._stack is not None:
            return
        from contextlib import ExitStack

        from activation_wave.engines.llamacpp import find_llamacpp, free_port, llama_server

        lc = self._lc or find_llamacpp()
        stack = ExitStack()
        try:
            for k in range(self.servers):
                log = self.workdir / f"llama-server-np{self.slots}-t{self.threads}{f'-{k}' if k else ''}.log"
                server = stack.enter_context(llama_server(lc, self.gguf, free_port(), self.threads, log,
                                                          ctx=self.slots * self.ctx_per_slot, slots=self.slots))
                self._urls.append(server.url)
        except BaseException:
            stack.close()
            self._urls = []
            raise
        self._stack = stack
        many = f", servers {self.servers}" if self.servers > 1 else ""
        self._engine = server_engine(self._urls[0], self.gguf, slots=self.slots, threads=self.threads) + many

    def __call__(self, prompt_ids: list[list[int]], max_new_tokens: int, *, temperature: float = 0.0,
                 seed: int = 0) -> list[tuple[list[int], str]]:
        longest = max(len(ids) for ids in prompt_ids) + max_new_tokens
        if longest > self.ctx_per_slot:
            raise ValueError(f"a prompt plus {max_new_tokens} new tokens is {longest} tokens, over the llama.cpp "
                             f"context of {self.ctx_per_slot} per slot; lower data.max_new_tokens")
        self._start()
        shares = [list(range(k, len(prompt_ids), len(self._urls))) for k in range(len(self._urls))]

        def serve(k: int) -> GenerationRun:
            # request i keeps seed s + i whichever server decodes it
            return _serve(self._urls[k], [(str(i), prompt_ids[i], seed + i) for i in shares[k]], max_new_tokens,
                          engine=self._engine, slots=self.slots, temperature=temperature)

        with ThreadPoolExecutor(max_workers=len(self._urls)) as pool:
            runs = list(pool.map(serve, range(len(self._urls))))
        out: dict[int, tuple[list[int], str]] = {}
        for k, run in enumerate(runs):
            out.update({i: (run.tokens[str(i)], run.finish[str(i)]) for i in shares[k]})
        return [out[i] for i in range(len(prompt_ids))]

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None
            self._urls = []

    def __enter__(self) -> ServerGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ----------------------------------------------------------------------------- agreement


@dataclass(frozen=True)
class PromptAgreement:
    """One prompt's two greedy responses: ``matched`` = length of their common prefix,
    ``first_diff`` = the index of the first differing token (None when identical; the
    shorter length when one is a prefix of the other), ``share`` = matched / the longer length."""

    id: str
    identical: bool
    first_diff: int | None
    matched: int
    share: float
    n_reference: int
    n_candidate: int


@dataclass(frozen=True)
class Agreement:
    """Greedy agreement of a candidate response set with a reference set, over the ids they
    share with equal prompt tokens: identical count and share, and the mean share of the
    matching prefix. ``prompt_differs`` lists ids whose prompt tokens differ (a template or
    tokenizer mismatch; not compared), ``missing`` candidate ids the reference lacks."""

    per_prompt: list[PromptAgreement]
    prompt_differs: list[str]
    missing: list[str]

    @property
    def n(self) -> int:
        return len(self.per_prompt)

    @property
    def identical(self) -> int:
        return sum(a.identical for a in self.per_prompt)

    def summary(self) -> dict[str, Any]:
        n = self.n
        firsts = [a.first_diff for a in self.per_prompt if a.first_diff is not None]
        return {"compared": n, "identical": self.identical,
                "identical_share": round(self.identical / n, 4) if n else None,
                "mean_prefix_share": round(sum(a.share for a in self.per_prompt) / n, 4) if n else None,
                "median_first_diff": sorted(firsts)[len(firsts) // 2] if firsts else None,
                "prompt_differs": self.prompt_differs, "missing_in_reference": self.missing}

    def to_json(self) -> dict[str, Any]:
        return {**self.summary(), "per_prompt": [asdict(a) for a in self.per_prompt]}


def compare_tokens(rid: str, ref: Sequence[int], cand: Sequence[int]) -> PromptAgreement:
    """:class:`PromptAgreement` of two token sequences."""
    matched = next((i for i, (a, b) in enumerate(zip(ref, cand)) if a != b), min(len(ref), len(cand)))
    same = list(ref) == list(cand)
    longer = max(len(ref), len(cand))
    return PromptAgreement(id=rid, identical=same, first_diff=None if same else matched, matched=matched,
                           share=1.0 if longer == 0 else matched / longer, n_reference=len(ref),
                           n_candidate=len(cand))


def greedy_agreement(reference: Sequence[Response] | dict[str, Response],
                     candidate: Sequence[Response] | dict[str, Response]) -> Agreement:
    """How far ``candidate``'s greedy responses (e.g. llama.cpp's) agree token for token with
    ``reference``'s (e.g. the PyTorch target's), per candidate prompt.

    >>> r = lambda i, ids: Response(id=i, prompt_ids=[1], response_ids=ids, finish="eos", text="")
    >>> a = greedy_agreement([r("a", [5, 6, 2]), r("b", [7, 8])], [r("a", [5, 6, 2]), r("b", [7, 9])])
    >>> a.identical, a.per_prompt[1].first_diff, a.summary()["mean_prefix_share"]
    (1, 1, 0.75)
    """
    ref = reference if isinstance(reference, dict) else {r.id: r for r in reference}
    cand = candidate if isinstance(candidate, dict) else {r.id: r for r in candidate}
    per, differs, missing = [], [], []
    for rid, c in cand.items():
        r = ref.get(rid)
        if r is None:
            missing.append(rid)
        elif list(r.prompt_ids) != list(c.prompt_ids):
            differs.append(rid)
        else:
            per.append(compare_tokens(rid, r.response_ids, c.response_ids))
    return Agreement(per_prompt=per, prompt_differs=differs, missing=missing)


# ----------------------------------------------------------------------------- one call


def gguf_of_model(name: str) -> Path:
    """The GGUF file llama.cpp runs for a model name: an embedded alias's file or a ``.gguf``
    path; other models (hub ids, folders) need converting first."""
    from activation_wave.models.targets import ALIASES, resolve_alias

    if name in ALIASES:
        return resolve_alias(name)
    path = Path(name).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return path.resolve()
    raise ValueError(f"model {name!r}: llama.cpp needs a .gguf file; give an alias ({', '.join(ALIASES)}) or a .gguf "
                     "path, or convert the model with llama.cpp's convert_hf_to_gguf.py first")


def gguf_tokenizer(gguf: Path) -> Any:
    """The tokenizer transformers builds from a GGUF (the PyTorch target's, see models/targets.py),
    without loading the weights."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)


def generate_with_llamacpp(gguf: Path, prompts: Sequence[Prompt], tokenizer: Any, max_new_tokens: int, *,
                           slots: int = 1, threads: int = 1, temperature: float = 0.0, seed: int = 0,
                           suffix: str = "", workdir: Path, llamacpp: Any = None, extra: Sequence[str] = (),
                           progress: bool = True) -> tuple[list[Response], GenerationRun, dict[str, Any]]:
    """Responses of the target in ``gguf`` to ``prompts`` by a ``llama-server`` with ``slots``
    slots and ``threads`` threads: (records in prompt order, the run, the header for
    :func:`~activation_wave.models.prompts.write_responses`). Response ids are the prompt ids
    plus ``suffix`` (e.g. ``~s1`` for a sampled set). ``extra``: more server flags (e.g.
    ``--cache-type-k f32``), named in the engine string. The server log goes to ``workdir``."""
    from activation_wave.core.progress import progress_bar
    from activation_wave.engines.llamacpp import find_llamacpp, free_port, llama_server
    from activation_wave.models.prompts import chat_template_ids

    lc = llamacpp or find_llamacpp()
    items = [(f"{p.id}{suffix}", p, chat_template_ids(tokenizer, p.text)) for p in prompts]
    per_slot = max(len(ids) for _, _, ids in items) + max_new_tokens + 8
    bar = progress_bar(total=len(items), desc=f"llama.cpp responses ({slots} slots)", unit="prompt",
                       disable=not progress)
    log = workdir / f"llama-server-np{slots}-t{threads}.log"
    with llama_server(lc, gguf, free_port(), threads, log, ctx=slots * per_slot, slots=slots, extra=extra) as server:
        engine = server_engine(server.url, gguf, slots=slots, threads=threads) + (f", {' '.join(extra)}" if extra else "")
        run = generate(server.url, [(rid, ids) for rid, _, ids in items], max_new_tokens, engine=engine,
                       slots=slots, temperature=temperature, seed=seed, progress=bar.update)
    bar.close()
    records = to_responses(run, items, lambda ids: tokenizer.decode(ids, skip_special_tokens=True))
    return records, run, responses_header(gguf, run, items, max_new_tokens, temperature, seed)


def divergence_logits(target: Any, reference: dict[str, Response], candidate: dict[str, Response],
                      agreement: Agreement) -> list[dict[str, Any]]:
    """Why two greedy responses part: at each prompt's first differing position, the PyTorch
    target's logits (one forward of prompt + common prefix, batch 1) for the reference's
    token and the candidate's, and the target's own arg max there. A small ``gap`` (the
    reference token's logit minus the candidate's) means a near tie that rounding decides;
    ``argmax_is_reference`` False means batch-1 PyTorch itself would not have picked the
    reference token (the reference was made in left-padded batches)."""
    import torch

    rows = []
    for a in agreement.per_prompt:
        k = a.first_diff
        r, c = reference[a.id], candidate[a.id]
        if k is None or k >= len(r.response_ids) or k >= len(c.response_ids):
            continue
        ids = torch.tensor([list(r.prompt_ids) + list(r.response_ids[:k])], device=target.model.device)
        with torch.no_grad():
            logits = target.model(input_ids=ids).logits[0, -1].float()
        top2 = torch.topk(logits, 2)
        rt, ct = r.response_ids[k], c.response_ids[k]
        rows.append({"id": a.id, "position": k, "reference_token": rt, "candidate_token": ct,
                     "gap": round(float(logits[rt] - logits[ct]), 4),
                     "top2_gap": round(float(top2.values[0] - top2.values[1]), 4),
                     "argmax": int(top2.indices[0]), "argmax_is_reference": int(top2.indices[0]) == rt,
                     "candidate_is_second": int(top2.indices[1]) == ct})
    return rows


def dequantize_gguf(src: Path, out: Path) -> Path:
    """Write ``src`` with every tensor dequantized to F32 (metadata copied, ``general.file_type``
    set to all-F32): the weights the PyTorch target runs (transformers dequantizes GGUFs with
    the same ``gguf.quants.dequantize``), for llama.cpp to compute on like for like. Atomic."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter
    from gguf.quants import dequantize

    reader = GGUFReader(str(src))
    arch = reader.fields["general.architecture"].contents()
    tmp = out.with_name(f".{out.name}.tmp")
    writer = GGUFWriter(str(tmp), arch=arch)
    for name, f in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # written by the writer itself
        value = 0 if name == "general.file_type" else f.contents()  # 0 = LLAMA_FTYPE_ALL_F32
        sub = f.types[-1] if f.types[0] == GGUFValueType.ARRAY else None
        writer.add_key_value(name, value, f.types[0], sub_type=sub)
    for t in reader.tensors:
        writer.add_tensor(t.name, dequantize(t.data, t.tensor_type).astype("float32"))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tmp.replace(out)
    return out
