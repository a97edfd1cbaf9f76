"""The framework table: what exists, what each runs, plugins, and who asks it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper import frameworks
from sweeper.spec.load import SpecError, validate_mapping
from sweeper.trainers.base import TrialJob
from sweeper.trainers.registry import get_trainer
from sweeper.trial_keys import expand
from tests.support.specs import minimal_spec


def test_builtins_and_the_test_plugin_are_registered() -> None:
    # tests/conftest.py names tests.support.dummy_trainer:register in $SWEEPER_PLUGINS.
    assert frameworks.names()[:2] == ["fairseq", "hf"]
    assert "dummy" in frameworks.names()


def test_methods_come_from_the_entries() -> None:
    assert frameworks.unsupported("hf", "lora") is None
    assert frameworks.unsupported("fairseq", "lora") == "LoRA trials run on HF (PEFT) only"
    with pytest.raises(KeyError, match="unknown framework 'jax'; registered: dummy, fairseq"):
        frameworks.unsupported("jax", "full")


def test_the_grid_skips_what_a_framework_cannot_run(tmp_path: Path) -> None:
    raw = minimal_spec()
    raw["grid"] = {"seed": [1], "init": ["random"], "framework": ["fairseq", "hf"],
                   "method": ["full", "lora"]}  # fmt: skip
    trials, skipped = expand(validate_mapping(raw, "s.yaml", tmp_path))
    assert sorted((t.framework, t.method) for t in trials) == [
        ("fairseq", "full"), ("hf", "full"), ("hf", "lora"),
    ]  # fmt: skip
    assert [(s.combination, s.reason) for s in skipped] == [
        ("framework=fairseq method=lora", "LoRA trials run on HF (PEFT) only")
    ]


def test_unknown_frameworks_are_reported_with_every_other_problem(tmp_path: Path) -> None:
    raw = minimal_spec()
    raw["grid"] = {"framework": ["hf", "tf", "jax"], "seed": "x"}
    with pytest.raises(SpecError) as caught:
        validate_mapping(raw, "s.yaml", tmp_path)
    shown = [str(p) for p in caught.value.problems]
    assert "s.yaml: grid.framework.1: unknown framework 'tf'; registered: dummy, fairseq, hf" in (
        shown
    )
    assert any(p.startswith("s.yaml: grid.framework.2: unknown framework 'jax'") for p in shown)
    assert any(p.startswith("s.yaml: grid.seed") for p in shown)


def test_the_trainer_says_what_a_reload_needs() -> None:
    job = TrialJob(
        framework="hf", seed=1, init="random", method="lora", train={}, lora={}, arch={},
        num_classes=2, num_train=1, fairseq_data="/f", hf_data="/h", init_checkpoint="/i.pt",
        out_dir="/o",
    )  # fmt: skip
    assert get_trainer("hf").reload_inputs(job) == ["/h", "/i.pt"]
    assert get_trainer("fairseq").reload_inputs(job) == ["/f"]


def _run_with_plugins(value: str) -> subprocess.CompletedProcess[str]:
    code = "from sweeper import frameworks; print(frameworks.names())"
    env = {
        "SWEEPER_PLUGINS": value,
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.environ["PYTHONPATH"],  # the repository root (tests/conftest.py)
    }
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )


def test_a_plugin_named_in_the_environment_is_loaded_in_a_new_process() -> None:
    done = _run_with_plugins("tests.support.dummy_trainer:register")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['fairseq', 'hf', 'dummy']"
    assert _run_with_plugins("").stdout.strip() == "['fairseq', 'hf']"


def test_a_plugin_that_does_not_load_is_an_error_not_a_skip() -> None:
    done = _run_with_plugins("sweeper.no_such_module:register")
    assert done.returncode != 0
    assert "$SWEEPER_PLUGINS: cannot load 'sweeper.no_such_module:register'" in done.stderr
