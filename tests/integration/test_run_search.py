"""`sweeper run` with a search block: Optuna + ASHA per group, then the confirm stage.

Real Ray, real MLflow SQLite store, real Optuna storage, dummy trainer subprocesses
(whose accuracy drops for learning rates above 0.01, so the search has a signal).
Two groups (pretrained, random) × 4 samples on seed 1, one trial at a time so ASHA's
decisions follow from the (seeded) samples; then each group's best configuration on
seeds 2 and 3 (never the tuning seed). A second test kills the driver mid-search and
resumes it; it confirms on the tuning seed with `allow_seed_overlap`, which the
summary flags.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sweeper import record_names
from tests.support.sweeps import (
    kill_group,
    logged_summary,
    new_sweep,
    run_sweeper,
    runs_by_role,
    sweeper_command,
    sweeper_env,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SEARCH = {
    "metric": "valid_accuracy",
    "mode": "max",
    "num_samples": 4,
    "space": {
        "train.lr": {"type": "loguniform", "low": 0.001, "high": 1.0},
        "train.warmup_ratio": {"type": "uniform", "low": 0.0, "high": 0.2},
    },
    "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2},
    "tuning_seeds": [1],
}


def _sweep(tmp_path, tmp_path_factory, name: str, **changes):
    """The base spec searched: 2 groups × 4 samples on seed 1, confirmed on seeds 2-3."""
    settings = {
        "grid": {"seed": [2, 3], "init": ["pretrained", "random"], "framework": ["dummy"]},
        "search": SEARCH,
        "max_concurrent": 1,
        **changes,
    }
    return new_sweep(tmp_path, tmp_path_factory, name, **settings)


def _study_trials(out: Path, sweep: str, group: str) -> list:
    import optuna

    study = optuna.load_study(study_name=f"{sweep}:{group}", storage=f"sqlite:///{out}/optuna.db")
    return study.get_trials(deepcopy=False)


def test_search_then_confirm(tmp_path, tmp_path_factory):
    spec, out = _sweep(tmp_path, tmp_path_factory, "search")
    done = run_sweeper("run", spec, timeout=480)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "search dummy/pretrained/full: 0 of 4 trials done before, 4 to run" in done.stdout

    parents, trials = runs_by_role(out, "search")
    assert len(parents) == 1
    by_stage: dict[str, list] = {}
    for run in trials:
        by_stage.setdefault(run.data.tags[record_names.TAG_STAGE], []).append(run)
    assert sorted(by_stage) == ["confirm", "search"]
    search, confirm = by_stage["search"], by_stage["confirm"]
    assert len(search) == 8 and len(confirm) == 4
    assert len({r.data.tags[record_names.TAG_TRIAL_KEY] for r in trials}) == 12  # one run per key

    statuses = {r.data.tags[record_names.TAG_STATUS] for r in search}
    assert statuses <= {record_names.Status.FINISHED, record_names.Status.EARLY_STOPPED}
    early = [
        r
        for r in search
        if r.data.tags[record_names.TAG_STATUS] == record_names.Status.EARLY_STOPPED
    ]
    assert early, "ASHA stopped no trial: the test lost its signal"
    assert all(r.info.status == "FINISHED" for r in early)

    for group in ("dummy/pretrained/full", "dummy/random/full"):
        studied = _study_trials(out, "search", group)
        assert len(studied) == 4 and all(t.state.name == "COMPLETE" for t in studied)
        members = [r for r in search if r.data.tags[record_names.TAG_GROUP] == group]
        finished = [r for r in members if r.data.tags[record_names.TAG_STATUS] == "finished"]
        top = max(r.data.metrics[record_names.METRIC_VALID_ACC] for r in finished)  # latest = best
        tied = [r for r in finished if r.data.metrics[record_names.METRIC_VALID_ACC] == top]
        best = min(tied, key=lambda r: r.info.start_time)  # ties: the earliest started
        chosen = [r for r in confirm if r.data.tags[record_names.TAG_GROUP] == group]
        assert sorted(int(r.data.tags[record_names.TAG_SEED]) for r in chosen) == [2, 3]
        searched = best.data.tags[record_names.TAG_SEARCH_PARAMS]
        for run in chosen:  # the best finished search trial's values, confirmed
            assert run.data.tags[record_names.TAG_SEARCH_PARAMS] == searched
            assert run.data.params["train.lr"] == best.data.params["train.lr"]

    report = logged_summary(out, parents[0].info.run_id)  # what `sweeper run` summarised
    assert [g["group"] for g in report["groups"]] == ["dummy/pretrained/full", "dummy/random/full"]
    assert all(g["n"] == 2 for g in report["groups"])  # confirm runs only
    assert {t["run_id"] for t in report["trials"]} == {r.info.run_id for r in confirm}
    sections = {s["group"]: s for s in report["search"]}
    assert sorted(sections) == ["dummy/pretrained/full", "dummy/random/full"]
    for section in sections.values():
        assert section["trials"] == 4
        assert section["early_stopped"] + section["finished"] == 4
        assert set(section["best_params"]) == {"train.lr", "train.warmup_ratio"}
        assert set(section["importances"]) == {"train.lr", "train.warmup_ratio"}
        assert abs(sum(section["importances"].values()) - 1.0) < 1e-6
        curve = section["expected_best"]  # Dodge et al.'s curve over the finished trials
        assert [n for n, _ in curve] == list(range(1, section["finished"] + 1))
        assert curve[-1][1] == section["best_value"]  # all N trials: their best
    assert "Search stage." in done.stdout and "Best config" in done.stdout
    assert "Search budget." in done.stdout
    assert not any("tuning seeds" in note for note in report["notes"])


def _wait_for(path: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text(encoding="utf-8") if path.exists() else ""
        if content.count(text) >= 1:
            return
        if proc.poll() is not None:
            pytest.fail(f"sweeper exited early ({proc.returncode}):\n{content[-3000:]}")
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {text!r}")


@pytest.mark.soak  # a multi-minute scenario: `make reliability` runs it
def test_killed_search_resumes_its_study(tmp_path, tmp_path_factory):
    spec, out = _sweep(
        tmp_path,
        tmp_path_factory,
        "searchresume",
        search={**SEARCH, "scheduler": None, "num_samples": 3, "allow_seed_overlap": True},
        grid={"seed": [1], "init": ["random"], "framework": ["dummy"]},
    )
    log = tmp_path / "first.log"
    slow = {"*": {"sleep_per_step": 0.2}}
    with open(log, "w", encoding="utf-8") as stdout:
        proc = subprocess.Popen(
            sweeper_command("run", spec),
            stdout=stdout,
            stderr=subprocess.STDOUT,
            env=sweeper_env(slow),
            start_new_session=True,
        )
    try:  # killed once the first trial finished and the second one is under way
        _wait_for(log, "[1/2 done]", proc, timeout=240)
        time.sleep(2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        kill_group(proc.pid)
    time.sleep(1)
    group = "dummy/random/full"
    before = _study_trials(out, "searchresume", group)
    states = sorted(t.state.name for t in before)
    assert states == ["COMPLETE", "RUNNING"], states
    _, runs_before = runs_by_role(out, "searchresume")
    assert len(runs_before) == 2
    killed = next(t for t in before if t.state.name == "RUNNING")

    refused = run_sweeper("run", spec, timeout=60)
    assert refused.returncode == 2 and "--resume" in refused.stderr

    resumed = run_sweeper("run", spec, "--resume", timeout=480)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert f"search {group}: 1 of 3 trials done before, 2 to run (1 of them resumed)" in (
        resumed.stdout
    )
    after = _study_trials(out, "searchresume", group)
    numbers = [t.number for t in after]
    assert numbers == list(range(len(after))) and len(after) == 4  # 2 before, 2 new
    assert [t.state.name for t in after].count("COMPLETE") == 3  # = num_samples
    assert after[1].state.name == "FAIL"  # the killed trial, run again as trial 2
    assert after[2].params == killed.params

    _, runs_after = runs_by_role(out, "searchresume")
    search = [r for r in runs_after if r.data.tags[record_names.TAG_STAGE] == "search"]
    assert len(search) == 3  # the killed trial continued its own run
    assert {r.info.run_id for r in runs_before} <= {r.info.run_id for r in search}
    assert all(r.info.status == "FINISHED" for r in runs_after)
    assert len([r for r in runs_after if r.data.tags[record_names.TAG_STAGE] == "confirm"]) == 1
    assert "note: confirm seed(s) [1] were also tuning seeds" in resumed.stdout
