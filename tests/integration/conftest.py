"""Every test in this folder is an integration test: it runs real components (Ray,
MLflow, trainer subprocesses), so `-m "not integration"` leaves all of them out.

The marker is set here, by folder, so a new file cannot forget it; `slow` and `gpu` stay
explicit in each file, since they depend on the test rather than on where it lives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark this folder's tests before `-m` deselects (a conftest hook sees every item
    of the session, so the folder is checked, not assumed)."""
    for item in items:
        if item.path.resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.integration)
