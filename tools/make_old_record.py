"""Write a sweep record with the code of an older git revision, and that code's summary.

    python tools/make_old_record.py --rev 6f53b41 --out tests/data/record_v1

A record (the MLflow store of a sweep) outlives the sweeper that wrote it, so the
upgrade path of `sweeper.tracking.record_format` is tested on a record an older
revision really wrote, not on a hand-made imitation. This runs a tiny sweep of the
test-only `dummy` trainer (`tests/support/sweeps.base_spec`: a generated corpus of 40
examples, one epoch-step curve per trial; 3 seeds x 2 learning rates, each trial's
curve shifted by its own fixed noise so the comparison has a spread) with `REV`'s
`src/` and `tests/support/` first on PYTHONPATH (`bench/common.code_of`, as the
benchmarks' `--baseline`), then has `REV`'s own `sweeper summarize --format json
--no-log` summarize it. OUT receives:

- `mlflow.db`: the sweep's SQLite store, compacted (`VACUUM` into 512-byte pages; no
  row changed);
- `summary.json`: what `REV` printed for it, with its `tracking_uri` replaced by the
  placeholder `TRACKING_URI` (the store is read from wherever the test copies it).

The artifact folder is not kept: `summarize --no-log` reads tags, params and metrics
only. tests/unit/test_record_upgrade.py summarizes OUT with the current code and
compares with `summary.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import common  # noqa: E402  (bench/common.py: code_of, clean_env)

from tests.support.processes import sweeper_command  # noqa: E402
from tests.support.sweeps import base_spec  # noqa: E402

NAME = "oldrec"
PLUGIN = "tests.support.dummy_trainer:register"
NOISE = {"*": {"noise": 0.5}}
TRACKING_URI = "TRACKING_URI"
"""Stands for the store's URI in the stored summary.json."""


def write_spec(work: Path) -> Path:
    """The tiny dummy sweep: 3 seeds x 2 learning rates, one trial at a time."""
    raw = base_spec(work / "corpus", NAME, work / "out")
    raw["grid"]["seed"] = [1, 2, 3]
    raw["grid"]["params"] = {"train.lr": [0.002, 0.004]}
    raw["max_concurrent"] = 1
    path = work / f"{NAME}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def make(rev: str, out: Path) -> None:
    """Run the sweep with `rev`'s code in a temporary folder; write OUT (see module)."""
    with tempfile.TemporaryDirectory(prefix="old-record-") as tmp:
        work = Path(tmp)
        code = common.code_of(rev, work / "code", "tests/support")
        env = common.clean_env()
        env.update(
            PYTHONPATH=os.pathsep.join([str(code), str(code.parent)]),
            SWEEPER_PLUGINS=PLUGIN,
            SWEEPER_HOME=str(work / "home"),
            SWEEPER_DUMMY_EXTRA=json.dumps(NOISE),
        )
        spec = write_spec(work)
        subprocess.run(sweeper_command("run", spec), env=env, check=True, cwd=work)
        out.mkdir(parents=True, exist_ok=True)
        db = out / "mlflow.db"
        shutil.copyfile(work / "out" / "mlflow.db", db)
        connection = sqlite3.connect(db, isolation_level=None)
        connection.execute("PRAGMA page_size = 512")  # ~200 tables and indexes, most empty
        connection.execute("VACUUM")
        connection.close()
        uri = f"sqlite:///{db.resolve()}"
        args = ("summarize", "--experiment", NAME, "--tracking-uri", uri, "--format", "json")
        printed = subprocess.run(
            sweeper_command(*args, "--no-log"),
            env=env, check=True, cwd=work, capture_output=True, text=True,
        ).stdout  # fmt: skip
    summary = json.loads(printed)
    summary["tracking_uri"] = TRACKING_URI
    text = json.dumps(summary, indent=2, sort_keys=True) + "\n"
    (out / "summary.json").write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", required=True, help="git revision whose code writes the record")
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for mlflow.db and summary.json"
    )
    args = parser.parse_args(argv)
    make(args.rev, args.out)
    size = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"{args.out}: record of {args.rev}, {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
