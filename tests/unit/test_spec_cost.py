"""The `cost:` block: prices per resource-hour, validated like every other block."""

from __future__ import annotations

import pytest

from sweeper.cli.main import main
from sweeper.spec.load import load_spec
from sweeper.summarize.costs import Prices
from sweeper.summarize.request import prices_of
from tests.support.specs import minimal_spec


def test_a_cost_block_gives_the_summary_its_prices(write_spec):
    spec = load_spec(write_spec({**minimal_spec(), "cost": {"gpu_hour": 2.5, "cpu_hour": 0.04}}))
    assert spec.cost is not None and spec.cost.currency == "USD"
    assert spec.cost.price(cpu_seconds=3600, gpu_seconds=7200) == pytest.approx(5.04)
    assert prices_of(spec) == Prices(cpu_hour=0.04, gpu_hour=2.5, currency="USD")
    assert prices_of(load_spec(write_spec(minimal_spec()))) is None  # optional


@pytest.mark.parametrize(
    ("cost", "field", "words"),
    [
        ({"gpu_hour": -1}, "cost.gpu_hour", "greater than or equal to 0"),
        ({"cpu_hour": "cheap"}, "cost.cpu_hour", "valid number"),
        ({"currency": "US D", "cpu_hour": 1}, "cost.currency", "pattern"),
        ({"gpu_hours": 2.5}, "cost.gpu_hours", "did you mean 'gpu_hour'"),
        ({"currency": "EUR"}, "cost", "give gpu_hour or cpu_hour"),
    ],
)
def test_a_bad_cost_block_exits_2_naming_the_field(write_spec, capsys, cost, field, words):
    path = write_spec({**minimal_spec(), "cost": cost})
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    line = next((ln for ln in err.splitlines() if f"{path}: {field}:" in ln), None)
    assert line is not None, f"no message names {field!r}:\n{err}"
    assert words.lower() in line.lower(), line
