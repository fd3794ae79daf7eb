"""File hashes: one function for files hashed once (capture shards, drafter weights) and a
memoised one for large files hashed on every load (model weights)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from activation_wave.core.paths import cache_root

_BLOCK = 1 << 22  # 4 MiB


def file_sha256(path: Path) -> str:
    """sha256 of a file, read in 4 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            h.update(block)
    return h.hexdigest()


def file_sha256_memo(path: Path) -> str:
    """:func:`file_sha256`, memoised under the cache root keyed by (path, size, mtime): a
    model file of a gigabyte is hashed once per machine, not on every load."""
    st = path.stat()
    key = hashlib.sha1(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()
    memo = cache_root() / "hashes" / key
    if memo.exists():
        return memo.read_text().strip()
    digest = file_sha256(path)
    from activation_wave.core import files

    files.write_text(memo, digest)
    return digest
