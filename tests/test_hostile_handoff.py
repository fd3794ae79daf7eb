"""Issue 63: the 36 inputs a hostile probe found on the hand-off surfaces, each with a clear answer.

The surfaces: ``wave export --engine specforge|vllm``, ``wave speculate`` on SpecForge and vLLM
checkpoint layouts, the engine children, file modes and the environment. Every row of
:data:`CASES` is one numbered case of the issue (``item``: "1a", "5c", ...). A row whose input
must be refused expects exit code 2, ONE line on stderr naming the problem and the fix (its
``needles``), no traceback, and every watched file unchanged with nothing left behind. A row
whose input should work (or whose fix is a behaviour, not a message) expects exit 0 and its
``check`` asserts what it wrote. Rows that are not one ``wave`` command (the engine children,
file modes, ``check_book.py``) give a ``call`` that returns ``(code, stdout, stderr)`` itself.

``HOSTILE_RECORD=FILE`` appends each row's exit code and first stderr line to FILE (JSON lines)
before its assertions: run on the commit before the fix (``PYTHONPATH=<worktree>/lib``,
``HOSTILE_ROOT=<worktree>``) it gives the "before" column of the issue's table, and on this one
the "after" (/work/notes/63.md).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from helpers import copy_model_folder
from safetensors.torch import load_file, save_file
from test_cli_errors import PROGRESS, assert_one_line, copy_draft, world  # noqa: F401 - fixtures
from test_hostile_inputs import Ctx, _snapshot

from activation_wave import cli

#: The checkout whose scripts the script rows run (the worktree of the "before" commit when recording).
ROOT = Path(os.environ.get("HOSTILE_ROOT") or Path(__file__).resolve().parents[1])
LAYERS = ["--layers", "1,2,3"]


# ----------------------------------------------------------------------------- running a row


def _wave(argv: list) -> tuple[int, str, str]:
    """``wave argv`` in this process: (exit code, stdout, stderr); an exception that escapes
    ``cli.main`` (a traceback for a user) is exit code 1 with its traceback as stderr."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    except Exception:  # noqa: BLE001 - what a user would see: a traceback
        code, err = 1, io.StringIO(err.getvalue() + traceback.format_exc())
    return code, out.getvalue(), err.getvalue()


def _first_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip() and not PROGRESS.match(x)]
    if any(x.startswith("Traceback") for x in lines):
        return "Traceback: " + lines[-1]
    return lines[0] if lines else ""


def _record(case: str, item: str, code: int, err: str) -> None:
    path = os.environ.get("HOSTILE_RECORD")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"case": case, "item": item, "code": code, "first": _first_line(err)[:400]}) + "\n")


# ----------------------------------------------------------------------------- inputs


def _export_specforge(ctx: Ctx, run_dir: Path | str, *extra: str, model: Path | str | None = None) -> list:
    """``wave export --engine specforge`` of the tiny model on the world's prompts (no capture:
    --layers given; the chat template named, as the tiny tokenizer has none)."""
    return ["export", "--engine", "specforge", "--model", model or ctx.world["model"], "--run-dir", run_dir,
            "--sources", ctx.world["prompts"], "--chat-template", "llama3", *LAYERS, *extra]


def _export_vllm(ctx: Ctx, out: Path | str, *extra: str, draft: Path | None = None) -> list:
    return ["export", "--engine", "vllm", "--draft", draft or ctx.world["draft"], "--out", out, *extra]


def _speculate(ctx: Ctx, draft: Path, *extra: str) -> list:
    return ["speculate", *ctx.common(), "--set", "spec.max_prompts=6", "--draft", draft, "--prompts",
            ctx.world["prompts"], *extra]


def _snapshot_links(*roots: Path) -> dict[str, str]:
    """:func:`_snapshot` of every file that is not a symbolic link; a link is recorded as its
    target (a loop of links is not read)."""
    out: dict[str, str] = {}
    for root in roots:
        for p in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if p.is_symlink():
                out[str(p)] = f"<link to {os.readlink(p)}>"
            elif not any(q.is_symlink() for q in p.parents):
                out.update({str(p): "<dir>"} if p.is_dir() else _snapshot(p))
    return out


