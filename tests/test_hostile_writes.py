"""Issue 43: files the study does not own stay untouched; every file read is checked where it is read.

Each row of :data:`CASES` runs one ``wave`` command (``activation_wave.cli.main``) on the tiny
world of ``tests/test_cli_errors.py`` and asserts what ``tests/test_hostile_inputs.py`` asserts:
exit code 2, ONE line on stderr (progress lines aside) naming the problem and the fix, no
traceback, every watched file byte-identical afterwards and nothing new left behind. Cases
that are not one command (the ledger, Ctrl-C in a chapter, a full disk, two processes at once)
are tests of their own below; :data:`COVERAGE` maps every numbered case of the issue to its
row or test, and a test checks that none is missing.

HOSTILE_NEEDLES=0 checks only the shape of the failure, not its words: how the issue's "before"
count was made on the code before the fix (commit 7b73ee8, ``git worktree add``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from helpers import copy_model_folder
from test_cli_errors import assert_one_line, run, world  # noqa: F401 - fixtures
import test_hostile_inputs as hostile
from test_hostile_inputs import _fake_llamacpp

ROOT = Path(__file__).resolve().parents[1]
NEEDLES = os.environ.get("HOSTILE_NEEDLES", "1") != "0"


@dataclass
class Ctx(hostile.Ctx):
    """issue 24's row context, plus repo paths a row watches."""

    watch: list[Path] = field(default_factory=list)

    def gone(self, p: Path) -> Path:
        """A path the command must not create."""
        return self.absent_path(p)

    def watched(self, p: Path) -> Path:
        """A path outside tmp whose files must stay byte-identical (a repo file or folder, shallow)."""
        self.watch.append(p)
        return p


def _write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def _snapshot(paths: list[Path], shallow: list[Path]) -> dict[str, str]:
    """sha256 of every file under ``paths`` (recursively) and directly in ``shallow`` folders."""
    out = {}
    for root in paths:
        for p in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if p.is_symlink():
                out[str(p)] = f"-> {os.readlink(p)}"
            elif p.exists():
                out[str(p)] = "<dir>" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    for root in shallow:
        for p in sorted(root.iterdir()) if root.is_dir() else [root]:
            # a socket or FIFO of another process (a clone under /tmp has them beside it) is listed, not read
            out[str(p)] = ("<dir>" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file()
                           else "<special>" if p.exists() else "-")
    return out


EMPTY_CONVERTER = """
    import sys, pathlib
    pathlib.Path(sys.argv[sys.argv.index("--outfile") + 1]).write_bytes(b"")  # 0 bytes, then exit 0
"""


def _fake_generation(ctx: Ctx) -> list[str]:
    """llama.cpp generation replaced by a fake that answers every prompt at once (no llama-server
    here), so a command that is not refused up front does write its --out; returns the argv head."""
    import activation_wave.engines.llamacpp_generate as gen
    from activation_wave.models.prompts import Response

    def generate(gguf, prompts, tokenizer, max_new_tokens, **kw):
        run = gen.GenerationRun(engine="fake llama.cpp", slots=1, tokens={p.id: [1, 2] for p in prompts}, wall_s=1.0)
        return [Response(p.id, [1], [1, 2], "length", "ab", split=p.split, engine=run.engine) for p in prompts], run, {}

    ctx.mp.setattr(gen, "gguf_of_model", lambda name: ctx.tmp / "fake.gguf")
    ctx.mp.setattr(gen, "gguf_tokenizer", lambda gguf: None)
    ctx.mp.setattr(gen, "generate_with_llamacpp", generate)
    return ["generate", *ctx.common(), "--engine", "llamacpp"]


def _model_folder(ctx: Ctx, **config) -> Path:
    """A copy of the world's tiny model whose config.json has ``config`` changed."""
    return copy_model_folder(ctx.world["model"], ctx.tmp / "m", **config)


