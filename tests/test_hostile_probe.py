"""Issue 58: the 20 inputs a new hostile probe found, each with a clear answer.

Every row of :data:`CASES` runs one ``wave`` command through ``activation_wave.cli.main`` (or,
for the notebook rows, the papermill parameters parser ``notebook_config``) on the tiny world
of ``tests/test_cli_errors.py`` and asserts what the rows of ``tests/test_hostile_inputs.py``
assert: exit code 2, ONE line on stderr (progress lines aside) naming the problem and the fix,
no traceback, every watched file byte-identical afterwards, nothing new left behind, and a
refusal up front. Where a user expects the input to work (a UTF-8 byte-order mark, CRLF line
ends) or the fix is a cleanup (stale temporaries), the row expects exit 0, no error line and
no traceback, and its ``check`` asserts what changed and that nothing else did.

:data:`COVERAGE` maps each numbered case of the issue (and its "also seen": a read-only
cache) to its rows, and a test checks that none is missing. The property test at the end
covers ``capture.layers``: ``wave dry-run``, a notebook's parser and the capture step itself
accept and refuse the same values.

HOSTILE_NEEDLES=0 checks only the shape of each failure (exit code, one line, nothing lost),
not its words: how the "before" count of this table was made on the code before the fix.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers import copy_model_folder
from test_cli_errors import PROGRESS, assert_one_line, copy_draft, run, world  # noqa: F401 - fixtures
from test_hostile_inputs import Ctx, _gguf, _snapshot, _write

NEEDLES = os.environ.get("HOSTILE_NEEDLES", "1") != "0"

# ----------------------------------------------------------------------------- row helpers


def _speculate(ctx: Ctx, prompts: Path | str | None = None, *extra: str, draft: Path | None = None) -> list:
    return ["speculate", *ctx.common(), "--draft", draft or ctx.world["draft"], "--prompts",
            prompts or ctx.world["prompts"], *extra]


def _no_model_load(ctx: Ctx) -> None:
    """The row must refuse before any model loads: loading one is an AssertionError (a traceback)."""
    import activation_wave.study.steps as steps

    def loaded(cfg):
        raise AssertionError(f"the model {cfg.model} was loaded before the input was refused")

    ctx.mp.setattr(steps, "get_target", loaded)


def _lines(ctx: Ctx, *lines: str | bytes, name: str = "p.jsonl") -> Path:
    """A prompt file of these raw lines (text is written as UTF-8, bytes as they are)."""
    data = b"".join(x if isinstance(x, bytes) else x.encode("utf-8") for x in lines)
    return _write(ctx.tmp / name, data)


def _model_folder(ctx: Ctx, drop: tuple[str, ...] = (), **config) -> Path:
    """A copy of the world's tiny model whose config.json has ``config`` set and ``drop`` removed."""
    return copy_model_folder(ctx.world["model"], ctx.tmp / "m", drop, **config)


def _edited_ids(ctx: Ctx, ids: list[int], *, spec_too: bool = False, keep_digest: bool = True) -> Path:
    """A copy of the world's drafter (trained on [1, 2, 3]) whose config.json names ``ids`` (both
    keys, as ``to_hf_config`` writes them) and whose provenance.json records them too: the careful
    hand edit of the issue. ``spec_too``: also provenance.json's ``spec.layers``; ``keep_digest``
    False: drop ``drafter_sha256`` (a checkpoint written before it was recorded)."""
    d = copy_draft(ctx.world, ctx.tmp)
    cfg = json.loads((d / "config.json").read_text())
    cfg["eagle_aux_hidden_state_layer_ids"] = ids
    if min(ids) > 0:
        cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [i - 1 for i in ids]
    else:
        cfg["eagle_config"].pop("eagle_aux_hidden_state_layer_ids", None)
    (d / "config.json").write_text(json.dumps(cfg, indent=1))
    prov = json.loads((d / "provenance.json").read_text())
    prov["layers"] = ids
    if spec_too:
        prov["spec"]["layers"] = ids
    if not keep_digest:
        prov.pop("drafter_sha256", None)
    (d / "provenance.json").write_text(json.dumps(prov, indent=1))
    return d


