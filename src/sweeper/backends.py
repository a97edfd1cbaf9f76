"""The backend table: what runs a trial of a (framework, task), and what exists.

A backend is an entry keyed by (framework, task). It owns, as lazy `"module:name"`
strings imported only when a trial of that backend runs (so `sweeper --help` and the
driver never load fairseq or transformers for nothing; docs/architecture.md,
invariant 4):

- its trainer (`trainer`: a `sweeper.trainers.base.Trainer` class), which also says how
  a stored checkpoint is reloaded for `summarize --evaluate` (`reload_inputs`,
  `remeasure`: per-example predictions and the metrics it reports, counted from them);
- how a trial's job is built (`job`: a function `(backend, spec, trial, inputs,
  out_dir, threads, device) -> TrialJob`, given its own entry; the job carries its
  task and its one data folder, `data`);
- which prepared-data folder its trials read (`data`: a key of the task's
  `SweepInputs.data`, written by the task's preparation) and, for a task whose
  preparation writes one folder per format (classification: `sweeper.data.prepare`),
  the function that writes it (`write`);
- the training methods it runs (`methods`; other grid combinations are skipped with
  `why_not`).

What the backends of one task share is the task (`Task`): one preparation of the data
and pretrained weights (invariant 2: the frameworks of a sweep read one encoding), the
task's own pre-flight checks, and the pretraining stage of each objective it offers
(`Task.pretrain`). `register` refuses a backend whose task differs from
the one already registered under that name.

Spec validation (an unknown framework, a task no framework runs, "causal_lm has no
fairseq backend"), the grid's expansion, the CLI's `--framework` choices, the trial
pipeline, pre-flight and `--evaluate` all ask this table, so adding a backend is one
`register` call plus the code its strings name; nothing else branches on a framework
or task name.

This module sits low in the layers (it imports nothing from sweeper) because the spec
loader and the grid's expansion, which are below the trainers, must ask it.

Plugins. `$SWEEPER_PLUGINS` holds comma-separated `"module:function"` names; each
function is called once, on first use of the table, and registers its entries. Every
process that may run a trial must see the variable: local Ray's workers inherit the
driver's environment; on a cluster it is set where each node's `ray start` runs (or in
a job's runtime_env). The test suite registers its `dummy` backend this way
(`tests.support.dummy_trainer:register`); it is not shipped.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PLUGINS_ENV = "SWEEPER_PLUGINS"


@dataclass(frozen=True)
class Task:
    """What every backend of one task shares."""

    name: str
    """As written in the spec's `task:`."""
    prepare: str
    """`"module:function"`, `(spec, log, need_pretrained, force=False) -> SweepInputs`:
    the sweep's prepared data (every folder its backends read) and, when asked, the
    pretrained weights; cached, so calling it again costs a hash."""
    check: str
    """`"module:function"`, `(spec, vocab_size, labels) -> None`: pre-flight checks of
    the task's own inputs (raises `DataError`); `vocab_size` and `labels` are None
    when the data are not files that exist yet."""
    params: str
    """`"module:function"`, `(args, spec, arch, vocab_size, vocab_source) -> exit code`:
    what `sweeper params` prints for the task's models."""
    select: Mapping[str, Any] = field(default_factory=dict)
    """Defaults of the fields of `select:` a spec of the task leaves out, over the
    schema's own (classification's: the highest validation accuracy)."""
    formats: tuple[str, ...] = ()
    """The `data.format`s its preparation reads; empty: every format."""
    tokenizer: bool = True
    """Whether its preparation trains a tokenizer from the data (`model.tokenizer`)."""
    pretrain: Mapping[str, str] = field(default_factory=dict)
    """`model.pretrain.objective` -> `"module:function"`, `(spec, prepared, log) ->
    Path`: the stage that pretrains the task's model with that objective, in the
    framework that does it natively (its checkpoint starts every framework's trials).
    Empty: the task's preparation has one pretraining of its own, and the spec may not
    choose an objective."""


@dataclass(frozen=True)
class Backend:
    """One (framework, task) a trial may run on."""

    framework: str
    """As written in `grid.framework` and recorded in the `sweeper.framework` tag."""
    task: Task
    trainer: str
    """`"module:Class"` of its Trainer (see `sweeper.trainers.base.Trainer`)."""
    job: str
    """`"module:function"` building a trial's `TrialJob` (see the module docstring)."""
    data: str
    """The prepared folder its trials read: a key of the task's `SweepInputs.data`."""
    methods: tuple[str, ...]
    """Training methods it runs (`full`, `lora`); other combinations are skipped."""
    why_not: str = ""
    """Said when a grid combination asks for a method it lacks."""
    write: str = ""
    """`"module:function"` writing its `data` folder from the encoded splits (see
    `sweeper.data.binarize.Writer`); empty where the task's preparation writes its one
    folder itself (causal_lm). Backends of one task that read one folder name one
    writer."""


