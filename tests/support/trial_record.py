"""A sweep's trial runs as plain data, for tests that two records are the same.

`trial_record(client, experiment)` reads every trial run of the experiment from any
store (a SQLite file, a tracking server) through MLflow's client and returns, per
trial key: its MLflow status, params, tags, every metric's whole history, its logged
models (name, status, tags, metrics) and its artifact paths. What differs between two
runs of one sweep by nature is left out or kept only in shape: run ids and times, the
Ray trial id, the node, MLflow's own `mlflow.*` tags; the values of wall times and
the cost ledger's measured seconds (their names and steps are kept), and of system
samples (their names are kept: the clock decides when one is taken).
Two sweeps of one spec whose records compare equal here lost nothing one of them kept.
"""

from __future__ import annotations

from typing import Any

from sweeper import record_names

VARYING_TAGS = (record_names.TAG_RAY_TRIAL_ID, record_names.TAG_NODE)
"""trial tags whose value names this run's processes, not what was measured"""
TIMED_METRICS = (record_names.METRIC_WALL_TIME,)
TIMED_PREFIXES = ("system/", "cost/")
"""metrics whose values are clock readings: compared by name and step only"""
SAMPLED_PREFIX = "system/"
"""system samples: taken when due by the clock, compared by name only"""


def _timed(key: str) -> bool:
    return key in TIMED_METRICS or key.startswith(TIMED_PREFIXES)


def _point(m: Any) -> tuple[Any, ...]:
    if m.key.startswith(SAMPLED_PREFIX):
        return (m.key,)
    return (m.key, m.step) if _timed(m.key) else (m.key, m.step, m.value)


def _points(metrics: Any) -> list[tuple[Any, ...]]:
    """(key, step, value) of each point, the value left out where it is a clock reading;
    a system sample by its name alone (how many are taken, at which steps, depends on
    the clock: `SystemSampler.due`)."""
    sampled = {_point(m) for m in metrics if m.key.startswith(SAMPLED_PREFIX)}
    measured = [_point(m) for m in metrics if not m.key.startswith(SAMPLED_PREFIX)]
    return sorted([*sampled, *measured], key=repr)  # a point logged twice shows twice


def _artifacts(client: Any, run_id: str, path: str | None = None) -> list[str]:
    found = []
    for info in client.list_artifacts(run_id, path):
        found += _artifacts(client, run_id, info.path) if info.is_dir else [info.path]
    return sorted(found)


def trial_record(client: Any, experiment: str) -> dict[str, dict[str, Any]]:
    """trial key -> what its run holds (see the module docstring)."""
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment!r}"
    runs = client.search_runs([found.experiment_id], max_results=5000)
    models = client.search_logged_models([found.experiment_id], max_results=5000)
    record: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run.data.tags.get(record_names.TAG_ROLE) != record_names.ROLE_TRIAL:
            continue
        run_id, tags = run.info.run_id, run.data.tags
        key = tags[record_names.TAG_TRIAL_KEY]
        assert key not in record, f"two runs of trial key {key}"
        history = [
            point for name in run.data.metrics for point in client.get_metric_history(run_id, name)
        ]
        record[key] = {
            "status": run.info.status,
            "params": dict(run.data.params),
            "tags": {
                k: ("<set>" if k in VARYING_TAGS else v)
                for k, v in tags.items()
                if not k.startswith("mlflow.") or k == "mlflow.runName"
            },
            "metrics": _points(history),
            "models": sorted(
                (
                    m.name,
                    str(m.status),
                    tuple(sorted((k, v.replace(run_id, "<run>")) for k, v in m.tags.items())),
                    tuple(_points(m.metrics or [])),
                )
                for m in models
                if m.source_run_id == run_id
            ),
            "artifacts": _artifacts(client, run_id),
        }
    return record
