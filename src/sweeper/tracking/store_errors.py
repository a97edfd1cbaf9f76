"""What a failed write to the tracking store means, for the outbox
(`sweeper.tracking.outbox`): whether a retry can cure it (`is_permanent`), why it
failed in an operator's words (`reason`), and one attempt with MLflow's own HTTP
retries off (`quick_http`), so that the outbox, not MLflow's client, does the waiting.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Iterator

PERMANENT_CODES = frozenset(
    {
        "INVALID_PARAMETER_VALUE",
        "RESOURCE_DOES_NOT_EXIST",
        "RESOURCE_ALREADY_EXISTS",
        "BAD_REQUEST",
        "INVALID_STATE",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
    }
)
"""MLflow error codes that a retry cannot cure: raised at once, not buffered."""
BUSY_DATABASE = ("QueuePool limit", "OperationalError", "could not connect to server")
"""What a tracking server's answer says when its database was busy or away: MLflow
sends some of these as BAD_REQUEST (an exhausted connection pool under load, seen
with a PostgreSQL backend), yet a retry cures them."""
QUICK_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


def is_permanent(exc: BaseException) -> bool:
    """A rejection the store will repeat (bad value, missing run), not an outage nor
    a server whose database is busy (`BUSY_DATABASE`)."""
    if any(marker in str(exc) for marker in BUSY_DATABASE):
        return False
    return getattr(exc, "error_code", None) in PERMANENT_CODES


_QUICK_LOCK = threading.Lock()
_quick_added: dict[str, str] = {}
_quick_users = 0


@contextlib.contextmanager
def quick_http() -> Iterator[None]:
    """MLflow's per-request HTTP retries off for one attempt (user settings win). The
    setting is process-wide (MLflow reads the environment): with attempts of several
    lanes at once, the first one in sets it and the last one out removes it."""
    global _quick_users
    with _QUICK_LOCK:
        if _quick_users == 0:
            _quick_added.update({k: v for k, v in QUICK_HTTP.items() if k not in os.environ})
            os.environ.update(_quick_added)
        _quick_users += 1
    try:
        yield
    finally:
        with _QUICK_LOCK:
            _quick_users -= 1
            if _quick_users == 0:
                for key in _quick_added:
                    os.environ.pop(key, None)
                _quick_added.clear()


_STATUS = re.compile(r"too many (\d{3}) error responses")
_SERVER = re.compile(r"API request to (\w+://[^/\s]+)")


def reason(exc: BaseException) -> str:
    """Why a write failed, in words: what MLflow's HTTP client says is a whole
    traceback's worth of URL and urllib3 detail, of which the server, the HTTP status
    and "connection refused" are what tells an operator where to look."""
    text = str(exc)
    found = _SERVER.search(text)
    server = found.group(1) if found else "the tracking server"
    status = _STATUS.search(text)
    if status and status.group(1) == "503":
        return (
            f"{server} answers HTTP 503 Service Unavailable (an MLflow server's answer "
            "while its database is away)"
        )
    if status:
        return f"{server} answers HTTP {status.group(1)}"
    if "Connection refused" in text:
        return f"{server}: connection refused (is the server down?)" if found else first_line(exc)
    if "timed out" in text.lower() and found:
        return f"{server}: no answer (timed out)"
    return first_line(exc)


def clock_time(seconds: float) -> str:
    """`HH:MM:SS` of a wall-clock time, in the driver's local time."""
    return time.strftime("%H:%M:%S", time.localtime(seconds))


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]
