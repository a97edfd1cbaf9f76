"""The one Tuner builder, on a real (unfitted) Tune Tuner: grid over keys or sampled
configs, the spec's resources and retries, and callbacks Tune can pickle."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from sweeper.spec.load import validate_mapping
from sweeper.trial_keys import expand
from tests.support.specs import minimal_spec

pytest.importorskip("ray")


def _ctx(tmp_path: Path):
    from sweeper.trainers.trial_pipeline import SweepInputs
    from sweeper.tune.trainable import TrialContext

    raw = minimal_spec()
    raw.update(output_dir=str(tmp_path / "out"), retries=3, resources={"cpu": 2})
    raw["grid"] = {"seed": [1, 2], "init": ["random"], "framework": ["hf"]}
    spec = validate_mapping(raw, "spec.yaml", base_dir=tmp_path)
    trials = {t.key: t for t in expand(spec)[0]}
    inputs = SweepInputs({"fairseq": tmp_path, "hf": tmp_path}, tmp_path, 100, 2, 80, {})
    return TrialContext(spec, trials, inputs, {}, "sqlite:///x.db", threads=2)


def test_a_grid_tuner_runs_every_key_with_the_specs_resources_and_retries(tmp_path):
    from sweeper.tracking.recorder import MetricLog, Recorder
    from sweeper.tune.callback import TrackingCallback
    from sweeper.tune.progress import Progress
    from sweeper.tune.trainable import CONFIG_KEY, run_ray_trial
    from sweeper.tune.tuner import TrialNames, build_tuner

    ctx = _ctx(tmp_path)
    keys = list(ctx.trials)
    live = Progress({}, stream=io.StringIO(), live=False)
    client = SimpleNamespace(lock=threading.Lock())  # live, and not picklable
    callback = TrackingCallback(Recorder(client, {}, MetricLog()), live)  # type: ignore[arg-type]
    tuner = build_tuner(
        ctx, run_ray_trial, name="eng-1", max_concurrent=2, callbacks=[callback], keys=keys
    )  # Tune pickles the callback into tuner.pkl here: its live parts are left out
    internal = tuner._local_tuner
    assert internal.param_space == {CONFIG_KEY: {"grid_search": keys}}
    config, run = internal._tune_config, internal.get_run_config()
    assert (config.max_concurrent_trials, config.reuse_actors, config.search_alg) == (2, True, None)
    names = config.trial_name_creator
    assert isinstance(names, TrialNames) and names.names[keys[0]].endswith(f"-{keys[0][:8]}")
    assert run.failure_config.max_failures == 3 and run.callbacks == [callback]
    assert run.storage_path == str((tmp_path / "out" / "ray").resolve())
    assert (tmp_path / "out" / "ray" / "eng-1" / "tuner.pkl").is_file()


def test_a_search_tuner_samples_from_its_searcher(tmp_path):
    from ray.tune.schedulers import FIFOScheduler
    from ray.tune.search import BasicVariantGenerator

    from sweeper.tune.trainable import run_ray_trial
    from sweeper.tune.tuner import build_tuner

    searcher, scheduler = BasicVariantGenerator(), FIFOScheduler()
    tuner = build_tuner(
        _ctx(tmp_path), run_ray_trial, name="eng-search-1", max_concurrent=None, callbacks=[],
        searcher=searcher, scheduler=scheduler, num_samples=5, trial_names=str,
        reuse_actors=False,
    )  # fmt: skip
    internal = tuner._local_tuner
    config = internal._tune_config
    assert internal.param_space == {}
    assert (config.search_alg, config.scheduler, config.num_samples) == (searcher, scheduler, 5)
    assert (config.reuse_actors, config.trial_name_creator) == (False, str)