def _external(ctx: Ctx, name: str = "ext", *, index: dict | None = None, weights: dict | None = None,
              **config) -> Path:
    """A SpecForge export folder (``specforge export --to sglang``: an EAGLE-3 config.json without
    the study's block, model.safetensors) made from the world's drafter, its config.json with
    ``config`` set (None removes a key unless the value must be null: pass ``"null"``), its
    tensors replaced by ``weights``; with ``index``, a model.safetensors.index.json instead."""
    d = ctx.tmp / name
    d.mkdir()
    cfg = json.loads((ctx.world["draft"] / "config.json").read_text())
    cfg.pop("activation_wave")
    for k, v in config.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = None if v == "null" else v
    (d / "config.json").write_text(json.dumps(cfg, indent=1))
    state = load_file(str(ctx.world["draft"] / "model.safetensors"))
    state.update(weights or {})
    if index is None:
        save_file(state, str(d / "model.safetensors"))
    else:
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))
    return d


def _newline_run_dir(ctx: Ctx) -> list:
    return _export_specforge(ctx, ctx.absent_path(ctx.tmp / "run\ntouch PWNED"))


def _newline_model(ctx: Ctx) -> list:
    model = copy_model_folder(ctx.world["model"], ctx.tmp / "m\nid >PWNED")
    return _export_specforge(ctx, ctx.absent_path(ctx.tmp / "run"), model=model)


def _quoted_paths(ctx: Ctx) -> list:
    """A run folder and a model folder whose names hold quotes, $(...) and backticks: legal names."""
    model = copy_model_folder(ctx.world["model"], ctx.tmp / "m's $(touch PWNED) `id`")
    return _export_specforge(ctx, ctx.tmp / "run's $(touch PWNED)", model=model)


def _launch_is_bash(ctx: Ctx, before: dict, after: dict, out: str) -> None:
    """launch.sh parses (bash -n), names the target as one word, runs nothing on a usage error;
    run.yaml is YAML holding the paths as they are."""
    import yaml

    run = ctx.tmp / "run's $(touch PWNED)"
    model = ctx.tmp / "m's $(touch PWNED) `id`"
    launch = run / "launch.sh"
    assert subprocess.run(["bash", "-n", str(launch)], capture_output=True).returncode == 0
    target = [x for x in launch.read_text().splitlines() if x.startswith("TARGET=")][0]
    assert shlex.split(target[len("TARGET="):]) == [str(model)]
    proc = subprocess.run(["bash", str(launch), "bogus"], capture_output=True, text=True, cwd=ctx.tmp)
    assert proc.returncode == 2 and "usage" in proc.stderr
    assert not any(p.name == "PWNED" for p in ctx.tmp.rglob("*"))
    doc = yaml.safe_load((run / "run.yaml").read_text())
    assert doc["model"]["target_model_path"] == str(model)


def _draft_as_out(ctx: Ctx) -> list:
    d = copy_draft(ctx.world, ctx.tmp)
    return _export_vllm(ctx, d, "--force", draft=d)


def _no_build_before_shapes(ctx: Ctx) -> None:
    """Building the drafter before its shapes are checked is an AssertionError (a traceback)."""
    import activation_wave.models.drafter as drafter

    def built(*a, **kw):
        raise AssertionError("the drafter was built (allocated at the config's sizes) before its shapes were checked")

    ctx.mp.setattr(drafter, "Eagle3Drafter", built)


def _big_intermediate_own(ctx: Ctx) -> list:
    d = copy_draft(ctx.world, ctx.tmp)
    cfg = json.loads((d / "config.json").read_text())
    cfg["intermediate_size"] = 600_000
    (d / "config.json").write_text(json.dumps(cfg))
    _no_build_before_shapes(ctx)
    return _speculate(ctx, d)


def _big_intermediate_external(ctx: Ctx) -> list:
    _no_build_before_shapes(ctx)
    return _speculate(ctx, _external(ctx, intermediate_size=10**9))


def _guessed_n(ctx: Ctx, *, model: bool) -> list:
    """A SpecForge export reading layers [0, 1, 2] of the 4-block tiny target: the config does
    not record N, and max id + 1 = 3 would be recorded as the target's N."""
    d = _external(ctx, eagle_aux_hidden_state_layer_ids=[0, 1, 2], eagle_config={"use_aux_hidden_state": True})
    out = ctx.tmp / "out"
    return _export_vllm(ctx, out if model else ctx.absent_path(out), *(["--model", ctx.world["model"]] if model else []),
                        draft=d)


