"""The drafter ledger: what trained drafters measured, kept where git keeps it.

A drafter's weights live in the machine-local cache (``<capture>/drafters/<name>/``) and
are lost with the machine; training them again costs minutes each on a 2-core CPU. The
ledger keeps, per drafter, everything the study reads from one *except* its weights: the
layers and the full training config (enough to train it again, bit-identically at the
same thread count on the same CPU), a digest of its weights (:func:`weights_digest`), its
``train_log.json``, and
every offline score a chapter asked for. A study whose drafters are in the ledger resumes
on a fresh machine without training them; only a drafter whose weights a step needs
(online decoding) is trained again.

Layout: ``<root>/<capture folder>/<drafter folder>.json``, the two names of the drafter's
cache folder, so the key that chose the cache folder (layers, config, seed, capture) also
chooses the ledger file. ``root`` is ``DraftConfig.ledger`` (repo-relative; ``""`` = no
ledger). Files are written atomically (:mod:`activation_wave.core.files`), and every
read-merge-write of an entry holds the lock of its model folder, so two processes recording
scores into one entry lose none. An unreadable entry is reported, moved aside and rebuilt;
an entry whose layers, config or capture do not match the name it is filed under, or whose
score is not a number, is refused (:class:`LedgerError`, naming the file): never trusted.
Each entry records the ``cpu`` that trained the drafter (model name and the vector/matrix
flags that set its training speed); entries written before that field read as unrecorded.
"""

from __future__ import annotations

import json
import math
import os
import platform
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from activation_wave.core import files
from activation_wave.core.paths import REPO_ROOT

#: Format of a ledger file; a file with another version is rebuilt.
LEDGER_VERSION = 1
#: The CPU flags an entry's ``cpu`` keeps: the units that set a drafter's training speed.
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile")
#: What an existing file must hold to be replaced as a ledger entry.
_OWNED = files.json_with("version", "train_log")


class LedgerError(ValueError):
    """A ledger entry that cannot be trusted (filed under another drafter's name, a score that
    is not a number); the message names the file and how to rebuild it."""


def cpu_record(cpuinfo: str | None = None) -> dict[str, Any]:
    r"""The CPU that trains here: ``{"model": name, "flags": [the CPU_FLAGS it has]}``, from
    ``/proc/cpuinfo`` where it exists, else ``platform.processor()`` (flags then unknown: None).

    >>> cpu_record("model name\t: AMD EPYC 9R14\nflags\t\t: fpu avx2 avx512f amx_tile\n")
    {'model': 'AMD EPYC 9R14', 'flags': ['avx2', 'avx512f', 'amx_tile']}
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return {"model": platform.processor() or platform.machine() or "unknown", "flags": None}
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    have = set(fields.get("flags", "").split())
    model = fields.get("model name") or platform.processor() or "unknown"
    return {"model": model, "flags": [f for f in CPU_FLAGS if f in have]}


def entry_cpu(entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The CPU that trained an entry's drafter, or None where the entry predates the field (unrecorded)."""
    cpu = entry.get("cpu")
    return dict(cpu) if isinstance(cpu, Mapping) else None


def ledger_file(root: str | Path, drafter_path: str | Path) -> Path | None:
    """The ledger file of the drafter whose cache folder is ``drafter_path``, or ``None`` without a ledger."""
    if not str(root):
        return None
    p = Path(drafter_path)
    base = Path(root) if Path(root).is_absolute() else REPO_ROOT / root
    return base / p.parent.parent.name / f"{p.name}.json"


def check_entry(path: Path, doc: Mapping[str, Any]) -> None:
    """Raise :class:`LedgerError` unless the entry ``doc`` read from ``path`` belongs there: the
    drafter it was recorded for (``drafter``: the cache folder name, which its layers and config
    chose) is the file's name, its layers start that name (entries written before ``drafter``
    was recorded are checked by their layers), and its capture (when recorded) is the folder's."""
    fix = f"delete {path} (or restore it: git checkout -- {path}) and its drafter is trained or read again"
    layers = doc.get("layers")
    try:
        prefix = "L" + "-".join(str(int(i)) for i in sorted(layers)) + "-"  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LedgerError(f"drafter ledger entry {path} has no valid 'layers' ({layers!r}): {fix}") from None
    recorded = doc.get("drafter", path.stem)
    if recorded != path.stem or not path.stem.startswith(prefix):
        named = recorded if recorded != path.stem else f"{prefix}*"
        raise LedgerError(f"drafter ledger entry {path} holds another drafter's entry (layers {layers}, recorded "
                          f"as {named}.json, not {path.name}): {fix}")
    capture = doc.get("capture")
    if capture is not None and capture != path.parent.name:
        raise LedgerError(f"drafter ledger entry {path} was recorded for the capture {capture!r}, not the folder "
                          f"{path.parent.name!r} it is filed in: {fix}")


def _load(path: Path) -> dict[str, Any] | None:
    """The entry at ``path`` (checked), or None when absent or unreadable (moved aside, with a warning)."""
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("version") != LEDGER_VERSION or "train_log" not in doc:
            raise ValueError("not a ledger entry of this version")
    except (ValueError, UnicodeDecodeError) as exc:
        bad = path.with_suffix(".json.corrupt")
        os.replace(path, bad)
        _notice(f"drafter ledger entry {path} is unreadable ({exc}); moved to {bad.name}, the drafter's results "
                "are computed again")
        return None
    check_entry(path, doc)
    return doc


