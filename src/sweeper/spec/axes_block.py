"""`grid:` and `search:`: the axes crossed into trials, and the hyperparameters Optuna
searches."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    model_validator,
)

from sweeper.spec.model_block import OBJECTIVE_AXIS
from sweeper.spec.strict import Strict
from sweeper.spec.train_block import check_tunable

Init = Literal["pretrained", "random"]
Method = Literal["full", "lora"]
SeedSource = Literal["all", "init", "data_order", "dropout"]
"""`all`, or one of `sweeper.record_names.SEED_SOURCES` (a test holds them equal)."""


class GridConfig(Strict):
    """Axes crossed into trials; each combination is one trial key."""

    seed: list[int] = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    """Seeds; each makes one trial per combination (and per `seed_source`). Under
    `seed_source: all` a seed fixes the trial's starting weights (random init,
    classifier head, LoRA adapters), its trainer's data order and its dropout masks:
    trials of one seed share their starting weights, so comparisons pair on seed."""
    seed_source: list[SeedSource] = Field(default_factory=lambda: ["all"], min_length=1)
    """Which randomness a trial's seed sets, an axis crossed with `seed`: `all` (every
    source, the default), or one source while the others stay at `held_seed`: `init`
    (the starting weights sweeper draws once for both frameworks: random init, the
    classifier head, LoRA's adapters, a causal LM's random decoder), `data_order` (the
    order of training examples: HF's `data_seed`, fairseq's `--seed`), `dropout` (the
    dropout masks: HF's `seed`, fairseq's per-update reseed). Each one-source value
    is a block of its own trials and groups (`[seed_source=init]`); e.g.
    `[init, data_order, dropout]` measures what each source adds to the spread
    (docs/architecture.md, "What a seed sets")."""
    held_seed: int | None = None
    """The seed of every source a one-source trial does not vary; unset: the first of
    `seed`. A trial whose seed equals it computes what the `all` trial of that seed
    computes (a determinism check); it is still a trial of its own block. Only with
    a `seed_source` other than `all`."""
    init: list[Init] = Field(default_factory=lambda: ["pretrained", "random"], min_length=1)
    """`pretrained`: start from `model.checkpoint` or the `model.pretrain` stage's output;
    `random`: from weights drawn under the trial's (init) seed."""
    framework: list[str] = Field(default_factory=lambda: ["fairseq", "hf"], min_length=1)
    """Frameworks with a backend for the spec's `task` (`fairseq` and `hf` classify, `hf`
    alone runs causal_lm; plugins add more, see `sweeper.backends`). A name nobody
    registered, or one without the task's backend, is reported by the spec loader."""
    method: list[Method] = Field(default_factory=lambda: ["full"], min_length=1)
    """`full`: every weight trains; `lora`: only the `lora:` adapters (and a classifier's
    head) train, through PEFT, on `hf` only (other combinations are skipped with a note)."""
    params: dict[str, list[Any]] = Field(default_factory=dict)
    """Extra axes by dotted field, e.g. `train.lr: [1e-5, 3e-5]`, `lora.r: [8, 16]` or
    `model.pretrain.objective: [masked_lm, causal_lm]`."""

    @model_validator(mode="after")
    def _known_params(self) -> GridConfig:
        for key, values in self.params.items():
            check_tunable(key)
            if not values:
                raise ValueError(f"grid.params.{key} needs at least one value")
        return self

    @model_validator(mode="after")
    def _seed_sources(self) -> GridConfig:
        repeated = sorted({s for s in self.seed_source if self.seed_source.count(s) > 1})
        if repeated:
            raise ValueError(f"grid.seed_source repeats {', '.join(repeated)}")
        if self.held_seed is not None and not self.one_source():
            raise ValueError(
                "grid.held_seed holds the sources a one-source trial does not vary; "
                "with grid.seed_source [all] there are none: drop it, or add a source"
            )
        return self

    def one_source(self) -> bool:
        """Whether some trials vary one seed source while the others are held."""
        return any(source != "all" for source in self.seed_source)

    def held(self) -> int:
        """The seed of the sources a one-source trial holds (`held_seed`, else the
        first grid seed: the same for the seeds `--until-decided` adds)."""
        return self.held_seed if self.held_seed is not None else self.seed[0]


class SearchParam(Strict):
    type: Literal["loguniform", "uniform", "int", "choice"]
    """The distribution: `uniform` (floats in [low, high]), `loguniform` (the same on a log
    scale), `int` (integers low..high, both included), `choice` (one of `values`)."""
    low: float | None = None
    """Lower bound of `uniform`, `loguniform` (above 0 there) and `int`."""
    high: float | None = None
    """Upper bound; must be above `low`."""
    values: list[Any] | None = None
    """The options of a `choice` (non-empty)."""

    @model_validator(mode="after")
    def _bounds_or_values(self) -> SearchParam:
        if self.type == "choice":
            if not self.values:
                raise ValueError("`choice` needs a non-empty `values` list")
        elif self.low is None or self.high is None or self.low >= self.high:
            raise ValueError(f"`{self.type}` needs `low` < `high`")
        elif self.type == "loguniform" and self.low <= 0:
            raise ValueError("`loguniform` needs `low` > 0")
        return self


class AshaConfig(Strict):
    type: Literal["asha"] = "asha"
    """The scheduler: `asha` (Ray Tune's ASHA), the only one."""
    grace_period: int = Field(1, ge=1)
    """Validation points a trial gets before it can be stopped."""
    reduction_factor: int = Field(2, ge=2)
    """At each rung (grace_period × reduction_factor^k validation points) a trial below
    the top 1/reduction_factor of the trials that reached it is stopped."""


class SearchConfig(Strict):
    """Optuna search per group (init × framework × method), then confirmation."""

    algorithm: Literal["optuna"] = "optuna"
    """`optuna`: TPE through Ray Tune's OptunaSearch (random for the first max(2,
    num_samples / 2) trials, at most 10), seeded by the study name."""
    metric: str = "valid_accuracy"
    """The validation metric a search trial is judged by, at its best validation point
    (ties: the earliest); one the task's trainers report (`valid_<m>`)."""
    mode: Literal["max", "min"] = "max"
    """`max`: a higher `metric` is better; `min`: a lower one."""
    num_samples: int = Field(8, ge=1)
    """Search trials per group; `--resume` runs only those not completed yet."""
    space: dict[str, SearchParam] = Field(min_length=1)
    """Dotted field -> distribution, e.g. `train.lr: {type: loguniform, ...}`."""
    scheduler: AshaConfig | None = None
    """Early stopping of search trials (ASHA); an early-stopped trial enters neither the
    tables nor the choice of the best configuration. Unset: every trial runs to the end."""
    tuning_seeds: list[int] = Field(default_factory=lambda: [1], min_length=1)
    """Seeds the search stage runs on; the confirm stage then uses grid.seed, which must
    not contain them (see allow_seed_overlap)."""
    allow_seed_overlap: bool = False
    """Let grid.seed repeat a tuning seed. The winner was picked for its score on the
    tuning seed, so confirming on that seed again reports a score biased upward
    (selection bias); allowed only when said here, and the summary then flags it."""

    @model_validator(mode="after")
    def _known_space(self) -> SearchConfig:
        for key in self.space:
            check_tunable(key)
            if key == OBJECTIVE_AXIS:
                raise ValueError(
                    f"{OBJECTIVE_AXIS} is a grid axis only (grid.params): each objective's "
                    "checkpoint is pretrained before the trials that start from it"
                )
        return self
