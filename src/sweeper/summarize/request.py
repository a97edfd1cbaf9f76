"""`SummaryRequest`: what one summary is asked for, the front door every summary enters by.

`sweeper summarize`, the closing report of `sweeper run` and each look of its
`--until-decided` loop build one of these and hand it to `sweeper.summarize.summarize`
(the summary side's equivalent of `sweeper.api.run_sweep`). A spec becomes a request
in one place, `SummaryRequest.of_spec`: its experiment and sweep name, its store by
`sweeper.deploy.resolve`'s precedence, its input fingerprint, `select:`,
`compare.margin` and `cost:` prices; so whatever summarises a spec counts the same
runs and decides by the same rule. A request without a spec (`summarize --experiment`)
is built field by field and compares nothing it was not told.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from sweeper.summarize.costs import Prices
from sweeper.summarize.decide import ALPHA

if TYPE_CHECKING:
    from sweeper.selection import Selection
    from sweeper.spec.schema import SweepSpec

RECORDED: Final = "recorded"
"""`SummaryRequest.prices`: the prices the sweep run recorded (its `sweeper.cost` tag)."""


@dataclass(frozen=True)
class SummaryRequest:
    """One summary of one sweep's record: where to read it and how to decide."""

    experiment: str
    """The MLflow experiment that holds the sweep's runs."""
    tracking_uri: str
    """The store, already resolved (`sweeper.deploy.resolve`)."""
    sweep: str | None = None
    """Only runs tagged with this sweep name count (untagged runs are kept); None: the
    only sweep the experiment's trials are tagged with (several: SummarizeError)."""
    inputs: dict[str, str] | None = None
    """The spec's input fingerprint (`sweeper.tracking.inputs`): trial runs made from
    other inputs are listed as not counted; None: not checked."""
    selection: Selection | None = None
    """How best checkpoints are picked and what is reported (the spec's `select:`);
    None: what the sweep run's `sweeper.select` tag says, else classification's."""
    metric: str | None = None
    """A measurement (`macro_f1`) the summary is about instead (`Selection.on`): best
    checkpoints by its validation value, its test value reported first."""
    margin: float | None = None
    """The equivalence margin D; None: the `--until-decided` plan's, if it has one."""
    alpha: float = ALPHA
    """The family-wise level the comparisons are decided at (a recorded sequential
    plan decides at its own)."""
    aso: bool = False
    """Add Almost Stochastic Order to each comparison (slow; `sweeper.summarize.decide`)."""
    prices: Prices | Literal["recorded"] | None = RECORDED
    """What a resource-hour costs: given prices, RECORDED (the sweep run's), or None."""
    recompute: bool = False
    """Pick every trial's best checkpoint from its metric histories, not from the
    best-checkpoint metrics its run carries (`select.recorded_checkpoint`)."""
    population: bool = False
    """Decide each comparison whose trials hold test predictions by its seeds x examples
    interval (other seeds and another test set of the same size;
    `sweeper.summarize.resolution`), not by the seeds alone; seeds fixed in advance
    only (a summary of an `--until-decided` plan refuses it)."""

    @classmethod
    def of_spec(
        cls,
        spec: SweepSpec,
        *,
        tracking_uri: str | None = None,
        experiment: str | None = None,
        sweep: str | None = None,
        margin: float | None = None,
        metric: str | None = None,
        alpha: float = ALPHA,
        aso: bool = False,
        recompute: bool = False,
        population: bool = False,
    ) -> SummaryRequest:
        """The summary of the sweep `spec` describes; a given keyword overrides what the
        spec says (None: the spec's). The store is `tracking_uri` if given, else the
        one `sweeper.deploy.resolve` finds for the spec; prices are the spec's `cost:`
        block where it has one (prices may be set after the sweep ran), else the ones
        the sweep run recorded."""
        from sweeper.deploy.resolve import tracking_uri as resolve
        from sweeper.selection import Selection
        from sweeper.tracking import experiment_name
        from sweeper.tracking.inputs import inputs_fingerprint

        prices = prices_of(spec)
        return cls(
            experiment=experiment or experiment_name(spec),
            tracking_uri=resolve(spec, tracking_uri),
            sweep=sweep or spec.name,
            inputs=inputs_fingerprint(spec),
            selection=Selection.of(spec.select),
            metric=metric,
            margin=margin if margin is not None else spec.compare.margin,
            alpha=alpha,
            aso=aso,
            prices=prices if prices is not None else RECORDED,
            recompute=recompute,
            population=population,
        )


def prices_of(spec: SweepSpec) -> Prices | None:
    """The spec's `cost:` block as the summary's prices (None without one)."""
    if spec.cost is None:
        return None
    return Prices(spec.cost.cpu_hour, spec.cost.gpu_hour, spec.cost.currency)
