"""Loading a sweep file: YAML, `extends:` bases, `${ENV}`, dotted overrides, paths, and
error reporting.

A spec error must be fixable from the message alone, so every problem is collected
(never just the first), and each line names the file, the field path and what was
expected, with a did-you-mean for misspelt keys.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from sweeper import backends
from sweeper.spec import extends
from sweeper.spec.schema import SweepSpec

_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a spec, located precisely enough to fix."""

    file: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field or '<top level>'}: {self.message}"


class SpecError(Exception):
    """All problems found in one spec; the CLI prints them and exits 2."""

    def __init__(self, problems: list[SpecProblem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def load_spec(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> SweepSpec:
    """Read (with its `extends:` chain), interpolate, override and validate a sweep
    file; raise SpecError on any fault."""
    path = Path(path)
    shown = str(path)
    problems: list[SpecProblem] = []
    raw = _read_chain(path, problems)
    for item in overrides:
        _apply_override(raw, item, shown, problems)
    if problems:
        raise SpecError(problems)
    return validate_mapping(raw, shown, base_dir=path.resolve().parent)


def _read_chain(path: Path, problems: list[SpecProblem]) -> dict[str, Any]:
    """The file's mapping laid over its bases', each interpolated on its own so that a
    problem names the file it is in."""
    layers: list[dict[str, Any]] = []
    chain: list[Path] = []
    current = path
    while True:
        raw = _interpolate(_read_yaml(current), (), _shown(current, path), problems)
        try:
            base = extends.base_of(raw, current)
            if base is not None:
                extends.check_cycle([*chain, current.resolve()], base)
                if not base.is_file():
                    raise extends.ChainError(f"base file not found: {base}")
        except extends.ChainError as exc:
            where = _shown(current, path)
            raise SpecError([SpecProblem(where, extends.EXTENDS, str(exc))]) from None
        raw.pop(extends.EXTENDS, None)
        layers.append(extends.rebase_paths(raw, current.resolve().parent) if chain else raw)
        chain.append(current.resolve())
        if base is None:
            break
        current = base
    merged: dict[str, Any] = {}
    for layer in reversed(layers):
        merged = extends.merge(merged, layer)
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    """One sweep file's top-level mapping, or a SpecError naming the file."""
    shown = str(path)
    if not path.is_file():
        raise SpecError([SpecProblem(shown, "", "file not found")])
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SpecError([SpecProblem(shown, "", f"not valid YAML: {exc}")]) from None
    if not isinstance(raw, dict):
        raise SpecError([SpecProblem(shown, "", "expected a mapping of fields at the top level")])
    return raw


def _shown(path: Path, leaf: Path) -> str:
    """The leaf as the user typed it; a base relative to the working folder if under it."""
    if path is leaf:
        return str(leaf)
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path.resolve())


def validate_mapping(raw: dict[str, Any], shown: str, base_dir: Path) -> SweepSpec:
    """Validate an already-loaded mapping (used by load_spec and by tests): the schema's
    problems and the backend table's, all reported at once."""
    problems = _backend_problems(raw, shown)
    try:
        spec = SweepSpec.model_validate(raw, context={"base_dir": base_dir})
    except ValidationError as exc:
        problems = [_problem(shown, err) for err in exc.errors()] + problems
        raise SpecError(problems) from None
    problems += _task_problems(spec, shown)
    if problems:
        raise SpecError(problems)
    return spec


def _task_problems(spec: SweepSpec, shown: str) -> list[SpecProblem]:
    """What the spec's task does not read (`sweeper.backends.Task.formats`,
    `Task.tokenizer`)."""
    task = backends.task(spec.task)
    problems = []
    if task.formats and spec.data.format not in task.formats:
        problems.append(SpecProblem(shown, "data.format", (
            f"task {task.name} reads data.format {', '.join(task.formats)} only "
            f"(got {spec.data.format!r})"
        )))  # fmt: skip
    if not task.tokenizer and spec.model.tokenizer is not None:
        problems.append(SpecProblem(shown, "model.tokenizer", (
            f"task {task.name} does not train a tokenizer: give model.sentencepiece and "
            "model.dictionary"
        )))  # fmt: skip
    return problems


def _backend_problems(raw: dict[str, Any], shown: str) -> list[SpecProblem]:
    """`grid.framework` names with no backend for the spec's task: a framework nobody
    registered, or one that does not run the task ("causal_lm has no fairseq
    backend"). The schema takes any string: which backends exist is
    `sweeper.backends`' to say, plugins included; a task the schema refuses is
    reported by the schema alone."""
    grid = raw.get("grid")
    chosen = grid.get("framework") if isinstance(grid, dict) else None
    if not isinstance(chosen, list):
        return []
    task = raw.get("task", SweepSpec.model_fields["task"].default)
    known = backends.tasks()
    problems = []
    for i, name in enumerate(chosen):
        if not isinstance(name, str):
            continue
        if name not in backends.frameworks():
            problems.append(SpecProblem(shown, f"grid.framework.{i}", backends.unknown(name)))
        elif isinstance(task, str) and task in known and backends.missing(name, task):
            problems.append(
                SpecProblem(shown, f"grid.framework.{i}", str(backends.missing(name, task)))
            )
    return problems


def _interpolate(value: Any, loc: tuple[str, ...], shown: str, problems: list) -> Any:
    """Replace `${VAR}` / `${VAR:-default}` in every string, reporting unset variables."""
    if isinstance(value, dict):
        return {k: _interpolate(v, (*loc, str(k)), shown, problems) for k, v in value.items()}
    if isinstance(value, list):
        return [_interpolate(v, (*loc, str(i)), shown, problems) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in os.environ:
            return os.environ[name]
        if default is not None:
            return default
        problems.append(
            SpecProblem(shown, ".".join(loc), f"environment variable {name} is not set")
        )
        return match.group(0)

    return _ENV.sub(sub, value)


def _apply_override(raw: dict[str, Any], item: str, shown: str, problems: list) -> None:
    """Apply one `dotted.path=yaml_value` command-line override to the raw mapping."""
    key, sep, text = item.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        problems.append(
            SpecProblem(shown, key, f"override {item!r} is not of the form field.path=value")
        )
        return
    try:
        value = yaml.safe_load(text) if text else ""
    except yaml.YAMLError:
        value = text
    node = raw
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            problems.append(SpecProblem(shown, key, f"override: {where} is not a mapping"))
            return
        node = child
    node[parts[-1]] = value


def _problem(shown: str, err: dict[str, Any]) -> SpecProblem:
    loc = tuple(str(p) for p in err["loc"])
    field = ".".join(loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        message = "unknown field"
        options = _fields_at(loc[:-1])
        close = difflib.get_close_matches(loc[-1], options, n=1, cutoff=0.6)
        if close:
            message += f"; did you mean {close[0]!r}?"
        elif options:
            message += f"; expected one of: {', '.join(sorted(options))}"
        return SpecProblem(shown, field, message)
    if kind == "missing":
        if loc and loc[-1].isdigit():
            return SpecProblem(shown, field, f"item {loc[-1]} is missing (list too short)")
        return SpecProblem(shown, field, "required field is missing")
    got = err.get("input")
    message = err["msg"].removeprefix("Value error, ")
    if kind not in {"value_error", "assertion_error"} and not isinstance(got, dict | list):
        message += f" (got {got!r})"
    return SpecProblem(shown, field, message)


def _fields_at(loc: tuple[str, ...]) -> list[str]:
    """Names of the fields allowed at a location, for did-you-mean suggestions."""
    model: Any = SweepSpec
    for part in loc:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
        info = model.model_fields.get(part)
        if info is None:
            return []
        model = _model_in(info.annotation)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    """The BaseModel inside `X | None` or `X`, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def check_files(spec: SweepSpec, shown: str) -> list[SpecProblem]:
    """`validate --strict`: every file the spec references must exist (unless sweeper
    itself produces it: generated data, the pretraining stage's checkpoint)."""
    problems: list[SpecProblem] = []
    generated = spec.data.source == "generated"

    def need(field: str, path: Path | None, what: str = "file") -> None:
        if path is None:
            return
        exists = path.is_dir() if what == "folder" else path.is_file()
        if not exists:
            problems.append(SpecProblem(shown, field, f"{what} not found: {path}"))

    data = spec.data
    if not generated:
        need("data.dir", data.dir, "folder")
        table = "folder" if data.format == "hf_disk" else "file"
        if data.format == "lines":
            for split, stem in data.splits.items():
                for suffix in (data.text_suffix, data.label_suffix):
                    need(f"data.splits.{split}", data.dir / f"{stem}.{suffix}")
        elif data.files is not None:
            for split, name in data.files.items():
                need(f"data.files.{split}", data.dir / name, table)
        elif data.file is not None:
            need("data.file", data.dir / data.file, table)
        if data.unlabeled is not None and not (data.dir / data.unlabeled).exists():
            problems.append(
                SpecProblem(shown, "data.unlabeled", f"not found: {data.dir / data.unlabeled}")
            )
        need("model.sentencepiece", spec.model.sentencepiece)
        need("model.dictionary", spec.model.dictionary)
    checkpoint = spec.model.checkpoint
    if checkpoint is not None and not checkpoint.is_dir():  # a folder: an HF model
        need("model.checkpoint", checkpoint)
    return problems
