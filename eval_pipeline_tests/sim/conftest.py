"""Setup for the simulated provider's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eval_pipeline_tests.sim.helpers import close_clients


@pytest.fixture(scope="module", autouse=True)
def raw_client_closed_after_module() -> Iterator[None]:
    """Each module's sim stops at module end: close the shared raw client with it."""
    yield
    close_clients()
