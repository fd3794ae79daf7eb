"""Issue 24: what a hostile user types ends in exit 2 and one line, loses nothing, leaves nothing.

Every row of :data:`CASES` runs one command through ``activation_wave.cli.main`` (or, for
the notebook rows, the papermill parameters parser ``pipeline.notebook_config``) on the tiny
model of ``tests/test_cli_errors.py`` and asserts: exit code 2, exactly ONE line on stderr
(progress lines aside) naming the problem and the fix, no traceback, stdout empty or valid
JSON where ``--json`` was given, every file that existed before byte-identical afterwards,
and no new file or folder left behind (in the row's folder, the drafter, the capture cache).

Items 2, 12 and 21 of the issue (``wave select``) are tested in tests/test_select_cli.py.
The same table, run against the code before the fix (commit c0f41ed), gives the issue's
"before" count; see the closing note of the branch.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from test_cli_errors import assert_one_line, copy_draft, run, world  # noqa: F401 - fixtures

from activation_wave import cli

# ----------------------------------------------------------------------------- the table


@dataclass
class Ctx:
    """What a row's setup gets: the shared tiny world, a fresh folder, monkeypatch."""

    world: dict
    tmp: Path
    mp: pytest.MonkeyPatch
    absent: list[Path] = field(default_factory=list)

    def absent_path(self, p: Path) -> Path:
        """A path the command must not create."""
        self.absent.append(p)
        return p

    def common(self) -> list[str]:
        return list(self.world["common"])


def _edit_config(ctx: Ctx, **changes) -> Path:
    """A copy of the world's drafter whose config.json has ``changes`` (top-level keys; ``ids``
    sets both layer-id keys consistently, as a careful hand edit would)."""
    d = copy_draft(ctx.world, ctx.tmp)
    cfg = json.loads((d / "config.json").read_text())
    ids = changes.pop("ids", None)
    if ids is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = ids
        cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [i - 1 for i in ids]
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg, indent=1))
    return d


def _unrecorded(d: Path) -> Path:
    """Drop the trained layer ids from provenance.json (a checkpoint written before they were recorded)."""
    prov = json.loads((d / "provenance.json").read_text())
    prov.pop("layers")
    (d / "provenance.json").write_text(json.dumps(prov))
    return d


def _nan_weights(ctx: Ctx) -> Path:
    """A copy of the drafter with NaN in fc.weight, its recorded sha256 updated (as a
    diverged training would have written it)."""
    from safetensors.torch import load_file, save_file

    d = copy_draft(ctx.world, ctx.tmp)
    state = load_file(str(d / "model.safetensors"))
    state["fc.weight"][0, :3] = float("nan")
    save_file(state, str(d / "model.safetensors"), metadata={"format": "pt"})
    prov = json.loads((d / "provenance.json").read_text())
    prov["weights_sha256"] = hashlib.sha256((d / "model.safetensors").read_bytes()).hexdigest()
    (d / "provenance.json").write_text(json.dumps(prov))
    return d


