"""Leaving without the interpreter's teardown: the exit code, the output and the atexit
handlers the `sweeper` command and the trainer subprocesses rely on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PRELUDE = (
    "import atexit, logging, sys, threading, time\n"
    "from sweeper.quick_exit import exit_after_atexit, exit_now\n"
    "atexit.register(lambda: print('atexit ran'))\n"
    "logging.basicConfig(stream=sys.stderr, format='%(message)s')\n"
)


def _run(body: str) -> subprocess.CompletedProcess[str]:
    # stdout is a pipe: block-buffered, so anything not flushed on the way out is lost
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + body], capture_output=True, text=True, timeout=60
    )


def test_exit_after_atexit_runs_the_handlers_and_keeps_the_output():
    done = _run("print('work', end='; '); logging.warning('logged'); exit_after_atexit(3)")
    assert done.returncode == 3
    assert done.stdout == "work; atexit ran\n"
    assert done.stderr == "logged\n"


def test_a_running_non_daemon_thread_is_waited_for():
    done = _run(
        "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done'))).start()\n"
        "exit_after_atexit(4)\n"
    )
    assert done.returncode == 4
    assert done.stdout == "thread done\natexit ran\n"


def test_exit_now_skips_the_handlers_but_not_the_output():
    done = _run("print('saved', end=''); exit_now(0)")
    assert (done.returncode, done.stdout) == (0, "saved")


def test_the_sweeper_command_exits_with_its_status_and_output(tmp_path):
    """The console entry (`sweeper.cli.main:entry`): 0 with the command's output, 2 on
    bad input (argparse's and the command's own), traceback-free."""
    sweeper = Path(sys.executable).with_name("sweeper")
    demo = Path(__file__).resolve().parents[2] / "sweeps" / "demo.yaml"
    good = subprocess.run([sweeper, "validate", demo], capture_output=True, text=True, timeout=120)
    assert good.returncode == 0, good.stderr
    assert "demo.yaml" in good.stdout
    for argv in (["validate", str(tmp_path / "missing.yaml")], ["run", "--no-such-option"]):
        bad = subprocess.run([sweeper, *argv], capture_output=True, text=True, timeout=120)
        assert bad.returncode == 2, (argv, bad.stdout, bad.stderr)
        assert "Traceback" not in bad.stderr
