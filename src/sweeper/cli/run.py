"""Run a sweep's grid of fine-tuning trials on Ray Tune and record them in MLflow.

Steps: validate the spec; check the tracking store; prepare the data and the
pretrained checkpoint once (cached); create one MLflow run per trial key under a
parent run for the sweep; run the trials on Ray (each retried up to `retries` times
from its own last checkpoint); print the summary (`sweeper summarize`), which is also
logged to the parent run.

A trial whose node is drained for preemption (a spot GPU taken back: Ray's autoscaler,
or `ray drain-node --reason DRAIN_NODE_REASON_PREEMPTION`), or whose trainer gets
SIGTERM, saves a checkpoint at its current step and resumes on another node from
there; that spends no retry, only one of `preemptions` (docs/cluster.md).

With no --address (and no $RAY_ADDRESS) Ray starts on this machine. The MLflow store:
--tracking-uri, else the spec's `tracking.uri`, else $MLFLOW_TRACKING_URI, else the
tracking server of a running `sweeper cluster up`, else a SQLite file in output_dir.

As a Ray job (`ray job submit --working-dir . -- sweeper run SPEC`) the sweep runs in
Ray's temporary copy of the working dir: a relative output_dir there is re-rooted onto
durable storage ($SWEEPER_STORAGE, which `sweeper cluster up` sets for its jobs), e.g.
runs/demo -> STORAGE/runs/demo, and the driver prints where; with no such storage it
exits 2 before anything runs.
A sweep whose trial runs already exist needs --resume: trials that finished are not
run again, every other trial continues its own run from its last checkpoint.
One driver runs a sweep at a time: a second `sweeper run` of a sweep whose driver is
alive exits 2 naming it (host, pid, start). The lease lives in the tracking store,
renewed every 10 s; a driver killed on this host frees it at once, elsewhere after 60 s
without a heartbeat, or at once with --force-resume.

With --until-decided the grid runs first; then, while a comparison of the summary is
undecided and fewer than --max-seeds seeds have run, the next --seed-batch seeds are
added to the groups of the undecided comparisons only (new trial keys; nothing
finished runs again). Decisions come from group-sequential boundaries over the
plan's looks (O'Brien-Fleming-type alpha spending, Bonferroni over the comparisons),
so stopping as soon as they decide keeps the rate of false decisions at 0.05 over all
looks; re-running a fixed-n t-test after every batch would not. The plan (seeds,
batch, max, margin) is recorded before the first look; a resume must keep it, except
that it may raise --max-seeds (past the plan, the anytime-valid rule decides). With
--margin D a comparison can also stop as "equivalent within ±D". The report says why
it stopped, at which look each comparison was decided, and how many trials that saved
against every group at --max-seeds.

examples:
  sweeper run sweeps/demo.yaml
  sweeper run sweeps/demo.yaml --until-decided --max-seeds 9
  sweeper run sweeps/demo.yaml --until-decided --margin 3
  sweeper run sweeps/demo.yaml train.epochs=1 grid.seed=[1] --max-concurrent 1
  sweeper run sweeps/demo.yaml --resume
  sweeper run sweeps/search.yaml           # Optuna + ASHA search, then confirm
  sweeper run sweeps/roberta.yaml --address HEAD:6379 --tracking-uri http://HOST:5000
  ray job submit --address http://HEAD:8265 --working-dir . -- sweeper run sweeps/roberta.yaml

With a `search:` block the command runs two stages: per group (init × framework ×
method), Optuna samples `num_samples` configurations on the tuning seed (ASHA may stop
weak ones early; the study lives in output_dir/optuna.db, so --resume continues it),
then each group's best configuration is confirmed over every grid.seed.

A tracking server that goes away mid-sweep costs nothing: the driver buffers its writes
and retries them, for up to $SWEEPER_TRACKING_RETRY_S seconds (default 300) of outage.

exit status: 0 when every trial finished; 1 when any trial failed past its retries,
or the tracking server stayed unreachable past that limit (then --resume records the rest);
2 for bad input (spec, data, unreachable tracking server, existing runs without
--resume, trial resources that no node has, after --wait-for-nodes on a cluster that
adds nodes on demand), reported before any trial starts;
130 after Ctrl-C (SIGINT) and 143 after SIGTERM: running trials stop, their runs are
marked KILLED, and --resume continues them from their last checkpoints (a second
signal stops at once).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from sweeper.cli.common import add_margin_argument, add_spec_argument, fail, load_or_exit
from sweeper.spec.schema import SweepSpec

if TYPE_CHECKING:
    from sweeper.api import Budget


def build_parser(parser: argparse.ArgumentParser) -> None:
    add_spec_argument(parser)
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue a sweep whose runs exist: finished trials are kept, the rest resume",
    )
    parser.add_argument(
        "--force-resume",
        action="store_true",
        help="--resume, taking over the sweep from a driver known to be dead whose lease "
        "has not expired yet (another host's driver, killed less than 60 s ago)",
    )
    parser.add_argument(
        "--address", metavar="ADDR", help="Ray cluster (default: $RAY_ADDRESS, else local Ray)"
    )
    parser.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="MLflow tracking URI (default: the spec's, $MLFLOW_TRACKING_URI, a running "
        "`sweeper cluster up`, else SQLite in output_dir)",
    )
    parser.add_argument(
        "--until-decided",
        action="store_true",
        help="after the grid, add seeds to the groups of undecided comparisons, a batch "
        "at a time, until every comparison is decided (group-sequential boundaries over the "
        "recorded plan's looks: the error rate holds over all of them) or --max-seeds is "
        "reached (grid sweeps only; a resume may raise --max-seeds)",
    )
    add_margin_argument(parser, "sets the spec's compare.margin")
    parser.add_argument(
        "--max-seeds",
        type=int,
        metavar="N",
        help="with --until-decided: seeds per group at most, the grid's included "
        "(default: 3 x the grid's seeds)",
    )
    parser.add_argument(
        "--seed-batch",
        type=int,
        metavar="K",
        help="with --until-decided: seeds added per round (default: as many as grid.seed)",
    )
    parser.add_argument(
        "--wait-for-nodes",
        type=float,
        default=0,
        metavar="SECONDS",
        help="on a cluster that adds nodes on demand (an autoscaler): when no node can "
        "hold a trial's resources yet, wait up to SECONDS for one to join, saying so "
        "every few seconds (default 0: exit 2 at once, before anything is created)",
    )
    parser.add_argument(
        "--figures",
        action="store_true",
        help="draw the closing summary's figures too (learning curves, accuracies; slow); "
        "by default `sweeper summarize` draws and logs them when asked",
    )
    parser.add_argument(
        "--max-concurrent",
        type=int,
        metavar="N",
        help="trials running at once (default: the spec's max_concurrent)",
    )


def place(spec: SweepSpec, spec_path: str, explicit_uri: str | None) -> tuple[SweepSpec, str]:
    """The spec with its outputs out of a Ray job's temporary working-dir copy, and the
    tracking URI by the one precedence (`sweeper.deploy.resolve`); print where the
    record and outputs go when that is not the plain local default. Exit 2 when a job
    would write into its copy and no durable place is known."""
    from sweeper.deploy.resolve import (
        NotDurable,
        durable_spec,
        record_in_copy,
        resolve_tracking_uri,
    )
    from sweeper.deploy.state import running_cluster

    cluster = None if (explicit_uri or spec.tracking.uri) else running_cluster()
    try:
        spec, placement = durable_spec(spec, spec_path, cluster)
    except NotDurable as exc:
        fail(str(exc))
    resolved = resolve_tracking_uri(spec, explicit_uri, cluster)
    if placement is not None:
        if record_in_copy(resolved.uri, placement.copy_root):
            fail(
                f"the tracking store {resolved.uri} lies in Ray's temporary copy of the "
                f"working dir ({placement.copy_root}); give an absolute path or a server"
            )
        print(f"Ray job: the working dir is Ray's temporary copy {placement.copy_root}")
        for field, (_old, new) in placement.moved.items():
            print(f"  {field} -> {new}")
    if resolved.source == "cluster":
        print(f"tracking: {resolved.uri} (the cluster started by `sweeper cluster up`)")
    elif placement is not None or resolved.source == "$MLFLOW_TRACKING_URI":
        print(f"tracking: {resolved.uri} (from {resolved.source})")
    sys.stdout.flush()
    return spec, resolved.uri


def _budget(args: argparse.Namespace, spec: SweepSpec) -> Budget | None:
    """--until-decided's limits, checked (exit 2); None without --until-decided."""
    if not args.until_decided:
        if args.max_seeds is not None or args.seed_batch is not None:
            fail("--max-seeds and --seed-batch go with --until-decided")
        return None
    if spec.search is not None:
        fail("--until-decided runs grid sweeps; this spec has a search block")
    from sweeper.api import Budget

    seeds = len(spec.grid.seed)
    max_seeds = args.max_seeds if args.max_seeds is not None else 3 * seeds
    batch = args.seed_batch if args.seed_batch is not None else seeds
    if max_seeds < seeds:
        fail(f"--max-seeds {max_seeds} is below the grid's {seeds} seeds")
    if batch < 1:
        fail("--seed-batch must be at least 1")
    return Budget(max_seeds=max_seeds, batch=batch)


def run(args: argparse.Namespace) -> int:
    """Parse and check the command line, build the options, and hand the sweep to
    `sweeper.api.run_sweep`, whose result is the exit status."""
    overrides = [*args.overrides, *([f"compare.margin={args.margin}"] if args.margin else [])]
    spec = load_or_exit(args.spec, overrides)
    spec, uri = place(spec, args.spec, args.tracking_uri)
    if args.max_concurrent is not None and args.max_concurrent < 1:
        fail("--max-concurrent must be at least 1")
    if args.wait_for_nodes < 0:
        fail("--wait-for-nodes must be 0 or more seconds")
    budget = _budget(args, spec)
    from sweeper.api import RunOptions, run_sweep

    options = RunOptions(
        spec_path=args.spec,
        overrides=tuple(overrides),
        resume=args.resume or args.force_resume,
        force_lease=args.force_resume,
        address=args.address,
        tracking_uri=uri,
        max_concurrent=args.max_concurrent,
        figures=args.figures,
    )
    return run_sweep(options, spec, budget, wait_for_nodes=args.wait_for_nodes)
