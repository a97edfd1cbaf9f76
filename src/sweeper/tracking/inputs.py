"""What a sweep's trials compute from beyond their own key, and the check on --resume.

A trial key hashes the sweep name, seed, init, framework, method and the resolved
`train`/`lora` blocks (`sweeper.trial_keys`). Everything else a trial reads is the same for
the whole sweep, so it is fingerprinted once per sweep instead: the model architecture,
the data (every byte the prepared ids come from, `sweeper.data.prepare.content_hash`,
and the generator's settings for a generated corpus), and the pretrained weights (the
checkpoint file's hash, or the pretraining recipe but its objective, which is a
trial's own and enters its key). The parent run and every trial run
carry it as the `sweeper.inputs` tag.

`--resume` (and each `--until-decided` round) compares the spec's fingerprint with
the record's before anything is prepared or created, and exits 2 naming what changed:
trials made from other inputs are not results of this spec. New seeds or new grid
values are new keys, never a change here. A part whose files are not on this machine
("missing") is not compared, nor is a run without the tag (search-stage trials carry
none, nor does a search sweep's parent run before its confirm stage; nor the runs of a
record older than the tag).
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from sweeper import record_names

if TYPE_CHECKING:
    from mlflow import MlflowClient

    from sweeper.spec.schema import SweepSpec

MISSING = "missing"


class InputsChanged(ValueError):
    """The spec's inputs differ from those the sweep's runs were made from."""


def inputs_fingerprint(spec: SweepSpec) -> dict[str, str]:
    """{input: 16-hex digest} for the architecture, the data and the pretrained weights."""
    model = spec.model
    parts = {"model.arch": _digest(model.arch.model_dump(mode="json")), "data": _data(spec)}
    if spec.data.answers is not None:  # a causal-LM sweep's answers (classification: none)
        parts["data.answers"] = _digest(spec.data.answers)
    if model.checkpoint is not None:
        parts["pretrained"] = _file(model.checkpoint)
    elif model.pretrain is not None:
        # The objective is each trial's own (its key), not the sweep's: left out.
        recipe = model.pretrain.model_dump(mode="json", exclude={"objective"})
        parts["pretrained"] = _digest({"pretrain": recipe})
    return parts


def changed(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """The inputs whose digests differ (a part missing on either side is not compared)."""
    return sorted(
        name
        for name in recorded.keys() | current.keys()
        if MISSING not in (recorded.get(name, MISSING), current.get(name, MISSING))
        and recorded.get(name) != current.get(name)
    )


def recorded_inputs(client: MlflowClient, experiment_id: str, sweep: str) -> dict[str, str]:
    """The fingerprint on the sweep's latest parent run; {} when none is recorded."""
    from sweeper.tracking.runs import role_filter, search_all

    parents = search_all(client, experiment_id, role_filter(record_names.ROLE_SWEEP, sweep))
    tagged = [p for p in parents if record_names.TAG_INPUTS in p.data.tags]
    return json.loads(tagged[-1].data.tags[record_names.TAG_INPUTS]) if tagged else {}


def check_resume(client: MlflowClient, experiment_id: str, spec: SweepSpec) -> None:
    """Raise InputsChanged when the spec's inputs differ from the record's."""
    differ = changed(recorded_inputs(client, experiment_id, spec.name), inputs_fingerprint(spec))
    if differ:
        raise InputsChanged(
            f"{', '.join(differ)} changed since its runs were made, so they are "
            "not results of this spec; nothing was run. Keep the inputs as they were to "
            "resume, or start a new sweep (another `name`, e.g. `name=NEW`)"
        )


def _data(spec: SweepSpec) -> str:
    from sweeper.data.errors import DataError
    from sweeper.data.prepare import content_hash, find_inputs

    generate = spec.data.generate.model_dump(mode="json") if spec.data.generate else None
    try:
        content = content_hash(spec, find_inputs(spec))
    except DataError:
        return MISSING  # not generated or copied onto this machine yet
    return _digest({"content": content, "generate": generate})


def _file(path: Any) -> str:
    from pathlib import Path

    from sweeper.hashing import file_sha256, tree_sha256

    if Path(path).is_dir():  # an HF model folder
        return tree_sha256(Path(path))[:16]
    return file_sha256(Path(path))[:16] if Path(path).is_file() else MISSING


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]