def _provenance(ctx: Ctx, **fields) -> Path:
    d = copy_draft(ctx.world, ctx.tmp)
    prov = json.loads((d / "provenance.json").read_text())
    prov.update(fields)
    (d / "provenance.json").write_text(json.dumps(prov))
    return d


def _cached_gguf(ctx: Ctx) -> tuple[Path, Path]:
    """A small GGUF and a cache folder of the row's own (WAVE_CACHE) that knows its hash (as after
    an earlier command) but holds no converted weights: (gguf, cache)."""
    from activation_wave.core.hashing import file_sha256_memo

    cache = ctx.tmp / "cache"
    (cache / "models").mkdir(parents=True)
    ctx.mp.setenv("WAVE_CACHE", str(cache))
    gguf = _gguf(ctx, None)
    file_sha256_memo(gguf.resolve())
    return gguf, cache


def _fake_dequantize(ctx: Ctx) -> None:
    """transformers' GGUF loading replaced by the world's tiny model and tokenizer (the real one
    needs a whole GGUF model): what the study does with the result is what the row tests."""
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(ctx.world["model"])
    tok = AutoTokenizer.from_pretrained(ctx.world["model"])
    ctx.mp.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **kw: model)
    ctx.mp.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **kw: tok)


def _disk_full_while_converting(ctx: Ctx) -> list:
    """``wave info`` on a GGUF whose dequantized weights do not fit the disk: safetensors raises
    its own error type (not an OSError), as it does on a full disk."""
    import safetensors.torch
    from safetensors import SafetensorError

    gguf, _ = _cached_gguf(ctx)
    _fake_dequantize(ctx)

    def full(*a, **kw):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: '
                              '"No space left on device" })')

    ctx.mp.setattr(safetensors.torch, "save_model", full)
    return ["info", "--model", gguf]


def _read_only_cache(ctx: Ctx) -> list:
    """``wave info`` on a GGUF with a read-only cache (EROFS on every file created in it; as root,
    permission bits would not stop the test): refused before the dequantization, which fails if reached."""
    import transformers

    gguf, cache = _cached_gguf(ctx)
    real = tempfile.mkstemp

    def refuse(*a, dir=None, **kw):
        if dir is not None and (Path(dir) == cache or cache in Path(dir).parents):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(Path(dir) / "x"))
        return real(*a, dir=dir, **kw)

    def dequantize(*a, **kw):
        raise AssertionError("dequantized into a read-only cache")

    ctx.mp.setattr(tempfile, "mkstemp", refuse)
    ctx.mp.setattr(transformers.AutoModelForCausalLM, "from_pretrained", dequantize)
    ctx.mp.setattr(transformers.AutoTokenizer, "from_pretrained", dequantize)
    return ["info", "--model", gguf]


def _read_only_fresh_cache(ctx: Ctx) -> list:
    """``wave capture`` on the tiny model with an empty read-only cache (EROFS on every folder or
    file created in it): refused before a response is generated (generating one fails the row)."""
    import activation_wave.models.prompts as prompts

    cache = ctx.tmp / "cache"
    cache.mkdir()
    ctx.mp.setenv("WAVE_CACHE", str(cache))
    real_mkdir, real_mkstemp = Path.mkdir, tempfile.mkstemp

    def inside(p) -> bool:
        return p is not None and cache in Path(p).parents

    def mkdir(self, *a, **kw):
        if inside(self) and not self.is_dir():
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        return real_mkdir(self, *a, **kw)

    def mkstemp(*a, dir=None, **kw):
        if dir is not None and (Path(dir) == cache or inside(dir)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(Path(dir) / "x"))
        return real_mkstemp(*a, dir=dir, **kw)

    def generate(*a, **kw):
        raise AssertionError("responses generated into a read-only cache")

    ctx.mp.setattr(Path, "mkdir", mkdir)
    ctx.mp.setattr(tempfile, "mkstemp", mkstemp)
    ctx.mp.setattr(prompts, "_generate_batch", generate)
    return ["capture", *ctx.common()]


