"""A new SQLite store starts as a copy of an empty, migrated one.

MLflow makes a new SQLite file's schema by running its alembic migrations, which is slow
and would be paid by every new sweep, a large part of a one-trial sweep's fixed cost.
The result depends only on the MLflow version, so the first store a version creates is
also kept, empty, as `$SWEEPER_CACHE/mlflow-schema/<version>.db`, and later new stores
start as a copy of it, which opens without running any migration (docs/benchmarks.md
has the measurements). A copy holds what MLflow's own first access leaves: the tables
at the head revision and the `Default` experiment (id 0), so the ids a sweep gets are
the same either way.

Both steps run under the store's creation lock (`tracking.server.creation_lock`); the
template is written to a temporary name and renamed, so a reader never sees half of one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

TEMPLATE_DIR = "mlflow-schema"


def template_path(mlflow_version: str) -> Path:
    from sweeper.tracking.staging import cache_root

    return cache_root() / TEMPLATE_DIR / f"{mlflow_version}.db"


def seed_from_template(db: Path, mlflow_version: str) -> bool:
    """Copy the version's template to `db`, which must not exist yet; False when there
    is no template (MLflow then creates the schema, and `keep_template` keeps it)."""
    template = template_path(mlflow_version)
    if db.exists() or not template.is_file():
        return False
    _copy_atomically(template, db)
    return True


def keep_template(db: Path, mlflow_version: str) -> None:
    """Keep `db`, just created and migrated by MLflow and still empty, as the template.
    A cache that cannot be written costs the next sweep the migration, nothing else."""
    with contextlib.suppress(OSError):
        _copy_atomically(db, template_path(mlflow_version))


def _copy_atomically(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    try:
        shutil.copyfile(source, temporary)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
