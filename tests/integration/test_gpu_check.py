"""bench/gpu_trainers.py, the GPU check, end to end on the CPU at a tiny size.

The GPU machine has neither Ray nor MLflow, so `run` goes here with both made
unimportable (a package of each name that raises ImportError, first on PYTHONPATH; every
trainer subprocess inherits it): a trainer that needed either would fail. `prepare`
builds the lab's stand-in data (32 reviews, 2 layers x 64: `--quick`) without the
wheels (they are for the GPU machine's Python); `run` writes the init file again from
the jobs, runs every job through sweeper's trainer and bare, packs two, and `report`
turns the results into the section. A few minutes on 2 cores: `make reliability`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.soak]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_trainers.py"


def _script(*args: object, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_prepare_run_report_on_cpu_without_ray_or_mlflow(tmp_path):
    blocked = tmp_path / "blocked"
    for name in ("ray", "mlflow"):
        (blocked / name).mkdir(parents=True)
        (blocked / name / "__init__.py").write_text(f"raise ImportError('no {name} here')\n")
    folder = tmp_path / "check"
    _script("prepare", folder, "--quick", "--no-wheels")
    plan = json.loads((folder / "jobs.json").read_text())
    assert sorted(plan["jobs"]) == ["fairseq, bf16", "fairseq, fp32", "hf, bf16", "hf, fp32"]
    assert not (folder / "init").exists()  # written again where the jobs run
    assert not (folder / "wheels").exists()

    env = {**os.environ, "PYTHONPATH": str(blocked)}
    _script("run", folder, "--device", "cpu", "--packings", "2", "--out", tmp_path / "out",
            "--budget-s", "3600", env=env)  # fmt: skip
    results = json.loads((tmp_path / "out" / "results-cpu.json").read_text())
    assert (folder / "results-cpu.json").read_text() == json.dumps(results, indent=2)
    for name, runs in results["solo"].items():
        mine = runs["sweeper"]
        assert mine["ok"], (name, mine["error"])
        assert mine["updates"] == 4 and mine["on_cuda"] is False  # 32 reviews, batch 8
        assert mine["best_valid"] is not None and mine["updates_per_s"] > 0
    # Stock fairseq-train takes its TPU path for --bf16 without CUDA (sweeper's child
    # patches that): the one bare run that cannot run on a CPU.
    bare = {name: runs["bare"]["ok"] for name, runs in results["solo"].items()}
    assert bare == {"fairseq, fp32": True, "hf, fp32": True, "fairseq, bf16": False,
                    "hf, bf16": True}  # fmt: skip
    packed = results["packed"]["2"]
    assert packed["ok"] and packed["trials"] == ["fairseq, fp32", "hf, fp32"]
    assert packed["wall_s"] >= max(t["wall_s"] for t in packed["each"]) - 0.1

    text = _script("report", tmp_path / "out" / "results-cpu.json", "--no-doc")
    assert "## GPU check" in text
    assert "| fairseq, fp32 | finished | finished |" in text
    assert "| 2 | fairseq, hf | yes |" in text
    assert "7 of 8 single runs finished (0 skipped for time)." in text