def _link_to_empty(ctx: Ctx) -> Path:
    mine = ctx.tmp / "mine"
    mine.mkdir()
    link = ctx.tmp / "link"
    link.symlink_to(mine, target_is_directory=True)
    return link


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _stale_temporaries(ctx: Ctx) -> list:
    """A bench --out beside temporaries of its name: one of a killed run (its process gone), one of
    a version before temporaries named their process (two hours old), one of a live writer (this
    process's parent) and a user's file of a similar name; the benchmark itself is a fake that
    writes at once (as in tests/test_hostile_writes.py)."""
    import activation_wave.benchmarks.suite as suite

    ctx.mp.setattr(suite, "entries", lambda: {"metrics": lambda cfg: {"fake": 1}})
    _write(ctx.tmp / f".b.json.{_dead_pid()}-k1lled00.tmp", '{"half": ')
    old = _write(ctx.tmp / ".b.json.k3j4h5g6.tmp", "older version")
    os.utime(old, (time.time() - 7200,) * 2)
    _write(ctx.tmp / f".b.json.{os.getppid()}-l1ve0000.tmp", "a live writer's")
    _write(ctx.tmp / ".b.json.notes.tmp", "the user's")
    return ["bench", "--out", ctx.tmp / "b.json", "--only", "metrics"]


def _stale_swept(ctx: Ctx, run: Callable, before: dict, after: dict, out: str) -> None:
    """The killed run's and the old version's temporaries are gone, b.json is written, and
    nothing else changed: the live writer's temporary and the user's file are untouched."""
    stale = {p for p in before if p.endswith(("-k1lled00.tmp", ".k3j4h5g6.tmp"))}
    assert len(stale) == 2 and set(before) - set(after) == stale, sorted(set(before) - set(after))
    assert set(after) - set(before) == {str(ctx.tmp / "b.json")}, sorted(set(after) - set(before))
    assert all(after[p] == before[p] for p in after if p in before)
    assert json.loads((ctx.tmp / "b.json").read_text())["metrics"]["fake"] == 1


def _same_results_as_plain(ctx: Ctx, run: Callable, before: dict, after: dict, out: str) -> None:
    """A BOM / CRLF prompt file decodes exactly what the plain UTF-8 file decodes (ids and tokens)."""
    assert after == before  # the prompt file is read, not rewritten; nothing is left behind
    with tempfile.TemporaryDirectory() as d:
        plain = _write(Path(d) / "plain.jsonl", "".join(json.dumps({"id": f"q{i}", "prompt": t}) + "\n"
                                                        for i, t in enumerate(TEXTS)))
        code, ref, err = run(_speculate(ctx, plain, "--json"))
    assert code == 0, err
    got = json.loads(out)["results"]
    assert [r["id"] for r in got] == ["q0", "q1"] and got == json.loads(ref)["results"]


TEXTS = ("count 1 2 3", "count 4 5 6")


@dataclass(frozen=True)
class Row:
    """One case: its issue item, the command (a list for cli.main; a dict or a JSON text for a
    notebook's ``overrides``), the words its one stderr line must hold, the exit code and, for
    rows that succeed, a check of what changed ``(ctx, run, before, after, stdout)``."""

    item: str
    setup: Callable[[Ctx], list | dict | str]
    needles: tuple[str, ...] = ()
    code: int = 2
    check: Callable | None = field(default=None, compare=False)


