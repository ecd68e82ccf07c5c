"""Shared setup for the model-call tests: one simulated provider per test session.

The sim is a real HTTP server in a child process; each test that uses it starts from a
reset bill, counters and clock. The API key is a planted fake, so that the secrets test
can search for it in everything written.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.calibration import PLANTED_LOOKUP_TOOL
from eval_pipeline.providers.config import ModelConfig, RetryPolicy
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.sim.process import SimHandle, running_sim

FAKE_KEY = "sk-evalp-PLANTED-fake-key-0f9e8d7c6b5a4321"
KEY_ENV = "EVALP_TEST_SIM_KEY"
BEFORE_TIER_CHANGE = date(2026, 12, 30)
AFTER_TIER_CHANGE = date(2027, 1, 2)
FAST_RETRY = RetryPolicy(
    max_attempts=3, base_delay_s=0.001, multiplier=2, max_delay_s=0.01, max_total_s=10
)
SIM_OPTIONS: dict[str, Any] = {
    "planted": {"retry_after_s": 0, "retry_after_ms": 3},
    "flaky": {"retry_after_s": 0, "retry_after_ms": 2},
    "flaky:heals": {"max_faults_per_request": 1, "retry_after_ms": 2},
    "flaky:always": {
        "drop": 0,
        "rate_limit": 0,
        "server_error": 1.0,
        "empty_body": 0,
        "malformed_json": 0,
        "truncated": 0,
    },
    "flaky:cut": {
        "drop": 0,
        "rate_limit": 0,
        "server_error": 0,
        "empty_body": 0,
        "malformed_json": 0,
        "truncated": 1.0,
    },
    "flaky:heal-late": {
        "drop": 0,
        "rate_limit": 0,
        "server_error": 1.0,
        "empty_body": 0,
        "malformed_json": 0,
        "truncated": 0,
        "max_faults_per_request": 4,
    },
}
LOOKUP = PLANTED_LOOKUP_TOOL


@pytest.fixture(scope="session")
def sim_server() -> Iterator[SimHandle]:
    with running_sim(seed=7, profile_options=SIM_OPTIONS) as handle:
        yield handle


@pytest.fixture
def sim(sim_server: SimHandle) -> Iterator[SimHandle]:
    """The session's sim with a clean bill, counters and occurrence memory, real clock.

    After the test, no profile may have failed: a simulator bug answered as a 500 would
    otherwise pass for the planted flakiness the test measures.
    """
    sim_server.reset()
    sim_server.set_clock(None)
    yield sim_server
    sim_server.check_no_profile_errors()


@pytest.fixture(autouse=True)
def fake_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    return FAKE_KEY


def sim_config(
    sim: SimHandle,
    model: str,
    *,
    api: str = "openai_compatible",
    name: str | None = None,
    retry: RetryPolicy = FAST_RETRY,
    max_in_flight: int = 64,
    **extra: Any,
) -> ModelConfig:
    """A model config for the test sim (base URL literal, key from the planted env var)."""
    base_url = sim.anthropic_base_url if api == "anthropic_messages" else sim.openai_base_url
    return ModelConfig.model_validate(
        {
            "name": name or f"sim-{model}-{api}",
            "api": api,
            "provider": "simulated",
            "model": model,
            "base_url": base_url,
            "api_key_env": KEY_ENV,
            "seed_header": "x-evalp-seed",
            "max_in_flight": max_in_flight,
            "timeout_s": 20,
            "connect_timeout_s": 5,
            "retry": retry.model_dump(),
            **extra,
        }
    )


def new_session(tmp_path: Path, run_id: str = "run-1", **options: Any) -> CallSession:
    """A session journaling under `tmp_path` (the test's own folder)."""
    options.setdefault("clock", lambda: BEFORE_TIER_CHANGE)
    options.setdefault("price_book", load_price_book())
    return CallSession(
        run_id=run_id,
        journal_path=tmp_path / "runs" / run_id / "envelopes.jsonl",
        **options,
    )
