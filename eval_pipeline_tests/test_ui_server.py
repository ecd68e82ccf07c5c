"""The webserver `evalp ui` runs answers loopback host names only (issue 25, finding 6: a
foreign Host header, as DNS rebinding sends it, was answered 200 by `dagster dev`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster import DagsterInstance
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import EmptyWorkspaceTarget
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.types import ASGIApp

from eval_pipeline.ui_server import build_app

QUERY = {"query": "{ version }"}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ASGIApp]:
    home: Path = tmp_path_factory.mktemp("dagster_home")
    with (
        DagsterInstance.local_temp(str(home)) as instance,
        WorkspaceProcessContext(instance, EmptyWorkspaceTarget()) as context,
    ):
        yield build_app(context)


@pytest.mark.parametrize(
    "base",
    ["http://127.0.0.1:3000", "http://localhost:3000", "http://[::1]:3000", "http://127.0.0.1"],
)
def test_graphql_answers_a_loopback_host(app: ASGIApp, base: str) -> None:
    answer = TestClient(app, base_url=base).post("/graphql", json=QUERY)
    assert answer.status_code == 200, answer.text
    assert "version" in answer.json()["data"]


@pytest.mark.parametrize(
    "base",
    ["http://evil.example.com", "http://evil.example.com:3000", "http://127.0.0.1.evil.example"],
)
def test_graphql_refuses_a_foreign_host(app: ASGIApp, base: str) -> None:
    answer = TestClient(app, base_url=base).post("/graphql", json=QUERY)
    assert answer.status_code == 400
    assert answer.text == "Invalid host header"


def test_the_graphql_websocket_refuses_a_foreign_host(app: ASGIApp) -> None:
    # TestClient's websockets go to ws://testserver whatever base_url says: Host set here.
    client = TestClient(app)
    with (
        pytest.raises(WebSocketDenialResponse) as denied,
        client.websocket_connect("/graphql", headers={"host": "evil.example.com"}),
    ):
        pass
    assert denied.value.status_code == 400


def test_the_graphql_websocket_accepts_a_loopback_host(app: ASGIApp) -> None:
    client = TestClient(app)
    with client.websocket_connect(
        "/graphql", subprotocols=["graphql-ws"], headers={"host": "127.0.0.1:3000"}
    ) as socket:
        socket.send_json({"type": "connection_init"})
        assert socket.receive_json() == {"type": "connection_ack"}