DIGITS = "9" * 5000
CASES: dict[str, Row] = {
    # 1: a key under a scalar
    "dry-run --set model.x=1": Row("1", lambda c: ["dry-run", "--profile", "smoke", "--set", "model.x=1"],
                                   ("override 'model.x'", "model is one value", "--model NAME")),
    "--set capture.batch_size.x=1": Row("1", lambda c: ["dry-run", "--set", "capture.batch_size.x=1"],
                                        ("capture.batch_size is one value", "--set capture.batch_size=VALUE")),
    "notebook model.x=1": Row("1", lambda c: {"model.x": 1}, ("override 'model.x'", "model is one value")),
    # 2: a lone surrogate, before any model loads
    "speculate: prompt with a lone surrogate": Row(
        "2", lambda c: (_no_model_load(c), _speculate(c, _lines(c, '{"prompt": "ok"}\n', '{"prompt": "hi \\ud800 there"}\n')))[1],
        ("p.jsonl:2", '"prompt" holds a lone surrogate \\ud800', "remove it")),
    # 3: a config the model library's validation refuses
    "info: hidden_size not a multiple of the heads": Row(
        "3", lambda c: ["info", "--model", _model_folder(c, drop=("head_dim",), hidden_size=30)],
        ("config.json: hidden_size 30 is not a multiple of num_attention_heads 4", "fix config.json")),
    "info: hidden_size 48, weights 32": Row(
        "3", lambda c: ["info", "--model", _model_folder(c, hidden_size=48)],
        ("do not match its config.json", "hidden_size is 48", "hidden_size: 32")),
    # 4: a size that is a string, before the memory estimate
    "info: hidden_size \"32\"": Row("4", lambda c: ["info", "--model", _model_folder(c, hidden_size="32")],
                                    ('hidden_size is "32" (a string)', '"hidden_size": 32 (no quotes)')),
    "dry-run: num_hidden_layers 4.0": Row("4", lambda c: ["dry-run", "--model", _model_folder(c, num_hidden_layers=4.0)],
                                          ("num_hidden_layers is 4.0", "whole number")),
    # 5: a full disk while the converted weights are saved
    "info: disk full while saving the dequantized weights": Row(
        "5", _disk_full_while_converting, ("cannot write the cache", "No space left on device", "WAVE_CACHE",
                                           "free some space")),
    # 6: an endless line
    "speculate --prompts /dev/zero": Row("6", lambda c: (_no_model_load(c), _speculate(c, "/dev/zero"))[1],
                                         ("/dev/zero:1", "longer than 4 MiB", "lines up to 4 MiB")),
    # 7: ids edited in config.json and provenance.json together
    "drafter ids edited in config.json and provenance.json": Row(
        "7", lambda c: _speculate(c, draft=_edited_ids(c, [0, 2, 3])),
        ("names layer ids [0, 2, 3]", "trained on [1, 2, 3]", "drafter_sha256")),
    "drafter ids edited everywhere but the digest": Row(
        "7", lambda c: _speculate(c, draft=_edited_ids(c, [0, 2, 3], spec_too=True)),
        ("names layer ids [0, 2, 3]", "drafter_sha256", "does not match")),
    "drafter without a digest, ids edited": Row(
        "7", lambda c: _speculate(c, draft=_edited_ids(c, [0, 2, 3], keep_digest=False)),
        ("names layer ids [0, 2, 3]", "spec.layers", "trained on [1, 2, 3]")),
    # 8-10: dry-run checks capture.layers as the capture does
    "dry-run capture.layers=5,5": Row("8", lambda c: ["dry-run", "--set", "capture.layers=5,5"],
                                      ("capture.layers = [5, 5]", "ids [5] are repeated", "--set capture.layers=")),
    "dry-run capture.layers=0,31,99": Row("9", lambda c: ["dry-run", "--set", "capture.layers=0,31,99"],
                                          ("capture.layers = [0, 31, 99]", "ids [31, 99] are outside 0..30")),
    "dry-run capture.layers=-1,3": Row("10", lambda c: ["dry-run", "--json", "--set", "capture.layers=-1,3"],
                                       ("capture.layers = [-1, 3]", "ids [-1] are outside 0..30")),
    "notebook capture.layers=[5, 5]": Row("8", lambda c: {"capture.layers": [5, 5]}, ("capture.layers = [5, 5]",)),
    "capture on the tiny model, capture.layers=1,9": Row(
        "9", lambda c: (_no_model_load(c), ["capture", *c.common(), "--set", "capture.layers=1,9"])[1],
        ("capture.layers = [1, 9]", "ids [9] are outside 0..4")),
    # 11: an integer of 5,000 digits
    "--set capture.batch_size=<5000 digits>": Row(
        "11", lambda c: ["dry-run", "--set", f"capture.batch_size={DIGITS}"],
        ("capture.batch_size", "5000 digits", "--set capture.batch_size=")),
    "notebook capture.batch_size=<5000 digits> (a JSON number)": Row(
        "11", lambda c: '{"capture.batch_size": ' + DIGITS + "}", ("capture.batch_size", "5000 digits")),
    # 12: a UTF-8 byte-order mark (and CRLF) is read
    "speculate: UTF-8 BOM and CRLF prompt file": Row(
        "12", lambda c: _speculate(c, _lines(c, b"\xef\xbb\xbf", *(json.dumps({"id": f"q{i}", "prompt": t}) + "\r\n"
                                                                    for i, t in enumerate(TEXTS))), "--json"),
        code=0, check=_same_results_as_plain),
    "speculate: CRLF prompt file": Row(
        "12", lambda c: _speculate(c, _lines(c, *(json.dumps({"id": f"q{i}", "prompt": t}) + "\r\n"
                                                  for i, t in enumerate(TEXTS))), "--json"),
        code=0, check=_same_results_as_plain),
    # 13: UTF-16 is named
    "speculate: UTF-16 prompt file": Row(
        "13", lambda c: (_no_model_load(c), _speculate(c, _lines(c, '{"prompt": "hi"}\n'.encode("utf-16"))))[1],
        ("p.jsonl is UTF-16", "byte-order mark", "iconv -f UTF-16 -t UTF-8")),
    "speculate: UTF-16 without a byte-order mark": Row(
        "13", lambda c: (_no_model_load(c), _speculate(c, _lines(c, '{"prompt": "hi"}\n'.encode("utf-16-le"))))[1],
        ("p.jsonl:1", "NUL bytes", "UTF-16")),
    # 14: ids are strings or numbers
    "speculate: two null ids": Row(
        "14", lambda c: (_no_model_load(c), _speculate(c, _lines(c, '{"prompt": "a", "id": null}\n',
                                                                 '{"prompt": "b", "id": null}\n')))[1],
        ("p.jsonl:1", '"id" must be a string or a number (or absent), got null')),
    "speculate: an id that is a list": Row(
        "14", lambda c: (_no_model_load(c), _speculate(c, _lines(c, '{"prompt": "a", "id": [1]}\n')))[1],
        ("p.jsonl:1", '"id" must be a string or a number', "got [1]")),
    # 15-16: config sizes that disagree with the weights, named before any library load
    "info: hidden_size 64, weights 32": Row(
        "15", lambda c: ["info", "--model", _model_folder(c, hidden_size=64)],
        ("the weights of", "do not match its config.json", "hidden_size is 64", "model.safetensors", "hidden_size: 32")),
    "info: vocab_size 1000, weights 128": Row(
        "16", lambda c: ["info", "--model", _model_folder(c, vocab_size=1000)],
        ("vocab_size is 1000", "128 token rows", "vocab_size: 128")),
    "info: intermediate_size 80, weights 64": Row(
        "16", lambda c: ["info", "--model", _model_folder(c, intermediate_size=80)],
        ("intermediate_size is 80", "intermediate_size: 64")),
    # 17: an unknown model_type
    "info: model_type nosuchmodel": Row("17", lambda c: ["info", "--model", _model_folder(c, model_type="nosuchmodel")],
                                        ('model_type "nosuchmodel" is not an architecture transformers',
                                         "upgrade transformers")),
    # 18: provenance.json fields of the wrong type
    "provenance layers \"1,2,3\"": Row("18", lambda c: _speculate(c, draft=_provenance(c, layers="1,2,3")),
                                      ('provenance.json: field "layers" is "1,2,3"', "list of layer ids")),
    "provenance weights_sha256 5": Row("18", lambda c: _speculate(c, draft=_provenance(c, weights_sha256=5)),
                                       ('field "weights_sha256" is 5', "64 hex digits")),
    # 19: --out a symlink, checked before training
    "train-draft --out a link to an empty folder": Row(
        "19", lambda c: (_no_model_load(c), ["train-draft", *c.common(), "--layers", "1,2", "--out", _link_to_empty(c)])[1],
        ("is a symbolic link", "give the folder itself", "mine")),
    # 20: stale temporaries of a results file are swept on the next write
    "bench --out beside stale temporaries": Row("20", _stale_temporaries, code=0, check=_stale_swept),
    # also seen: a read-only cache is found before a long step
    "info on a GGUF with a read-only cache": Row(
        "ro", _read_only_cache, ("cannot write the cache", "Read-only file system", "WAVE_CACHE")),
    "capture with an empty read-only cache": Row(
        "ro", _read_only_fresh_cache, ("cannot write the cache", "Read-only file system", "WAVE_CACHE")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_probe_input_has_a_clear_answer(case, world, run, tmp_path, monkeypatch):
    from activation_wave.study.estimate import check_before_load
    from activation_wave.study.steps import notebook_config

    row = CASES[case]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ctx = Ctx(world, tmp_path, monkeypatch)
    argv = row.setup(ctx)
    watched = (tmp_path, world["draft"], world["prompts"], world["model"], world["cache"] / "capture")
    before = _snapshot(*watched)
    t0 = time.time()
    if isinstance(argv, (dict, str)):  # a papermill parameters cell: the same parser, an exception instead of an exit
        with pytest.raises(Exception) as info:  # what a chapter does first: its config, the check before loading
            check_before_load(notebook_config("smoke", str(world["model"]),
                                              argv if isinstance(argv, str) else json.dumps(argv)))
        assert type(info.value).__name__ == "ConfigError", (case, repr(info.value))
        code, out, err = 2, "", f"{_one_line(str(info.value))}\n"
    else:
        with _library_log() as logged:  # transformers logs to the stderr it found at import, past capsys
            code, out, err = run(argv)
        err += "".join(f"[transformers log] {line}\n" for line in logged)
    assert code == row.code, (case, err)
    if row.code == 0:
        assert "Traceback" not in err and all(PROGRESS.match(x) for x in err.splitlines() if x.strip()), err
        row.check(ctx, run, before, _snapshot(*watched), out)
    else:
        assert_one_line(err, *(row.needles if NEEDLES else ()))
        assert _snapshot(*watched) == before, case  # nothing lost, changed or left behind
    if "--json" in map(str, argv):
        assert out.strip() == "" or json.loads(out) is not None
    assert not any(p.exists() for p in ctx.absent), case
    assert time.time() - t0 < 60, case  # refused up front, not after a long step


@contextlib.contextmanager
def _library_log():
    """The warnings transformers logs during the block, as lines: its handler writes to the stderr
    it found at import, which capsys does not see, so a load report would otherwise pass unseen."""
    import logging

    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.extend(x for x in record.getMessage().splitlines() if x.strip())

    handler = Keep(logging.WARNING)
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))


