"""The Dagster webserver as a person meets it after a sweep, through its GraphQL API: the
asset graph (lanes partitioned, the gate with its checks, tracking, the report, each
experiment's assets), the report's lineage back to the world with the chain behind its
numbers, the nightly schedule and the sensors."""

from __future__ import annotations

import json
import time
import urllib.request

from eval_pipeline_tests.test_ui import answers

QUERY = """
{
  assetNodes {
    assetKey { path } isPartitioned hasAssetChecks groupName dependencyKeys { path }
  }
  report: assetNodes(assetKeys: [{path: ["sweep_report"]}]) {
    assetMaterializations(limit: 1) {
      runId
      metadataEntries { label ... on MarkdownMetadataEntry { mdStr } }
    }
  }
  repositoriesOrError {
    ... on RepositoryConnection { nodes { name schedules { name } sensors { name } } }
  }
}
"""


def assert_the_webserver_shows_the_graph(url: str, seeds: str) -> None:
    """The webserver at `url` (after a sweep of sim-strong and sim-small over `seeds`, as
    "0,1,2") shows the graph, the report's lineage, the schedule and the sensors. Called by
    the nightly-tick test in test_automation.py, whose `evalp ui` serves it: one sweep
    for both, not a demo of its own."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not answers(f"{url}/server_info"):
        time.sleep(1)
    request = urllib.request.Request(
        f"{url}/graphql",
        data=json.dumps({"query": QUERY}).encode(),
        headers={"Content-Type": "application/json"},
    )
    data = json.load(urllib.request.urlopen(request, timeout=60))["data"]
    nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
    assert (
        nodes["product_lane_runs"]["isPartitioned"] and nodes["model_lane_scores"]["isPartitioned"]
    )
    assert nodes["ship_gate"]["hasAssetChecks"] and nodes["fixtures"]["hasAssetChecks"]
    assert {"sweep_summary", "sweep_tracking", "sweep_report"} <= set(nodes)
    for experiment in ("lanes-sim-small", "serving-path-sim-strong", "guard-ablation-sim-small"):
        assert nodes[f"experiments/{experiment}/arm_scores"]["isPartitioned"]
        assert nodes[f"experiments/{experiment}/parity_report"]["groupName"] == "experiments"
    upstream: set[str] = set()
    pending = ["sweep_report"]
    while pending:
        for parent in nodes[pending.pop()]["dependencyKeys"]:
            key = "/".join(parent["path"])
            if key not in upstream:
                upstream.add(key)
                pending.append(key)
    assert {
        "sweep_summary",
        "sweep_tracking",
        "product_lane_scores",
        "product_lane_records",
        "product_lane_runs",
        "model_lane_runs",
        "fixtures",
        "answer_key",
        "world",
        "experiments/serving-path-sim-strong/parity_report",
        "experiments/serving-path-sim-strong/arm_scores",
    } <= upstream
    (materialization,) = data["report"][0]["assetMaterializations"]
    entries = {e["label"]: e.get("mdStr") for e in materialization["metadataEntries"]}
    lineage = entries["lineage"]
    assert lineage is not None
    for lane in ("model", "product"):
        for model in ("sim-strong", "sim-small"):
            assert f"partitions {lane}/{model}/{seeds}" in lineage
    assert f"sweep_report @ Dagster run {materialization['runId']} → MLflow run " in lineage
    assert "call envelopes → fixture fx-" in lineage and ", world " in lineage
    (repository,) = data["repositoriesOrError"]["nodes"]
    assert [s["name"] for s in repository["schedules"]] == ["nightly_sweep"]
    assert sorted(s["name"] for s in repository["sensors"]) == ["evaluation_chain", "model_configs"]
