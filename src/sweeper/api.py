"""`run_sweep`: one call that runs a sweep, for the CLI and for Python callers alike.

    from sweeper.api import RunOptions, run_sweep
    from sweeper.spec.schema import SweepSpec
    status = run_sweep(RunOptions(spec_path="sweeps/demo.yaml"), spec)

It does what `sweeper run` does once the command line is parsed: check every input
file (preflight), check that some node can hold a trial, start or join Ray with the
tracking store opened and the sweep's lease taken beside it, then run the grid, the
search stage (a spec with `search:`) or the `--until-decided` loop (a `Budget`). Bad
input is reported before anything is created. The result is the exit status `sweeper
run` documents: 0 every trial finished, 1 a trial failed past its retries, 2 bad input,
130 / 143 after SIGINT / SIGTERM. Messages go to stdout and stderr as the CLI prints
them; nothing here parses arguments or calls `sys.exit`.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING

from sweeper.engine.options import EXIT_BAD_INPUT, Budget, RunOptions, SweepError

if TYPE_CHECKING:
    from sweeper.spec.schema import SweepSpec

__all__ = ["EXIT_BAD_INPUT", "Budget", "RunOptions", "SweepError", "run_sweep"]


def run_sweep(
    options: RunOptions,
    spec: SweepSpec,
    budget: Budget | None = None,
    wait_for_nodes: float = 0.0,
) -> int:
    """Run the sweep `spec` describes (see the module docstring); returns the exit
    status. `budget`: add seeds until decided after the grid (grid sweeps only);
    `wait_for_nodes`: seconds to wait for an autoscaling cluster to add a node that
    can hold a trial before giving up with exit 2."""
    from sweeper.engine.preflight import preflight
    from sweeper.engine.signals import EXIT_INTERRUPTED, graceful_stop

    errors = preflight(spec)  # every input file, before the store or output_dir exists
    if errors:
        for error in errors:
            print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if budget is not None and spec.search is not None:
        print("error: --until-decided runs grid sweeps; this spec has a search block",
              file=sys.stderr)  # fmt: skip
        return EXIT_BAD_INPUT
    with graceful_stop() as stop:
        try:
            _check_resources(spec, options, wait_for_nodes)
            from sweeper.engine.open_store import sweep_lease
            from sweeper.engine.session import ray_session

            # One Ray session for the whole command, started while the store is opened
            # and the sweep's lease (one live driver per sweep) taken beside it.
            with ray_session(options, spec, beside=functools.partial(sweep_lease, options, spec)):
                return stop.exit_code(_run(options, spec, budget))
        except SweepError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            return stop.exit_code(exc.exit_code)
        except KeyboardInterrupt:  # a signal outside Tune's graceful stop, or a second one
            print(f"\nstopped; `{options.resume_command()}` continues", file=sys.stderr)
            return stop.exit_code(EXIT_INTERRUPTED)


def _check_resources(spec: SweepSpec, options: RunOptions, wait_s: float) -> None:
    """Raise SweepError (exit 2) now, not after preparing data, when no node can hold
    one trial (after `wait_s` seconds of waiting for one to join, on a cluster)."""
    from sweeper.engine.resources import check_resources
    from sweeper.tune.cluster import ray_address

    address = ray_address(options.address)
    log = functools.partial(print, flush=True)
    check_resources(spec.resources.cpu, spec.resources.gpu, address, wait_s, log=log)


def _run(options: RunOptions, spec: SweepSpec, budget: Budget | None) -> int:
    """The until-decided loop, the search stage or the grid, by what was asked."""
    if budget is not None:
        from sweeper.engine.until_decided import run_until_decided

        return run_until_decided(options, spec, budget)
    if spec.search is not None:  # search per group, then confirm
        from sweeper.search.run import run_search

        return run_search(options, spec)
    from sweeper.engine.grid import run_grid_sweep

    return run_grid_sweep(options, spec)