def _results(ctx: Ctx, text: str) -> Path:
    """A results root holding ``text`` as the tiny model's smoke-profile 06_predictors.json."""
    root = ctx.tmp / "results"
    _write(root / "smoke" / ctx.world["model"].name / "06_predictors.json", text)
    ctx.mp.setenv("WAVE_RESULTS", str(root))
    return root


#: A config.json of 650 8B-sized blocks (the weights stay the tiny model's: nothing may load them).
BIG = {"num_hidden_layers": 650, "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
       "num_key_value_heads": 8, "vocab_size": 128256}

#: A chapter-6 document whose reference set has no ``layers`` (case 17).
NO_LAYERS = json.dumps({"name": "06_predictors", "config": {"model": "tiny-model"}, "written": "x",
                        "reference": "eagle3-default", "sets": [{"set": "eagle3-default"}],
                        "comparisons": [{"set": "a", "layers": [1, 2, 3], "n": 40, "delta": 0.1}]})


#: A drafter batch large enough that the number of layers read moves its memory estimate.
BIG_BATCH = "draft.batch_tokens=10000000"


def _memory_between(ctx: Ctx, k_low: int, k_high: int) -> None:
    """WAVE_MEMORY_GIB between the drafter step's estimate with ``k_low`` and ``k_high`` layers."""
    from dataclasses import replace

    from activation_wave.core.config import load_config, parse_overrides
    from activation_wave.study.estimate import estimate_peak_gib, model_shape

    common = ctx.common()
    sets = [a for flag, a in zip(common, common[1:]) if flag == "--set"] + [BIG_BATCH]
    cfg = load_config("smoke", parse_overrides(sets), model=str(ctx.world["model"]))
    shape = model_shape(str(ctx.world["model"]))
    low, high = (estimate_peak_gib(replace(cfg, select=replace(cfg.select, k=k)), shape)["drafter"]
                 for k in (k_low, k_high))
    assert high > low
    ctx.mp.setenv("WAVE_MEMORY_GIB", repr((low + high) / 2))


def _timings(ctx: Ctx, doc: object) -> list:
    """A marked run folder whose smoke timings.json is ``doc``; a study into it (09 only)."""
    run_dir = ctx.tmp / "run"
    _write(run_dir / ".wave-study-run", "")
    _write(run_dir / "results" / "smoke" / "timings.json", json.dumps(doc))
    return ["study", *ctx.common(), "--only", "09", "--no-build", "--book-dir", run_dir / "book"]


def _user_book_parent(ctx: Ctx) -> Path:
    d = ctx.tmp / "mine"
    _write(d / "_config.yml", "title: my own book\n")
    _write(d / "_toc.yml", "root: intro\n")
    return d