def _gguf(ctx: Ctx, keep: int | None) -> Path:
    """A small llama GGUF (one 960 x 576 tensor), cut to its first ``keep`` bytes (None: whole)."""
    from gguf import GGUFWriter

    path = ctx.tmp / "model.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(4)
    w.add_tensor("token_embd.weight", np.zeros((960, 576), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if keep is not None:
        path.write_bytes(path.read_bytes()[:keep])
    return path


def _fake_llamacpp(ctx: Ctx, converter: str) -> None:
    root = ctx.tmp / "llamacpp"
    (root / "src").mkdir(parents=True)
    (root / "src" / "convert_hf_to_gguf.py").write_text(textwrap.dedent(converter))
    ctx.mp.setenv("LLAMACPP_DIR", str(root))


FAILING_CONVERTER = """
    import sys, pathlib
    out = pathlib.Path(sys.argv[sys.argv.index("--outfile") + 1])
    out.write_bytes(b"half a gguf")  # a partial output, then the failure
    sys.exit("KeyError: 'tokenizer.ggml.model'")
"""


def _write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def _folder(ctx: Ctx, *files: str) -> Path:
    """A folder ``m`` holding the world model's ``files`` only (none: empty)."""
    m = ctx.tmp / "m"
    m.mkdir()
    for name in files:
        (m / name).write_bytes((ctx.world["model"] / name).read_bytes())
    return m


def _prompts(ctx: Ctx, *texts: str) -> Path:
    return _write(ctx.tmp / "p.jsonl", "".join(json.dumps({"id": f"q{i}", "prompt": t}) + "\n"
                                               for i, t in enumerate(texts)))


def _speculate(ctx: Ctx, draft: Path | None = None, *extra: str) -> list:
    return ["speculate", *ctx.common(), "--draft", draft or ctx.world["draft"], "--prompts", ctx.world["prompts"],
            *extra]


def _nan_loss(ctx: Ctx) -> None:
    """Training whose loss is NaN (what draft.lr=inf gave before it was refused; with a tiny
    capture, one batch per epoch, so from the first step)."""
    import activation_wave.draft.training as training

    real = training.ttt_loss

    def nan_loss(*a, **kw):
        loss, stats = real(*a, **kw)
        return loss * float("nan"), stats

    ctx.mp.setattr(training, "ttt_loss", nan_loss)


def _disk_full(ctx: Ctx) -> None:
    import activation_wave.models.capture as capture
    from safetensors import SafetensorError

    def full(*a, **kw):
        raise SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: '
                              '"No space left on device" })')

    ctx.mp.setattr(capture, "save_file", full)


#: name -> (issue item, setup(ctx) -> argv (a list for cli.main, or a dict of notebook overrides), needles)
Row = tuple[str, Callable[[Ctx], list | dict], tuple[str, ...]]
CASES: dict[str, Row] = {
    # 1: a failed export loses nothing and leaves nothing; a missing --out folder is refused
    "export over an existing file, converter fails": (
        "1", lambda c: (_fake_llamacpp(c, FAILING_CONVERTER),
                        ["export", *c.common(), "--engine", "llamacpp", "--draft", c.world["draft"], "--out",
                         _write(c.tmp / "existing.gguf", b"GGUF my previous export")])[1],
        ("convert_hf_to_gguf.py failed", "existing.gguf is unchanged")),
    "export into a missing folder": (
        "1", lambda c: (_fake_llamacpp(c, FAILING_CONVERTER),
                        ["export", *c.common(), "--engine", "llamacpp", "--draft", c.world["draft"], "--out",
                         c.absent_path(c.tmp / "no" / "such") / "d.gguf"])[1],
        ("does not exist", "mkdir -p")),
    # 3: layer ids beyond N in a drafter's config.json
    "drafter ids beyond N": ("3", lambda c: _speculate(c, _edit_config(c, ids=[1, 2, 45])),
                             ("config.json", "[45] out of range", "N=4")),
    # 4: damaged .gguf files
    "gguf cut in its header": ("4", lambda c: ["info", "--model", _gguf(c, 60)], ("model.gguf", "truncated or corrupted")),
    "gguf cut in a tensor": ("4", lambda c: ["info", "--model", _gguf(c, 1 << 20)], ("model.gguf", "truncated or corrupted")),
    "empty gguf": ("4", lambda c: ["info", "--model", _write(c.tmp / "empty.gguf", b"")], ("empty.gguf", "empty (0 bytes)")),
    # 5: a full disk during the capture
    "disk full in capture": ("5", lambda c: (_disk_full(c), ["capture", *c.common(), "--set", "capture.topk=7"])[1],
                             ("No space left on device", "WAVE_CACHE")),
    # 6: a bench results file that is not a JSON object
    "bench --out holds a list": ("6", lambda c: ["bench", "--out", _write(c.tmp / "b.json", "[1, 2]"), "--only", "metrics"],
                                 ("b.json holds a JSON list", "new path")),
    "bench --out not JSON": ("6", lambda c: ["bench", "--out", _write(c.tmp / "b.json", "hello"), "--only", "metrics"],
                             ("b.json is not valid JSON", "new path")),
    # 7: notebook overrides of the wrong type
    "notebook data.sources=5": ("7", lambda c: {"data.sources": 5}, ("'5' is not a prompt source",)),
    # 8: a diverging drafter
    "--set draft.lr=inf": ("8", lambda c: ["train-draft", *c.common(), "--layers", "1,2", "--set", "draft.lr=inf",
                                           "--out", c.absent_path(c.tmp / "d")], ("draft.lr = inf", "finite")),
    "NaN loss in training": ("8", lambda c: (_nan_loss(c), ["train-draft", *c.common(), "--layers", "1,2", "--out",
                                                           c.absent_path(c.tmp / "d")])[1],
                             ("diverged", "loss is nan", "--set draft.lr=")),
    "NaN drafter weights": ("8", lambda c: _speculate(c, _nan_weights(c)), ("non-finite weights", "draft.lr")),
    # 9: config.json edited to other ids than provenance.json records
    "config ids differ from provenance": ("9", lambda c: _speculate(c, _edit_config(c, ids=[1, 2, 4])),
                                          ("config.json names layer ids [1, 2, 4]", "trained on [1, 2, 3]")),
    # 10: temperatures that decode random tokens
    "--temperature inf": ("10", lambda c: _speculate(c, None, "--temperature", "inf"),
                          ("--temperature inf", "in [0, 10]")),
    "--temperature 1e300": ("10", lambda c: _speculate(c, None, "--temperature", "1e300"),
                            ("--temperature 1e300", "in [0, 10]")),
    "--set spec.temperature=nan": ("10", lambda c: _speculate(c, None, "--json", "--set", "spec.temperature=nan"),
                                   ("spec.temperature = nan", "finite")),
    # 11: layer lists int() would have accepted
    "--layers 2,,3": ("11", lambda c: ["train-draft", *c.common(), "--layers", "2,,3", "--out", c.absent_path(c.tmp / "d")],
                      ("--layers '2,,3'", "no empty item")),
    "--layers 1,1_5,3": ("11", lambda c: ["train-draft", *c.common(), "--layers", "1,1_5,3", "--out",
                                          c.absent_path(c.tmp / "d")], ("--layers '1,1_5,3'", "no '_'")),
    # 13: dry-run rejects what the steps reject
    "dry-run select.k=100": ("13", lambda c: ["dry-run", "--set", "select.k=100"], ("select.k = 100", "1 <= k <= 29")),
    "dry-run select.method=nonsense": ("13", lambda c: ["dry-run", "--set", "select.method=nonsense"],
                                       ("unknown selection method 'nonsense'", "combined")),
    "dry-run draft.draft_vocab=1": ("13", lambda c: ["dry-run", "--set", "draft.draft_vocab=1"],
                                    ("draft.draft_vocab = 1", ">= 16")),
    "dry-run draft.lr=inf": ("13", lambda c: ["dry-run", "--json", "--set", "draft.lr=inf"], ("draft.lr = inf", "finite")),
    "dry-run capture.topk=100000": ("13", lambda c: ["dry-run", "--set", "capture.topk=100000"],
                                    ("capture.topk = 100000", "in [1, 256]")),
    "dry-run data.sources=bogus": ("13", lambda c: ["dry-run", "--set", "data.sources=bogus"],
                                   ("'bogus' is not a prompt source", "--set data.sources=team")),
    "dry-run bench.rounds=-5": ("13", lambda c: ["dry-run", "--set", "bench.rounds=-5"], ("bench.rounds = -5", ">= 1")),
    "dry-run capture.batch_size=1000": ("13", lambda c: ["dry-run", "--set", "capture.batch_size=1000"],
                                        ("step capture needs", "8 GiB limit", "--set capture.batch_size=", "WAVE_MEMORY_GIB")),
    "dry-run paper 70B draft_vocab=1e7": (
        "13", lambda c: ["dry-run", "--profile", "paper", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--json",
                         "--set", "draft.draft_vocab=10000000"], ("draft.draft_vocab = 10000000", "128256 tokens")),
    # 14: notebook overrides are parsed as strictly as --set
    "notebook select.k=true": ("14", lambda c: {"select.k": True}, ("select.k", "expected an integer", "True")),
    "notebook token_budget=511.9": ("14", lambda c: {"metrics.token_budget": 511.9}, ("metrics.token_budget", "511.9")),
    "notebook draft.epochs=2.9": ("14", lambda c: {"draft.epochs": 2.9}, ("draft.epochs", "2.9")),
    "--set draft.epochs=2.9": ("14", lambda c: ["dry-run", "--set", "draft.epochs=2.9"], ("draft.epochs", "2.9")),
    # 15: prompts beyond the context are refused with their counts, before decoding
    "prompt longer than the context": ("15", lambda c: ["speculate", *c.common(), "--draft", c.world["draft"],
                                                        "--prompts", _prompts(c, "hi", "x" * 300)],
                                       ("1 of 2 prompts", "context of 256 tokens", "shorten or drop")),
    "prompt + new tokens beyond the context": ("15", lambda c: ["speculate", *c.common(), "--draft", c.world["draft"],
                                                                "--prompts", _prompts(c, "y" * 253)],
                                               ("1 of 1 prompts", "--max-new-tokens 3")),
    # 16-18: values that failed deep inside a step
    "--set draft.draft_vocab=1": ("16", lambda c: ["train-draft", *c.common(), "--layers", "1,2", "--set",
                                                   "draft.draft_vocab=1", "--out", c.absent_path(c.tmp / "d")],
                                  ("draft.draft_vocab = 1", ">= 16")),
    "--set capture.topk=100000": ("17", lambda c: ["capture", *c.common(), "--set", "capture.topk=100000"],
                                  ("capture.topk = 100000", "in [1, 256]")),
    "capture.topk above the vocabulary": ("17", lambda c: ["capture", *c.common(), "--set", "capture.topk=200"],
                                          ("capture.topk = 200", "128 tokens")),
    "--set bench.capture_repeats=0": ("18", lambda c: ["bench", "--set", "bench.capture_repeats=0", "--out",
                                                       c.absent_path(c.tmp / "b.json")],
                                      ("bench.capture_repeats = 0", ">= 1")),
    # 19: a drafter config that does not match its weights
    "config hidden size edited": ("19", lambda c: _speculate(c, _edit_config(c, hidden_size=48)),
                                  ("config.json does not match", "model.safetensors", "hidden_size 48")),
    "config edited to k=2 ids": ("19", lambda c: _speculate(c, _edit_config(c, ids=[1, 2])),
                                 ("config.json names layer ids [1, 2]", "trained on [1, 2, 3]")),
    "config k=2, no recorded ids": ("19", lambda c: _speculate(c, _unrecorded(_edit_config(c, ids=[1, 2]))),
                                    ("config.json does not match", "fc.weight", "2 layers")),
    # 20: incomplete model folders
    "info on an empty folder": ("20", lambda c: ["info", "--model", _folder(c)],
                                ("is not a complete model folder", "config.json", "save_pretrained")),
    "info on a folder with config.json only": ("20", lambda c: ["info", "--model", _folder(c, "config.json")],
                                               ("is not a complete model folder", "no weights", "tokenizer")),
    "train-draft on a folder with config.json only": (
        "20", lambda c: ["train-draft", "--model", _folder(c, "config.json"), "--layers", "1,2", "--out",
                         c.absent_path(c.tmp / "d")], ("is not a complete model folder", "no weights")),
    # 22: a hub dataset without the hub fails at once
    "hub dataset offline": ("22", lambda c: (c.mp.setenv("HF_HUB_OFFLINE", "1"),
                                             ["capture", *c.common(), "--set", "data.sources=hub:nobody/nodataset-xyz"])[1],
                            ("hub dataset 'nobody/nodataset-xyz'", "not reachable", "local JSONL")),
    "hub dataset, hub unreachable": ("22", lambda c: (c.mp.delenv("HF_HUB_OFFLINE", raising=False),
                                                      c.mp.setenv("HF_ENDPOINT", "http://127.0.0.1:9"),
                                                      ["capture", *c.common(), "--set",
                                                       "data.sources=hub:nobody/nodataset-xyz"])[2],
                                     ("hub dataset 'nobody/nodataset-xyz'", "not reachable")),
}


def _snapshot(*roots: Path) -> dict[str, str]:
    """sha256 of every file under ``roots`` (and the folders, as '<dir>'), by path."""
    out = {}
    for root in roots:
        for p in sorted(root.rglob("*")) if root.is_dir() else [root]:
            out[str(p)] = "<dir>" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_input_exits_2_with_one_line_and_loses_nothing(case, world, run, tmp_path, monkeypatch):
    from activation_wave.study.steps import notebook_config

    item, setup, needles = CASES[case]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ctx = Ctx(world, tmp_path, monkeypatch)
    argv = setup(ctx)
    watched = (tmp_path, world["draft"], world["prompts"], world["model"], world["cache"] / "capture")
    before = _snapshot(*watched)
    t0 = time.time()
    if isinstance(argv, dict):  # a papermill parameters cell: the same parser, an exception instead of an exit
        with pytest.raises(Exception) as info:
            notebook_config("smoke", str(world["model"]), json.dumps(argv))
        assert type(info.value).__name__ == "ConfigError", (case, repr(info.value))
        code, out, err = 2, "", f"{info.value}\n"
    else:
        code, out, err = run(argv)
    assert code == 2, (case, err)
    # HOSTILE_NEEDLES=0 checks only the shape of the failure (one line, no traceback, nothing lost),
    # not its words: how the "before" count of this table was made on the code before the fix.
    assert_one_line(err, *(needles if os.environ.get("HOSTILE_NEEDLES", "1") != "0" else ()))
    if "--json" in map(str, argv):
        assert out.strip() == "" or json.loads(out) is not None
    assert _snapshot(*watched) == before, case  # nothing lost, changed or left behind
    assert not any(p.exists() for p in ctx.absent), case
    assert time.time() - t0 < 60, case  # refused up front, not after a long step


def test_the_table_covers_every_item_of_issue_24_but_select():
    items = {item for item, _, _ in CASES.values()}
    assert items == {str(i) for i in range(1, 23)} - {"2", "12", "21"}


# ----------------------------------------------------------------------------- saved and loaded weights


def test_a_non_finite_drafter_is_refused_at_save(tiny_llama, tmp_path):
    import torch

    from activation_wave.models.drafter import DrafterError, Eagle3Drafter, save_drafter

    d = Eagle3Drafter.from_target(tiny_llama, [1, 2, 3], list(range(0, 128, 2)))
    with torch.no_grad():
        d.fc.weight[0, 0] = float("inf")
    with pytest.raises(DrafterError, match=r"non-finite weights \(fc.weight: 1 NaN/inf values\).*draft.lr"):
        save_drafter(d, tmp_path / "d")
    assert not (tmp_path / "d").exists()


# ----------------------------------------------------------------------------- one parser, three entry points

_SECTIONS = ("data", "capture", "metrics", "select", "draft", "spec", "cross", "bench")


def _keys() -> list[tuple[str, type]]:
    from typing import get_type_hints

    from activation_wave.core.config import StudyConfig

    hints = get_type_hints(StudyConfig)
    out = []
    for section in _SECTIONS:
        for name, typ in get_type_hints(hints[section]).items():
            if name not in ("BOUNDS", "CHOICES"):
                out.append((f"{section}.{name}", typ))
    return out


KEYS = _keys()


def _texts():
    """Random values as a user would type them after ``--set key=``."""
    from hypothesis import strategies as st

    from activation_wave.core.config import SELECTION_METHODS

    number = st.one_of(st.integers(-5, 300).map(str), st.integers(-10**12, 10**12).map(str),
                       st.floats(allow_nan=True, allow_infinity=True).map(repr),
                       st.sampled_from(["1_5", "2.0", "2.9", "1e300", "-0", "+3", "0x10", "1e5", "inf", "-inf", "nan",
                                        "٣", " 4 ", ""]))
    word = st.one_of(st.sampled_from(["true", "false", "yes", "no", "maybe", "null", "team", "humaneval", "bogus",
                                      "hub:nobody/x", "hub:", "fp16", "bf16", "bfloat16", "fast", "hf", *SELECTION_METHODS]),
                     st.text("abc-_:/.", max_size=6))
    item = st.one_of(number, word)
    return st.one_of(item, st.lists(item, min_size=0, max_size=3).map(",".join))


def _outcome(fn: Callable[[], object]) -> str:
    """'ok' or the ConfigError's message (any other exception fails the test)."""
    from activation_wave.core.config import ConfigError

    try:
        fn()
    except ConfigError as exc:
        return f"rejected: {exc}"
    return "ok"


def test_every_config_key_is_parsed_alike_by_dry_run_the_cli_and_notebooks(run):
    """hypothesis: a random value of a random key is accepted or rejected alike by ``wave
    dry-run --set``, ``load_config(parse_overrides(...))`` and the papermill parser
    (``notebook_config``), as text and, where the text is a JSON literal, as that value."""
    from hypothesis import HealthCheck, example, given, settings
    from hypothesis import strategies as st

    from activation_wave.core.config import load_config, parse_overrides
    from activation_wave.study.estimate import KNOWN_SHAPES, check_fit
    from activation_wave.study.steps import notebook_config

    shape = KNOWN_SHAPES["smollm2-135m"]

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(key=st.sampled_from([k for k, _ in KEYS]), text=_texts())
    @example(key="draft.soft_targets", text="-0")  # found by hypothesis: JSON reads it as 0, so must --set
    @example(key="capture.layers", text="5,5")  # issue 58: dry-run refuses what the capture refuses
    @example(key="capture.layers", text="0,31,99")
    @example(key="capture.layers", text="-1,3")
    @example(key="capture.layers", text="2,15,27")
    def check(key: str, text: str) -> None:
        cli_set = _outcome(lambda: check_fit(load_config("smoke", parse_overrides([f"{key}={text}"])), shape))
        notebook = _outcome(lambda: check_fit(notebook_config("smoke", "", json.dumps({key: text})), shape))
        code, out, err = run(["dry-run", "--json", "--set", f"{key}={text}"])
        assert code in (0, 2) and "Traceback" not in err, (key, text, err)
        dry = "ok" if code == 0 else "rejected"
        assert (cli_set == "ok") == (dry == "ok") == (notebook == "ok"), (key, text, cli_set, notebook, err)
        if key == "capture.layers" and _outcome(lambda: load_config("smoke", parse_overrides([f"{key}={text}"]))) == "ok":
            ids = load_config("smoke", parse_overrides([f"{key}={text}"])).capture.layers  # parses: as the capture checks it
            valid = len(set(ids)) == len(ids) and all(0 <= i <= shape.n_layers for i in ids)
            assert (dry == "ok") == valid, (text, ids, err)
        if code == 0:
            json.loads(out)
        else:
            assert err.count("\n") == 1 and cli_set.removeprefix("rejected: ") in err, (key, text, err)
        try:
            value = json.loads(text)
        except ValueError:
            return
        typed = _outcome(lambda: check_fit(notebook_config("smoke", "", json.dumps({key: value})), shape))
        if not isinstance(value, (list, dict)):
            assert (typed == "ok") == (cli_set == "ok"), (key, text, value, typed, cli_set)

    check()


def test_notebook_json_lists_and_cli_lists_agree():
    from activation_wave.core.config import ConfigError, load_config, parse_overrides
    from activation_wave.study.steps import notebook_config

    a = load_config("smoke", parse_overrides(["bench.scaling_fractions=0.5,1", "data.sources=team"]))
    b = notebook_config("smoke", "", json.dumps({"bench.scaling_fractions": [0.5, 1], "data.sources": ["team"]}))
    assert a == b and a.bench.scaling_fractions == (0.5, 1.0)
    for bad in ({"data.sources": ["team", ""]}, {"data.sources": [["team"]]}, {"capture.topk": [4]},
                {"bench.scaling_fractions": [0.5, math.inf]}):
        with pytest.raises(ConfigError):
            notebook_config("smoke", "", json.dumps(bad))
