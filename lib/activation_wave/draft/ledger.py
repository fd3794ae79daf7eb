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
ledger). Files are written atomically; an unreadable one is reported, moved aside and
rebuilt, never trusted.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from activation_wave.core.paths import REPO_ROOT

#: Format of a ledger file; a file with another version is rebuilt.
LEDGER_VERSION = 1


def ledger_file(root: str | Path, drafter_path: str | Path) -> Path | None:
    """The ledger file of the drafter whose cache folder is ``drafter_path``, or ``None`` without a ledger."""
    if not str(root):
        return None
    p = Path(drafter_path)
    base = Path(root) if Path(root).is_absolute() else REPO_ROOT / root
    return base / p.parent.parent.name / f"{p.name}.json"


def read(root: str | Path, drafter_path: str | Path) -> dict[str, Any] | None:
    """The ledger entry of a drafter, or ``None`` (no ledger, no entry, or an unreadable entry,
    which is renamed to ``*.corrupt`` with a warning so that it is rebuilt)."""
    path = ledger_file(root, drafter_path)
    if path is None or not path.exists():
        return None
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("version") != LEDGER_VERSION or "train_log" not in doc:
            raise ValueError("not a ledger entry of this version")
    except (ValueError, UnicodeDecodeError) as exc:
        bad = path.with_suffix(".json.corrupt")
        os.replace(path, bad)
        warnings.warn(f"drafter ledger entry {path} is unreadable ({exc}); moved to {bad.name}, the drafter's "
                      "results are computed again", stacklevel=2)
        return None
    return doc


def _write(path: Path, doc: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True, separators=(",", ":")))  # compact: ~40 KB per drafter
    os.replace(tmp, path)


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


def record_training(root: str | Path, drafter_path: str | Path, layers: Sequence[int], config: Mapping[str, Any],
                    train_log: Mapping[str, Any], digest: str | None = None) -> None:
    """Enter a trained drafter (its folder must hold its weights; ``digest``, its
    :func:`weights_digest`, is computed when not given); scores already in the ledger for
    the same weights are kept."""
    path = ledger_file(root, drafter_path)
    if path is None:
        return
    digest = digest or weights_digest(drafter_path)
    old = read(root, drafter_path) or {}
    same = old.get("weights_digest") == digest
    _write(path, {"version": LEDGER_VERSION, "layers": [int(i) for i in layers], "config": dict(config),
                  "weights_digest": digest, "train_log": dict(train_log),
                  "scores": old.get("scores", {}) if same else {}})


def score_key(eval_cache: str | Path, depth: int, threshold: float) -> str:
    """The name a score is kept under: the eval capture's folder, the chain depth and the draft threshold."""
    return f"{Path(eval_cache).name}/depth{int(depth)}/threshold{float(threshold):g}"


def read_score(root: str | Path, drafter_path: str | Path, key: str) -> dict[str, Any] | None:
    """A score the ledger holds for a drafter (see :func:`score_key`), or ``None``."""
    doc = read(root, drafter_path)
    return None if doc is None else doc.get("scores", {}).get(key)


def record_score(root: str | Path, drafter_path: str | Path, key: str, score: Mapping[str, Any]) -> None:
    """Add a score to a drafter's ledger entry (a drafter without an entry is skipped)."""
    path = ledger_file(root, drafter_path)
    doc = read(root, drafter_path)
    if path is None or doc is None:
        return
    doc.setdefault("scores", {})[key] = dict(score)
    _write(path, doc)
