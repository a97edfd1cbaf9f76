"""The summary side's front door: every caller asks for a summary with one
`SummaryRequest`, and a spec becomes one in one place (`SummaryRequest.of_spec`).

`sweeper summarize SPEC` (the flags overriding the spec), the closing report of
`sweeper run` and each `--until-decided` look build the same request for the same spec
and store; the store comes from `sweeper.deploy.resolve`, as `sweeper run`'s does.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import pytest

from sweeper.cli.summarize import build_parser, request_of
from sweeper.deploy.resolve import tracking_uri
from sweeper.engine import until_decided
from sweeper.engine.closing_report import summary_request
from sweeper.selection import ACCURACY, Selection
from sweeper.spec.load import load_spec
from sweeper.summarize.costs import Prices
from sweeper.summarize.request import RECORDED, SummaryRequest
from sweeper.tracking.inputs import inputs_fingerprint
from tests.support.specs import minimal_spec
from tests.support.summaries import holm_summary


def _cli(*argv: str | Path) -> SummaryRequest:
    parser = argparse.ArgumentParser()
    build_parser(parser)
    return request_of(parser.parse_args([str(a) for a in argv]))


@pytest.fixture
def spec_file(write_spec, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    raw = minimal_spec()
    raw["select"] = {"metric": "valid_loss"}
    raw["compare"] = {"margin": 1.5}
    return write_spec(raw)


def test_a_spec_request_carries_what_the_spec_says(spec_file):
    spec = load_spec(spec_file)
    request = _cli(spec_file)
    assert request == SummaryRequest.of_spec(spec)
    assert (request.experiment, request.sweep) == ("t", "t")
    assert request.tracking_uri == tracking_uri(spec)  # the one precedence
    assert request.tracking_uri == f"sqlite:///{spec.output_dir / 'mlflow.db'}"
    assert request.inputs == inputs_fingerprint(spec)  # other inputs are not counted
    assert request.selection == Selection.of(spec.select) != ACCURACY
    assert request.margin == 1.5  # compare.margin
    assert (request.alpha, request.aso, request.recompute, request.metric) == (
        0.05,
        False,
        False,
        None,
    )


def test_the_flags_override_the_spec(spec_file):
    request = _cli(
        spec_file, "--experiment", "e", "--sweep", "s", "--margin", "3", "--alpha", "0.1",
        "--aso", "--recompute", "--metric", "test_macro_f1", "--tracking-uri", "sqlite:///x.db",
    )  # fmt: skip
    assert (request.experiment, request.sweep, request.tracking_uri) == ("e", "s", "sqlite:///x.db")
    assert (request.margin, request.alpha, request.aso, request.recompute) == (3.0, 0.1, True, True)
    assert request.metric == "macro_f1"


def test_the_store_follows_the_one_precedence(spec_file, monkeypatch, write_spec):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env:1")
    assert _cli(spec_file).tracking_uri == "http://env:1"
    assert _cli(spec_file, "tracking.uri=http://spec:2").tracking_uri == "http://spec:2"
    assert _cli("--experiment", "e").tracking_uri == "http://env:1"  # no spec: no default
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    with pytest.raises(SystemExit) as exc:
        _cli("--experiment", "e")
    assert exc.value.code == 2


def test_the_specs_cost_block_prices_the_summary_else_the_recorded_prices(spec_file):
    prices = _cli(spec_file, "cost.cpu_hour=0.04", "cost.currency=EUR").prices
    assert prices == Prices(cpu_hour=0.04, gpu_hour=0.0, currency="EUR")
    assert _cli(spec_file).prices == RECORDED  # prices may be set after the sweep ran
    no_spec = _cli("--experiment", "e", "--tracking-uri", "sqlite:///x.db")
    assert no_spec == SummaryRequest("e", "sqlite:///x.db")  # nothing compared, recorded prices


def test_the_run_and_its_looks_ask_what_summarize_spec_asks(spec_file, monkeypatch):
    """The closing report and each `--until-decided` look summarise the request
    `sweeper summarize SPEC --tracking-uri URI` builds for the store the run opened."""
    spec = load_spec(spec_file)
    sweep = SimpleNamespace(spec=spec, uri="sqlite:////runs/t/mlflow.db", client=object())
    expected = _cli(spec_file, "--tracking-uri", sweep.uri)
    assert summary_request(sweep) == expected
    asked: list[tuple[SummaryRequest, object]] = []

    def summarize(request: SummaryRequest, client: object = None):
        asked.append((request, client))
        return holm_summary()

    monkeypatch.setattr("sweeper.summarize.summarize", summarize)
    assert until_decided._summary(sweep) == holm_summary()
    assert asked == [(expected, sweep.client)]
