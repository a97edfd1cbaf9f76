"""`sweeper.logs.route_logs`: which records reach the terminal, which the log file.

Records are made through `logging` as a library makes them (its own named logger, a
`basicConfig` call, an own terminal handler, a `warnings` warning); the terminal is
pytest's capture of stderr, read after the command's arrangement is gone.
"""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path

import pytest

from sweeper import logs


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line]


@pytest.mark.parametrize(
    ("name", "verbose", "level"),
    [
        ("sweeper", False, logging.WARNING),
        ("sweeper.tracking.resume_sync", False, logging.WARNING),
        ("sweeper.tracking", True, logging.WARNING),
        ("sweeperish", False, logging.ERROR),  # a prefix is not the package
        ("fairseq.models.roberta.model", False, logging.ERROR),
        ("py.warnings", False, logging.ERROR),
        ("fairseq.models.roberta.model", True, logging.INFO),
        ("root", True, logging.INFO),
    ],
)
def test_terminal_level(name, verbose, level):
    assert logs.terminal_level(name, verbose) == level


def test_third_party_info_and_warnings_go_to_the_file_named_in_one_line(tmp_path, capsys):
    with warnings.catch_warnings(), logs.route_logs("evaluate", tmp_path) as routing:
        warnings.simplefilter("always")
        logging.getLogger("fairseq.models.roberta.model").info("{'_name': None, 'common': ...}")
        warnings.warn("`resume_download` is deprecated", FutureWarning, stacklevel=1)
        print("evaluate 1/1 fairseq-random-s1: ok", file=sys.stderr)
        assert routing.path == tmp_path / "sweeper-evaluate.log"
    err = capsys.readouterr().err
    assert _lines(err) == [
        "evaluate 1/1 fairseq-random-s1: ok",
        f"third-party log: {tmp_path / 'sweeper-evaluate.log'}",
    ]
    text = (tmp_path / "sweeper-evaluate.log").read_text(encoding="utf-8")
    header, info, warning = text.splitlines()[:3]
    assert header.startswith("==== sweeper evaluate (pid ")
    assert " INFO fairseq.models.roberta.model: {'_name': None" in info
    assert " WARNING py.warnings: " in warning and "FutureWarning" in text


def test_errors_and_sweepers_own_warnings_reach_the_terminal(tmp_path, capsys):
    with logs.route_logs("run", tmp_path):
        logging.getLogger("sweeper.tracking.resume_sync").warning("the store is behind")
        logging.getLogger("sweeper.tracking.resume_sync").info("caught up")
        logging.getLogger("somelib.store").error("could not reach the server")
    err = _lines(capsys.readouterr().err)
    assert err[:2] == ["the store is behind", "ERROR somelib.store: could not reach the server"]
    assert err[2].startswith("third-party log: ")  # the file holds all three
    assert "caught up" in (tmp_path / "sweeper-run.log").read_text(encoding="utf-8")


def test_verbose_puts_third_party_lines_on_the_terminal_and_writes_no_file(tmp_path, capsys):
    with warnings.catch_warnings(), logs.route_logs("evaluate", tmp_path, verbose=True):
        warnings.simplefilter("always")
        logging.getLogger("fairseq.tasks.sentence_prediction").info("[input] dictionary: 202")
        logging.getLogger("fairseq").debug("not even with -v")
        warnings.warn("old API", FutureWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert "INFO fairseq.tasks.sentence_prediction: [input] dictionary: 202" in err
    assert "FutureWarning: old API" in err
    assert "not even with -v" not in err and "third-party log" not in err
    assert not list(tmp_path.iterdir())


def test_a_command_that_logs_nothing_leaves_no_file_and_no_line(tmp_path, capsys):
    with logs.route_logs("validate", tmp_path):
        logging.getLogger("urllib3").debug("below the file's level too")
    assert capsys.readouterr().err == ""
    assert not list(tmp_path.iterdir())


def test_a_later_basicconfig_changes_nothing(tmp_path, capsys):
    """fairseq's import calls basicConfig; the root logger already has handlers."""
    with logs.route_logs("prepare", tmp_path):
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
        logging.getLogger("fairseq.data").info("loaded 20 examples")
    assert _lines(capsys.readouterr().err) == [
        f"third-party log: {tmp_path / 'sweeper-prepare.log'}"
    ]


def test_a_forced_basicconfig_is_undone_by_quiet_root_logger(tmp_path, capsys):
    with logs.route_logs("prepare", tmp_path):
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, force=True)
        logs.quiet_root_logger()
        logging.getLogger("fairseq.data").info("loaded 20 examples")
    assert "loaded 20 examples" not in capsys.readouterr().err
    assert "loaded 20 examples" in (tmp_path / "sweeper-prepare.log").read_text()