def _records_true_n(ctx: Ctx, before: dict, after: dict, out: str) -> None:
    cfg = json.loads((ctx.tmp / "out" / "config.json").read_text())
    assert cfg["activation_wave"]["target_num_hidden_layers"] == 4, cfg["activation_wave"]


def _index_outside(ctx: Ctx) -> list:
    other = ctx.tmp / "other"
    other.mkdir()
    (other / "model.safetensors").write_bytes((ctx.world["draft"] / "model.safetensors").read_bytes())
    names = load_file(str(ctx.world["draft"] / "model.safetensors"))
    return _speculate(ctx, _external(ctx, index={k: "../other/model.safetensors" for k in names}))


def _package_run_dir(ctx: Ctx) -> list:
    import activation_wave

    inside = Path(activation_wave.__file__).parent / f"hostile-run-{os.getpid()}"
    ctx.cleanup.append(inside)
    return _export_specforge(ctx, ctx.absent_path(inside))


def _quoted_out(ctx: Ctx) -> list:
    """A drafter folder and an --out folder whose names hold a quote."""
    d = ctx.tmp / "dr'aft"
    d.mkdir()
    for f in ctx.world["draft"].iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    return _export_vllm(ctx, ctx.tmp / "it's out", draft=d)


def _serve_line_names_out(ctx: Ctx, before: dict, after: dict, out: str) -> None:
    """The printed serve command, split as a shell splits it, names the folders as they are:
    vLLM's --speculative-config the export, or `wave serve --draft` the drafter."""
    line = [x for x in out.splitlines() if x.startswith("serve ")][0]
    words = shlex.split(line[len("serve "):].split("  (")[0])  # the command, without the note after it
    if "--speculative-config" in words:
        assert json.loads(words[words.index("--speculative-config") + 1])["model"] == str(ctx.tmp / "it's out")
    else:
        assert Path(words[words.index("--draft") + 1]) == (ctx.tmp / "dr'aft").resolve(), words


def _export_while_locked(ctx: Ctx) -> list:
    """Another export holds the write lock of the new --out (flock on the folder, as an export
    takes it): this one is refused instead of interleaving its files with the other's."""
    import fcntl

    out = ctx.tmp / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    ctx.mp.setattr(ctx, "held", fd, raising=False)
    return _export_vllm(ctx, out)


def _check_book_chromium(ctx: Ctx) -> Callable[[], tuple[int, str, str]]:
    """check_book.py --chromium /nonexistent, with another Chromium ($CHROMIUM, a stand-in) there."""
    site = ctx.tmp / "site"
    site.mkdir()
    (site / "index.html").write_text("<html><body>hi</body></html>")
    fake = ctx.tmp / "other-chromium"
    fake.write_text("#!/bin/sh\necho 'the other Chromium ran' >&2\nexit 3\n")
    fake.chmod(0o755)

    def call() -> tuple[int, str, str]:
        env = {**os.environ, "CHROMIUM": str(fake)}
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_book.py"), str(site), "--chromium",
                               "/nonexistent", "--timeout", "5"], capture_output=True, text=True, env=env, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr

    return call


def _fused_export(ctx: Ctx) -> list:
    """A drafter with per-layer norms (fused_norm; written as a checkpoint without provenance, as
    an older run's) exported for vLLM (fuse_norm.{i} -> fc_norm.{i}), then read by the study."""
    d = copy_draft(ctx.world, ctx.tmp)
    (d / "provenance.json").unlink()
    cfg = json.loads((d / "config.json").read_text())
    cfg["activation_wave"]["fused_norm"] = True
    (d / "config.json").write_text(json.dumps(cfg))
    state = load_file(str(d / "model.safetensors"))
    k, width = len(cfg["eagle_aux_hidden_state_layer_ids"]), cfg["target_hidden_size"]
    state.update({f"fuse_norm.{i}.weight": torch.ones(width) for i in range(k)})
    save_file(state, str(d / "model.safetensors"))
    code, out, err = _wave(_export_vllm(ctx, ctx.tmp / "vllm", draft=d))
    assert code == 0, err
    ctx.mp.setattr(ctx, "fused_source", d, raising=False)
    return _speculate(ctx, ctx.tmp / "vllm", "--json")