#: name -> (issue case, setup(ctx) -> argv, needles on the one stderr line)
Row = tuple[str, Callable[[Ctx], list], tuple[str, ...]]
CASES: dict[str, Row] = {
    "generate --out is its own prompt file": (
        "1", lambda c: [*_fake_generation(c), "--split", "eval", "--out", c.world["prompts"]],
        ("is a prompt file this command reads", "write the responses elsewhere")),
    "generate --out a file it did not write": (
        "1", lambda c: [*_fake_generation(c), "--out", _write(c.tmp / "notes.jsonl", "{}\n")],
        ("notes.jsonl exists and is not a file the study wrote", "--force")),
    "generate --out the committed team prompts": (
        "1", lambda c: [*_fake_generation(c), "--out", c.watched(ROOT / "data" / "prompts" / "team_prompts.jsonl")],
        ("team_prompts.jsonl exists and is not a file the study wrote",)),
    "study --book-dir D/book with the user's files in D": (
        "3", lambda c: ["study", *c.common(), "--no-build", "--book-dir", _user_book_parent(c) / "book"],
        ("holds files it did not make", "_config.yml")),
    "study --book-dir /book": (
        "3", lambda c: ["study", *c.common(), "--no-build", "--book-dir", c.gone(Path("/book"))],
        ("is or holds the repository",)),
    "select on a truncated 06_predictors.json": (
        "6", lambda c: (_results(c, '{"name": "06_predictors", "sets": [{"set": "eagle3'),
                        ["select", *c.common(), "--json"])[1],
        ("06_predictors.json is not valid JSON", "wave study")),
    "info on a folder whose config has one block more than its weights": (
        "7", lambda c: ["info", "--model", _model_folder(c, num_hidden_layers=5)],
        ("do not match its config.json", "missing", "num_hidden_layers")),
    "generate --temperature nan": ("8", lambda c: [*_fake_generation(c), "--out",
                                                   c.gone(c.tmp / "r.jsonl"), "--temperature", "nan", "--json"],
                                   ("--temperature nan", "in [0, 10]")),
    "generate --temperature inf": ("8", lambda c: [*_fake_generation(c), "--out",
                                                   c.gone(c.tmp / "r.jsonl"), "--temperature", "inf"],
                                   ("--temperature inf", "in [0, 10]")),
    "generate --seed -1": ("8", lambda c: [*_fake_generation(c), "--out",
                                           c.gone(c.tmp / "r.jsonl"), "--seed", "-1"], ("--seed -1", "in [0, 4294967295]")),
    "study --only ''": ("9", lambda c: ["study", *c.common(), "--only", "", "--no-build", "--book-dir",
                                        c.gone(c.tmp / "run") / "book"], ("--only ''", "every notebook")),
    "WAVE_CACHE empty": ("10", lambda c: (c.mp.setenv("WAVE_CACHE", ""), c.mp.chdir(c.tmp),
                                          ["info", "--model", c.world["model"]])[2],
                         ("WAVE_CACHE is set but empty", "unset WAVE_CACHE")),
    "export: the converter writes 0 bytes and exits 0": (
        "11", lambda c: (_fake_llamacpp(c, EMPTY_CONVERTER),
                         ["export", *c.common(), "--engine", "llamacpp", "--draft", c.world["draft"], "--out",
                          _write(c.tmp / "existing.gguf", b"GGUF my previous export")])[1],
        ("wrote 0 bytes", "existing.gguf is unchanged")),
    "info on a folder whose config has 650 big blocks": (
        "12", lambda c: ["info", "--model", _model_folder(c, **BIG)],
        ("step load needs", "8 GiB limit", "WAVE_MEMORY_GIB")),
    "speculate on a folder whose config has 650 big blocks": (
        "12", lambda c: ["speculate", "--model", _model_folder(c, **BIG), "--draft", c.world["draft"], "--prompts",
                         c.world["prompts"]], ("GiB of memory", "8 GiB limit")),
    "train-draft's memory guard counts --layers": (
        "13", lambda c: (_memory_between(c, 1, 4), ["train-draft", *c.common(), "--set", "select.k=1", "--set",
                                                    BIG_BATCH, "--layers",
                                                    "1,2,3,4", "--out", c.gone(c.tmp / "d")])[1],
        ("step drafter needs", "WAVE_MEMORY_GIB")),
    "study --book-dir book/chapters": (
        "14", lambda c: ["study", *c.common(), "--no-build", "--book-dir",
                         c.watched(ROOT / "book") / "chapters"], ("inside the committed book",)),
    "study --book-dir mybook (in the repo)": (
        "15", lambda c: (c.mp.chdir(ROOT), c.gone(ROOT / "mybook"), c.watched(ROOT / "_config.yml"),
                         ["study", *c.common(), "--no-build", "--book-dir", "mybook"])[3],
        ("is or holds the repository",)),
    "timings.json is a list": ("16", lambda c: _timings(c, [1, 2]), ("timings.json holds a JSON list", "delete it")),
    "timings.json lacks seconds": ("16", lambda c: _timings(c, {"longest": {"09_performance": {"finished": "x"}}}),
                                   ("timings.json", "no number 'seconds'")),
    "select: reference set without layers": (
        "17", lambda c: (_results(c, NO_LAYERS), ["select", *c.common(), "--json"])[1],
        ("06_predictors.json", "has no 'layers' list", "wave study")),
    # the poor messages and leftovers
    "generate --check-against an empty file": (
        "msg", lambda c: [*_fake_generation(c), "--out", c.gone(c.tmp / "r.jsonl"),
                          "--check-against", _write(c.tmp / "empty.jsonl", b"")],
        ("empty.jsonl holds no responses",)),
    "generate --check-against a binary file": (
        "msg", lambda c: [*_fake_generation(c), "--out", c.gone(c.tmp / "r.jsonl"),
                          "--check-against", _write(c.tmp / "bin.jsonl", bytes(range(256)) * 4)],
        ("bin.jsonl is not a responses .jsonl",)),
    "dry-run strength.singles=999": ("msg", lambda c: ["dry-run", "--set", "strength.singles=999"],
                                     ("strength.singles = [999]", "1..30")),
    "study with a bad third.model": (
        "msg", lambda c: ["study", *c.common(), "--set", "third.model=no-such-model", "--no-build", "--book-dir",
                          c.gone(c.tmp / "run") / "book"], ("third.model = 'no-such-model'", "--set third.model=")),
    "bench --out a JSON object that is not a benchmarks file": (
        "2", lambda c: ["bench", "--out", _write(c.tmp / "package.json", '{"name": "mine"}'), "--only", "metrics"],
        ("package.json", "not one written by `wave bench`")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_write_exits_2_with_one_line_and_touches_nothing(case, world, run, tmp_path, monkeypatch):
    _, setup, needles = CASES[case]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ctx = Ctx(world, tmp_path, monkeypatch)
    argv = setup(ctx)
    deep = [tmp_path, world["draft"], world["prompts"], world["model"], world["cache"] / "capture"]
    before = _snapshot(deep, ctx.watch)
    t0 = time.time()
    code, out, err = run(argv)
    assert code == 2, (case, err)
    assert_one_line(err, *(needles if NEEDLES else ()))
    if "--json" in map(str, argv):
        assert out.strip() == "" or json.loads(out) is not None
    assert _snapshot(deep, ctx.watch) == before, case  # nothing lost, changed or left behind
    assert not any(p.exists() for p in ctx.absent), case
    assert time.time() - t0 < 60, case  # refused up front


def test_the_fake_generation_writes_a_new_out_and_replaces_its_own(world, run, tmp_path, monkeypatch):
    """The rows' fake llama.cpp does generate: a new --out is written, and written again over itself."""
    ctx = Ctx(world, tmp_path, monkeypatch)
    out = tmp_path / "r.jsonl"
    for _ in range(2):
        code, _, err = run([*_fake_generation(ctx), "--split", "eval", "--out", out, "--json"])
        assert code == 0, err
        assert json.loads(out.read_text().splitlines()[0])["schema"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["r.jsonl"]


# ----------------------------------------------------------------------------- the ledger (cases 4, 5)


def _entry(root: Path, layers=(1, 2), capture: str = "tiny-cap") -> Path:
    """A ledger entry filed under the name its layers and config give; returns the drafter folder."""
    from activation_wave.core.config import DraftConfig
    from activation_wave.draft import ledger
    from activation_wave.draft.experiment import drafter_dir

    cfg = DraftConfig()
    drafter = drafter_dir(SimpleNamespace(path=root / "cache" / capture), list(layers), cfg)
    ledger.record_training(str(root / "ledger"), drafter, list(layers), asdict(cfg), {"tokens_per_s": 1.0},
                           digest="d" * 64)
    return drafter


RECORDER = """
import sys
from activation_wave.draft import ledger
root, drafter, who, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for i in range(n):
    ledger.record_score(root, drafter, f"{who}-{i}", {"tau_offline": 1.0 + i / 1000, "per_record": []})
"""


def test_two_processes_recording_into_one_ledger_entry_lose_nothing(tmp_path):
    """Case 4: two real processes record 150 scores each into one entry at once; all 300 are kept."""
    from activation_wave.draft import ledger

    drafter = _entry(tmp_path)
    root = str(tmp_path / "ledger")
    procs = [subprocess.Popen([sys.executable, "-c", RECORDER, root, str(drafter), who, "150"],
                              stderr=subprocess.PIPE, text=True) for who in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    scores = ledger.read(root, drafter)["scores"]
    assert len(scores) == 300 and {k.split("-")[0] for k in scores} == {"a", "b"}
    assert sorted(p.name for p in ledger.ledger_file(root, drafter).parent.iterdir()) == [f"{drafter.name}.json"]


def test_an_entry_filed_under_another_drafters_name_is_refused_in_one_line(tmp_path):
    """Case 5: another drafter's entry copied over this one's is refused, naming the file; it is not changed."""
    from activation_wave.draft import ledger

    mine, other = _entry(tmp_path, (1, 2)), _entry(tmp_path, (2, 3))
    root = str(tmp_path / "ledger")
    path = ledger.ledger_file(root, mine)
    path.write_bytes(ledger.ledger_file(root, other).read_bytes())
    before = path.read_bytes()
    with pytest.raises(ledger.LedgerError) as info:
        ledger.read(root, mine)
    msg = str(info.value)
    assert "\n" not in msg and str(path) in msg and "another drafter's entry" in msg and "layers [2, 3]" in msg
    assert path.read_bytes() == before
    elsewhere = tmp_path / "cache" / "other-cap" / "drafters" / other.name  # same drafter, another capture
    _write(ledger.ledger_file(root, elsewhere), ledger.ledger_file(root, other).read_bytes())
    with pytest.raises(ledger.LedgerError, match="capture 'tiny-cap', not the folder 'other-cap'"):
        ledger.read(root, elsewhere)


def test_every_committed_ledger_entry_passes_the_check_and_reads_without_a_cpu():
    """The committed entries (written before the check and the ``cpu`` field) read as they are."""
    from activation_wave.draft import ledger

    paths = sorted((ROOT / "data" / "drafters").glob("*/*.json"))
    assert paths
    for p in paths:
        doc = json.loads(p.read_text())
        ledger.check_entry(p, doc)
        assert ledger.entry_cpu(doc) is None or ledger.entry_cpu(doc)["model"]


def test_new_entries_record_the_cpu_that_trained_them(tmp_path):
    from activation_wave.draft import ledger

    doc = ledger.read(str(tmp_path / "ledger"), _entry(tmp_path))
    assert doc["cpu"] == ledger.cpu_record() and set(doc["cpu"]["flags"] or []) <= set(ledger.CPU_FLAGS)
    assert doc["capture"] == "tiny-cap"
    assert ledger.cpu_record("flags : avx2 sse\nmodel name : X\n") == {"model": "X", "flags": ["avx2"]}


def test_nan_scores_name_the_entry_and_the_drafter(tmp_path):
    from activation_wave.draft import ledger

    drafter = _entry(tmp_path)
    root = str(tmp_path / "ledger")
    ledger.record_score(root, drafter, "k", {"tau_offline": math.nan, "per_record": [{"tau": math.nan}]})
    with pytest.raises(ledger.LedgerError) as info:
        ledger.read_score(root, drafter, "k")
    assert "\n" not in str(info.value) and drafter.name in str(info.value) and str(ledger.ledger_file(root, drafter)) \
        in str(info.value)


def test_a_corrupt_entry_is_reported_on_the_study_log_too(tmp_path, monkeypatch):
    from activation_wave.core.progress import RELAY_ENV
    from activation_wave.draft import ledger

    drafter = _entry(tmp_path)
    root = str(tmp_path / "ledger")
    ledger.ledger_file(root, drafter).write_text('{"version": 1, "train_lo')
    relay = tmp_path / "relay.log"
    monkeypatch.setenv(RELAY_ENV, str(relay))
    with pytest.warns(UserWarning, match="unreadable"):
        assert ledger.read(root, drafter) is None
    assert "unreadable" in relay.read_text()


def test_a_read_only_ledger_is_refused_before_training_naming_draft_ledger(tmp_path, monkeypatch):
    """The check train_or_load makes before training (os.access is faked: this runs as root)."""
    from activation_wave.draft import ledger

    drafter = _entry(tmp_path)
    folder = ledger.ledger_file(str(tmp_path / "ledger"), drafter).parent
    real = os.access
    monkeypatch.setattr(ledger.os, "access", lambda p, mode: False if Path(p) == folder else real(p, mode))
    with pytest.raises(ledger.LedgerError, match=r"not writable \(draft.ledger\).*--set draft.ledger="):
        ledger.check_writable(str(tmp_path / "ledger"), drafter)


# ----------------------------------------------------------------------------- a full disk (case 2)

FULL_DISK = """
import errno, json, os, resource, signal, sys
from pathlib import Path
from activation_wave.core import results
from activation_wave.core.config import load_config
how, path = sys.argv[1], Path(sys.argv[2])
doc = results.load_benchmarks(path)
doc["new_entry"] = {"values": list(range(20000))}
if how == "rlimit":  # the file system refuses bytes past this size, as a full disk would
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
else:  # ENOSPC from the file system on the data's fsync
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    os.fsync = full
try:
    results.write_benchmarks(path, doc)
except Exception as exc:
    print(type(exc).__name__, exc, file=sys.stderr)
    sys.exit(2)
"""


@pytest.mark.parametrize("how", ["rlimit", "enospc"])
def test_a_full_disk_while_writing_a_results_file_leaves_the_previous_file(tmp_path, how):
    """Case 2: the write fails part way (a file-size limit, or ENOSPC); the previous 11-entry file
    is byte-identical and no temporary file is left beside it."""
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps({"machine": {"cpus": 2}, **{f"entry{i}": {"x": [i] * 50} for i in range(11)}}, indent=1))
    before = path.read_bytes()
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, how, str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("WriteFailed could not write") and "previous file is unchanged" in proc.stderr
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["benchmarks.json"]


def test_save_result_refuses_to_replace_a_file_it_did_not_write(tmp_path):
    from activation_wave.core.config import load_config
    from activation_wave.core.files import WriteRefused
    from activation_wave.core.results import results_dir, save_result

    cfg = load_config("smoke")
    mine = _write(results_dir(cfg, tmp_path) / "x.json", "my notes\n")
    with pytest.raises(WriteRefused, match="not a file the study wrote"):
        save_result("x", {"a": 1}, cfg, tmp_path)
    assert mine.read_text() == "my notes\n"
    save_result("y", {"a": 1}, cfg, tmp_path)
    save_result("y", {"a": 2}, cfg, tmp_path)  # its own file: replaced
    assert json.loads((mine.parent / "y.json").read_text())["a"] == 2


def test_papermill_parameters_of_the_wrong_type_are_config_errors(tmp_path):
    from activation_wave.core.config import ConfigError, load_config
    from activation_wave.core.files import WriteRefused
    from activation_wave.core.results import save_result
    from activation_wave.study.steps import notebook_config

    with pytest.raises(ConfigError, match="-p overrides 5: must be a JSON object"):
        notebook_config("smoke", "", 5)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="-p model 5"):
        notebook_config("smoke", 5)  # type: ignore[arg-type]
    root = _write(tmp_path / "results_root", "a file")
    with pytest.raises(WriteRefused, match="results_root"):
        save_result("x", {"a": 1}, load_config("smoke"), root)


# ----------------------------------------------------------------------------- children die with their parent


SLOW_CONVERTER = """
    import os, sys, time, pathlib
    out = pathlib.Path(sys.argv[sys.argv.index("--outfile") + 1])
    pathlib.Path(os.environ["CONVERTER_PID"]).write_text(str(os.getpid()))
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_sigterm_during_export_stops_the_converter_and_removes_the_work_folder(world, tmp_path, sig):
    """SIGTERM: exit 143, one line, the converter stopped, its work folder removed. SIGKILL (no
    cleanup can run): the converter still dies with its parent (PR_SET_PDEATHSIG)."""
    root = tmp_path / "llamacpp"
    (root / "src").mkdir(parents=True)
    (root / "src" / "convert_hf_to_gguf.py").write_text(textwrap.dedent(SLOW_CONVERTER))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    pid_file = tmp_path / "converter.pid"
    env = {**os.environ, "LLAMACPP_DIR": str(root), "CONVERTER_PID": str(pid_file), "WAVE_CACHE": str(world["cache"]),
           "HF_HUB_OFFLINE": "1"}
    argv = ["export", *map(str, world["common"]), "--engine", "llamacpp", "--draft", str(world["draft"]), "--out",
            str(out_dir / "d.gguf")]
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from activation_wave import cli; "
                             "sys.exit(cli.main(sys.argv[1:]))", *argv], env=env, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while not pid_file.exists() and time.time() - t0 < 120 and proc.poll() is None:
        time.sleep(0.2)
    assert pid_file.exists(), proc.stderr.read() if proc.poll() is not None else "converter never started"
    child = int(pid_file.read_text())
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if sig == signal.SIGTERM:
        assert proc.returncode == 143, err
        assert_one_line(err, "terminated (SIGTERM)")
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)
    if sig == signal.SIGTERM:
        assert list(out_dir.iterdir()) == []  # no .d.gguf.export-* folder left


NOTEBOOK = """# %% tags=["parameters"]
profile = "smoke"
model = ""

# %%
import time
time.sleep(120)
"""

DRIVE = """
import signal
import sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a launcher's `cmd &` starts children with SIGINT ignored
from pathlib import Path
import activation_wave.study.runner as study
from activation_wave import cli
src, book = Path(sys.argv[1]), Path(sys.argv[2])
study._runs = lambda *a, **k: [("99_sleep", src, book / "chapters" / "99_sleep.ipynb", {"profile": "smoke"}, None)]
sys.exit(cli.main(["study", "--no-build", "--book-dir", str(book)]))
"""


@pytest.mark.slow
def test_ctrl_c_in_a_chapter_prints_one_line(tmp_path):
    """Case 18: SIGINT while a chapter's cell runs: exit 130 and one line, no kernel traceback."""
    src = _write(tmp_path / "99_sleep.py", NOTEBOOK)
    proc = subprocess.Popen([sys.executable, "-c", DRIVE, str(src), str(tmp_path / "run" / "book")],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT)
    seen = ""
    t0 = time.time()
    while "cell 2/3" not in seen and time.time() - t0 < 180:
        seen += proc.stderr.readline()
    time.sleep(3)  # inside the sleeping cell
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, seen + rest
    assert_one_line(seen + rest, "wave study: interrupted")
    for p in (ROOT / "build" / "notebooks").glob("99_sleep*"):
        p.unlink()


# ----------------------------------------------------------------------------- the property


GGUF_CONVERTER = """
    import struct, sys, pathlib
    out = pathlib.Path(sys.argv[sys.argv.index("--outfile") + 1])
    out.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 0))  # a header with one tensor
"""


def _hostile_targets(world: dict, tmp: Path) -> list[Path]:
    """Existing files the study did not write, folders holding them, and the repository's own folders and files."""
    user = tmp / "user"
    files = [_write(user / "notes.txt", "mine\n"), _write(user / "data.json", '{"mine": 1}'),
             _write(user / "list.json", "[1, 2]"), _write(user / "r.jsonl", '{"id": "x"}\n'),
             _write(user / "sub" / "model.gguf", b"not a gguf")]
    repo = [ROOT, ROOT / "data", ROOT / "data" / "prompts", ROOT / "book", ROOT / "book" / "chapters", ROOT / "lib",
            ROOT / "README.md", ROOT / "_config.yml", ROOT / "data" / "prompts" / "team_prompts.jsonl",
            Path("/")]
    return [*files, user, user / "sub", world["prompts"], world["model"], world["draft"], *repo]


def test_no_command_changes_a_file_it_did_not_create(world, run, tmp_path, monkeypatch):
    """hypothesis: random --out / --book-dir targets (existing files, parents of existing files,
    the repo's own folders) for every command that writes: each refuses (exit 2, one line), and
    no file it did not create changes."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    import activation_wave.benchmarks.suite as suite

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    targets = _hostile_targets(world, tmp_path)
    common = [str(a) for a in world["common"]]
    # fakes that do write, so that a target the guards let through would really be replaced
    ctx = Ctx(world, tmp_path / "fakes", monkeypatch)
    ctx.tmp.mkdir()
    generate = _fake_generation(ctx)
    _fake_llamacpp(ctx, GGUF_CONVERTER)
    monkeypatch.setattr(suite, "entries", lambda: {"metrics": lambda cfg: {"fake": 1}})
    commands: dict[str, Callable[[Path], list[str]]] = {
        "generate": lambda t: [*map(str, generate), "--out", str(t)],
        "bench": lambda t: ["bench", "--out", str(t), "--only", "metrics"],
        "export": lambda t: ["export", *common, "--engine", "llamacpp", "--draft", str(world["draft"]), "--out", str(t)],
        "train-draft": lambda t: ["train-draft", *common, "--layers", "1,2", "--out", str(t)],
        "study": lambda t: ["study", *common, "--no-build", "--book-dir", str(t)],
        "study (t/book)": lambda t: ["study", *common, "--no-build", "--book-dir", str(t / "book")],
    }

    for name, suffix in (("generate", "r.jsonl"), ("bench", "b.json"), ("export", "d.gguf")):  # the fakes write
        fresh = ctx.tmp / "fresh" / suffix
        fresh.parent.mkdir(exist_ok=True)
        code, _, err = run(commands[name](fresh))
        assert code == 0 and fresh.stat().st_size > 0, (name, err)

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(command=st.sampled_from(sorted(commands)), target=st.sampled_from(targets))
    def check(command: str, target: Path) -> None:
        watched = [target, target.parent] if target != Path("/") else [target]
        deep = [p for p in (tmp_path / "user", world["draft"], world["model"]) if p.exists()]
        before = _snapshot(deep, watched)
        code, _, err = run(commands[command](target))
        assert code == 2, (command, target, err)
        assert_one_line(err)
        assert _snapshot(deep, watched) == before, (command, target)

    check()


# ----------------------------------------------------------------------------- coverage of the issue

COVERAGE = {
    "1": "rows 'generate --out ...'", "2": "test_a_full_disk_while_writing_a_results_file_leaves_the_previous_file",
    "3": "rows 'study --book-dir D/book ...', '/book'", "4": "test_two_processes_recording_into_one_ledger_entry_lose_nothing",
    "5": "test_an_entry_filed_under_another_drafters_name_is_refused_in_one_line", "6": "row 'select on a truncated ...'",
    "7": "row 'info on a folder whose config has one block more ...'", "8": "rows 'generate --temperature/--seed'",
    "9": "row 'study --only'", "10": "row 'WAVE_CACHE empty'", "11": "row 'export: the converter writes 0 bytes'",
    "12": "row 'info on a folder whose config has 650 big blocks'", "13": "row 'train-draft's memory guard ...'",
    "14": "row 'study --book-dir book/chapters'", "15": "row 'study --book-dir mybook'",
    "16": "rows 'timings.json ...'", "17": "row 'select: reference set without layers'",
    "18": "test_ctrl_c_in_a_chapter_prints_one_line",
}


def test_every_case_of_issue_43_has_a_row_or_a_test():
    assert set(COVERAGE) == {str(i) for i in range(1, 19)}
    rows = {item for item, _, _ in CASES.values()}
    assert {k for k, v in COVERAGE.items() if v.startswith("row")} <= rows
    names = set(globals())
    assert {v for v in COVERAGE.values() if v.startswith("test_")} <= names
