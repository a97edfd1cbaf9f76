"""Where log records go: sweeper's own to the terminal, third-party ones to a file.

The terminal belongs to sweeper's own output (the progress view, the tables, `error:`
lines). The libraries a command loads log freely there: fairseq prints its whole model
configuration at INFO on every checkpoint it loads, and its import calls
`logging.basicConfig(level=...)`, after which every library's records (Ray, matplotlib,
urllib3, MLflow's HTTP client) would reach the terminal; MLflow and transformers attach
their own terminal handlers; third-party code raises FutureWarnings through `warnings`.

`route_logs` holds, for the length of a command, the one arrangement of the process's
logging:

* sweeper's own records (loggers named `sweeper...`) at WARNING and above go to the
  terminal, as their bare message;
* third-party records at ERROR and above go to the terminal too: a real failure is
  never hidden;
* every record at INFO and above, and every `warnings` warning, goes to the log file,
  which is created only when a first record arrives; then, as the command ends, one
  line names it (`third-party log: PATH`);
* verbose: third-party records at INFO and above, and warnings, go to the terminal
  instead, and no file is written;
* a child process whose output is all third-party (the MLflow server of `sweeper ui`)
  writes into the same file (`child_output`); a trainer's output goes to its trial's
  own trainer.log (`sweeper.trainers.runner`), read by sweeper line by line
  (`sweeper trial -v` shows it too).

The root logger holds a handler from the start, so a library's later
`logging.basicConfig(...)` does nothing (it only configures a root without handlers).
A library that attaches its own terminal handler (MLflow, transformers, Optuna) is
brought under the arrangement by `quiet_root_logger`, which every path that loads such
a library in-process calls afterwards (and which `route_logs` calls as the command
ends); a record such a library logs between its import and that call still takes its
own handler. Outside `route_logs` (in a Ray worker) `quiet_root_logger` keeps the root
logger at WARNING.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

LOG_LINE_PREFIX = "third-party log: "
"""The start of the one line naming the log file."""
OWN_LOGGER = "sweeper"
FILE_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FILE_LEVEL = logging.INFO


def is_own(name: str) -> bool:
    """Whether logger `name` is sweeper's own (`sweeper` or below it)."""
    return name == OWN_LOGGER or name.startswith(OWN_LOGGER + ".")


def terminal_level(name: str, verbose: bool) -> int:
    """The lowest level a record of logger `name` reaches the terminal at."""
    if is_own(name):
        return logging.WARNING
    return logging.INFO if verbose else logging.ERROR


class TerminalFilter(logging.Filter):
    """Passes the records `terminal_level` lets onto the terminal."""

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= terminal_level(record.name, self.verbose)


class TerminalFormatter(logging.Formatter):
    """Sweeper's own records as their message (as `print` would show it); third-party
    ones with their level and logger, so a reader knows whose line it is."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if is_own(record.name):
            return record.getMessage()
        return super().format(record)


class TerminalHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is when a record arrives (a test's capture, a
    redirected stream), not to the stream of the moment it was made."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


class LazyFileHandler(logging.Handler):
    """Appends records to `path()`, opened at the first record (so a command that logs
    nothing leaves no file), after a line naming the command: several commands, one
    after another, share a file."""

    def __init__(self, path: Callable[[], Path], header: str) -> None:
        super().__init__(FILE_LEVEL)
        self.setFormatter(logging.Formatter(FILE_FORMAT))
        self._path = path
        self._header = header
        self._file: TextIO | None = None
        self.written: Path | None = None
        """The file, once a record went to it."""

    def open(self) -> Path:
        """Create the file (with its header) if not yet done; its path."""
        if self._file is None:
            path = self._path()
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
            self._file.write(self._header + "\n")
            self._file.flush()
            self.written = path
        assert self.written is not None
        return self.written

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            self.open()
            assert self._file is not None
            self._file.write(text + "\n")
            self._file.flush()
        except Exception:  # as logging's own handlers: a failing log never ends the command
            self.handleError(record)

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
        super().close()


@dataclass
class Routing:
    """The arrangement `route_logs` installed; `folder` may be set once the command
    knows where its outputs go (`place_log`)."""

    command: str
    folder: Path
    verbose: bool
    handlers: list[logging.Handler] = field(default_factory=list)
    logfile: LazyFileHandler | None = None
    """The file's handler; None when verbose."""

    @property
    def path(self) -> Path:
        return self.folder / f"sweeper-{self.command}.log"


_routing: Routing | None = None


