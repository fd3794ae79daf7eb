"""Committed results name drafters and captures by cache keys, never by a machine's paths
(issue 42: absolute cache paths in benchmarks.json)."""

from __future__ import annotations

import re

import pytest

from activation_wave.core.paths import REPO_ROOT

MACHINE_PATH = re.compile(r'"/(root|home|tmp|work)\b')
FILES = sorted([*(REPO_ROOT / "data" / "results").rglob("*.json"), *(REPO_ROOT / "data" / "drafters").rglob("*.json")])


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_machine_paths_in_committed_results(path):
    hits = MACHINE_PATH.findall(path.read_text(encoding="utf-8"))
    assert not hits, f"{path.relative_to(REPO_ROOT)} holds {len(hits)} absolute path(s); write cache keys (core.results.cache_key)"


def test_the_pattern_catches_a_machine_path():
    assert MACHINE_PATH.search('{"path": "/root/.cache/activation_wave/capture/x"}')
    assert not MACHINE_PATH.search('{"path": "capture/x/drafters/y"}')