def _same_tokens_as_source(ctx: Ctx, before: dict, after: dict, out: str) -> None:
    code, ref, err = _wave(_speculate(ctx, ctx.fused_source, "--json"))
    assert code == 0, err
    assert json.loads(out)["results"] == json.loads(ref)["results"]


def _wide_target_hidden(ctx: Ctx) -> list:
    """An external drafter for a target 1024 wide (fc reads 3 x 1024), given the 32-wide tiny target."""
    state = load_file(str(ctx.world["draft"] / "model.safetensors"))
    fc = torch.zeros(state["fc.weight"].shape[0], 3 * 1024)
    return _speculate(ctx, _external(ctx, target_hidden_size=1024, weights={"fc.weight": fc}))


def _run_with_link_loop(ctx: Ctx) -> list:
    run = ctx.tmp / "run"
    (run / "outputs").mkdir(parents=True)
    (run / "specforge_run.json").write_text(json.dumps({"schema": 1, "producer": "activation_wave",
                                                       "engine": "specforge", "run": {"output_dir": "outputs"}}))
    (run / "outputs" / "wave-a-latest").symlink_to("wave-b-latest")
    (run / "outputs" / "wave-b-latest").symlink_to("wave-a-latest")
    return _speculate(ctx, run)


def _interrupted_export(ctx: Ctx) -> list:
    run = ctx.tmp / "run"
    code, _, err = _wave(_export_specforge(ctx, run))
    assert code == 0, err
    (run / "specforge_run.json").unlink()  # the export stopped before its last file
    return _export_specforge(ctx, run, "--force")


def _manifest_written(ctx: Ctx, before: dict, after: dict, out: str) -> None:
    assert json.loads((ctx.tmp / "run" / "specforge_run.json").read_text())["engine"] == "specforge"


def _drafter_as_model(ctx: Ctx) -> list:
    return ["info", "--model", copy_draft(ctx.world, ctx.tmp)]


def _unwritable_home(ctx: Ctx) -> list:
    """HOME a folder this user cannot write (EACCES on every folder or file made in it: as root,
    permission bits would not stop the test) and no WAVE_CACHE: the cache would go under it."""
    import errno
    import tempfile

    home = ctx.tmp / "home"
    home.mkdir()
    ctx.mp.setenv("HOME", str(home))
    ctx.mp.delenv("WAVE_CACHE", raising=False)
    real_mkdir, real_mkstemp = Path.mkdir, tempfile.mkstemp

    def mkdir(self, *a, **kw):
        if home in Path(self).parents and not Path(self).is_dir():
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real_mkdir(self, *a, **kw)

    def mkstemp(*a, dir=None, **kw):
        if dir is not None and (Path(dir) == home or home in Path(dir).parents):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(Path(dir) / "x"))
        return real_mkstemp(*a, dir=dir, **kw)

    ctx.mp.setattr(Path, "mkdir", mkdir)
    ctx.mp.setattr(tempfile, "mkstemp", mkstemp)
    return ["capture", *ctx.common()]


# ----------------------------------------------------------------------------- children


STAND_IN = r"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pids = [os.getpid()]
if sys.argv[2] == "fork":
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(300)
        os._exit(0)
    pids.append(pid)
with open(sys.argv[1], "w") as fh:
    fh.write(" ".join(map(str, pids)))
time.sleep(300)
"""

PARENT = r"""
import subprocess, sys, time
from activation_wave.engines import vllm
cmd = [sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]]
start = getattr(vllm, "start_child", None)
if start is not None:
    proc = start(cmd)