def _writes_to_terminal(handler: logging.Handler) -> bool:
    """A stream handler (not a file's) on the process's stdout or stderr: the stream
    objects themselves, or any stream on file descriptor 1 or 2."""
    if not isinstance(handler, logging.StreamHandler) or isinstance(handler, logging.FileHandler):
        return False
    stream = getattr(handler, "stream", None)
    standard = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
    if stream is None or any(stream is s for s in standard):
        return stream is not None
    try:
        return stream.fileno() in (1, 2)
    except (AttributeError, OSError, ValueError):  # no descriptor: a buffer, a closed file
        return False


def adopt_library_handlers() -> list[str]:
    """Remove the handlers libraries attached to their own loggers that write to the
    terminal, and let those loggers' records propagate to the root (and so to the
    arrangement); returns the loggers changed. File handlers stay (Ray's driver log)."""
    changed = []
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if not isinstance(logger, logging.Logger) or is_own(name):
            continue
        own_terminal = [h for h in logger.handlers if _writes_to_terminal(h)]
        for handler in own_terminal:
            logger.removeHandler(handler)
        if own_terminal:
            logger.propagate = True
            changed.append(name)
    return changed


def quiet_root_logger() -> None:
    """Undo what a library did to the process's logging since the last call: within
    `route_logs`, restore the root logger's level and handlers (a `basicConfig(force=
    True)` replaces them) and adopt libraries' terminal handlers; outside it, keep the
    root logger at WARNING (a fairseq import in a Ray worker)."""
    root = logging.getLogger()
    if _routing is None:
        root.setLevel(logging.WARNING)
        return
    root.setLevel(FILE_LEVEL)
    for handler in list(root.handlers):
        if handler not in _routing.handlers:
            root.removeHandler(handler)
    for handler in _routing.handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    adopt_library_handlers()


def place_log(folder: Path) -> None:
    """Put this command's log file in `folder` (the sweep's outputs), if no record has
    gone to it yet; without `route_logs`, nothing."""
    if _routing is not None:
        _routing.folder = Path(folder) / "logs"


@contextlib.contextmanager
def child_output(child: str) -> Iterator[tuple[TextIO | None, Path | None]]:
    """(stream, path) for a child process's stdout and stderr (a server the command
    starts): the command's log file, after a line naming `child`, so its log lines
    and access log stay off the terminal; (None, None), the terminal, when verbose or
    outside `route_logs`. The stream is closed after the body."""
    if _routing is None or _routing.logfile is None:
        yield None, None
        return
    path = _routing.logfile.open()
    with open(path, "a", encoding="utf-8") as stream:
        stream.write(f"==== {child} (its own output follows)\n")
        stream.flush()
        yield stream, path


def display(path: Path) -> str:
    """`path` relative to the working directory when it lies below it, else absolute."""
    absolute = path.absolute()
    with contextlib.suppress(ValueError):
        return str(absolute.relative_to(Path.cwd()))
    return str(absolute)


@contextlib.contextmanager
def route_logs(command: str, default_folder: Path, verbose: bool = False) -> Iterator[Routing]:
    """Hold the arrangement (module docstring) for the body, then restore the process's
    logging as it was and, if the file was written, print `third-party log: PATH` on
    stderr. `default_folder` holds the file unless `place_log` moves it."""
    global _routing
    root = logging.getLogger()
    saved_level, saved_handlers = root.level, list(root.handlers)
    captured = getattr(logging, "_warnings_showwarning", None) is not None
    routing = Routing(command, Path(default_folder), verbose)
    terminal = TerminalHandler()
    terminal.addFilter(TerminalFilter(verbose))
    terminal.setFormatter(TerminalFormatter())
    routing.handlers.append(terminal)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    header = f"==== sweeper {command} (pid {os.getpid()}) {stamp}"
    logfile = LazyFileHandler(lambda: routing.path, header) if not verbose else None
    if logfile is not None:
        routing.handlers.append(logfile)
        routing.logfile = logfile
    previous, _routing = _routing, routing
    for handler in list(root.handlers):
        root.removeHandler(handler)
    logging.captureWarnings(True)
    quiet_root_logger()
    try:
        yield routing
    finally:
        with contextlib.suppress(Exception):
            quiet_root_logger()
        _routing = previous
        logging.captureWarnings(captured)
        for handler in routing.handlers:
            root.removeHandler(handler)
            handler.close()
        root.setLevel(saved_level)
        for handler in saved_handlers:
            root.addHandler(handler)
        if logfile is not None and logfile.written is not None:
            print(f"{LOG_LINE_PREFIX}{display(logfile.written)}", file=sys.stderr, flush=True)