COVERAGE = {str(i): [name for name, row in CASES.items() if row.item == str(i)] for i in range(1, 21)}
COVERAGE["ro"] = [name for name, row in CASES.items() if row.item == "ro"]


def test_every_case_of_issue_58_has_a_row():
    assert all(COVERAGE.values()), {k for k, v in COVERAGE.items() if not v}
    assert {row.item for row in CASES.values()} == set(COVERAGE)


# ----------------------------------------------------------------------------- beyond one command


def test_library_errors_crossing_into_the_cli_are_one_line():
    """A model config transformers' strict validation refuses, and a safetensors error, are named
    in one line (exit 2); an error that is not the user's (a bug) keeps its traceback (None)."""
    from huggingface_hub.errors import StrictDataclassClassValidationError
    from safetensors import SafetensorError

    from activation_wave import cli

    try:
        raise ValueError("The hidden size (512) is not a multiple of the number of attention heads (9).")
    except ValueError as cause:
        strict = StrictDataclassClassValidationError(validator="validate_architecture", cause=cause)
    text, code = cli.error_message(strict)
    assert code == 2 and "\n" not in text and "config.json" in text and "512" in text
    text, code = cli.error_message(SafetensorError("Error while deserializing header: HeaderTooLarge"))
    assert code == 2 and "truncated or corrupted" in text
    assert cli.error_message(ZeroDivisionError("a bug")) is None


