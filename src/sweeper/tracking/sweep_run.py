"""The sweep's parent run: what was run (spec), with what (code, packages, cluster).

A result is only as good as the record of how it was produced, so the parent run
carries the spec as written and as resolved, the git commit of the spec's repository,
the versions of the packages that compute the numbers, and the Ray cluster the trials
ran on. These are tags rather than params: a `--resume` after upgrading a package must
be able to update them, and MLflow refuses to change a param's value. Such a resume
says which versions changed; each trial run keeps the versions it trained with (the
`sweeper.versions` tag, sent by the trial from its node), so the summary can tell
when counted trials ran on different stacks.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper import record_names
from sweeper.redact import redact, redact_values
from sweeper.selection import Selection
from sweeper.spec.extends import spec_files
from sweeper.spec.schema import SweepSpec
from sweeper.tracking.record_format import RECORD_VERSION
from sweeper.tracking.runs import role_filter, search_all

if TYPE_CHECKING:
    from mlflow import MlflowClient

TAG_GIT_COMMIT = "sweeper.git_commit"
TAG_GIT_DIRTY = "sweeper.git_dirty"
TAG_VERSION_PREFIX = "sweeper.version."
TAG_RAY_RESOURCES = "sweeper.ray_resources"
TAG_RAY_ADDRESS = "sweeper.ray_address"
TAG_TRIALS = "sweeper.trial_keys"
PACKAGES = {
    "sweeper": ("sweeper",),
    "torch": ("torch",),
    "fairseq": ("fairseq-fixed", "fairseq"),
    "transformers": ("transformers",),
    "ray": ("ray",),
    "mlflow": ("mlflow",),
    "peft": ("peft",),
}


def open_sweep_run(client: MlflowClient, experiment_id: str, spec: SweepSpec) -> str:
    """The sweep's parent run: the latest existing one (a resume, its record format
    version kept), else a new one in this code's `record_format.RECORD_VERSION`."""
    existing = search_all(client, experiment_id, role_filter(record_names.ROLE_SWEEP, spec.name))
    if existing:
        run_id = existing[-1].info.run_id
        client.update_run(run_id, status=record_names.RunState.RUNNING)
        return run_id
    tags = {
        record_names.TAG_ROLE: record_names.ROLE_SWEEP,
        record_names.TAG_SWEEP: spec.name,
        record_names.TAG_RECORD_VERSION: str(RECORD_VERSION),
    }
    return client.create_run(experiment_id, tags=tags, run_name=spec.name).info.run_id


def record_sweep(
    client: MlflowClient, run_id: str, spec: SweepSpec, spec_file: Path, trials: int
) -> None:
    """Spec artifacts and provenance tags on the parent run, secrets masked
    (`sweeper.redact`): `${VAR}` puts environment values into the resolved spec."""
    from mlflow.utils.mlflow_tags import MLFLOW_GIT_COMMIT

    leaf, *bases = spec_files(spec_file)
    client.log_text(run_id, redact(leaf.read_text(encoding="utf-8")), record_names.ARTIFACT_SPEC)
    for depth, base in enumerate(bases, start=1):
        written = redact(base.read_text(encoding="utf-8"))
        client.log_text(run_id, written, f"{record_names.ARTIFACT_SPEC_BASES}/{depth}-{base.name}")
    resolved = json.dumps(spec.model_dump(mode="json"), indent=2, sort_keys=True)
    client.log_text(run_id, redact(resolved), record_names.ARTIFACT_RESOLVED_SPEC)
    tags = {TAG_TRIALS: str(trials)}
    selection = Selection.of(spec.select)
    if not selection.is_default():  # no tag means the default (classification) selection
        tags[record_names.TAG_SELECT] = selection.to_json()
    if spec.cost is not None:  # prices for a summary made without the spec
        tags[record_names.TAG_COST] = json.dumps(spec.cost.model_dump(mode="json"), sort_keys=True)
    versions = package_versions()
    _note_version_changes(client, run_id, versions)
    tags.update({TAG_VERSION_PREFIX + name: version for name, version in versions.items()})
    commit, dirty = git_state(spec_file.resolve().parent)
    if commit:
        tags.update({TAG_GIT_COMMIT: commit, MLFLOW_GIT_COMMIT: commit, TAG_GIT_DIRTY: str(dirty)})
    for key, value in redact_values(tags).items():
        client.set_tag(run_id, key, value)


def record_cluster(
    client: MlflowClient, run_id: str, resources: dict[str, Any], address: str
) -> None:
    """The Ray cluster the trials ran on: its total resources and how it was reached."""
    shown = {k: v for k, v in sorted(resources.items()) if not k.startswith("node:")}
    shown["nodes"] = sum(1 for k in resources if k.startswith("node:") and "internal" not in k)
    client.set_tag(run_id, TAG_RAY_RESOURCES, json.dumps(shown, sort_keys=True))
    client.set_tag(run_id, TAG_RAY_ADDRESS, redact(address))


def package_versions() -> dict[str, str]:
    """Installed version of each package that shapes the results ('absent' if none)."""
    versions: dict[str, str] = {}
    for name, dists in PACKAGES.items():
        versions[name] = "absent"
        for dist in dists:
            try:
                versions[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return versions


def versions_json() -> str:
    """`package_versions()` as the compact JSON of a trial run's sweeper.versions tag."""
    return json.dumps(package_versions(), sort_keys=True, separators=(",", ":"))


def version_changes(recorded: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """`name old -> new` for each package both name whose version differs from the
    record's (a sweeper that tracks a package more records it from then on)."""
    return [
        f"{name} {recorded[name]} -> {version}"
        for name, version in sorted(current.items())
        if name in recorded and recorded[name] != version
    ]


def _note_version_changes(client: MlflowClient, run_id: str, current: Mapping[str, str]) -> None:
    """On a resumed parent run, say which of the record's package versions this driver
    does not have: the new trials then run on another stack than the finished ones."""
    tags = client.get_run(run_id).data.tags
    recorded = {
        key.removeprefix(TAG_VERSION_PREFIX): value
        for key, value in tags.items()
        if key.startswith(TAG_VERSION_PREFIX)
    }
    changes = version_changes(recorded, current)
    if changes:
        print(
            f"note: package versions differ from the sweep's record: {'; '.join(changes)}. "
            f"Trials run now are recorded with the new versions (tag {record_names.TAG_VERSIONS}); "
            "finished trials keep theirs, and the summary notes the mix",
            file=sys.stderr,
        )


def git_state(folder: Path) -> tuple[str | None, bool]:
    """(HEAD commit, has uncommitted changes) of the repository holding `folder`;
    (None, False) outside a repository or without git. Read-only git commands only."""
    try:
        head = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--verify", "HEAD"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        if head.returncode != 0:
            return None, False
        status = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None, False
    return head.stdout.strip(), bool(status.stdout.strip())


def close_sweep_run(client: MlflowClient, run_id: str, failed: bool) -> None:
    """FINISHED when every trial finished, FAILED when any did not."""
    state = record_names.RunState.FAILED if failed else record_names.RunState.FINISHED
    client.set_terminated(run_id, status=state)
