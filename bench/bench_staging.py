"""Staging inputs and syncing checkpoints through the artifact store: what they cost.

Without a shared filesystem (docs/architecture.md, "Storage without a shared
filesystem") every trial input goes through the tracking server's artifact proxy once
per sweep (publish) and once per node (fetch into the node cache), and every trial
copies its last and best checkpoints there at each validation point (sync) so that a
retry on another node can restore them. This script times each of those against a real
`mlflow server` with served artifacts on 127.0.0.1, at two sizes:

* demo: the demo's prepared data and its pretrained checkpoint (2 layers x 64, vocabulary
  1,002), as `make demo` leaves them in runs/demo;
* lab: the same prepared data with a checkpoint of the lab's arch (4 layers x 512, ffn
  512, vocabulary 32,000; sweeps/roberta.yaml), built here with random weights by
  sweeper's own init code (`sweeper.models.init`).

Synced trial checkpoints are modelled as the trainers write them: `best` holds the
weights, `last` the weights plus Adam's two moment buffers (3x the weights). Round 1 sends
both; round 2 follows a validation point that did not improve (best unchanged: only
`last` is sent again). Restore is a retry on a node with an empty trial folder.

Then the end-to-end ratio: the same short sweep (hf, pretrained, 2 seeds, 1 epoch) with
the default SQLite store (nothing staged or synced) and against the tracking server
(inputs published, hashes checked, a checkpoint sync per validation point). On one
machine the trials find the driver's files, so that ratio has no downloads: what a cold
node adds is the `fetch, cold node` row.

    python bench/bench_staging.py [--repeats N] [--quick] [--no-doc]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import common

TITLE = "Staging and checkpoint sync without a shared filesystem"
LAB_ARCH = {
    "layers": 4,
    "embed_dim": 512,
    "ffn_dim": 512,
    "heads": 8,
    "max_positions": 256,
    "vocab_size": 32000,
}


READING = [
    "Reading. Every transfer here is loopback HTTP to one `mlflow server` worker, so the "
    "MB/s column is the server's own ceiling on this machine; between real nodes the "
    "network sets it (at 1 Gb/s, about 110 MB/s, a lab-size sync round takes about 3 s). "
    "Staging is paid once per sweep (publish) and once per node (fetch); a warm node's "
    "cache hit costs a directory check. Syncing is paid at every validation point "
    "(`sync_every: 1`): negligible at the demo's size, about a second per validation "
    "point at the lab's, sent by a thread while the trainer keeps training, so it costs "
    "wall time only when the next sync comes before the previous one has finished; "
    "`sync_every: N` trades that for losing up to N validation intervals on a lost node. "
    "End to end the staged and synced sweep was not slower: its fixed costs (publish, "
    "hash checks, syncs: well under a second at this size) are smaller than what the "
    "SQLite run pays for creating and migrating a new store in its output folder, which "
    "the server had done once; on one machine the trials read the driver's files in "
    "place (after a hash check), so the cold-node download is the `fetch` row, not in "
    "this ratio.",
]


class FakeTrainer:
    """What CheckpointSync asks of a trainer: where its checkpoints are."""

    def __init__(self, best: Path, last: Path):
        self.best, self.last = best, last

    def checkpoints(self, job: Any) -> Any:
        from sweeper.trainers.base import Checkpoints

        return Checkpoints(self.best, self.last)


def size_of(path: Path) -> int:
    path = Path(path)
    return (
        sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        if path.is_dir()
        else (path.stat().st_size)
    )


def lab_checkpoint(folder: Path) -> Path:
    """A fairseq checkpoint of the lab's arch (random weights), written by sweeper."""
    from sweeper.models.init import init_checkpoint
    from sweeper.spec.model_block import ArchConfig

    arch = ArchConfig(**{k: v for k, v in LAB_ARCH.items() if k != "vocab_size"})
    return init_checkpoint(arch, LAB_ARCH["vocab_size"], 2, "random", 1, None, folder)


def trial_checkpoints(weights: Path, folder: Path) -> tuple[Path, Path]:
    """best (weights) and last (weights + two Adam moments) from a fairseq checkpoint."""
    import torch

    state = torch.load(weights, map_location="cpu", weights_only=False)["model"]
    folder.mkdir(parents=True, exist_ok=True)
    best, last = folder / "checkpoint_best.pt", folder / "checkpoint_last.pt"
    torch.save({"model": state}, best)
    moments = {k: torch.randn_like(v) if v.is_floating_point() else v for k, v in state.items()}
    torch.save({"model": state, "exp_avg": moments, "exp_avg_sq": moments}, last)
    return best, last


