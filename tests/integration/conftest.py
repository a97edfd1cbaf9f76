"""Every test in this folder is an integration test: it runs real components (Ray,
MLflow, trainer subprocesses), so `-m "not integration"` leaves all of them out.

The marker is set here, by folder, so a new file cannot forget it; `slow` and `gpu` stay
explicit in each file, since they depend on the test rather than on where it lives.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.postgres import PostgresServer, postgres_server

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark this folder's tests before `-m` deselects (a conftest hook sees every item
    of the session, so the folder is checked, not assumed)."""
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    """One real PostgreSQL server for a test module (Debian's binaries, 127.0.0.1, a free
    port; `make install` installs them where missing), stopped by its pid after the
    module's last test: no server outlives the tests that use it (a live child of the
    test process would count in the process-tree CPU time that unit tests measure)."""
    with postgres_server() as server:
        yield server


@pytest.fixture
def postgres_uri(postgres: PostgresServer) -> str:
    """A fresh, empty database on that server for one test: `postgresql://...`."""
    return postgres.create_database(f"t{uuid.uuid4().hex[:12]}")