def _notice(text: str) -> None:
    """A warning that also reaches ``wave study``'s stderr from inside a chapter's kernel
    (through the progress relay, :func:`activation_wave.core.progress.relay`)."""
    from activation_wave.core.progress import RELAY_ENV

    warnings.warn(text, stacklevel=3)
    relay = os.environ.get(RELAY_ENV)
    if relay:
        with open(relay, "a", encoding="utf-8") as fh:  # a log line, appended: not a file the study replaces
            fh.write(f"warning: {text}\n")


def committed_entry(key: str) -> dict[str, Any] | None:
    """The committed ledger's record (``data/drafters/<capture>/<name>.json``) of a drafter named by
    its results key ``capture/<capture>/drafters/<name>``, or None (another key, or no record)."""
    parts = Path(key).parts
    if len(parts) < 4 or parts[0] != "capture" or parts[2] != "drafters":
        return None
    path = REPO_ROOT / "data" / "drafters" / parts[1] / f"{parts[3]}.json"
    return json.loads(path.read_text()) if path.exists() else None


def read(root: str | Path, drafter_path: str | Path) -> dict[str, Any] | None:
    """The ledger entry of a drafter, or ``None`` (no ledger, no entry, or an unreadable entry,
    which is renamed to ``*.corrupt`` with a warning so that it is rebuilt). An entry filed
    under another drafter's name raises :class:`LedgerError`."""
    path = ledger_file(root, drafter_path)
    return None if path is None else _load(path)


def _writable(path: Path) -> None:
    """Refuse, before any training, a ledger folder this process cannot write (names ``draft.ledger``)."""
    folder = next((p for p in (path.parent, *path.parent.parents) if p.exists()), None)
    if folder is not None and not os.access(folder, os.W_OK):
        raise LedgerError(f"the drafter ledger folder {folder} is not writable (draft.ledger); make it writable, or "
                          "train without a ledger: --set draft.ledger=")


def check_writable(root: str | Path, drafter_path: str | Path) -> None:
    """Raise :class:`LedgerError` now, not after training, when the drafter's entry could not be written."""
    path = ledger_file(root, drafter_path)
    if path is not None:
        _writable(path)


def weights_digest(drafter_path: str | Path) -> str:
    """sha256 over the drafter's tensors (names, dtypes, shapes and values, in name order):
    equal for equal weights. The file's own sha256 is not, since safetensors writes its
    metadata keys in no fixed order."""
    import hashlib

    import torch
    from safetensors.torch import load_file

    h = hashlib.sha256()
    for name, t in sorted(load_file(str(Path(drafter_path) / "model.safetensors")).items()):
        h.update(f"{name}|{t.dtype}|{list(t.shape)}|".encode())
        h.update(t.contiguous().view(-1).view(dtype=torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _update(path: Path, change: Any) -> None:
    """Read-merge-write the entry at ``path`` under the lock of its model folder."""
    _writable(path)
    files.update_json(path, change, _OWNED, read=_load, sort_keys=True, separators=(",", ":"),
                      indent=None)  # compact: ~40 KB per drafter


def record_training(root: str | Path, drafter_path: str | Path, layers: Sequence[int], config: Mapping[str, Any],
                    train_log: Mapping[str, Any], digest: str | None = None) -> None:
    """Enter a trained drafter (its folder must hold its weights; ``digest``, its
    :func:`weights_digest`, is computed when not given), with the CPU it trained on
    (:func:`cpu_record`); scores already in the ledger for the same weights are kept."""
    path = ledger_file(root, drafter_path)
    if path is None:
        return
    digest = digest or weights_digest(drafter_path)

    def change(old: dict[str, Any] | None) -> dict[str, Any]:
        old = old or {}
        same = old.get("weights_digest") == digest
        return {"version": LEDGER_VERSION, "layers": [int(i) for i in layers], "config": dict(config),
                "drafter": path.stem, "capture": path.parent.name, "cpu": cpu_record(), "weights_digest": digest,
                "train_log": dict(train_log), "scores": old.get("scores", {}) if same else {}}

    _update(path, change)


def score_key(eval_cache: str | Path, depth: int, threshold: float) -> str:
    """The name a score is kept under: the eval capture's folder, the chain depth and the draft threshold."""
    return f"{Path(eval_cache).name}/depth{int(depth)}/threshold{float(threshold):g}"


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def read_score(root: str | Path, drafter_path: str | Path, key: str) -> dict[str, Any] | None:
    """A score the ledger holds for a drafter (see :func:`score_key`), or ``None``. A score
    whose tau is not a number raises :class:`LedgerError` naming the entry and the drafter."""
    doc = read(root, drafter_path)
    score = None if doc is None else doc.get("scores", {}).get(key)
    if score is None:
        return None
    per = score.get("per_record") or []
    if ("tau_offline" in score and not _finite(score["tau_offline"])) or \
            (per and not any(_finite(r.get("tau")) for r in per)):
        path = ledger_file(root, drafter_path)
        raise LedgerError(f"drafter ledger entry {path} (drafter {Path(drafter_path).name}) holds a score {key!r} "
                          f"whose tau is not a number (tau_offline {score.get('tau_offline')}); delete that score "
                          f"from the entry (or the entry: git checkout -- {path}) and it is computed again")
    return score


def record_score(root: str | Path, drafter_path: str | Path, key: str, score: Mapping[str, Any]) -> None:
    """Add a score to a drafter's ledger entry (a drafter without an entry is skipped), under the
    lock of its model folder: concurrent recorders into one entry keep each other's scores."""
    path = ledger_file(root, drafter_path)
    if path is None:
        return

    def change(doc: dict[str, Any] | None) -> dict[str, Any] | None:
        if doc is None:
            return None
        doc.setdefault("scores", {})[key] = dict(score)
        return doc

    _update(path, change)
