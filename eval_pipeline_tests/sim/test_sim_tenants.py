"""Tenants: one server process whose model endpoints under /t/<name> keep state of their own,
as a server of their own would (a lanes run's two lanes and its judge share one process)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_pipeline.sim.errors import SimAdminError, SimError
from eval_pipeline.sim.process import SimHandle, running_sim, running_tenant
from eval_pipeline_tests.sim.helpers import post

PLUGIN = "eval_pipeline_tests.sim.echo_profile"


@pytest.fixture
def server() -> Iterator[SimHandle]:
    with running_sim(
        seed=9,
        profile_options={"test-echo": {"prefix": "seen:"}},
        plugins=[PLUGIN],
        allow_profile_errors=True,  # the echo profile crashes on purpose here
    ) as handle:
        yield handle


def _occurrence(response: Any) -> int:
    assert response.status_code == 200, response.text
    text = response.json()["choices"][0]["message"]["content"]
    seen: dict[str, Any] = json.loads(text[len("seen:") :])
    return int(seen["occurrence"])


FIRST_CALL = {
    "model": "test-echo",
    "max_tokens": 4000,
    "messages": [{"role": "user", "content": "What is the net payable?"}],
}


def test_two_tenants_sent_the_same_request_each_see_it_first(
    server: SimHandle, tmp_path: Path
) -> None:
    """A partition's model lane and product lane send the same first request; with one
    state for both, the second lane's would count as a retry of the first (a flaky profile
    draws its faults per occurrence), and which lane came second would decide it."""
    with (
        running_tenant(server, "model-lane-r1", request_log=tmp_path / "model.jsonl") as model,
        running_tenant(
            server, "product-lane-r1", request_log=tmp_path / "product.jsonl"
        ) as product,
    ):
        assert _occurrence(post(model, "openai", FIRST_CALL)) == 0
        assert _occurrence(post(product, "openai", FIRST_CALL)) == 0
        assert _occurrence(post(model, "openai", FIRST_CALL)) == 1  # a retry, on its own
        assert model.counters()["request_count"] == 2
        assert product.counters()["request_count"] == 1
        assert model.base_url_for("anthropic_messages") == model.base_url
        assert post(product, "anthropic", FIRST_CALL).status_code == 200
    assert server.counters()["request_count"] == 0  # nothing reached the server's own
    assert len((tmp_path / "model.jsonl").read_text().splitlines()) == 2
    product_log = (tmp_path / "product.jsonl").read_text().splitlines()
    assert [json.loads(line)["wire_format"] for line in product_log] == ["openai", "anthropic"]


def test_a_profile_error_fails_its_tenants_block_and_counts_for_the_server(
    server: SimHandle,
) -> None:
    crash = {"model": "test-echo", "messages": [{"role": "user", "content": "crash"}]}
    with pytest.raises(SimError, match="profiles failed 1 time"):  # noqa: SIM117
        with running_tenant(server, "judge-r1") as judge:
            assert post(judge, "openai", crash).status_code == 500
    assert server.profile_errors() == 1
    with pytest.raises(SimError, match="profiles failed"):
        server.check_no_profile_errors()


def test_a_tenant_name_is_checked_and_never_given_twice(server: SimHandle) -> None:
    server.tenant("lane-a")
    with pytest.raises(SimAdminError, match="409"):
        server.tenant("lane-a")
    with pytest.raises(SimAdminError, match="400"):
        server.tenant("../escape")
    with running_tenant(server, "lane-a") as first, running_tenant(server, "lane-a") as again:
        assert first.name != again.name  # a session opened again gets a fresh tenant