def test_a_link_to_an_empty_folder_is_refused_before_any_capture(world, run, tmp_path, monkeypatch):
    """The refusal of case 19 comes before the capture and the training: neither runs."""
    import activation_wave.study.steps as steps

    monkeypatch.setattr(steps, "run_capture", lambda *a, **kw: pytest.fail("captured before --out was checked"))
    link = _link_to_empty(Ctx(world, tmp_path, monkeypatch))
    code, _, err = run(["train-draft", *world["common"], "--layers", "1,2", "--out", link])
    assert code == 2 and "symbolic link" in err
    assert link.is_symlink() and not any((tmp_path / "mine").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "mine"]


def test_a_killed_writer_leaves_a_temporary_that_the_next_write_removes(tmp_path):
    """kill -9 in the middle of an atomic write leaves ``.NAME.PID-XXXX.tmp``; the next write of
    that file removes it (its process is gone) and leaves a live writer's temporary alone."""
    code = (
        "import os, sys\n"
        "from activation_wave.core import files\n"
        "with files.atomic_path(sys.argv[1]) as tmp:\n"
        "    tmp.write_text('half')\n"
        "    os.kill(os.getpid(), 9)\n")
    out = tmp_path / "results.json"
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stderr=subprocess.PIPE)
    proc.communicate()
    assert proc.returncode == -9
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(f".results.json.{proc.pid}-") and left[0].endswith(".tmp"), left
    from activation_wave.core import files

    live = _write(tmp_path / f".results.json.{os.getpid()}-abcdefgh.tmp", "mine, in flight")
    files.write_json(out, {"ok": 1})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["results.json", live.name])
    assert json.loads(out.read_text()) == {"ok": 1}


