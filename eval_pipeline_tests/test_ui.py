"""`evalp ui` serves the Dagster UI and the MLflow UI on loopback, prints both addresses,
and stops both servers on SIGTERM (they ignore it when their parent leaves SIGINT ignored:
FIELD-NOTES)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from eval_pipeline.tracking.mlflow_store import default_store, experiment_id, open_client


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def post_status(url: str, host: str, body: bytes) -> int:
    """The status of a POST to ``url`` naming ``host`` in its Host header (what a browser
    sends after DNS rebinding points that name at 127.0.0.1)."""
    request = urllib.request.Request(
        url, data=body, headers={"Host": host, "Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as refused:
        return int(refused.code)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


@pytest.mark.slow
def test_evalp_ui_serves_dagster_and_mlflow_and_stops_on_sigterm(isolated_state: Path) -> None:
    store = default_store()
    client = open_client(store)
    sweep_experiment = experiment_id(client, "evalp/sweeps/fx-ui-test", store)
    dagster_port, mlflow_port = free_port(), free_port()
    evalp = Path(sys.executable).with_name("evalp")
    process = subprocess.Popen(
        [str(evalp), "ui", "--port", str(dagster_port), "--mlflow-port", str(mlflow_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        dagster = f"http://127.0.0.1:{dagster_port}"
        mlflow = f"http://127.0.0.1:{mlflow_port}"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not (answers(dagster) and answers(mlflow)):
            time.sleep(1)
        assert answers(dagster) and answers(mlflow)
        listed = urllib.request.urlopen(
            urllib.request.Request(
                f"{mlflow}/api/2.0/mlflow/experiments/search",
                data=json.dumps({"max_results": 10}).encode(),
                headers={"Content-Type": "application/json"},
            ),
            timeout=10,
        )
        names = {e["name"] for e in json.load(listed)["experiments"]}
        assert "evalp/sweeps/fx-ui-test" in names
        # Issue 25, finding 6: `dagster dev` answered a foreign Host 200.
        graphql, query = f"{dagster}/graphql", json.dumps({"query": "{ version }"}).encode()
        assert post_status(graphql, f"127.0.0.1:{dagster_port}", query) == 200
        assert post_status(graphql, f"localhost:{dagster_port}", query) == 200
        assert post_status(graphql, "evil.example.com", query) == 400
        assert post_status(graphql, f"evil.example.com:{dagster_port}", query) == 400
        search = f"{mlflow}/api/2.0/mlflow/experiments/search"
        assert post_status(search, "evil.example.com", b'{"max_results": 1}') == 403
    finally:
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=60)
    assert f"Dagster  {dagster}" in out and f"MLflow   {mlflow}" in out
    # Issue 28: a bare experiment link opens MLflow's GenAI page; the sweep's runs link is
    # printed
    assert (
        f"evalp/sweeps/fx-ui-test: {mlflow}/#/experiments/{sweep_experiment}/runs?"
        "workflowType=machine_learning&viewStateShareKey=evalp-headline"
    ) in out
    assert "servers stopped" in out
    assert not answers(dagster) and not answers(mlflow)
