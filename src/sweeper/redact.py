"""Keeping secrets out of the record and user text out of paths.

The MLflow record is meant to be shared (a tracking server a whole team reads), so
nothing secret may reach it. Secrets get in through the environment: a spec may say
`uri: https://me:${MLFLOW_PASSWORD}@host` and `${VAR}` interpolation puts the value into
the resolved spec. `redact` masks, in any text about to be logged, the value of every
environment variable whose name looks like a secret (TOKEN, KEY, SECRET, PASSWORD,
any case) and the password part of any `scheme://user:password@host` URL.

`safe_name` is for names built from user input that become file or folder names
(trial names carry grid values, some of them free strings such as
`lora.target_modules`): one path component, no separators, never `.` or `..`.
`contained` is for names read back from the record (a synced checkpoint's manifest):
they must land inside the folder they are restored into. `links_outside` finds the
symbolic links in a trial folder that lead out of it, which an upload would follow.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD", re.IGNORECASE)
MASK = "***"
MIN_SECRET_LENGTH = 4
"""Shorter values (`1`, `yes`) are flags rather than secrets, and masking them would
garble every number in the record."""
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)(?!\$\{)[^/\s@]+(?=@)")
"""`scheme://user:PASSWORD@`; a `${VAR}` reference (the spec as written) is no secret."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.,=+\-\[\]]")


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the secret-looking variables, longest first (so a secret containing
    another is masked whole)."""
    env = os.environ if environ is None else environ
    found = {v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= MIN_SECRET_LENGTH}
    return sorted(found, key=len, reverse=True)


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with secret values and URL passwords replaced by `***`."""
    for value in secret_values(environ):
        text = text.replace(value, MASK)
    return _URL_PASSWORD.sub(rf"\g<head>{MASK}", text)


def redact_values(
    values: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A params/tags mapping with every value redacted (keys are sweeper's own names)."""
    return {key: redact(value, environ) for key, value in values.items()}


def safe_name(text: str) -> str:
    """`text` as one file-name component: characters other than letters, digits and
    `_ . , = + - [ ]` become `_`, and leading dots are dropped (no `..`, no hidden
    files). Names made of safe characters are unchanged."""
    return _UNSAFE.sub("_", text).lstrip(".") or "_"


def contained(root: Path, name: str) -> Path:
    """`root / name`, or ValueError when `name` is absolute or leads out of `root`."""
    base = Path(root).resolve()
    path = (base / name).resolve()
    if Path(name).is_absolute() or not path.is_relative_to(base):
        raise ValueError(f"{name!r} leads out of {root}")
    return path


def links_outside(folder: Path) -> list[Path]:
    """Symbolic links under `folder` whose targets lie outside it (sorted)."""
    base = Path(folder).resolve()
    return sorted(
        p
        for p in Path(folder).rglob("*")
        if p.is_symlink() and not p.resolve().is_relative_to(base)
    )
