"""The tiny sweep of the `sweeper run` integration tests, and readers of its store.

Each test runs the real CLI in a subprocess (real Ray on 127.0.0.1, real MLflow SQLite
store, real trainer subprocesses) on a tiny generated corpus. Two costs are paid once
per session instead of once per sweep, without changing what a sweep does:

* data preparation: the prepared folder is content-addressed, so a copy placed in a
  sweep's output_dir is exactly what `prepare()` would rebuild;
* MLflow's schema migrations on a new SQLite file (seconds): an empty migrated store is
  copied in as the sweep's `mlflow.db`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.processes import clean_env, kill_group, sweeper_command

TRAIN = 80
BATCH = 8
UPDATES_PER_EPOCH = TRAIN // BATCH  # 10
TEST = 20

_SHARED: dict[str, Path] = {}


def base_spec(corpus: Path, name: str, output_dir: Path) -> dict[str, Any]:
    """A tiny sweep: 10 updates per epoch, a 1-layer 16-dim model, dummy trainer."""
    return {
        "name": name,
        "output_dir": str(output_dir),
        "data": {
            "source": "generated",
            "dir": str(corpus),
            "generate": {
                "seed": 0,
                "train_size": TRAIN,
                "valid_size": 20,
                "test_size": TEST,
                "unlabeled_size": 400,
                "vocab_size": 200,
            },
        },
        "model": {
            "arch": {"layers": 1, "embed_dim": 16, "ffn_dim": 32, "heads": 2, "max_positions": 64},
            "sentencepiece": str(corpus / "sentencepiece.bpe.model"),
            "dictionary": str(corpus / "dict.txt"),
            "pretrain": {"steps": 4, "batch_size": 8},
        },
        "train": {"epochs": 2, "batch_size": BATCH, "lr": 0.002},
        "grid": {"seed": [1, 2], "init": ["random"], "framework": ["dummy"]},
        "resources": {"cpu": 1},
        "max_concurrent": 2,
        "retries": 1,
    }


def shared(tmp_path_factory: Any) -> dict[str, Path]:
    """The session's corpus, prepared folder and empty migrated MLflow store."""
    if _SHARED:
        return _SHARED
    from mlflow import MlflowClient

    from sweeper.data import prepare
    from sweeper.spec.load import validate_mapping

    root = tmp_path_factory.mktemp("sweep_shared")
    raw = base_spec(root / "corpus", "shared", root / "out")
    spec = validate_mapping(raw, "shared.yaml", base_dir=root)
    prepare(spec, log=lambda _: None)
    store = root / "template.db"
    MlflowClient(f"sqlite:///{store}").search_experiments()
    _SHARED.update(corpus=root / "corpus", prepared=root / "out" / "prepared", store=store)
    return _SHARED


def new_sweep(
    tmp_path: Path, tmp_path_factory: Any, name: str, **changes: Any
) -> tuple[Path, Path]:
    """Write a sweep file (base spec with top-level `changes`) whose output_dir already
    holds the shared prepared data and an empty store; returns (spec file, output_dir)."""
    inputs = shared(tmp_path_factory)
    out = tmp_path / "out"
    raw = base_spec(inputs["corpus"], name, out)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    out.mkdir(parents=True)
    shutil.copytree(inputs["prepared"], out / "prepared")
    shutil.copy(inputs["store"], out / "mlflow.db")
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path, out


def sweeper_env(extra: dict[str, Any] | None = None) -> dict[str, str]:
    """The environment of a `sweeper run` subprocess: local Ray, optional dummy faults."""
    env = clean_env()
    if extra:
        env["SWEEPER_DUMMY_EXTRA"] = json.dumps(extra)
    return env


def run_sweeper(
    *args: str | Path, extra: dict[str, Any] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run the CLI to completion in its own process group; clean up what it leaves."""
    proc = subprocess.Popen(
        sweeper_command(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=sweeper_env(extra),
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        kill_group(proc.pid)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def client_for(out: Path) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(f"sqlite:///{out / 'mlflow.db'}")


def runs_by_role(out: Path, experiment: str) -> tuple[list[Any], list[Any]]:
    """(parent runs, trial runs) of the experiment in the sweep's store."""
    return roles_in(client_for(out), experiment)


def roles_in(client: Any, experiment: str) -> tuple[list[Any], list[Any]]:
    """(parent runs, trial runs) of the experiment in any store (a server's too)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        return [], []
    runs = client.search_runs([found.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("sweeper.role") == "sweep"]
    trials = [r for r in runs if r.data.tags.get("sweeper.role") == "trial"]
    return parents, trials


def logged_summary(out: Path, parent_run_id: str) -> dict[str, Any]:
    """The summary.json `sweeper run`'s closing report logged to the parent run."""
    from mlflow.artifacts import download_artifacts

    path = download_artifacts(
        run_id=parent_run_id,
        artifact_path="report/summary.json",
        tracking_uri=f"sqlite:///{out / 'mlflow.db'}",
    )
    return json.loads(Path(path).read_text(encoding="utf-8"))


def history(out: Path, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client_for(out).get_metric_history(run_id, key))


def artifacts(out: Path, run_id: str, path: str | None = None) -> list[str]:
    return sorted(a.path for a in client_for(out).list_artifacts(run_id, path))


def assert_runs_carry_table1(spec: Path, runs: list[Any]) -> None:
    """Each trial run's best-checkpoint metrics (what the MLflow runs table shows) are
    Table 1's numbers as the metric histories give them (`sweeper summarize --format
    json --recompute`), and so the summary read from those metrics is the same."""
    from sweeper import record_names

    summary = run_sweeper("summarize", spec, "--format", "json", "--no-log", "--recompute")
    assert summary.returncode == 0, summary.stderr[-3000:]
    recorded = run_sweeper("summarize", spec, "--format", "json", "--no-log")
    assert recorded.returncode == 0, recorded.stderr[-3000:]
    assert json.loads(recorded.stdout) == json.loads(summary.stdout)
    table1 = {t["run_id"]: t for t in json.loads(summary.stdout)["trials"]}
    assert {run.info.run_id for run in runs} == set(table1)
    for run in runs:
        row, metrics = table1[run.info.run_id], run.data.metrics
        assert metrics[record_names.METRIC_BEST_TEST_ACC] == row["test_accuracy"], run.info.run_name
        assert metrics[record_names.METRIC_BEST_VALID_ACC] == row["best_valid_accuracy"]
        assert metrics[record_names.METRIC_BEST_STEP] == row["best_step"]


def stored_predictions(out: Path, run_id: str, split: str, into: Path) -> Any:
    """A trial run's uploaded predictions of `split` (`sweeper.trainers.predictions`)."""
    from sweeper.trainers import predictions

    local = client_for(out).download_artifacts(run_id, predictions.artifact_path(split), str(into))
    return predictions.read(Path(local))


def count_of(value: float, total: int) -> int:
    """The integer k with `100.0 * k / total == value` exactly; fails when there is none."""
    count = round(value * total / 100)
    assert 0 <= count <= total and 100.0 * count / total == value, (value, total)
    return count