def test_a_librarys_own_terminal_handler_is_adopted(tmp_path, capsys):
    """As MLflow and transformers: a handler on their logger, propagation off."""
    library = logging.getLogger("somelib")
    handler = logging.StreamHandler(sys.stderr)
    library.addHandler(handler)
    library.propagate = False
    library.setLevel(logging.INFO)
    try:
        with logs.route_logs("ui", tmp_path):
            logs.quiet_root_logger()
            library.info("Creating initial MLflow database tables")
            assert handler not in library.handlers and library.propagate
    finally:
        library.removeHandler(handler)
        library.propagate = True
        library.setLevel(logging.NOTSET)
    assert "Creating initial" not in capsys.readouterr().err
    assert "Creating initial" in (tmp_path / "sweeper-ui.log").read_text(encoding="utf-8")


def test_only_handlers_on_the_terminal_are_adopted(tmp_path):
    import io

    assert logs._writes_to_terminal(logging.StreamHandler(sys.__stderr__))
    with open("/dev/null", "w") as other, open(tmp_path / "f", "w") as plain:
        assert not logs._writes_to_terminal(logging.StreamHandler(other))
        assert not logs._writes_to_terminal(logging.StreamHandler(plain))
    assert not logs._writes_to_terminal(logging.StreamHandler(io.StringIO()))
    assert not logs._writes_to_terminal(logging.NullHandler())


def test_file_handlers_of_libraries_stay(tmp_path):
    """Ray's driver log (`sweeper.tune.cluster.route_ray_logs`) is a file of its own."""
    library = logging.getLogger("somelib.files")
    handler = logging.FileHandler(tmp_path / "ray.log", delay=True)
    library.addHandler(handler)
    try:
        assert "somelib.files" not in logs.adopt_library_handlers()
        assert handler in library.handlers
    finally:
        library.removeHandler(handler)
        handler.close()


def test_place_log_moves_the_file_beside_the_outputs(tmp_path, capsys):
    with logs.route_logs("trial", tmp_path / "home"):
        logs.place_log(tmp_path / "runs" / "demo")
        logging.getLogger("transformers").warning("Some weights were not used")
    assert (tmp_path / "runs" / "demo" / "logs" / "sweeper-trial.log").exists()
    assert not (tmp_path / "home").exists()
    assert "runs/demo/logs/sweeper-trial.log" in capsys.readouterr().err


def test_the_processs_logging_is_restored_afterwards(tmp_path):
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    showwarning = warnings.showwarning
    with logs.route_logs("summarize", tmp_path):
        assert root.level == logging.INFO
        assert all(h not in root.handlers for h in before[1])
    assert (root.level, list(root.handlers)) == before
    assert warnings.showwarning is showwarning


def test_outside_route_logs_quiet_root_logger_keeps_the_root_at_warning():
    root = logging.getLogger()
    level = root.level
    try:
        root.setLevel(logging.DEBUG)
        logs.quiet_root_logger()
        assert root.level == logging.WARNING
    finally:
        root.setLevel(level)


def test_display_is_relative_below_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert logs.display(tmp_path / "runs" / "x.log") == str(Path("runs") / "x.log")
    assert logs.display(Path("/elsewhere/x.log")) == "/elsewhere/x.log"


def test_a_childs_output_goes_into_the_file_unless_verbose(tmp_path, capsys):
    import subprocess

    command = [
        sys.executable,
        "-c",
        "import sys; print('INFO: Uvicorn running'); sys.stderr.write('x\\n')",
    ]
    with logs.route_logs("ui", tmp_path), logs.child_output("mlflow server") as (stream, path):
        assert path == tmp_path / "sweeper-ui.log"
        subprocess.run(command, stdout=stream, stderr=stream, check=True)
    lines = (tmp_path / "sweeper-ui.log").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("==== sweeper ui (pid ")
    assert lines[1:] == [
        "==== mlflow server (its own output follows)",
        "INFO: Uvicorn running",
        "x",
    ]
    assert _lines(capsys.readouterr().err) == [f"third-party log: {path}"]
    with logs.route_logs("ui", tmp_path / "v", verbose=True), logs.child_output("x") as found:
        assert found == (None, None)  # the child writes to the terminal
    with logs.child_output("x") as found:  # outside route_logs
        assert found == (None, None)
