"""Content hashes of files: what caches and staged copies are keyed and checked by.

One function, because a cache key computed one way and checked another would make
every lookup miss (or, worse, every check pass): the init-weights cache and the
artifact-store staging of inputs and checkpoints all hash files here.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: Path) -> str:
    """sha256 of a (possibly large) file's bytes, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_sha256(folder: Path) -> str:
    """sha256 of a folder's regular files: each relative name with its content hash, in
    name order (an HF model folder used as a checkpoint is keyed by this)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(folder).as_posix()}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()
