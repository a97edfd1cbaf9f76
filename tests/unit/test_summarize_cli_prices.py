"""`sweeper summarize SPEC` prices the sweep with the spec's `cost:` block where it has
one (prices may be set after the sweep ran), else with the prices the sweep recorded."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweeper.cli.summarize import _prices
from sweeper.summarize.core import RECORDED
from sweeper.summarize.costs import Prices

DEMO = Path(__file__).resolve().parents[2] / "sweeps" / "demo.yaml"


def _args(spec: Path | None, *overrides: str) -> argparse.Namespace:
    return argparse.Namespace(spec=spec, overrides=list(overrides))


def test_the_specs_cost_block_prices_the_summary():
    prices = _prices(_args(DEMO, "cost.cpu_hour=0.04", "cost.currency=EUR"))
    assert isinstance(prices, Prices)
    assert (prices.cpu_hour, prices.gpu_hour, prices.currency) == (0.04, 0.0, "EUR")


def test_without_a_cost_block_the_recorded_prices_stand():
    assert _prices(_args(DEMO)) == RECORDED
    assert _prices(_args(None)) == RECORDED
