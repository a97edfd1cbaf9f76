"""`train.precision`: bf16 trials on both real frameworks, and fp16 refused on CPU.

bf16 runs where the CPU has it natively (AVX-512 BF16 or AMX); elsewhere torch emulates
it slowly and the test skips, naming why. The trial key of an fp32 trial is the one it
had before the field existed (tests/unit/test_trials.py); here the record shows the
precision (param, Table 1) and `--evaluate` reproduces the bf16 test accuracy.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.sweeps import new_sweep, run_sweeper, runs_by_role

pytestmark = pytest.mark.integration


def _native_bf16() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text(encoding="utf-8") if cpuinfo.exists() else ""
    return "avx512_bf16" in flags or "amx_bf16" in flags


def test_bf16_trials_run_on_both_frameworks_and_reload_alike(tmp_path, tmp_path_factory):
    pytest.importorskip("fairseq")
    if not _native_bf16():
        pytest.skip("this CPU has no native bf16 (avx512_bf16 / amx_bf16)")
    spec, out = new_sweep(
        tmp_path,
        tmp_path_factory,
        "bf16",
        grid={"framework": ["fairseq", "hf"], "seed": [1]},
        train={"precision": "bf16"},
    )
    done = run_sweeper("run", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    _, trials = runs_by_role(out, "bf16")
    assert len(trials) == 2
    for run in trials:
        assert run.info.status == "FINISHED"
        assert run.data.params["train.precision"] == "bf16"
    (folder,) = (out / "trials").glob("fairseq-random-full-s1-*")
    log = (folder / "trainer.log").read_text(encoding="utf-8")
    assert " --bf16" in log and "'bf16': True" in log  # fairseq's own switch, taken
    assert "'tpu': False" in log  # on the CPU, not fairseq's implied TPU

    summary = run_sweeper("summarize", spec, "--format", "json", "--no-log")
    assert summary.returncode == 0, summary.stderr[-3000:]
    assert {t["precision"] for t in json.loads(summary.stdout)["trials"]} == {"bf16"}
    checked = run_sweeper("summarize", spec, "--evaluate", "--no-log")
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "2 of 2 agree, exactly" in checked.stdout


def test_fp16_without_a_gpu_exits_2_before_anything_is_created(tmp_path, tmp_path_factory):
    spec, out = new_sweep(tmp_path, tmp_path_factory, "fp16", train={"precision": "fp16"})
    done = run_sweeper("run", spec, timeout=60)
    assert done.returncode == 2
    assert "train.precision fp16 runs on CUDA only" in done.stderr
    assert not (out / "trials").exists()
    _, trials = runs_by_role(out, "fp16")
    assert not trials