else:  # before issue 63: the engines' children were started with this preexec_fn
    proc = subprocess.Popen(cmd, preexec_fn=vllm.die_with_parent)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _children(ctx: Ctx, how: str) -> Callable[[], tuple[int, str, str]]:
    """A ``wave``-like parent starts a stand-in engine child the engines' way; the child ignores
    SIGTERM (and with ``fork`` starts a grandchild that does too); the parent is SIGKILLed. Every
    one of them must be gone within 20 s: exit 0, else exit 1 naming the survivors."""

    def call() -> tuple[int, str, str]:
        pids_file = ctx.tmp / "pids"
        parent = subprocess.Popen([sys.executable, "-c", PARENT, STAND_IN, str(pids_file), how])
        t0 = time.time()
        while not (pids_file.exists() and pids_file.read_text().strip()) and time.time() - t0 < 60:
            time.sleep(0.1)
        pids = [int(x) for x in pids_file.read_text().split()]
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        t0 = time.time()
        while any(_alive(p) for p in pids) and time.time() - t0 < 20:
            time.sleep(0.1)
        left = [p for p in pids if _alive(p)]
        for p in left:
            os.kill(p, signal.SIGKILL)
        if left:
            return 1, "", f"engine child processes {left} outlived a SIGKILL of their parent\n"
        return 0, "", ""

    return call


# ----------------------------------------------------------------------------- file modes


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _modes(paths: Callable[[Ctx], list[Path]]) -> Callable[[Ctx], Callable[[], tuple[int, str, str]]]:
    """A row that passes when every file ``paths(ctx)`` lists is 0644 under the umask 022 (a
    server running as another user can read it)."""

    def setup(ctx: Ctx) -> Callable[[], tuple[int, str, str]]:
        def call() -> tuple[int, str, str]:
            old = os.umask(0o022)
            try:
                wrong = {str(p): oct(_mode(p)) for p in paths(ctx) if _mode(p) != 0o644}
            finally:
                os.umask(old)
            return (1, "", f"files not readable by others: {wrong}\n") if wrong else (0, "", "")

        return call

    return setup


def _drafter_files(ctx: Ctx) -> list[Path]:
    from activation_wave.models.drafter import load_drafter, save_drafter

    return sorted(save_drafter(load_drafter(ctx.world["draft"]), ctx.tmp / "saved").iterdir())


def _vllm_files(ctx: Ctx) -> list[Path]:
    code, _, err = _wave(_export_vllm(ctx, ctx.tmp / "vllm"))
    assert code == 0, err
    return sorted((ctx.tmp / "vllm").iterdir())


def _results_files(ctx: Ctx) -> list[Path]:
    from activation_wave.core import files

    path = ctx.tmp / "results.json"
    path.write_text('{"a": 1}')
    path.chmod(0o644)
    files.update_json(path, lambda doc: {**(doc or {}), "b": 2})
    return [path]


# ----------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Row:
    """One case: its issue item, the command (a ``wave`` argv list, or a callable returning
    ``(code, stdout, stderr)``), the words its one stderr line must hold, the exit code and,
    for rows that succeed, a check ``(ctx, before, after, stdout)``."""

    item: str
    setup: Callable[[Ctx], list | Callable[[], tuple[int, str, str]]]
    needles: tuple[str, ...] = ()
    code: int = 2
    check: Callable | None = field(default=None, compare=False)


