"""The Dagster webserver as a person meets it, through its GraphQL API: the asset graph
(lanes partitioned, the gate with its checks, tracking, the report, each experiment's
assets), the nightly schedule and the model-config sensor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from eval_pipeline.paths import PROJECT_ROOT
from eval_pipeline_tests.test_ui import answers, free_port

QUERY = """
{
  assetNodes { assetKey { path } isPartitioned hasAssetChecks groupName }
  repositoriesOrError {
    ... on RepositoryConnection { nodes { name schedules { name } sensors { name } } }
  }
}
"""


@pytest.mark.slow
def test_the_webserver_shows_the_graph_checks_schedule_and_sensor(isolated_state: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("dagster-webserver")),
            "-w",
            str(PROJECT_ROOT / "workspace.yaml"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        cwd=PROJECT_ROOT,
        env=dict(os.environ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not answers(f"{url}/server_info"):
            time.sleep(1)
        request = urllib.request.Request(
            f"{url}/graphql",
            data=json.dumps({"query": QUERY}).encode(),
            headers={"Content-Type": "application/json"},
        )
        data = json.load(urllib.request.urlopen(request, timeout=60))["data"]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    assert (
        nodes["product_lane_runs"]["isPartitioned"] and nodes["model_lane_scores"]["isPartitioned"]
    )
    assert nodes["ship_gate"]["hasAssetChecks"] and nodes["fixtures"]["hasAssetChecks"]
    assert {"sweep_summary", "sweep_tracking", "sweep_report"} <= set(nodes)
    for experiment in ("lanes-sim-small", "serving-path-sim-strong", "guard-ablation-sim-small"):
        assert nodes[f"experiments/{experiment}/arm_scores"]["isPartitioned"]
        assert nodes[f"experiments/{experiment}/parity_report"]["groupName"] == "experiments"
    (repository,) = data["repositoriesOrError"]["nodes"]
    assert [s["name"] for s in repository["schedules"]] == ["nightly_sweep"]
    assert [s["name"] for s in repository["sensors"]] == ["model_configs"]
