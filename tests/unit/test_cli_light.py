"""`import sweeper` and every `--help` stay light: no torch, ray, fairseq, transformers, mlflow."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sweeper.cli.main import COMMANDS

HEAVY = ("torch", "ray", "fairseq", "transformers", "mlflow", "peft", "optuna", "matplotlib")


def _heavy_modules_after(code: str) -> list[str]:
    probe = (
        "import sys, json, contextlib, io\n"
        f"{code}\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_sweeper_is_light():
    modules = (
        "sweeper, sweeper.spec.schema, sweeper.spec.load, sweeper.trial_keys, sweeper.record_names"
    )
    assert _heavy_modules_after(f"import {modules}") == []


def test_top_level_help_is_light_and_lists_every_command():
    code = (
        "from sweeper.cli.main import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf): main(['--help'])\n"
        "print(buf.getvalue())"
    )
    assert _heavy_modules_after(code) == []
    out = subprocess.run(
        [sys.executable, "-m", "sweeper.cli.main", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in COMMANDS:
        assert f"  {name} " in out


@pytest.mark.parametrize("name", list(COMMANDS))
def test_subcommand_help_is_light(name):
    code = (
        "from sweeper.cli.main import main\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf), contextlib.suppress(SystemExit):\n"
        f"    main([{name!r}, '--help'])\n"
        "print(buf.getvalue()[:0])"
    )
    assert _heavy_modules_after(code) == []


def test_unknown_command_exits_2(capsys):
    from sweeper.cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_output_piped_into_a_reader_that_stops_early_is_not_an_error():
    """`sweeper validate --show SPEC | head -3`: the reader leaves, the command ends 0
    without a traceback. Here the reader (`true`) leaves before the first line."""
    shell = f"{sys.executable} -m sweeper.cli.main validate --show sweeps/demo.yaml | true"
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {shell}"], capture_output=True, text=True
    )
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    assert done.returncode == 0
