"""``wave serve --engine vllm``: the command it builds, the folders it writes or reuses, and the
process group that dies with it (a stand-in server that ignores SIGTERM and forks, no vLLM
needed); then the real server on the embedded model, where ``bash scripts/setup_vllm.sh`` made
the environment (skipped, saying why, elsewhere)."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
import torch

from activation_wave.engines import vllm as V
from activation_wave.engines import vllm_serve as S
from activation_wave.engines.group import group_members
from activation_wave.models.drafter import Eagle3Drafter, save_drafter

LIB = str(Path(__file__).resolve().parents[1] / "lib")

#: What vLLM 0.32's /metrics says of speculative decoding (the names of vllm/v1/spec_decode/metrics.py).
METRICS = textwrap.dedent("""\
    # HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
    # TYPE vllm:spec_decode_num_drafts_total counter
    vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 16.0
    vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 48.0
    vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 15.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 9.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 4.0
    vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 2.0
    vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7966227437514553e+09
    vllm:generation_tokens_total{engine="0",model_name="m"} 32.0
    vllm:num_requests_running{engine="0",model_name="m"} 0.0
    """)

#: A stand-in for vLLM's server: answers /health and /metrics, ignores SIGTERM, and forks a
#: child that ignores it too (vLLM's engine process); writes "server_pid child_pid" to argv[2].
STAND_IN = textwrap.dedent('''\
    import http.server, os, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    port, pids, metrics = int(sys.argv[1]), sys.argv[2], open(sys.argv[3]).read().encode()
    child = os.fork()
    if child == 0:
        while True:
            time.sleep(1)
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"" if self.path == "/health" else metrics if self.path == "/metrics" else None
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")
        def log_message(self, *a):
            pass
    srv = http.server.HTTPServer(("127.0.0.1", port), H)
    with open(pids + ".tmp", "w") as fh:
        fh.write(f"{os.getpid()} {child}")
    os.replace(pids + ".tmp", pids)
    srv.serve_forever()
    ''')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_for(cond, timeout: float, what: str) -> None:
    t0 = time.time()
    while not cond():
        if time.time() - t0 > timeout:
            pytest.fail(f"{what} within {timeout} s")
        time.sleep(0.1)


def stand_in(tmp_path: Path, port: int) -> tuple[list[str], Path]:
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    (tmp_path / "metrics.txt").write_text(METRICS)
    pids = tmp_path / "pids"
    return [sys.executable, str(tmp_path / "stand_in.py"), str(port), str(pids), str(tmp_path / "metrics.txt")], pids


# ----------------------------------------------------------------------------- the command


def test_the_command_is_the_checked_one_with_absolute_paths(tmp_path):
    v = V.Vllm(tmp_path / "vllm")
    s = S.Server(tmp_path / "target", tmp_path / "draft", depth=2, threads=2, port=8123, name="smollm2-135m")
    argv = s.argv(v)
    assert argv[:3] == [str(v.python), "-m", "vllm.entrypoints.openai.api_server"]
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert flags["--model"] == str(tmp_path / "target") and flags["--dtype"] == "float32"
    assert flags["--kv-cache-memory-bytes"] == str(256 * 2**20) and flags["--port"] == "8123"
    assert json.loads(flags["--speculative-config"]) == {"method": "eagle3", "model": str(tmp_path / "draft"),
                                                          "num_speculative_tokens": 2}
    assert s.env(v) == {"VLLM_CPU_OMP_THREADS_BIND": "0-1", "LD_PRELOAD": str(v.iomp)}
    text = s.command(v)
    assert text.startswith(f"VLLM_CPU_OMP_THREADS_BIND=0-1 LD_PRELOAD={v.iomp} {v.python} -m ")
    assert "--speculative-config '{\"method\": \"eagle3\"" in text and all(
        p.startswith("/") for p in (str(v.python), str(v.iomp), flags["--model"]))
    plain = S.Server(tmp_path / "target", threads=1)
    assert "--speculative-config" not in plain.argv(v) and plain.env(v)["VLLM_CPU_OMP_THREADS_BIND"] == "0"
    req = s.example_request()
    assert req.startswith("curl -s http://127.0.0.1:8123/v1/completions ") and '"temperature": 0' in req
    body = json.loads(req.split("-d ", 1)[1].strip("'"))
    assert body["model"] == "smollm2-135m" and body["max_tokens"] == 32
    with pytest.raises(ValueError, match="--port 0"):
        S.Server(tmp_path, port=0)
    with pytest.raises(ValueError, match="--depth 0"):
        S.Server(tmp_path, depth=0)


def test_metrics_are_vllms_counters():
    c = S.parse_metrics(METRICS)
    assert c == {"drafts": 16, "draft_tokens": 48, "accepted_tokens": 15, "tokens": 32, "accepted_per_pos": [9, 4, 2]}
    acc = S.acceptance(c)
    assert acc["tau"] == round(32 / (32 - 15), 4) and acc["acceptance_by_position"] == [0.5625, 0.25, 0.125]
    assert S.counters_text(acc).startswith("32 tokens, 16 drafts, 48 drafted and 15 accepted tokens: tau 1.88 "
                                           "(tokens per target forward)")
    assert S.counters_text(S.acceptance(S.parse_metrics(""))).startswith("no drafts")


def test_the_folders_are_written_once_then_reused_and_readable_by_others(tiny_target, tmp_path):
    t = tiny_target
    torch.manual_seed(0)
    d = Eagle3Drafter.from_target(t.model, layers=[1, 2, 3], draft_ids=list(range(0, t.vocab_size, 2)), seed=0)
    draft = save_drafter(d, tmp_path / "draft", {"target": t.name, "target_fingerprint": t.fingerprint})
    loads = []

    def load(name):
        loads.append(name)
        return t

    first = S.prepare(draft, model=None, default_model="other", load_target=load)
    assert loads == ["tiny-llama"]  # the drafter's own target, from its provenance
    assert first.target_dir == V.target_dir_for(t).resolve() == S.target_dir_for_name(t.name, t.fingerprint).resolve()
    exp = json.loads((first.draft_dir / "config.json").read_text())
    assert exp["activation_wave"]["export"]["drafter_weights_sha256"] == json.loads(
        (draft / "provenance.json").read_text())["weights_sha256"]
    for folder in (first.target_dir, first.draft_dir):
        for p in folder.iterdir():
            assert stat.S_IMODE(p.stat().st_mode) & 0o044 == 0o044, p  # a server of another user reads them
    again = S.prepare(draft, model=None, default_model="other", load_target=load)
    assert loads == ["tiny-llama"]  # not loaded again
    assert (again.target_dir, again.draft_dir) == (first.target_dir, first.draft_dir)
    assert all("reused" in n for n in again.notes)
    with pytest.raises(ValueError, match="another model"):
        other = type(t)(name="other", model=t.model, tokenizer=t.tokenizer, provenance={"source": "else"})
        S.prepare(draft, model="other", default_model="x", load_target=lambda name: other)


# ----------------------------------------------------------------------------- the process group


def test_a_sigkilled_parent_takes_the_whole_group_along(tmp_path):
    """The stand-in ignores SIGTERM and has a child that does too: SIGKILL of the process that
    started it leaves nothing (the leader SIGTERMs the group, then SIGKILLs what is left)."""
    port = free_port()
    argv, pids = stand_in(tmp_path, port)
    code = (f"import sys, time; sys.path.insert(0, {LIB!r})\n"
            "from pathlib import Path\n"
            "from activation_wave.engines.vllm_serve import start\n"
            f"leader = start({argv!r}, {{}}, Path({str(tmp_path / 'log')!r}), grace=1.0)\n"
            "print(leader.pid, flush=True)\n"
            "time.sleep(300)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    leader = int(parent.stdout.readline())
    wait_for(pids.exists, 30, "the stand-in did not start")
    server, child = map(int, pids.read_text().split())
    assert os.getpgid(server) == os.getpgid(child) == leader != os.getpgid(0)  # one group, not the test's
    assert S.http_get(f"http://127.0.0.1:{port}/health")[0] == 200
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    wait_for(lambda: not group_members(leader) and not any(map(alive, (leader, server, child))), 20,
             "a process of the server's group outlived its parent")


def test_serve_prints_the_url_and_the_counters_and_leaves_nothing(tmp_path):
    """``serve`` on the stand-in: ready line, example request, then Ctrl-C: vLLM's counters read
    from /metrics before the group is stopped, and nothing left."""
    port = free_port()
    argv, pids = stand_in(tmp_path, port)
    code = (f"import sys; sys.path.insert(0, {LIB!r})\n"
            "from pathlib import Path\n"
            "from activation_wave.engines import vllm_serve as S, vllm as V\n"
            "class StandIn(S.Server):\n"
            f"    def argv(self, v): return {argv!r}\n"
            "    def env(self, v): return {}\n"
            f"s = StandIn(Path('/t'), Path('/d'), port={port}, name='m')\n"
            f"sys.exit(S.serve(s, V.Vllm(Path('/nowhere')), Path({str(tmp_path / 'log')!r}), grace=1.0))\n")
    # Ctrl-C as a terminal sends it: a shell that starts a job in the background (`pytest ... &`)
    # has it ignore SIGINT, which its children inherit, and `serve` would then never see the signal
    proc = subprocess.Popen([sys.executable, "-u", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("stop "):
            break
    text = "".join(lines)
    assert f"serving    http://127.0.0.1:{port}/v1" in text and f"try        curl -s http://127.0.0.1:{port}/v1/completions" in text
    leader = int(text.split("process group ")[1].split()[0])
    server, child = map(int, pids.read_text().split())
    proc.send_signal(signal.SIGINT)
    rest = proc.stdout.read()
    assert proc.wait(timeout=30) == 0, rest
    assert "counters   vLLM /metrics: 32 tokens, 16 drafts, 48 drafted and 15 accepted tokens: tau 1.88" in rest
    assert f"stopped    process group {leader}: no process left" in rest
    assert not any(map(alive, (server, child)))


def test_serve_refuses_a_busy_port(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(V.VllmError, match=f"port {port} .* in use.*--port {port + 1}"):
            S.serve(S.Server(tmp_path, port=port), V.Vllm(tmp_path), tmp_path / "log")


# ----------------------------------------------------------------------------- the real server

needs_vllm = pytest.mark.skipif(V.available() is not None, reason=f"optional vLLM environment absent: {V.available()}")


def _completion(port: int, prompt: str, max_tokens: int) -> dict:
    body = json.dumps({"model": "smollm2-135m", "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


@needs_vllm
@pytest.mark.integration
@pytest.mark.slow
def test_wave_serve_on_the_embedded_model(tmp_path):
    """The must-show, as a test: `wave serve --engine vllm --draft D` with a tiny drafter on the
    embedded SmolLM2 and a plain `wave serve` beside it (both start at once: ~5 minutes on 2 busy
    cores); one greedy request answered identically by both; SIGKILL of the speculative
    server's `wave` leaves no process of its group."""
    from activation_wave.models.targets import load_target

    t = load_target("smollm2-135m")
    torch.manual_seed(0)
    d = Eagle3Drafter.from_target(t.model, layers=[2, 15, 27], draft_ids=list(range(0, t.vocab_size, 8)), seed=0)
    draft = save_drafter(d, tmp_path / "draft", {"target": t.name, "target_fingerprint": t.fingerprint})
    wave = str(Path(sys.executable).with_name("wave"))
    ports = free_port(), free_port()
    common = ["serve", "--engine", "vllm", "--threads", "1", "--max-model-len", "512", "--kv-cache-mib", "64"]
    env = {**os.environ, "WAVE_CACHE": str(tmp_path / "cache")}
    spec = subprocess.Popen([wave, *common, "--draft", str(draft), "--port", str(ports[0])], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    plain = subprocess.Popen([wave, *common, "--port", str(ports[1])], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=env,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # Ctrl-C reaches it
    outs = {}
    try:
        for name, proc in (("spec", spec), ("plain", plain)):
            lines = []
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("stop "):
                    break
            outs[name] = "".join(lines)
            assert "serving    http://" in outs[name], outs[name]
        leader = int(outs["spec"].split("process group ")[1].split()[0])
        prompt = "def fibonacci(n):"
        a, b = _completion(ports[0], prompt, 24), _completion(ports[1], prompt, 24)
        assert a["choices"][0]["text"] == b["choices"][0]["text"] and a["usage"] == b["usage"]
        text = S.http_get(f"http://127.0.0.1:{ports[0]}/metrics")[1]
        assert S.parse_metrics(text)["drafts"] > 0  # it drafted
        spec.send_signal(signal.SIGKILL)
        spec.wait()
        wait_for(lambda: not group_members(leader), 60, "vLLM's processes outlived `wave serve`")
        plain.send_signal(signal.SIGINT)
        rest = plain.stdout.read()
        assert plain.wait(timeout=120) == 0 and "no process left" in rest
    finally:
        for proc in (spec, plain):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
