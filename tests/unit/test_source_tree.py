"""The source tree reads as the architecture: unique file names, indexes that match.

A newcomer finds a module by its name, so no two modules under src/sweeper share a
file name (but `__init__.py` and the `cli/` modules named after their subcommand), and
each package's docstring lists exactly the modules it holds.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "sweeper"
PACKAGES = sorted(p.parent for p in SRC.rglob("__init__.py") if p.parent != SRC)


def _subcommands() -> set[str]:
    """The `cli/` module of each subcommand `sweeper.cli.main` registers."""
    from sweeper.cli.main import COMMANDS

    return {module.rsplit(".", 1)[1] for module, _ in COMMANDS.values()}


def test_no_two_modules_share_a_file_name():
    cli_commands = _subcommands()
    seen: dict[str, list[str]] = defaultdict(list)
    for path in SRC.rglob("*.py"):
        if path.name == "__init__.py":
            continue
        if path.parent.name == "cli" and path.stem in cli_commands:
            continue
        seen[path.name].append(str(path.relative_to(SRC)))
    shared = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not shared, f"modules that share a file name: {shared}"


def test_no_two_test_files_share_a_name():
    """The test folders are not packages: pytest imports each test file by its bare name,
    so two files of one name stop the whole run at collection."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in (SRC.parents[1] / "tests").rglob("test_*.py"):
        found[path.name].append(str(path.relative_to(SRC.parents[1])))
    assert {name: paths for name, paths in found.items() if len(paths) > 1} == {}


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(SRC)))
def test_package_docstring_lists_its_modules(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"{package.name}/__init__.py has no docstring"
    modules = {p.name for p in package.glob("*.py") if p.name != "__init__.py"}
    modules |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()}
    listed = set(re.findall(r"\b(\w+\.py)\b", doc)) | set(re.findall(r"\b(\w+/)", doc))
    listed = {name for name in listed if name in modules or name.endswith(".py")}
    missing = sorted(modules - listed)
    stale = sorted(name for name in listed - modules if name.endswith(".py"))
    assert not missing, f"{package.name}/__init__.py does not list {missing}"
    assert not stale, f"{package.name}/__init__.py lists modules that are not there: {stale}"


def test_no_docstring_or_comment_tells_issue_history():
    hits = [
        f"{path.relative_to(SRC)}:{number}"
        for path in SRC.rglob("*.py")
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bissue \d", line)
    ]
    assert not hits, f"history belongs in the commit log: {hits}"
