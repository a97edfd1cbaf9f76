"""The format version of a sweep's record, and one upgrade step per older version.

A record (a sweep's parent run and its trial runs) outlives the sweeper that wrote it:
a newer sweeper summarises and resumes it. The parent run carries the version of the
format its sweep was created in (`record_names.TAG_RECORD_VERSION`, set by
`sweeper.tracking.sweep_run.open_sweep_run` when it creates the run, never changed
afterwards); a parent run without the tag was written before the tag existed: version 1.

A version is what a reader may take as written. Version 2 is the format of the sweeper
that introduced the tag; version-1 records span every sweeper before it, and the older of
them lack what later ones write on every trial run. `_v1_to_v2` fills that in, in memory,
with the value those writers meant, so no reader special-cases an older record. An
upgrade reads and never writes: a summary may read a store it cannot write.

Readers open a record here once: a summary through
`sweeper.summarize.mlflow_reader.records_of` (every run upgraded by its sweep's
version, a newer record refused), `sweeper run` through `check_stored`, where
`sweeper.engine.open_store.sweep_lease` first opens the store (a newer record refused
before the lease or any run is written). A resumed version-1 record stays version 1: the
runs a resume adds are current runs, which every step leaves as they are (a step only
fills what is absent, so it is idempotent).

A record newer than this code is refused (`RecordTooNew`): this code cannot tell what its
runs mean.

To change the format: raise `RECORD_VERSION`, add the step from the previous version
(in memory, idempotent, filling or rewriting what the older format has otherwise) to
`UPGRADES`, and say what changed in docs/architecture.md ("Record format").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from sweeper import record_names

if TYPE_CHECKING:
    from mlflow import MlflowClient

RECORD_VERSION = 2
"""The format this code writes, and the newest it reads."""
FIRST_VERSION = 1
"""The format of a parent run without the version tag."""

Fields = dict[str, str]
Step = Callable[[Fields, Fields], tuple[Fields, Fields]]


class RecordTooNew(ValueError):
    """The record was written by a newer sweeper, in a format this code does not know."""


def version_of(tags: Mapping[str, str]) -> int:
    """The format version a sweep run's tags name (no tag: version 1); RecordTooNew for
    a tag that is no version number (no sweeper writes one)."""
    text = tags.get(record_names.TAG_RECORD_VERSION)
    if text is None:
        return FIRST_VERSION
    if not text.isdigit():
        raise RecordTooNew(
            f"the sweep run's {record_names.TAG_RECORD_VERSION} tag is {text!r}, not a "
            f"record format version (this sweeper reads up to {RECORD_VERSION}); upgrade sweeper"
        )
    return int(text)


def check(version: int, sweep: str | None) -> None:
    """RecordTooNew (one line naming both versions) when `version` is newer than this code."""
    if version > RECORD_VERSION:
        raise RecordTooNew(
            f"sweep {sweep!r} was recorded in record format version {version}, newer than "
            f"this sweeper's version {RECORD_VERSION}; upgrade sweeper to read or resume it"
        )


def upgrade(
    version: int, tags: Mapping[str, str], params: Mapping[str, str]
) -> tuple[Fields, Fields]:
    """One run's (tags, params) as the current format has them, from a run of a record
    of format `version` (a record newer than this code is returned as read: `check`
    refuses it)."""
    upgraded: tuple[Fields, Fields] = (dict(tags), dict(params))
    for step in range(version, RECORD_VERSION):
        upgraded = UPGRADES[step](*upgraded)
    return upgraded


def _v1_to_v2(tags: Fields, params: Fields) -> tuple[Fields, Fields]:
    """Version 1 to 2, on trial runs; what older version-1 writers left out:

    - the `train.precision` param: recipes before the field ran in fp32 (the same value
      `sweeper.trial_keys.KEYED_WHEN_SET` leaves out of their keys);
    - the `sweeper.versions` tag: trials before it recorded no package versions, `{}`,
      so the summary compares none of theirs.
    """
    if tags.get(record_names.TAG_ROLE) != record_names.ROLE_TRIAL:
        return tags, params
    return (
        {record_names.TAG_VERSIONS: "{}", **tags},
        {record_names.PARAM_PRECISION: "fp32", **params},
    )


UPGRADES: dict[int, Step] = {1: _v1_to_v2}
"""The step from each older version to the next."""


def check_stored(client: MlflowClient, experiment_id: str, sweep: str) -> None:
    """RecordTooNew when a parent run of `sweep` in the store is newer than this code:
    what a resume calls before it writes anything."""
    from sweeper.tracking.runs import role_filter, search_all

    for parent in search_all(client, experiment_id, role_filter(record_names.ROLE_SWEEP, sweep)):
        check(version_of(parent.data.tags), sweep)
