"""Turn the reliability record (JSON lines from `reliability.record`) into docs/reliability.md.

    python tests/support/reliability_report.py LOG OUT.md --command "make reliability"

The page is a function of the log and the arguments only (rows sorted by scenario, the
date is the log's latest entry, the machine is passed in), so running it twice on the
same log gives the same file. `make reliability` runs the tests that record, then this.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

TITLE = "# Reliability: injected faults and bad input, and what the sweep did"
INTRO = (
    "Every row was written by the test named under it, after its assertions, with the\n"
    "figures it measured (tests/support/reliability.py). Regenerate with\n"
    "`make reliability`; do not edit by hand."
)


def load(path: Path) -> list[dict[str, object]]:
    """The log's entries; the last entry of a (scenario, test) pair wins (a re-run)."""
    entries: dict[tuple[str, str], dict[str, object]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            entries[(str(entry["scenario"]), str(entry.get("test", "")))] = entry
    return [entries[key] for key in sorted(entries)]


def cell(text: object) -> str:
    """Markdown-table-safe text: pipes escaped, line breaks as <br>."""
    return str(text).replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def pytest_totals(junit: Path | None) -> str:
    """'N tests: P passed, F failed, S skipped in T s' from pytest's JUnit XML: a test
    that failed before it could record still shows here."""
    if junit is None or not junit.is_file():
        return "(no pytest report)"
    import xml.etree.ElementTree as ET

    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return "(no pytest report)"
    count = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    passed = count["tests"] - count["failures"] - count["errors"] - count["skipped"]
    return (
        f"{count['tests']} tests: {passed} passed, {count['failures'] + count['errors']} "
        f"failed, {count['skipped']} skipped in {float(suite.get('time', 0)):.0f} s"
    )


def render(entries: list[dict[str, object]], command: str, machine: str, totals: str = "") -> str:
    date = max((str(e.get("time", "")) for e in entries), default="(no entries)")
    passed = sum(1 for e in entries if e.get("passed"))
    lines = [
        TITLE,
        "",
        INTRO,
        "",
        f"- command: `{command}`",
        f"- machine: {machine}",
        f"- date (UTC, last record): {date}",
        f"- scenarios: {len(entries)}, passed: {passed}, failed: {len(entries) - passed}",
        f"- pytest: {totals or '(no pytest report)'}",
        "",
        "| scenario | injected | observed | result |",
        "|---|---|---|---|",
    ]
    for e in entries:
        test = f"<br>`{e['test']}`" if e.get("test") else ""
        result = "pass" if e.get("passed") else "**FAIL**"
        lines.append(
            f"| **{cell(e['scenario'])}**{test} | {cell(e['injected'])} "
            f"| {cell(e['observed'])} | {result} |"
        )
    return "\n".join(lines) + "\n"


def this_machine() -> str:
    import os

    cores = len(os.sched_getaffinity(0))
    return f"{platform.system()} {platform.machine()}, {cores} CPU core(s), Python " + (
        platform.python_version()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--command", default="make reliability")
    parser.add_argument("--machine", default=None, help="default: this machine, described")
    parser.add_argument("--junit", type=Path, default=None, help="pytest --junitxml output")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        print(f"error: {args.log}: no reliability log (run the tests first)", file=sys.stderr)
        return 2
    machine = args.machine or this_machine()
    text = render(load(args.log), args.command, machine, pytest_totals(args.junit))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