CASES: dict[str, Row] = {
    # 1: a command in a path runs
    "export specforge: --run-dir with a newline": Row(
        "1a", _newline_run_dir, ("--run-dir", "control character", "'\\n'", "rename it")),
    "export specforge: --model folder with a newline": Row(
        "1b", _newline_model, ("--model", "control character", "rename it")),
    "export specforge: quotes, $(...) and backticks in the paths": Row(
        "1", _quoted_paths, code=0, check=_launch_is_bash),
    # 2: the drafter destroyed
    "export vllm --out = --draft --force": Row(
        "2", _draft_as_out, ("is the --draft folder", "--force or not", "give another folder")),
    # 3: tracebacks on external checkpoints
    "speculate: external num_hidden_layers null": Row(
        "3a", lambda c: _speculate(c, _external(c, num_hidden_layers="null")),
        ('"num_hidden_layers" is null', "not a whole number", "config.json")),
    "speculate: external layer ids as strings": Row(
        "3c", lambda c: _speculate(c, _external(c, eagle_aux_hidden_state_layer_ids=["2", "15", "27"],
                                                  eagle_config=None)),
        ("eagle_aux_hidden_state_layer_ids is ['2', '15', '27']", "not a list of whole numbers", "fix the file")),
    "speculate: external index weight_map value a number": Row(
        "3b", lambda c: _speculate(c, _external(c, index={"fc.weight": 5})),
        ('weight_map["fc.weight"] is 5', "not the name of a file", "export the checkpoint again")),
    # 4: memory before checks
    "speculate: own drafter, intermediate_size 600000": Row(
        "4a", _big_intermediate_own, ("does not match", "midlayer.mlp", "restore it")),
    "speculate: external intermediate_size 10^9": Row(
        "4b", _big_intermediate_external, ('"intermediate_size" is 1000000000', "outside 1..")),
    # 5: silent wrong results
    "export vllm of a SpecForge export that does not record N": Row(
        "5a", lambda c: _guessed_n(c, model=False), ("does not record its target's number of blocks", "--model")),
    "export vllm of a SpecForge export, --model gives N": Row(
        "5a", lambda c: _guessed_n(c, model=True), code=0, check=_records_true_n),
    "speculate: external layer id 2.5": Row(
        "5b", lambda c: _speculate(c, _external(c, eagle_aux_hidden_state_layer_ids=[1, 2.5, 3],
                                                eagle_config={"use_aux_hidden_state": True,
                                                              "eagle_aux_hidden_state_layer_ids": [0, 1.5, 2]})),
        ("[1, 2.5, 3]", "not a list of whole numbers", "not rounded")),
    "speculate: external index names ../other/model.safetensors": Row(
        "5c", _index_outside, ('"../other/model.safetensors"', "not the name of a file", "own folder only")),
    "export specforge --gpus 10^23": Row(
        "5d", lambda c: _export_specforge(c, c.absent_path(c.tmp / "run"), "--gpus", "1" + "0" * 23),
        ("--gpus 1" + "0" * 23, "1..64")),
    "export specforge --chat-template nosuch": Row(
        "5e", lambda c: [*_export_specforge(c, c.absent_path(c.tmp / "run"))[:-4], "--chat-template", "nosuch",
                         *LAYERS], ("--chat-template 'nosuch'", "not a SpecForge", "llama3")),
    "export specforge --run-dir inside the package": Row(
        "5f", _package_run_dir, ("inside the package's source tree", "give a folder outside it")),
    "export vllm --layers": Row("5g", lambda c: _export_vllm(c, c.absent_path(c.tmp / "o"), *LAYERS),
                                ("--engine vllm does not take --layers", "leave it out")),
    "export vllm --run-dir": Row("5h", lambda c: _export_vllm(c, c.absent_path(c.tmp / "o"), "--run-dir", c.tmp / "r"),
                                 ("--engine vllm does not take --run-dir",)),
    "export vllm --gpus": Row("5i", lambda c: _export_vllm(c, c.absent_path(c.tmp / "o"), "--gpus", "4"),
                              ("--engine vllm does not take --gpus",)),
    "export vllm --out with a quote": Row("5j", _quoted_out, code=0, check=_serve_line_names_out),
    "export vllm into a folder another export is writing": Row(
        "5k", _export_while_locked, ("is being written by another process", "wait for it")),
    "check_book.py --chromium /nonexistent": Row(
        "5l", _check_book_chromium, ("--chromium /nonexistent", "no such executable")),
    "dry-run spec.threads=10000": Row("5m", lambda c: ["dry-run", "--set", "spec.threads=10000"],
                                      ("spec.threads = 10000", "out of range")),
    # 6: the study reads its own vLLM export of a drafter with per-layer norms
    "speculate on a vLLM export with fc_norm": Row("6", _fused_export, code=0, check=_same_tokens_as_source),
    # 7: engine children outlive the parent
    "engine child ignoring SIGTERM, parent SIGKILLed": Row("7a", lambda c: _children(c, "plain"), code=0),
    "engine child forking a grandchild, parent SIGKILLed": Row("7b", lambda c: _children(c, "fork"), code=0),
    # 8: poor messages
    "speculate: target_hidden_size 1024 on a 32-wide target": Row(
        "8a", _wide_target_hidden, ("target_hidden_size = 1024", "hidden_size is 32", "--model")),
    "speculate: a run folder with a link loop": Row(
        "8b", _run_with_link_loop, ("loop of symbolic links", "remove it")),
    "speculate: external num_hidden_layers \"x\"": Row(
        "8c", lambda c: _speculate(c, _external(c, num_hidden_layers="x")), ("config.json", '"num_hidden_layers" is "x"')),
    "speculate with WAVE_MEMORY_GIB too small for capture, not for speculate": Row(
        "8d", lambda c: (c.mp.setenv("WAVE_MEMORY_GIB", "0.01"), _speculate(c, c.world["draft"], "--json"))[1],
        code=0, check=lambda c, b, a, out: json.loads(out)["results"]),
    "capture with an unwritable HOME and no WAVE_CACHE": Row("8e", _unwritable_home, ("WAVE_CACHE",)),
    "info --set model= (empty)": Row("8f", lambda c: ["info", "--set", "model="], ("names no model", "--model")),
    "info --model <a drafter folder>": Row("8g", _drafter_as_model, ("drafter", "--draft")),
    "export specforge --sources \"\"": Row(
        "8h", lambda c: ["export", "--engine", "specforge", "--model", c.world["model"], "--run-dir",
                         c.absent_path(c.tmp / "run"), "--sources", "", "--chat-template", "llama3", *LAYERS],
        ("--sources names no prompt set",)),
    "export specforge --sources bogus": Row(
        "8h", lambda c: ["export", "--engine", "specforge", "--model", c.world["model"], "--run-dir",
                         c.absent_path(c.tmp / "run"), "--sources", "bogus", "--chat-template", "llama3", *LAYERS],
        ("--sources 'bogus'", "is not a prompt source", "e.g. --sources")),
    "export specforge --force on an export interrupted before its manifest": Row(
        "8i", _interrupted_export, code=0, check=_manifest_written),
    # 9: file modes
    "drafter files are 0644": Row("9a", _modes(_drafter_files), code=0),
    "vLLM export files are 0644": Row("9b", _modes(_vllm_files), code=0),
    "a rewritten results file stays 0644": Row("9c", _modes(_results_files), code=0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_handoff_input_has_a_clear_answer(case, world, tmp_path, monkeypatch):
    row = CASES[case]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WAVE_CACHE", str(world["cache"]))
    ctx = Ctx(world, tmp_path, monkeypatch)
    ctx.cleanup = []  # type: ignore[attr-defined]
    try:
        argv = row.setup(ctx)
        watched = (tmp_path, world["draft"], world["prompts"], world["model"])
        before = _snapshot_links(*watched)
        code, out, err = argv() if callable(argv) else _wave(argv)
        _record(case, row.item, code, err)
        assert code == row.code, (case, err)
        if row.code == 0:
            assert "Traceback" not in err and all(PROGRESS.match(x) for x in err.splitlines() if x.strip()), err
            if row.check is not None:
                row.check(ctx, before, _snapshot_links(*watched), out)
        else:
            assert_one_line(err, *row.needles)
            # the study's own check words the problem; a Python exception's name means one slipped through
            assert not re.search(r"\b(Value|Key|Type|Index|Attribute)Error\b", err), (case, err)
            assert _snapshot_links(*watched) == before, case  # nothing lost, changed or left behind
        assert not any(p.exists() for p in ctx.absent), case
    finally:
        import shutil

        for p in ctx.cleanup:  # type: ignore[attr-defined]
            if p.exists():
                p.chmod(0o755)
                shutil.rmtree(p, ignore_errors=True)


COVERAGE = {f"{n}{s}" for n, s in [(1, "a"), (1, "b"), (2, ""), (3, "a"), (3, "b"), (4, "a"), (4, "b"),
                                   *((5, c) for c in "abcdefghijklm"), (6, ""), (7, "a"), (7, "b"),
                                   *((8, c) for c in "abcdefghi"), (9, "a"), (9, "b"), (9, "c")]}


def test_every_case_of_issue_63_has_a_row():
    """35 of the issue's 36 cases are rows here; the 36th (8j, MathJax in a --book-dir build) is
    the study runner's and the book's (not these surfaces): /work/notes/63.md says so."""
    assert COVERAGE <= {row.item for row in CASES.values()}, sorted(COVERAGE - {row.item for row in CASES.values()})
    assert len(COVERAGE) == 35
