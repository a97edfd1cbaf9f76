"""The base every sweep-file block shares: unknown keys are errors, and a path is
relative to the spec file that names it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    ValidationInfo,
)


def resolve_path(value: Path, info: ValidationInfo) -> Path:
    """Relative paths mean "relative to the spec file", never to the caller's cwd."""
    base = (info.context or {}).get("base_dir")
    value = Path(value).expanduser()
    if base is not None and not value.is_absolute():
        value = Path(base) / value
    return Path(value).resolve() if base is not None else value


SpecPath = Annotated[Path, AfterValidator(resolve_path)]
"""A filesystem path; relative values resolve against the spec file's folder."""


class Strict(BaseModel):
    """Base for every block: unknown keys are errors (with a did-you-mean)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
