"""The Optuna studies of a search: where they are stored, their names, resume, importances.

Persistence. Every group's study lives in one Optuna RDB storage, a SQLite file
`<output_dir>/optuna.db` (beside the default MLflow store `<output_dir>/mlflow.db`);
its URL is tagged on the sweep's parent run (`sweeper.optuna_storage`) so the
summariser finds it. Study names are deterministic, `<sweep>:<group>` (e.g.
`search:hf/pretrained/full`), so `sweeper run --resume` reopens the same studies.

Resume. A killed driver leaves the trials it was running RUNNING in the study.
`reconcile` tells them FAIL, so they never count nor feed the sampler, and returns
their parameters: the resumed search enqueues them again,
which gives the very same trial keys, so those trials continue their own MLflow runs
and trainer folders instead of starting new ones. The search then runs only
`num_samples - completed` new trials, where completed counts COMPLETE and PRUNED
trials (early-stopped trials are COMPLETE in Optuna, told their best value so far).

A spec run without `--resume` and without any trial run in MLflow starts its studies
afresh (`reset_study`): a leftover study of a deleted store must not skew the sampler.
"""

from __future__ import annotations

import contextlib
import warnings
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.tracking.store import sqlite_path

if TYPE_CHECKING:
    import optuna

    from sweeper.spec.axes_block import SearchParam
    from sweeper.spec.schema import SweepSpec

STORAGE_FILE = "optuna.db"
MIN_STARTUP = 2
"""TPE samples at random until this many trials completed (at most Optuna's default 10,
at least half of num_samples): small demo searches still get TPE's guided samples."""


def storage_url(spec: SweepSpec) -> str:
    """The Optuna storage of a sweep: a SQLite file in its output folder."""
    return f"sqlite:///{Path(spec.output_dir).resolve() / STORAGE_FILE}"


def study_name(sweep: str, group: str) -> str:
    """One study per (sweep, group); the summariser derives the same name from tags."""
    return f"{sweep}:{group}"


def distributions(space: Mapping[str, SearchParam]) -> dict[str, Any]:
    """The spec's search space as Optuna distributions, keyed by dotted field."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    out: dict[str, Any] = {}
    for key, param in space.items():
        if param.type == "choice":
            out[key] = CategoricalDistribution(list(param.values or []))
        elif param.type == "int":
            out[key] = IntDistribution(int(param.low or 0), int(param.high or 0))
        else:
            log = param.type == "loguniform"
            out[key] = FloatDistribution(float(param.low or 0), float(param.high or 0), log=log)
    return out


def quiet_optuna() -> None:
    """Optuna logs a line per trial at INFO; the progress view already says it."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


def open_study(url: str, name: str, mode: str) -> optuna.Study:
    """The study `name` in `url`, created if absent (direction from `mode`)."""
    import optuna

    quiet_optuna()
    direction = "maximize" if mode == "max" else "minimize"
    return optuna.create_study(
        storage=url, study_name=name, direction=direction, load_if_exists=True
    )


def open_existing(url: str, name: str) -> optuna.Study | None:
    """The study `name` if `url` holds it; None otherwise (nothing is created: a
    SQLite URL whose file is absent is not opened at all)."""
    import optuna

    quiet_optuna()
    db = sqlite_path(url)
    if db is not None and not db.is_file():
        return None
    try:
        return optuna.load_study(study_name=name, storage=url)
    except KeyError:
        return None


def reset_study(url: str, name: str) -> None:
    """Delete the study if it exists (a fresh search)."""
    import optuna

    quiet_optuna()
    with contextlib.suppress(KeyError):  # no such study: nothing to reset
        optuna.delete_study(study_name=name, storage=url)


def reconcile(study: optuna.Study) -> list[dict[str, Any]]:
    """Tell trials a killed driver left RUNNING that they FAILed; return their params,
    to be enqueued again (same params, same trial keys). WAITING trials (enqueued, not
    yet asked) stay: the next `ask` takes them."""
    from optuna.trial import TrialState

    stale = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for trial in stale:
        study.tell(trial.number, state=TrialState.FAIL)
    return [dict(trial.params) for trial in stale if trial.params]


def completed(study: optuna.Study) -> int:
    """Trials that count toward num_samples: COMPLETE (early-stopped included) and PRUNED."""
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def make_sampler(name: str, num_samples: int, trials_so_far: int) -> optuna.samplers.BaseSampler:
    """TPE with a seed fixed by the study name and its trial count: reproducible, yet a
    resumed study does not replay the random draws of its first invocation."""
    import optuna

    startup = min(10, max(MIN_STARTUP, num_samples // 2))
    seed = (zlib.crc32(name.encode()) + trials_so_far) % 2**31
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup)


def importances(study: optuna.Study) -> tuple[dict[str, float], str]:
    """Optuna's parameter importances over the study's COMPLETE trials, and a note.

    Undefined (empty, with the reason) below 2 completed trials; Optuna's own caveats
    (e.g. "too few trials: importances are equal") become the note.
    """
    import optuna
    from optuna.trial import TrialState

    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(done) < 2:
        return {}, f"{len(done)} completed trial(s): importances need at least 2"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            found = optuna.importance.get_param_importances(study)
        except (ValueError, RuntimeError) as exc:
            return {}, f"importances undefined: {exc}"
    note = "; ".join(sorted({str(w.message) for w in caught}))
    return {str(k): float(v) for k, v in found.items()}, note