def time_staging(inputs: Any, client: Any, uri: str, tmp: Path, repeats: int) -> dict[str, Any]:
    """publish (a new experiment each time), fetch into an empty cache, fetch again."""
    from sweeper.tracking.staging import fetch, publish

    publish_s, cold_s, warm_s, moved = [], [], [], 0
    for i in range(repeats):
        exp = client.create_experiment(f"stage-{time.time_ns()}-{i}")
        root = client.get_experiment(exp).artifact_location
        start = time.perf_counter()
        staged = publish(inputs, root, uri, log=lambda _: None)
        publish_s.append(time.perf_counter() - start)
        cache = tmp / f"cache-{i}"
        start = time.perf_counter()
        for item in staged:
            fetch(item, uri, cache)
        cold_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        for item in staged:
            fetch(item, uri, cache)
        warm_s.append(time.perf_counter() - start)
        moved = sum(size_of(Path(item.driver_path)) for item in staged)
        shutil.rmtree(cache)
    return {"bytes": moved, "publish": publish_s, "cold": cold_s, "warm": warm_s}


def _wait_synced(sync: Any, step: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while step not in sync.synced:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no sync of step {step}")
        time.sleep(0.005)


def time_sync(weights: Path, client: Any, uri: str, tmp: Path, repeats: int) -> dict[str, Any]:
    """Two sync rounds of a trial folder, then a restore into an empty folder."""
    from sweeper import record_names
    from sweeper.tracking.resume_sync import CheckpointSync, restore, resume_repo
    from sweeper.trainers.events import MetricEvent

    exp = client.create_experiment(f"sync-{time.time_ns()}")
    rounds: dict[str, list[float]] = {"round1": [], "round2": [], "restore": []}
    sizes = {}
    for i in range(repeats):
        run = client.create_run(exp)
        repo = resume_repo(run.info.artifact_uri, uri)
        out = tmp / f"trial-{i}"
        best, last = trial_checkpoints(weights, out / "checkpoints")
        sizes = {"best": size_of(best), "last": size_of(last)}
        (out / record_names.EVENTS_FILE).write_text('{"step": 1, "split": "train"}\n')
        sync = CheckpointSync(repo, out, 1, print)
        sync.start(FakeTrainer(best, last), SimpleNamespace())  # type: ignore[arg-type]
        for step, key in ((10, "round1"), (20, "round2")):
            if step == 20:  # a later, not better, validation point: `last` changed only
                last.write_bytes(last.read_bytes()[:-8] + os.urandom(8))
            sync.on_event(MetricEvent(step=step, epoch=1.0, split="valid", loss=0.5, accuracy=50.0))
            start = time.perf_counter()
            sync.on_event(MetricEvent(step=step + 1, epoch=1.0, split="train", loss=0.5))
            _wait_synced(sync, step)
            rounds[key].append(time.perf_counter() - start)
        sync.close()
        cold = tmp / f"restored-{i}"
        start = time.perf_counter()
        assert restore(repo, cold) == 20
        rounds["restore"].append(time.perf_counter() - start)
        shutil.rmtree(out)
        shutil.rmtree(cold)
    return {"sizes": sizes, **rounds}


def time_sweeps(uri: str, workdir: Path, quick: bool, repeats: int) -> dict[str, list[float]]:
    """The same short sweep with a local store and against the tracking server, in
    alternating order (local, server, local, ...), each time from a fresh output folder
    (a new SQLite store) or a new experiment on the server."""
    changes: dict[str, Any] = {
        "grid.framework": ["hf"], "grid.init": ["pretrained"], "grid.seed": [1, 2],
        "train.epochs": 1, "max_concurrent": 2,
    }  # fmt: skip
    if quick:
        changes["data.generate.train_size"] = 200
    walls: dict[str, list[float]] = {"local": [], "server": []}
    for i in range(repeats):
        for name, extra in (("local", []), ("server", ["--tracking-uri", uri])):
            tag = f"staging-{name}-{i}-{time.time_ns() % 10**6}"
            spec, _ = common.new_sweep(workdir, tag, changes)
            env = {**common.clean_env(), "SWEEPER_CACHE": str(workdir / f"cache-{tag}")}
            done = common.run_timed(common.sweeper_command("run", spec, *extra), env=env)
            if "2 trials counted" not in done.output:
                raise RuntimeError(f"the {name} sweep failed:\n{done.output[-3000:]}")
            walls[name].append(done.wall)
    return walls


def mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def rows_for(label: str, staging: dict[str, Any], sync: dict[str, Any]) -> list[list[str]]:
    def cell(seconds: list[float], size: float) -> list[str]:
        med = common.median(seconds)
        return [f"{med:.2f}", mb(size), f"{size / 1e6 / med:.0f}" if med > 0 else "-"]

    inputs, best, last = staging["bytes"], sync["sizes"]["best"], sync["sizes"]["last"]
    warm = [f"{common.median(staging['warm']):.3f}", "0", "-"]
    steps = [
        ("publish inputs (driver, once per sweep)", cell(staging["publish"], inputs)),
        ("fetch inputs, cold node (once per node)", cell(staging["cold"], inputs)),
        ("fetch inputs, warm node (cache hit)", warm),
        ("checkpoint sync, round 1 (best + last)", cell(sync["round1"], best + last)),
        ("checkpoint sync, best unchanged", cell(sync["round2"], last)),
        ("restore on a new node", cell(sync["restore"], best + last)),
    ]
    return [[label, step, *cells] for step, cells in steps]


def sweep_rows(walls: dict[str, list[float]]) -> list[str]:
    local, served = common.median(walls["local"]), common.median(walls["server"])
    runs = (
        ", ".join(f"{w:.1f}" for w in walls["local"]),
        ", ".join(f"{w:.1f}" for w in walls["server"]),
    )
    sqlite = "SQLite in output_dir (a shared folder: nothing staged or synced)"
    server = "tracking server (inputs published and hash-checked, checkpoints synced)"
    rows = [
        [sqlite, f"{local:.1f}", runs[0]],
        [server, f"{served:.1f}", runs[1]],
        ["ratio (server / SQLite)", f"{common.ratio(served, local):.2f}", ""],
    ]
    head = "End to end, hf, pretrained, 2 seeds, 1 epoch (2 trials at a time), medians:"
    return ["", head, "", *common.table(["store", "median wall s", "each run"], rows, "lrr")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    common.add_common_arguments(parser)
    parser.add_argument("--repeats", type=int, default=3, help="repeats per timing (median)")
    parser.add_argument("--no-sweeps", action="store_true", help="skip the end-to-end ratio")
    args = parser.parse_args(argv)
    start_load = common.load_average()
    common.ensure_inputs()
    args.workdir.mkdir(parents=True, exist_ok=True)
    repeats = 1 if args.quick else args.repeats
    with tempfile.TemporaryDirectory(dir=args.workdir) as scratch:
        rows, walls = measure(Path(scratch), args, repeats)
    command = common.command_line("bench_staging.py", argv or sys.argv[1:])
    lines = common.header(TITLE, command, common.machine(), start_load)
    lines += ["", f"Median of {repeats} repeats; MB = 10^6 bytes; MB/s = size / median time.", ""]
    lines += common.table(["size", "step", "median s", "MB", "MB/s"], rows, "llrrr")
    lines += sweep_rows(walls) if walls else []
    lines += ["", *READING]
    text = "\n".join(lines) + "\n"
    common.publish(TITLE, text, not args.no_doc)
    return 0


def measure(tmp: Path, args: argparse.Namespace, repeats: int) -> tuple[list, dict]:
    """Every timing, against one tracking server started for them."""
    from dataclasses import replace

    from mlflow import MlflowClient

    from sweeper.logs import quiet_root_logger
    from sweeper.spec.load import load_spec
    from sweeper.trainers.trial_pipeline import prepare_inputs
    from tests.support.cluster import mlflow_server

    demo = prepare_inputs(load_spec(common.DEMO_SPEC), log=lambda _: None)
    quiet_root_logger()  # the check of the prepared data imported fairseq
    rows: list[list[str]] = []
    with mlflow_server(tmp / "server") as server:
        client = MlflowClient(server.uri)
        sizes = [("demo", demo, demo.pretrained["masked_lm"])]
        if not args.quick:
            lab = lab_checkpoint(tmp / "lab")
            sizes.append(("lab", replace(demo, pretrained={"masked_lm": lab}), lab))
        for label, inputs, weights in sizes:
            staging = time_staging(inputs, client, server.uri, tmp, repeats)
            sync = time_sync(weights, client, server.uri, tmp, repeats)
            rows += rows_for(label, staging, sync)
            print(json.dumps({"size": label, "staging": staging, "sync": sync}), file=sys.stderr)
        walls = {} if args.no_sweeps else time_sweeps(server.uri, args.workdir, args.quick, 2)
    return rows, walls


if __name__ == "__main__":
    sys.exit(main())
