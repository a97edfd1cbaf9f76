"""From a validated spec to the list of trials, each with its stable trial key.

The trial key is the identity the whole product hangs on (docs/architecture.md,
invariant 1): one key, one MLflow run, however often the trial is retried or resumed. It
hashes the sweep name and everything that changes what the trial computes, and nothing
that does not (paths, concurrency, retries), so moving a sweep folder or re-running it
finds the same runs.

A trial's seed sets every source of its randomness (`grid.seed_source: all`), or one of
them while the others stay at the grid's held seed (`Trial.seeds`): the initial
weights, the data order, the dropout masks (`record_names.SEED_SOURCES`). A one-source
trial keys, groups and names its source; an `all` trial keys exactly as before sources
existed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sweeper import backends
from sweeper.record_names import SEED_ALL, SEED_SOURCES, TAG_SEED, TAG_SEED_OF, TAG_SEED_SOURCE
from sweeper.redact import safe_name
from sweeper.spec.model_block import DEFAULT_OBJECTIVE, OBJECTIVE_AXIS
from sweeper.spec.schema import SweepSpec

KEYED_WHEN_SET: dict[str, Any] = {"precision": "fp32"}
"""Recipe fields added after trial keys were first recorded, with the value every older
trial ran with: at that value a field is left out of the key, so a store made before the
field existed resumes and summarises under the same keys (docs/architecture.md,
invariant 1). Its MLflow param is logged either way. The pretraining objective is kept
the same way: `DEFAULT_OBJECTIVE` leaves it out of the key (`Trial.key`)."""
_ALWAYS = object()
SEED_SOURCE_AXIS = "seed_source"
"""The name a one-source trial's source goes by in its identity and group variant
(`fairseq/pretrained/full[seed_source=data_order]`): a block of the sweep, never an
axis the summary compares along (its trials differ from another block's by which
seed they hold, not by a treatment)."""


@dataclass(frozen=True)
class Trial:
    """One fine-tuning run of the grid, fully resolved."""

    sweep: str
    seed: int
    init: str
    framework: str
    method: str
    train: dict[str, Any]
    """The resolved recipe (spec.train with this trial's grid/search values applied)."""
    lora: dict[str, Any] | None
    """Resolved LoRA settings; None unless method is `lora`."""
    objective: str | None = None
    """The pretraining objective of the checkpoint a `pretrained` trial starts from
    (`model.pretrain.objective`, or its grid value); None where it means nothing: a
    `random` trial, a given `model.checkpoint`, a task with one pretraining of its own."""
    varied: dict[str, Any] = field(default_factory=dict)
    """The dotted grid/search values that distinguish this trial within its group."""
    stage: str = "grid"
    """`search` for a search-stage trial: it enters the key, so the confirm stage's run
    of the same configuration and seed is a trial of its own (a grid or confirm trial's
    key leaves the stage out)."""
    seed_source: str = SEED_ALL
    """Which randomness `seed` sets: `all` (every source), or one of
    `record_names.SEED_SOURCES`, the others held at `held_seed`."""
    held_seed: int | None = None
    """The seed of the sources a one-source trial holds; None for an `all` trial."""

    def __post_init__(self) -> None:
        if self.seed_source != SEED_ALL and self.seed_source not in SEED_SOURCES:
            raise ValueError(f"seed source {self.seed_source!r}: one of all, {SEED_SOURCES}")
        if (self.seed_source == SEED_ALL) != (self.held_seed is None):
            raise ValueError("a held seed goes with a one-source trial, and only there")

    @property
    def seeds(self) -> dict[str, int]:
        """The seed of each source (`record_names.SEED_SOURCES`): `seed` for the varied
        one (every one under `all`), `held_seed` for the others."""
        return {
            source: self.seed
            if self.seed_source in (SEED_ALL, source) or self.held_seed is None
            else self.held_seed
            for source in SEED_SOURCES
        }

    @property
    def group(self) -> str:
        """Trials that differ only by seed form a group: `framework/init/method[+varied]`;
        a one-source trial's source leads the bracket (`[seed_source=init,train.lr=...]`),
        so a group's variant still splits at each dotted grid value."""
        base = f"{self.framework}/{self.init}/{self.method}"
        parts = [f"{k}={v}" for k, v in sorted(self.varied.items())]
        if self.seed_source != SEED_ALL:
            parts.insert(0, f"{SEED_SOURCE_AXIS}={self.seed_source}")
        extra = ",".join(parts)
        return f"{base}[{extra}]" if extra else base

    @property
    def name(self) -> str:
        """Readable run name, e.g. `hf-pretrained-full-s1` (a one-source trial's:
        `hf-pretrained-full-data_order-s2`); also the trial's folder name, so grid values
        (free strings for `lora.target_modules`) are made path-safe."""
        extra = "".join(f"-{k.split('.')[-1]}{v}" for k, v in sorted(self.varied.items()))
        if self.seed_source != SEED_ALL:
            extra += f"-{self.seed_source}"
        return safe_name(f"{self.framework}-{self.init}-{self.method}{extra}-s{self.seed}")

    def identity(self) -> dict[str, Any]:
        """Everything the key is a hash of. An `all` trial's is what it was before seed
        sources existed (its key too); a one-source trial's adds the source and every
        source's seed, so each is a trial of its own, even where its seeds equal an `all`
        trial's."""
        identity: dict[str, Any] = {
            "sweep": self.sweep,
            "seed": self.seed,
            "init": self.init,
            "framework": self.framework,
            "method": self.method,
            "train": self.train,
            "lora": self.lora,
        }
        if self.objective is not None:
            identity[OBJECTIVE_AXIS] = self.objective
        if self.stage == "search":
            identity["stage"] = self.stage
        if self.seed_source != SEED_ALL:
            identity[SEED_SOURCE_AXIS] = self.seed_source
            identity["seeds"] = self.seeds
        return identity

    @property
    def key(self) -> str:
        identity = self.identity()
        identity["train"] = {
            name: value
            for name, value in self.train.items()
            if KEYED_WHEN_SET.get(name, _ALWAYS) != value
        }
        if identity.get(OBJECTIVE_AXIS) == DEFAULT_OBJECTIVE:
            del identity[OBJECTIVE_AXIS]  # keys recorded before the objective existed
        canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Skipped:
    """A grid combination that cannot run, with the reason shown to the user."""

    combination: str
    reason: str


def expand(spec: SweepSpec, seeds: list[int] | None = None) -> tuple[list[Trial], list[Skipped]]:
    """Cross the grid axes into trials (deduplicated by key), in a stable order. `seeds`
    (default `grid.seed`; `--until-decided` passes the seeds it adds) cross every
    `grid.seed_source`, the held seed staying the grid's (`GridConfig.held`)."""
    params = spec.grid.params
    trials: dict[str, Trial] = {}
    skipped: dict[str, Skipped] = {}
    axes = itertools.product(
        spec.grid.framework,
        spec.grid.init,
        spec.grid.method,
        itertools.product(*params.values()),
        spec.grid.seed_source,
        seeds if seeds is not None else spec.grid.seed,
    )
    for framework, init, method, values, source, seed in axes:
        why_not = backends.unsupported(framework, spec.task, method)
        if why_not is not None:
            combo = f"framework={framework} method={method}"
            skipped[combo] = Skipped(combo, why_not)
            continue
        varied = dict(zip(params, values, strict=True))
        trial = make_trial(
            spec,
            seed=seed,
            init=init,
            framework=framework,
            method=method,
            varied=varied,
            seed_source=source,
        )
        trials.setdefault(trial.key, trial)
    return list(trials.values()), list(skipped.values())


def make_trial(
    spec: SweepSpec,
    *,
    seed: int,
    init: str,
    framework: str,
    method: str,
    varied: dict[str, Any] | None = None,
    seed_source: str = SEED_ALL,
) -> Trial:
    """Resolve one trial: apply its dotted values to the recipe and LoRA blocks, and
    its pretraining objective (`pretrained` trials only); a one-source trial holds the
    other sources at the grid's held seed."""
    objective = _pretrained_objective(spec) if init == "pretrained" else None
    blocks = {
        "train": spec.train.model_dump(mode="json"),
        "lora": spec.lora.model_dump(mode="json"),
    }
    kept: dict[str, Any] = {}
    for dotted, value in (varied or {}).items():
        block, _, name = dotted.partition(".")
        if block == "lora" and method != "lora":
            continue  # LoRA values mean nothing to full fine-tuning: same trial, same key
        if dotted == OBJECTIVE_AXIS:
            if objective is None:
                continue  # nor an objective to a trial that is not pretrained by sweeper
            objective = str(value)
        else:
            blocks[block][name] = value
        kept[dotted] = value
    # Re-validate so grid/search values obey the same bounds as the YAML itself.
    train = type(spec.train).model_validate(blocks["train"]).model_dump(mode="json")
    lora = type(spec.lora).model_validate(blocks["lora"]).model_dump(mode="json")
    return Trial(
        sweep=spec.name,
        seed=seed,
        init=init,
        framework=framework,
        method=method,
        train=train,
        lora=lora if method == "lora" else None,
        objective=objective,
        varied=kept,
        seed_source=seed_source,
        held_seed=None if seed_source == SEED_ALL else spec.grid.held(),
    )


def seed_tags(trial: Trial) -> dict[str, str]:
    """The run tags that say which seed set what (`record_names.TAG_SEED_SOURCE`,
    `TAG_SEED_OF`), set when the trial's run is created."""
    tags = {TAG_SEED_SOURCE: trial.seed_source}
    tags.update({TAG_SEED_OF[source]: str(seed) for source, seed in trial.seeds.items()})
    return tags


def recorded_seeds(tags: Mapping[str, str]) -> tuple[str, dict[str, int]] | None:
    """(seed source, seed per source) a trial run's tags record; a run made before
    seed sources existed has only `sweeper.seed`, and its seed set every source. None
    for a run without a seed."""
    if TAG_SEED not in tags:
        return None
    seed = int(tags[TAG_SEED])
    source = tags.get(TAG_SEED_SOURCE, SEED_ALL)
    return source, {s: int(tags.get(TAG_SEED_OF[s], seed)) for s in SEED_SOURCES}


def without_seed_source(group: str) -> tuple[str, str]:
    """(the group as an `all` trial of its configuration names it, its seed source):
    `hf/pretrained/full[seed_source=init,train.lr=0.001]` ->
    (`hf/pretrained/full[train.lr=0.001]`, `init`); a group without a source: `all`."""
    base, bracket, rest = group.partition("[")
    prefix = f"{SEED_SOURCE_AXIS}="
    if not bracket or not rest.startswith(prefix):
        return group, SEED_ALL
    variant = rest.removesuffix("]")
    source, _, others = variant[len(prefix) :].partition(",")
    return (f"{base}[{others}]" if others else base), source


def objectives(spec: SweepSpec) -> list[str]:
    """The pretraining objectives the spec's `pretrained` trials start from, grid order
    (its `model.pretrain.objective` values, else the field); empty when sweeper
    pretrains nothing with an objective (no `pretrained` init, a given checkpoint, a
    task with one pretraining: `sweeper.backends.Task.pretrain`)."""
    default = _pretrained_objective(spec)
    if "pretrained" not in spec.grid.init or default is None:
        return []
    asked = spec.grid.params.get(OBJECTIVE_AXIS, [default])
    return list(dict.fromkeys(str(value) for value in asked))


def _pretrained_objective(spec: SweepSpec) -> str | None:
    """`model.pretrain.objective` where sweeper pretrains with an objective, else None."""
    pretrain = spec.model.pretrain
    if pretrain is None or spec.model.checkpoint is not None:
        return None
    return pretrain.objective if backends.task(spec.task).pretrain else None