CLASSIFICATION = Task(
    "classification",
    prepare="sweeper.trainers.classification:prepare_inputs",
    check="sweeper.engine.preflight:check_classification",
    params="sweeper.cli.params:classification_params",
    pretrain={
        "masked_lm": "sweeper.trainers.fairseq.fairseq_pretrain:pretrain",
        "causal_lm": "sweeper.trainers.hf.roberta_causal_pretrain:pretrain_causal",
    },
)
CAUSAL_LM = Task(
    "causal_lm",
    prepare="sweeper.trainers.hf.lm_trial:prepare_inputs",
    check="sweeper.engine.preflight:check_causal_lm",
    params="sweeper.cli.params:causal_lm_params",
    select={"metric": "valid_exact_match", "report": ["test_exact_match", "test_perplexity"]},
    formats=("lines",),
    tokenizer=False,
)
_BUILTIN = (
    Backend("fairseq", CLASSIFICATION, "sweeper.trainers.fairseq.fairseq_trainer:FairseqTrainer",
            "sweeper.trainers.classification:build_job", "fairseq", ("full",),
            why_not="LoRA trials run on HF (PEFT) only",
            write="sweeper.data.binarize:write_fairseq"),
    Backend("hf", CLASSIFICATION, "sweeper.trainers.hf.hf_trainer:HFTrainer",
            "sweeper.trainers.classification:build_job", "hf", ("full", "lora"),
            write="sweeper.data.binarize:write_hf"),
    Backend("hf", CAUSAL_LM, "sweeper.trainers.hf.lm_trial:LMTrainer",
            "sweeper.trainers.hf.lm_trial:build_job", "lm", ("full", "lora")),
)  # fmt: skip
_TABLE: dict[tuple[str, str], Backend] = {(b.framework, b.task.name): b for b in _BUILTIN}
_plugins_loaded = False


def register(entry: Backend) -> None:
    """Add (or replace) a backend; plugins call this. ValueError when its task differs
    from the one the task's other backends share, or when it names another writer for
    a folder they write."""
    named = f"backend ({entry.framework}, {entry.task.name})"
    for other in _TABLE.values():
        if other.task.name != entry.task.name:
            continue
        if other.task != entry.task:
            raise ValueError(
                f"{named}: task {entry.task.name!r} is registered as {other.task}; every "
                "backend of a task shares its Task"
            )
        if other.data == entry.data and other.write != entry.write:
            raise ValueError(
                f"{named}: folder {entry.data!r} is written by {other.write or 'the task'}; "
                "backends that read one folder name one writer"
            )
    _TABLE[(entry.framework, entry.task.name)] = entry


def frameworks() -> list[str]:
    """Every framework with a backend, built-ins first."""
    _load_plugins()
    return list(dict.fromkeys(framework for framework, _ in _TABLE))


def tasks() -> list[str]:
    """Every task with a backend, built-ins first."""
    _load_plugins()
    return list(dict.fromkeys(task for _, task in _TABLE))


def get(framework: str, task: str) -> Backend:
    """The entry of (framework, task); KeyError with `missing`'s message otherwise."""
    _load_plugins()
    try:
        return _TABLE[(framework, task)]
    except KeyError:
        raise KeyError(missing(framework, task)) from None


def task(name: str) -> Task:
    """The task `name`, as its backends share it; KeyError naming the tasks otherwise."""
    _load_plugins()
    for backend in _TABLE.values():
        if backend.task.name == name:
            return backend.task
    raise KeyError(f"unknown task {name!r}; registered: {', '.join(sorted(tasks()))}")


def writers(task: str, plugins: bool = True) -> dict[str, str]:
    """{prepared folder: its writer} of the backends of `task` that name one, in the
    table's order (built-ins first); `plugins=False`: of the built-in backends only."""
    _load_plugins()
    entries = _TABLE.values() if plugins else _BUILTIN
    return {b.data: b.write for b in entries if b.task.name == task and b.write}


def missing(framework: str, task: str) -> str | None:
    """Why no trial of (framework, task) can run, or None when one can."""
    _load_plugins()
    if (framework, task) in _TABLE:
        return None
    if framework not in frameworks():
        return unknown(framework)
    if task not in tasks():
        return f"unknown task {task!r}; registered: {', '.join(sorted(tasks()))}"
    runs = sorted(name for name, of in _TABLE if of == task)
    return f"{task} has no {framework} backend (it runs on {', '.join(runs)})"


def unknown(framework: str) -> str:
    """The message for a framework nobody registered."""
    return f"unknown framework {framework!r}; registered: {', '.join(sorted(frameworks()))}"


def unsupported(framework: str, task: str, method: str) -> str | None:
    """Why (framework, task) cannot run `method`, or None when it can."""
    entry = get(framework, task)
    if method in entry.methods:
        return None
    return entry.why_not or f"{framework} runs {', '.join(entry.methods)} only"


def load(name: str) -> Any:
    """The object a `"module:name"` string of an entry names, imported now."""
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _load_plugins() -> None:
    """Call each `$SWEEPER_PLUGINS` function once (a bad name is an error, not a skip:
    a plugin silently missing would make its trials fail later, on a worker)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for item in filter(None, (p.strip() for p in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            load(item)()
        except (ImportError, AttributeError) as exc:
            raise RuntimeError(f"${PLUGINS_ENV}: cannot load {item!r}: {exc}") from exc
