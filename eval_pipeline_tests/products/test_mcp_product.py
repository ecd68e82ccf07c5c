"""The `mcp` product (issue 27, item 3): the product lane's agent loop over an MCP server's
tools. Against a server exposing the label world's tools, sim-strong scores as it does
through the built-in loop, and the payout batches it submits never reach the server (its
own call log shows none): they are recorded as dry-run writes and answered with a
synthetic success."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.errors import ConfigError
from eval_pipeline.experiments.isolated import run_and_score_in_session
from eval_pipeline.lanes.partition_runs import LaneSettings
from eval_pipeline.products import ProductSpec, product_for
from eval_pipeline.products.mcp import McpError
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.scoring.judge import load_judge
from eval_pipeline.world.label.tools import SUBMIT_PAYOUT_BATCH

SERVER = Path(__file__).with_name("label_mcp_server.py")


def mcp_spec(agent_db: Path, log: Path, **options: object) -> ProductSpec:
    return ProductSpec(
        plugin="mcp",
        options={"command": [sys.executable, str(SERVER), str(agent_db), str(log)], **options},
    )


@pytest.mark.slow
def test_sim_strong_scores_the_same_through_an_mcp_server_and_no_write_reaches_it(
    small_fixture_set: FixtureSet, agent_db: Path, tmp_path: Path
) -> None:
    log = tmp_path / "server-calls.jsonl"
    judge = load_judge()
    configs = scan_model_configs().require(["sim-strong", judge.model])
    loop = LaneSettings(lane="product")
    # The label agent reads the batch id back from its write, as a team's agent reads the
    # shape its own write tool answers with.
    receipt = {"batch_id": "{request_id}", "status": "accepted"}
    over_mcp = LaneSettings(
        lane="product",
        product=mcp_spec(agent_db, log, dry_run_replies={SUBMIT_PAYOUT_BATCH: receipt}),
    )
    scored = run_and_score_in_session(
        [("loop", configs["sim-strong"], loop), ("mcp", configs["sim-strong"], over_mcp)],
        seeds=(0,),
        fixture_set=small_fixture_set,
        agent_db=agent_db,
        root=tmp_path / "runs",
        judge=judge,
        judge_config=configs[judge.model],
        run_id="mcp-product",
        journal=tmp_path / "calls.jsonl",
    )
    by_case = {
        name: {score.case_id: score.score for score, _ in pairs} for name, pairs in scored.items()
    }
    assert by_case["mcp"] == by_case["loop"]
    assert sum(by_case["mcp"].values()) / len(by_case["mcp"]) > 0.9

    sent = [json.loads(line)["tool"] for line in log.read_text().splitlines()]
    assert sent, "the server was never called"
    assert SUBMIT_PAYOUT_BATCH not in sent
    written = [run.case_id for _, run in scored["mcp"] if run.case_id.startswith("multi_step")]
    assert written  # the workflow cases ran, and their batches went to the dry-run sink
    traces = (tmp_path / "runs").rglob("traces.jsonl")
    writes = [
        event
        for path in traces
        if "mcp" in str(path)
        for event in map(json.loads, path.read_text().splitlines())
        if event["kind"] == "write"
    ]
    assert writes and all(w["tool"] == SUBMIT_PAYOUT_BATCH for w in writes)


def test_over_streamable_http_reads_are_sent_and_writes_are_not(
    agent_db: Path, tmp_path: Path
) -> None:
    log = tmp_path / "server-calls.jsonl"
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(SERVER), str(agent_db), str(log), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, server)
        spec = ProductSpec(
            plugin="mcp", options={"url": f"http://127.0.0.1:{port}/mcp", "timeout_s": 20}
        )
        with product_for(spec).open_tools(_no_world_tools()) as tools:
            assert tools.toolbox is not None
            assert {spec.name for spec in tools.specs} >= {"run_sql", SUBMIT_PAYOUT_BATCH}
            read = tools.toolbox.execute("find_artist", json.dumps({"name": "a"}))
            wrote = tools.toolbox.execute(
                SUBMIT_PAYOUT_BATCH,
                json.dumps(
                    {"period": "2025-03", "payouts": [{"artist_id": "ART-0001", "amount": "1.00"}]}
                ),
            )
        assert not wrote.is_error and wrote.write is not None
        assert "DRYRUN-" in wrote.text
        sent = [json.loads(line)["tool"] for line in log.read_text().splitlines()]
        assert sent == ["find_artist"], (sent, read.text)
    finally:
        server.terminate()
        server.communicate(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(
                f"the MCP server exited: {process.stderr.read() if process.stderr else ''}"
            )
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"the MCP server did not listen on {port} in {seconds} s")


def test_a_write_the_server_does_not_list_is_refused_before_any_call(
    agent_db: Path, tmp_path: Path
) -> None:
    spec = mcp_spec(agent_db, tmp_path / "log.jsonl", writes=["submit_payout_btach"])
    product = product_for(spec)
    world = _no_world_tools()
    with (
        pytest.raises(ConfigError, match=r"writes names submit_payout_btach, which the server"),
        product.open_tools(world),
    ):
        pass
    assert not (tmp_path / "log.jsonl").exists()


def test_a_server_that_cannot_start_is_one_error_naming_it(tmp_path: Path) -> None:
    spec = ProductSpec(
        plugin="mcp",
        options={"command": [sys.executable, "-c", "raise SystemExit(3)"], "timeout_s": 5},
    )
    with (
        pytest.raises(McpError, match=r"MCP server .*python"),
        product_for(spec).open_tools(_no_world_tools()),
    ):
        pass


def test_mcp_options_are_checked_with_the_product_named() -> None:
    with pytest.raises(ConfigError, match=r"(?s)mcp options.*`command` \(stdio\) or `url`"):
        product_for(ProductSpec(plugin="mcp", options={}))
    with pytest.raises(ConfigError, match=r"unknown product 'mpc'; known: agent-loop, http, mcp"):
        product_for(ProductSpec(plugin="mpc"))


def _no_world_tools():  # type: ignore[no-untyped-def]
    from eval_pipeline.products import WorldTools

    def refuse():  # type: ignore[no-untyped-def]
        raise AssertionError("the mcp product opened the world's toolbox")

    return WorldTools(specs=(), open=refuse)
