"""From a validated spec to the list of trials, each with its stable trial key.

The trial key is the identity the whole product hangs on (docs/architecture.md,
invariant 1): one key, one MLflow run, however often the trial is retried or resumed. It
hashes the sweep name and everything that changes what the trial computes, and nothing
that does not (paths, concurrency, retries), so moving a sweep folder or re-running it
finds the same runs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from sweeper import backends
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

    @property
    def group(self) -> str:
        """Trials that differ only by seed form a group: `framework/init/method[+varied]`."""
        base = f"{self.framework}/{self.init}/{self.method}"
        extra = ",".join(f"{k}={v}" for k, v in sorted(self.varied.items()))
        return f"{base}[{extra}]" if extra else base

    @property
    def name(self) -> str:
        """Readable run name, e.g. `hf-pretrained-full-s1`; also the trial's folder name,
        so grid values (free strings for `lora.target_modules`) are made path-safe."""
        extra = "".join(f"-{k.split('.')[-1]}{v}" for k, v in sorted(self.varied.items()))
        return safe_name(f"{self.framework}-{self.init}-{self.method}{extra}-s{self.seed}")

    def identity(self) -> dict[str, Any]:
        """Everything the key is a hash of."""
        identity = {
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
    """Cross the grid axes into trials (deduplicated by key), in a stable order."""
    params = spec.grid.params
    trials: dict[str, Trial] = {}
    skipped: dict[str, Skipped] = {}
    axes = itertools.product(
        spec.grid.framework,
        spec.grid.init,
        spec.grid.method,
        itertools.product(*params.values()),
        seeds if seeds is not None else spec.grid.seed,
    )
    for framework, init, method, values, seed in axes:
        why_not = backends.unsupported(framework, spec.task, method)
        if why_not is not None:
            combo = f"framework={framework} method={method}"
            skipped[combo] = Skipped(combo, why_not)
            continue
        varied = dict(zip(params, values, strict=True))
        trial = make_trial(
            spec, seed=seed, init=init, framework=framework, method=method, varied=varied
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
) -> Trial:
    """Resolve one trial: apply its dotted values to the recipe and LoRA blocks, and
    its pretraining objective (`pretrained` trials only)."""
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
    )


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
