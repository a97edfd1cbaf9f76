"""Every shipped sweep validates, runs its grid, and says how to run it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeper.cli.main import main
from sweeper.spec.load import load_spec
from sweeper.trial_keys import expand
from tests.support.specs import SWEEPS

SHIPPED = sorted(SWEEPS.glob("*.yaml"))


def test_sweeps_exist():
    names = {p.name for p in SHIPPED}
    assert {"demo.yaml", "roberta.yaml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_sweep_validates_through_the_cli(path: Path, capsys):
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_sweep_starts_with_its_command(path: Path):
    first = path.read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# Run: sweeper run sweeps/" + path.name), first


def test_lab_sweep_matches_the_reference_workload():
    spec = load_spec(SWEEPS / "roberta.yaml")
    arch = spec.model.arch
    assert (arch.layers, arch.embed_dim, arch.ffn_dim, arch.heads) == (4, 512, 512, 8)
    assert (arch.max_positions, arch.vocab_size) == (256, 32000)
    t = spec.train
    assert (t.epochs, t.batch_size, t.lr, t.warmup_ratio) == (5, 8, 1e-5, 0.06)
    assert (t.adam_betas, t.adam_eps, t.dropout, t.weight_decay) == ((0.9, 0.98), 1e-6, 0.1, 0.1)
    trials, skipped = expand(spec)
    assert len(trials) == 12 and not skipped
    assert {t.seed for t in trials} == {1, 2, 3}


def test_demo_sweep_has_the_same_grid_as_the_lab():
    demo, lab = load_spec(SWEEPS / "demo.yaml"), load_spec(SWEEPS / "roberta.yaml")
    assert demo.grid == lab.grid
    assert demo.data.source == "generated" and demo.model.pretrain is not None
