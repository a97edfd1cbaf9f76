"""The search stage of a sweep: per group, its trials, best configuration, importances.

Search-stage runs never enter Table 1 or Table 2 (`select.py`, rule 3); this section
says how the confirmed configurations were chosen. The same `search_groups` picks the
configuration `sweeper run` confirms, so the report and the engine cannot disagree.

Best configuration of a group: among its search runs that finished (MLflow FINISHED
and status tag `finished`: early-stopped, failed and interrupted runs are out), the
one whose search metric is best (by the search mode) at its best validation point
(`sweeper.selection.best_point`); ties go to the earliest-started run. Importances
come from the group's Optuna study (`sweeper.tracking.study`), found through the parent
run's `sweeper.optuna_storage` tag; a study that cannot be opened (another machine's
file) leaves them empty, with a note.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sweeper import record_names
from sweeper.record_names import RunState, Stage, Status
from sweeper.selection import Mode, best_point, is_better
from sweeper.summarize.budget import expected_best_curve
from sweeper.summarize.mlflow_reader import History
from sweeper.summarize.records import Point, RunRecord, SearchGroup
from sweeper.summarize.select import by_step

if TYPE_CHECKING:
    from sweeper.summarize.source import RunSource

Importances = Callable[[str], tuple[dict[str, float], str]]
"""study name -> (importances, note)"""


@dataclass(frozen=True)
class Scored:
    """A search run with its metric at its best validation point."""

    run: RunRecord
    value: float | None
    step: int | None

    @property
    def finished(self) -> bool:
        return self.run.mlflow_status == RunState.FINISHED and self.run.status == Status.FINISHED

    @property
    def params(self) -> dict[str, Any]:
        return json.loads(self.run.search_params) if self.run.search_params else {}


def score(run: RunRecord, points: Sequence[Point], mode: Mode) -> Scored:
    """The best value of the run's metric over its validation points (ties: earliest)."""
    best = best_point(by_step(points).items(), mode)
    return Scored(run, best[1], best[0]) if best is not None else Scored(run, None, None)


def pick_best(scored: Sequence[Scored], mode: Mode) -> Scored | None:
    """The best finished run (see the module docstring); None if none finished."""
    best = None
    for item in sorted(scored, key=lambda s: (s.run.start_time or 0, s.run.run_id)):
        if not item.finished or item.value is None:
            continue
        if best is None or is_better(item.value, best.value, mode):  # strict: earliest wins
            best = item
    return best


def search_groups(
    runs: Sequence[RunRecord],
    histories: History,
    metric: str,
    mode: Mode,
    sweep: str | None,
    importances: Importances | None = None,
) -> list[SearchGroup]:
    """One SearchGroup per group of search-stage runs, in group order."""
    from sweeper.tracking.study import study_name

    members: dict[str, list[Scored]] = {}
    for run in runs:
        if run.role == record_names.ROLE_TRIAL and run.stage == Stage.SEARCH:
            points = histories.get(run.run_id, {}).get(metric, ())
            members.setdefault(run.group, []).append(score(run, points, mode))
    out = []
    for group, scored in sorted(members.items()):
        name = study_name(sweep or "", group)
        best = pick_best(scored, mode)
        found, note = importances(name) if importances else ({}, "")
        early = sum(1 for s in scored if s.run.status == Status.EARLY_STOPPED)
        finished = sum(1 for s in scored if s.finished)
        out.append(
            SearchGroup(
                group=group,
                study=name,
                metric=metric,
                mode=mode,
                trials=len(scored),
                finished=finished,
                early_stopped=early,
                not_finished=len(scored) - finished - early,
                best_run_id=best.run.run_id if best else None,
                best_value=best.value if best else None,
                best_step=best.step if best else None,
                best_params=best.params if best else {},
                importances=found,
                note=note if best else "; ".join(filter(None, ["no finished trial", note])),
                expected_best=expected_best_curve(
                    [s.value for s in scored if s.finished and s.value is not None], mode
                ),
            )
        )
    return out


def load_search(
    source: RunSource, runs: Sequence[RunRecord], parent_run_id: str | None, sweep: str | None
) -> list[SearchGroup]:
    """The search section of a summary (empty when the sweep has no search runs)."""
    search_runs = [r for r in runs if r.role == record_names.ROLE_TRIAL and r.stage == Stage.SEARCH]
    if not search_runs:
        return []
    tags = source.tags(parent_run_id) if parent_run_id else {}
    metric = tags.get(record_names.TAG_SEARCH_METRIC, record_names.METRIC_VALID_ACC)
    mode = tags.get(record_names.TAG_SEARCH_MODE, "max")
    storage = tags.get(record_names.TAG_OPTUNA_STORAGE)
    histories = source.histories([r.run_id for r in search_runs], [metric])
    return search_groups(search_runs, histories, metric, mode, sweep, _study_importances(storage))


def _study_importances(storage: str | None) -> Importances:
    def read(name: str) -> tuple[dict[str, float], str]:
        if not storage:
            return {}, f"no {record_names.TAG_OPTUNA_STORAGE} tag on the sweep run"
        from sweeper.tracking.study import importances, open_existing

        study = open_existing(storage, name)
        if study is None:
            return {}, f"Optuna study {name!r} not found at {storage}"
        return importances(study)

    return read
