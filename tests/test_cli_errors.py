"""Every bad input of issue 19 (and those handled well before it) through the CLI entry point.

Each row runs ``activation_wave.cli.main([...])`` on a tiny random Llama saved as a local
folder and asserts the exit code (0 success, 2 bad input, 130 interrupted) and, for a
failure, that stderr is ONE line naming the problem and the fix, with no traceback.
Where a result was computed before the failure, the test asserts it is still on disk.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers import permutation_target

from activation_wave import cli
from activation_wave.core.config import load_config
from activation_wave.engines.conventions import ENGINES

ROOT = Path(__file__).resolve().parents[1]

#: Overrides that size the smoke profile to the tiny model (vocab 128, context 256).
TINY = ["--set", "data.max_new_tokens=8", "--set", "data.batch_size=4", "--set", "capture.records_per_shard=2",
        "--set", "capture.max_length=128", "--set", "draft.draft_vocab=64", "--set", "draft.workers=1",
        "--set", "spec.max_new_tokens=6", "--set", "spec.max_prompts=4"]


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_tokenizer):
    """A tiny model folder, a prompt file, a trained drafter (via `wave train-draft`) and the
    cache they used, shared by the rows below."""
    root = tmp_path_factory.mktemp("cli")
    model = root / "tiny-model"
    target = permutation_target(tiny_tokenizer)
    target.model.save_pretrained(model)
    tiny_tokenizer.save_pretrained(model)
    prompts = root / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"p{i}", "prompt": f"count {i} {i + 1} {i + 2}",
                                           "split": "eval" if i % 3 == 2 else "train"}) + "\n" for i in range(6)))
    common = ["--model", str(model), "--set", f"data.sources={prompts}", *TINY]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WAVE_CACHE", str(root / "cache"))
        code = cli.main(["train-draft", *common, "--layers", "1,2,3", "--out", str(root / "draft")])
    assert code == 0 and (root / "draft" / "model.safetensors").exists()
    return {"root": root, "model": model, "prompts": prompts, "common": common, "draft": root / "draft",
            "cache": root / "cache"}


@pytest.fixture()
def run(world, capsys, monkeypatch) -> Callable[..., tuple[int, str, str]]:
    """``run(argv)`` -> (exit code, stdout, stderr) with the shared cache."""
    monkeypatch.setenv("WAVE_CACHE", str(world["cache"]))

    def call(argv: list[str]) -> tuple[int, str, str]:
        try:
            code = cli.main([str(a) for a in argv])
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return call


#: Progress lines of long steps (stderr is not a TTY under capsys); they may precede an error.
PROGRESS = re.compile(r"^\[(capture|responses|sampled responses [^\]]*|draft \[[^\]]*\]|study)\] ")


def assert_one_line(err: str, *needles: str) -> None:
    """stderr is one line besides progress lines, no traceback, naming each needle (the problem and the fix)."""
    lines = [line for line in err.splitlines() if line.strip() and not PROGRESS.match(line)]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def copy_draft(world, tmp_path: Path) -> Path:
    d = tmp_path / "draft"
    d.mkdir()
    for f in world["draft"].iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    return d


# ----------------------------------------------------------------------------- bad input -> exit 2
# (argv builder, needles on the one stderr line)
BAD: dict[str, tuple[Callable[[dict, Path], list], tuple[str, ...]]] = {
    # item 2: numbers in the config, checked before any work (dry-run included)
    "records_per_shard<0": (lambda w, t: ["dry-run", "--set", "capture.records_per_shard=-1"],
                            ("capture.records_per_shard = -1", ">= 1", "--set capture.records_per_shard=")),
    "capture.batch_size<0": (lambda w, t: ["capture", *w["common"], "--set", "capture.batch_size=-1"],
                             ("capture.batch_size = -1", ">= 1")),
    "capture.batch_size=0": (lambda w, t: ["capture", *w["common"], "--set", "capture.batch_size=0"],
                             ("capture.batch_size = 0", ">= 1")),
    "data.batch_size<0": (lambda w, t: ["capture", *w["common"], "--set", "data.batch_size=-1"],
                          ("data.batch_size = -1", ">= 1")),
    "quantile=1": (lambda w, t: ["dry-run", "--set", "metrics.filter_quantile=1"], ("metrics.filter_quantile", "[0, 1)")),
    # item 3: decoding flags
    "temperature<0": (lambda w, t: ["speculate", *w["common"], "--draft", w["draft"], "--prompts", w["prompts"],
                                    "--temperature", "-1"], ("--temperature -1", "must be in [0, 10]")),
    "max-new-tokens=0": (lambda w, t: ["speculate", *w["common"], "--draft", w["draft"], "--prompts", w["prompts"],
                                       "--max-new-tokens", "0"], ("--max-new-tokens 0", "must be >= 1")),
    "max-new-tokens<0": (lambda w, t: ["speculate", *w["common"], "--draft", w["draft"], "--prompts", w["prompts"],
                                       "--max-new-tokens", "-5"], ("--max-new-tokens -5", "must be >= 1")),
    "tree without topk": (lambda w, t: ["speculate", *w["common"], "--set", "spec.tree_topk=0", "--draft", w["draft"],
                                        "--prompts", w["prompts"], "--method", "tree"], ("spec.tree_topk", "--method chain")),
    # item 4: train-draft checks its arguments before the capture
    "layers out of range": (lambda w, t: ["train-draft", *w["common"], "--layers", "2,99", "--out", _absent(t / "d")],
                            ("[99] out of range", "N=4", "wave info")),
    "out is a file": (lambda w, t: ["train-draft", *w["common"], "--layers", "1,2", "--out", w["prompts"]],
                      ("is an existing file", "give a folder path")),
    "out not empty": (lambda w, t: ["train-draft", *w["common"], "--layers", "1,2", "--out", w["draft"]],
                      ("non-empty folder", "--force")),
    "--force on other files": (lambda w, t: ["train-draft", *w["common"], "--layers", "1,2", "--force", "--out",
                                             _write(t / "notes.txt", b"mine").parent],
                               ("holds files other than a drafter", "notes.txt", "give a new folder")),
    # item 5: one line instead of a traceback
    "non-UTF-8 prompts": (lambda w, t: ["speculate", *w["common"], "--draft", w["draft"], "--prompts",
                                        _write(t / "latin1.jsonl", b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')],
                          ("latin1.jsonl:2", "not UTF-8", "save the file as UTF-8")),
    "drafter config.json": (lambda w, t: ["speculate", *w["common"], "--prompts", w["prompts"], "--draft",
                                          _damage(w, t, "config.json", lambda b: b[:40])],
                            ("config.json", "not valid JSON", "retrain")),
    "truncated drafter": (lambda w, t: ["speculate", *w["common"], "--prompts", w["prompts"], "--draft",
                                        _damage(w, t, "model.safetensors", lambda b: b[: len(b) // 2])],
                          ("model.safetensors", "sha256", "retrain")),
    "truncated, no hash": (lambda w, t: ["speculate", *w["common"], "--prompts", w["prompts"], "--draft",
                                         _damage(w, t, "model.safetensors", lambda b: b[: len(b) // 2], unhashed=True)],
                           ("model.safetensors", "truncated or corrupted", "train the drafter again")),
    # item 11: a bit-flipped drafter is detected by its sha256
    "bit-flipped drafter": (lambda w, t: ["speculate", *w["common"], "--prompts", w["prompts"], "--draft",
                                          _damage(w, t, "model.safetensors", _flip)],
                            ("does not match the sha256", "retrain")),
    # item 6: silent no-ops
    "--only typo": (lambda w, t: ["study", "--only", "1_layer", "--no-build", "--book-dir", _absent(t / "book")],
                    ("--only 1_layer matches no notebook", "01_layer_entropy")),
    # item 7: a hub id without hub access fails fast
    "hub id offline": (lambda w, t: ["info", "--model", "nobody-h19/no-such-model"],
                       ("nobody-h19/no-such-model", "not reachable", "--model smollm2-135m")),
    # handled well before issue 19, kept
    "wrong model name": (lambda w, t: ["info", "--model", "no-such-model"], ("unknown model 'no-such-model'", "smollm2-135m")),
    "malformed prompt file": (lambda w, t: ["speculate", *w["common"], "--draft", w["draft"], "--prompts",
                                            _write(t / "bad.jsonl", b'{"prompt": "ok"}\n{"prompt": \n')],
                              ("bad.jsonl:2", "not valid JSON")),
    "unknown --set key": (lambda w, t: ["dry-run", "--set", "capture.batchsize=4"], ("batchsize", "known keys")),
    "bad --layers text": (lambda w, t: ["train-draft", *w["common"], "--layers", "a,b", "--out", _absent(t / "d")],
                          ("--layers 'a,b'", "2,15,27")),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _absent(path: Path) -> Path:
    """A path the command must not create (checked by the row's test after the run)."""
    ABSENT.append(path)
    return path


ABSENT: list[Path] = []


def _flip(data: bytes) -> bytes:
    b = bytearray(data)
    b[-7] ^= 0x10  # one bit inside the last tensor's data
    return bytes(b)


def _damage(world, tmp_path: Path, name: str, edit: Callable[[bytes], bytes], unhashed: bool = False) -> Path:
    d = copy_draft(world, tmp_path)
    (d / name).write_bytes(edit((d / name).read_bytes()))
    if unhashed:  # a checkpoint written before the hash was recorded
        prov = json.loads((d / "provenance.json").read_text())
        prov.pop("weights_sha256")
        (d / "provenance.json").write_text(json.dumps(prov))
    return d


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exits_2_with_one_line(case, world, run, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    captures_before = sorted((world["cache"] / "capture").glob("*"))
    argv, needles = BAD[case]
    t0 = time.time()
    code, out, err = run(argv(world, tmp_path))
    assert code == 2, (case, err)
    assert_one_line(err, *needles)
    assert time.time() - t0 < 30  # fails up front, before any long step
    # no new capture was started, and no folder written, by a rejected command
    assert sorted((world["cache"] / "capture").glob("*")) == captures_before
    assert not any(p.exists() for p in ABSENT)


def test_hub_probe_is_quick_without_the_offline_flag(run, monkeypatch):
    """Without HF_HUB_OFFLINE the hub is probed with a short timeout, not retried for a minute."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    t0 = time.time()
    code, _, err = run(["info", "--model", "nobody-h19/no-such-model"])
    assert code == 2 and time.time() - t0 < 15
    assert_one_line(err, "not reachable", "huggingface-cli download nobody-h19/no-such-model")


def test_file_shaped_cache_is_one_line(world, run, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "file" / "cache"))
    code, _, err = run(["info", "--model", world["model"]])
    assert code == 2
    assert_one_line(err, "is a file", "set WAVE_CACHE to a writable folder")


def test_unwritable_cache_is_one_line(world, run, tmp_path, monkeypatch):
    """An OSError on a path in the cache (here: mkdir refused, as in a read-only folder)."""
    cache = tmp_path / "ro-cache"
    monkeypatch.setenv("WAVE_CACHE", str(cache))
    real = Path.mkdir

    def refuse(self, *a, **kw):
        if cache in (self, *self.parents):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "mkdir", refuse)
    code, _, err = run(["capture", *world["common"]])
    assert code == 2
    assert_one_line(err, "cannot write the cache", "Permission denied", "WAVE_CACHE=")


# ----------------------------------------------------------------------------- results kept on disk


def test_trained_drafter_is_kept_when_out_cannot_be_written(world, run, tmp_path, monkeypatch):
    """--out turns into a file while training: the drafter stays in its temporary folder, named on stderr."""
    import activation_wave.draft.training as training

    out = tmp_path / "late"
    real = training.train_drafter

    def train_then_block(*a, **kw):
        path = real(*a, **kw)
        out.write_text("someone else's file")
        return path

    monkeypatch.setattr(training, "train_drafter", train_then_block)
    code, _, err = run(["train-draft", *world["common"], "--layers", "1,3", "--out", out])
    assert code == 2
    assert_one_line(err, "could not move the trained drafter", "it is kept in")
    kept = Path(err.split("it is kept in ")[1].split(":")[0])
    assert (kept / "model.safetensors").exists() and (kept / "provenance.json").exists()


def test_force_replaces_a_previous_drafter(world, run, tmp_path):
    old = copy_draft(world, tmp_path)
    before = json.loads((old / "provenance.json").read_text())["layers"]
    code, out, err = run(["train-draft", *world["common"], "--layers", "2,3", "--out", old, "--force"])
    assert code == 0, err
    assert before == [1, 2, 3] and json.loads((old / "provenance.json").read_text())["layers"] == [2, 3]
    assert [p.name for p in tmp_path.iterdir()] == ["draft"]  # no temporary folder left behind


def test_fused_norm_drafter_is_loadable_by_vllm_only(world, run, tmp_path):
    code, out, err = run(["train-draft", *world["common"], "--layers", "1,2,3", "--set", "draft.fused_norm=true",
                          "--out", tmp_path / "d"])
    assert code == 0, err
    assert json.loads((tmp_path / "d" / "config.json").read_text())["activation_wave"]["fused_norm"] is True
    # vLLM 0.32 applies one RMSNorm per captured layer (fc_norm, written by `wave export --engine vllm`)
    assert "loadable by vllm" in out and out.count("applies no per-layer RMSNorm before fc") == len(ENGINES) - 1


def test_interrupt_exits_130_and_keeps_the_shards(world, run, monkeypatch):
    """KeyboardInterrupt mid-capture (in process): exit 130, one line, finished shards kept."""
    import activation_wave.study.steps as pipeline
    from activation_wave.models.capture import capture

    monkeypatch.setattr(pipeline, "capture", lambda *a, **kw: capture(*a, **{**kw, "max_shards": 1}))
    code, _, err = run(["capture", *world["common"], "--set", "capture.topk=3"])
    assert code == 130
    assert_one_line(err, "interrupted", "rerun resumes")
    unfinished = [d for d in (world["cache"] / "capture").iterdir() if not (d / "manifest.json").exists()]
    assert len(unfinished) == 1
    assert (unfinished[0] / "shard_00000.safetensors").exists() and (unfinished[0] / "shard_00000.json").exists()


def test_sigint_exits_130_with_one_line(world, tmp_path):
    """A real Ctrl-C (SIGINT) in a subprocess during a capture: exit 130, one line, shards kept.

    The child restores Python's SIGINT handler first: a process started in the background
    by a non-interactive shell (`pytest ... &`, some CI runners) inherits SIGINT ignored,
    and Python then never raises KeyboardInterrupt. Each shard write is followed by a 5 s
    pause, so the signal lands mid-capture however loaded the machine is (the pause ends
    at the signal)."""
    cache = tmp_path / "cache"
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "import activation_wave.models.capture as c\n"
            "real = c._write_shard\n"
            "def slow(*a, **k):\n"
            "    out = real(*a, **k)\n"
            "    time.sleep(5.0)\n"
            "    return out\n"
            "c._write_shard = slow\n"
            "from activation_wave.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    argv = ["capture", *world["common"], "--set", "capture.records_per_shard=1"]
    env = {**os.environ, "WAVE_CACHE": str(cache), "PYTHONPATH": os.pathsep.join([str(ROOT / "lib"), str(ROOT / "tests")])}
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, argv)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while not list(cache.glob("capture/*/shard_00000.json")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert_one_line(err, "interrupted", "rerun resumes")
    assert list(cache.glob("capture/*/shard_00000.safetensors"))
    assert not list(cache.glob("capture/*/manifest.json"))


def test_failing_notebook_is_one_line_naming_cell_and_partial_copy(world, run, tmp_path, monkeypatch):
    """papermill failure inside `wave study`, caused by an unknown papermill parameter
    (`-p modle ...`): exit 2, one line with the notebook, the cell error and the partial copy."""
    import activation_wave.study.runner as study

    src = tmp_path / "99_probe.py"
    src.write_text('# %% tags=["parameters"]\nprofile = "smoke"\nmodel = ""\n\n'
                   "# %%\nfrom activation_wave.study.steps import notebook_config\n"
                   "cfg = notebook_config(profile, model)\n")
    out = tmp_path / "run" / "book" / "chapters" / "99_probe.ipynb"  # a new run folder: tmp_path holds the source
    monkeypatch.setattr(study, "_runs", lambda *a, **k: [("99_probe", src, out, {"profile": "smoke", "modle": "x"}, None)])
    code, _, err = run(["study", "--no-build", "--book-dir", tmp_path / "run" / "book"])
    assert code == 2
    assert_one_line(err, "notebook 99_probe failed in cell", "ConfigError", "unknown notebook parameter(s) ['modle']",
                    "99_probe.executed.ipynb")
    assert not out.exists()  # the book keeps its previous copy; the partial one is in build/
    partial = Path(err.split("traceback is ")[1].split(" (")[0])
    assert partial.exists() and "modle" in partial.read_text()
    for p in partial.parent.glob("99_probe*.ipynb"):
        p.unlink()


def test_dry_run_cli_and_notebooks_reject_a_value_alike(run):
    """Validation lives in the config objects: every entry point gives the same message."""
    from activation_wave.core.config import CaptureConfig, ConfigError
    from activation_wave.study.steps import notebook_config

    want = "capture.batch_size = 0 is out of range: it must be >= 1"
    for command in ("dry-run", "capture", "select", "info"):
        code, _, err = run([command, "--set", "capture.batch_size=0"])
        assert code == 2 and want in err, command
    with pytest.raises(ConfigError, match=re.escape(want)):
        notebook_config("smoke", "", '{"capture.batch_size": 0}')  # a papermill parameters cell
    with pytest.raises(ConfigError, match=re.escape(want)):
        dataclasses.replace(load_config("smoke").capture, batch_size=0)
    with pytest.raises(ConfigError, match=re.escape(want)):
        CaptureConfig(batch_size=0)


def test_every_bound_names_a_field_and_every_profile_passes():
    from activation_wave.core.config import PROFILES, StudyConfig

    cfg = StudyConfig()
    for section in ("data", "capture", "metrics", "select", "draft", "spec", "cross", "bench"):
        obj = getattr(cfg, section)
        names = {f.name for f in dataclasses.fields(obj)}
        assert set(obj.BOUNDS) | set(obj.CHOICES) <= names, section
    for profile in PROFILES:
        load_config(profile)


def test_notebook_parameter_check_reads_the_kernel_history():
    from activation_wave.core.config import ConfigError
    from activation_wave.study.notebooks import check_notebook_parameters, unknown_notebook_parameters

    history = ["", 'profile = "default"\nmodel = ""', '# Parameters\nprofile = "smoke"\nmodle = "x"\n', "cfg = ..."]
    assert unknown_notebook_parameters(history) == (["modle"], ["model", "profile"])
    with pytest.raises(ConfigError, match=r"\['modle'\].*\['model', 'profile'\]"):
        check_notebook_parameters(history)
    check_notebook_parameters(history[:2])  # nothing injected: nothing to check
    assert unknown_notebook_parameters(["", 'model = ""', '# Parameters\nmodel = "m"\n']) == ([], ["model"])


# ----------------------------------------------------------------------------- success paths (exit 0)


def test_speculate_json_contract_default_chain_and_max_prompts(world, run):
    code, out, err = run(["speculate", *world["common"], "--draft", world["draft"], "--prompts", world["prompts"],
                          "--set", "spec.max_prompts=2", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert [r["id"] for r in doc["results"]] == ["p0", "p1"]  # spec.max_prompts honoured
    assert all(set(r) == {"id", "token_ids"} and 1 <= len(r["token_ids"]) <= 6 for r in doc["results"])
    assert [p["token_ids"] for p in doc["per_prompt"]] == [r["token_ids"] for r in doc["results"]]
    assert doc["method"] == "eagle3-chain"  # the default, although the smoke profile sets spec.tree_topk
    assert load_config("smoke").spec.tree_topk > 0
    assert "first 2 of 6 prompts" in err


def test_speculate_text_with_a_weak_drafter(world, run, tmp_path):
    """An untrained drafter: positions that are never reached are null in JSON and '-' in text."""
    from activation_wave.models.drafter import Eagle3Drafter, save_drafter

    target = permutation_target_from(world)
    weak = Eagle3Drafter.from_target(target, [1, 2, 3], list(range(64)), seed=5)
    save_drafter(weak, tmp_path / "weak")
    argv = ["speculate", *world["common"], "--draft", tmp_path / "weak", "--prompts", world["prompts"],
            "--set", "spec.depth=4", "--set", "spec.draft_threshold=0.9"]
    code, out, err = run(argv + ["--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert None in doc["acceptance_by_position"]  # the case that crashed the text formatter
    code, text, err = run(argv)
    assert code == 0, err
    head = text.splitlines()[0]
    assert head.startswith("eagle3-chain") and head.rstrip().endswith("-")
    assert [line.split(":")[0].strip() for line in text.splitlines()[1:]] == ["p0", "p1", "p2", "p3"]


def permutation_target_from(world) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(world["model"]).eval()


def test_method_tree_on_request(world, run):
    code, out, err = run(["speculate", *world["common"], "--draft", world["draft"], "--prompts", world["prompts"],
                          "--method", "tree", "--json"])
    assert code == 0, err
    assert json.loads(out)["method"] == "eagle3-tree"


def test_truncated_records_warn(world, run, tmp_path):
    """Records left without response positions: one warning line. (Prompts beyond the context
    are refused: tests/test_hostile_inputs.py.)"""
    code, _, err = run(["capture", *world["common"], "--set", "capture.max_length=8"])
    assert code == 0
    warning = [x for x in err.splitlines() if "keep no response position" in x]
    assert len(warning) == 1 and "capture.max_length = 8" in warning[0] and "--set capture.max_length=" in warning[0]


def test_progress_lines_when_stderr_is_not_a_tty(world, run):
    """In a log (capsys: not a TTY) a long step prints plain progress lines, not tqdm redraws."""
    code, _, err = run(["capture", *world["common"], "--set", "capture.topk=5"])
    assert code == 0
    lines = [x for x in err.splitlines() if x.startswith("[capture]")]
    assert lines and lines[-1].startswith("[capture] 3/3 shard (100%)") and "\r" not in err


def test_fresh_clone_book_build_fails_in_one_line(tmp_path):
    """`jupyter-book build book -W` where MathJax is missing and no fetch script is at hand: one line naming the command."""
    import shutil

    jb = Path(sys.executable).with_name("jupyter-book")
    if not jb.exists():
        pytest.skip("jupyter-book is not installed (the book extra)")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "book", tmp_path / "book", symlinks=True,
                    ignore=shutil.ignore_patterns("chapters", "_build"))
    proc = subprocess.run([str(jb), "build", "book", "-W", "-n", "--keep-going"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert_one_line(proc.stderr, "MathJax is not on disk", "bash scripts/fetch_mathjax.sh")


def test_local_mathjax_check(tmp_path):
    (tmp_path / "book").mkdir()
    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        from local_mathjax import missing_mathjax
    finally:
        sys.path.pop(0)
    assert missing_mathjax(tmp_path / "book", ["../site"], "mathjax/tex-mml-chtml.js")
    js = tmp_path / "site" / "_static" / "mathjax" / "tex-mml-chtml.js"
    js.parent.mkdir(parents=True)
    js.write_text("// mathjax")
    assert not missing_mathjax(tmp_path / "book", ["../site"], "mathjax/tex-mml-chtml.js")
    assert not missing_mathjax(tmp_path / "book", [], "https://cdn.example/mathjax.js")


def test_doctests_of_the_helpers():
    """The examples in the docstrings of the text report, the bounds and the line progress hold."""
    import doctest

    from activation_wave.core import config
    from activation_wave.core import progress

    for module in (cli, config, progress):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_the_book_build_fetches_a_missing_mathjax_itself(tmp_path, capsys):
    """Item 8 of the book issue: `jupyter-book build book` on a fresh clone runs the fetch script itself
    (here a stand-in that writes the file), and stops in one line only when the fetch fails."""
    import types

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    try:
        import local_mathjax
    finally:
        sys.path.pop(0)
    (tmp_path / "book").mkdir()
    (tmp_path / "scripts").mkdir()
    script = tmp_path / "scripts" / "fetch_mathjax.sh"
    script.write_text('mkdir -p "$(dirname "$0")/../site/_static/mathjax"\n'
                      'echo "// mathjax" > "$(dirname "$0")/../site/_static/mathjax/tex-mml-chtml.js"\n')
    app = types.SimpleNamespace(confdir=str(tmp_path / "book"))
    config = types.SimpleNamespace(html_extra_path=["../site"], mathjax_path="mathjax/tex-mml-chtml.js")
    local_mathjax.check(app, config)  # fetched: no exit
    assert (tmp_path / "site" / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()
    assert "fetching it once" in capsys.readouterr().err
    script.write_text("exit 1\n")
    (tmp_path / "site" / "_static" / "mathjax" / "tex-mml-chtml.js").unlink()
    with pytest.raises(SystemExit) as stop:
        local_mathjax.check(app, config)
    assert stop.value.code == 2
    assert_one_line(capsys.readouterr().err.splitlines()[-1], "fetching it failed", "bash scripts/fetch_mathjax.sh")