def test_a_digest_covers_the_ids_and_sizes_not_only_the_weights(world, tmp_path):
    """The drafter's recorded digest (``drafter_sha256``) changes with its layer ids and with a
    size, not only with its weights; a drafter as trained loads; an edited rope_theta is named."""
    from dataclasses import replace

    from activation_wave.models.drafter import DrafterError, drafter_digest, load_drafter

    d = load_drafter(world["draft"])
    prov = json.loads((world["draft"] / "provenance.json").read_text())
    assert prov["drafter_sha256"] == drafter_digest(prov["weights_sha256"], d.spec)
    for other in (replace(d.spec, layers=(0, 2, 3)), replace(d.spec, target_num_layers=5),
                  replace(d.spec, hidden_size=48)):
        assert drafter_digest(prov["weights_sha256"], other) != prov["drafter_sha256"]
    copy = copy_draft(world, tmp_path)
    cfg = json.loads((copy / "config.json").read_text())
    cfg["rope_theta"] = cfg["rope_theta"] * 50
    (copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(DrafterError, match="rope_theta .* trained with"):
        load_drafter(copy)


def test_a_prompt_file_over_the_size_bound_is_refused_before_reading(tmp_path, monkeypatch):
    """The file-size bound is stated in the message, and checked from the file's size."""
    import activation_wave.models.prompts as prompts

    path = _write(tmp_path / "big.jsonl", '{"prompt": "a"}\n' * 100)
    monkeypatch.setattr(prompts, "MAX_PROMPT_FILE_BYTES", 1000)
    with pytest.raises(prompts.PromptFileError, match=r"big.jsonl has 0 MiB: prompt files are read up to"):
        prompts.read_prompt_jsonl(path)


def test_number_ids_are_read_as_text_and_nan_is_refused(tmp_path):
    from activation_wave.models.prompts import PromptFileError, read_prompt_jsonl

    ok = _write(tmp_path / "ok.jsonl", '{"prompt": "a", "id": 7}\n{"prompt": "b", "id": 1.5}\n{"prompt": "c"}\n')
    assert [p.id for p in read_prompt_jsonl(ok)] == ["7", "1.5", "ok-3"]
    for bad in ('{"prompt": "a", "id": NaN}', '{"prompt": "a", "id": true}', '{"prompt": "a", "category": 3}'):
        with pytest.raises(PromptFileError, match="must be a string"):
            read_prompt_jsonl(_write(tmp_path / "bad.jsonl", bad + "\n"))


# ----------------------------------------------------------------------------- the property test


def _capture_step_outcome(cfg, monkeypatch) -> str:
    """'ok' or the refusal of the capture step itself (:func:`activation_wave.models.capture.capture`)
    on smollm2-135m's shape, stopped right after its checks (nothing is captured or written)."""
    from types import SimpleNamespace

    import activation_wave.models.capture as capture_mod
    from activation_wave.core.config import ConfigError
    from activation_wave.study.estimate import KNOWN_SHAPES

    shape = KNOWN_SHAPES["smollm2-135m"]
    target = SimpleNamespace(name="smollm2-135m", n_layers=shape.n_layers, vocab_size=shape.vocab)
    class Checked(Exception):
        """Raised where the capture, its checks passed, would choose its folder."""

    def checked(*a):
        raise Checked()

    with monkeypatch.context() as mp:
        mp.setattr(capture_mod, "cache_dir_for", checked)
        try:
            capture_mod.capture(target, [], cfg.capture)
        except Checked:
            return "ok"
        except (ConfigError, ValueError) as exc:
            return f"rejected: {exc}"
    return "ok"


def test_capture_layers_are_refused_alike_by_dry_run_notebooks_and_the_capture(run, monkeypatch):
    """hypothesis: a random ``capture.layers`` (repeats, negatives, ids beyond N = 30, empty) is
    accepted or refused alike by ``wave dry-run --set``, a notebook's parser followed by the
    check every step makes before loading (``check_fit``), and the capture step's own check."""
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    from activation_wave.core.config import ConfigError, load_config, parse_overrides
    from activation_wave.study.estimate import KNOWN_SHAPES, check_fit
    from activation_wave.study.steps import notebook_config

    shape = KNOWN_SHAPES["smollm2-135m"]

    def outcome(fn) -> str:
        try:
            fn()
        except ConfigError as exc:
            return f"rejected: {exc}"
        return "ok"

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(ids=st.lists(st.integers(-3, 34), max_size=4))
    @example(ids=[5, 5])
    @example(ids=[0, 31, 99])
    @example(ids=[-1, 3])
    @example(ids=[0, 30])
    @example(ids=[])
    def check(ids: list[int]) -> None:
        text = ",".join(map(str, ids))
        code, out, err = run(["dry-run", "--json", "--set", f"capture.layers={text}"])
        assert code in (0, 2) and "Traceback" not in err, (ids, err)
        dry = "ok" if code == 0 else "rejected"
        cli_set = outcome(lambda: check_fit(load_config("smoke", parse_overrides([f"capture.layers={text}"])), shape))
        typed = outcome(lambda: check_fit(notebook_config("smoke", "", json.dumps({"capture.layers": ids})), shape))
        # every such list parses (the ids are integers): what does the capture step itself do with it?
        step = _capture_step_outcome(load_config("smoke", parse_overrides([f"capture.layers={text}"])), monkeypatch)
        want = "ok" if len(set(ids)) == len(ids) and all(0 <= i <= 30 for i in ids) else "rejected"
        assert dry == want, (ids, err)
        assert cli_set.split(":")[0] == typed.split(":")[0] == want, (ids, cli_set, typed)
        assert step.split(":")[0] == want, (ids, step)
        if code == 2:
            assert err.count("\n") == 1 and "capture.layers" in err and cli_set.removeprefix("rejected: ") in err

    check()
