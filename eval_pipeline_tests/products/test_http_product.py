"""The `http` product (issue 27, item 3): a deployed product behind an HTTP endpoint runs
the product lane. Its reply is scored like any other, its own model calls' cost and tokens
are what it reports (marked as reported in the trace), and a dead or failing endpoint is a
‡ or a harness error, never a zero."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

import pytest

from eval_pipeline import world_stages
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.experiments.isolated import run_and_score_in_session
from eval_pipeline.lanes.partition_runs import LaneSettings
from eval_pipeline.paths import PROJECT_ROOT
from eval_pipeline.products import ProductSpec
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.scoring.judge import load_judge
from eval_pipeline.world import load_world_config, plugin_for_config
from eval_pipeline_tests.products.test_mcp_product import free_port, wait_for_port

DEPLOYED = textwrap.dedent(
    '''
    """A deployed agent for the arithmetic example: adds the two numbers of a question."""
    import re, sys
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    MODE = sys.argv[2]

    async def answer(request: Request) -> Response:
        case = await request.json()
        if MODE == "down":
            return JSONResponse({"error": "overloaded"}, status_code=503)
        if MODE == "refuses":
            return JSONResponse({"error": "bad key"}, status_code=401)
        if MODE == "garbage":
            return Response("<html>oops</html>", media_type="text/html")
        if MODE == "huge":
            return JSONResponse({"reply": "x" * 3_000_000})
        numbers = [int(n) for n in re.findall(r"-?\\d+", case["prompt"].splitlines()[0])]
        total = sum(numbers[:2])
        return JSONResponse({
            "reply": f"The sum is {total}.\\nANSWER: {total}",
            "trace": [
                {"kind": "tool_call", "tool": "add",
                 "data": {"arguments": {"a": numbers[0], "b": numbers[1]}}},
                {"kind": "tool_result", "tool": "add", "data": {"text": str(total)}},
            ],
            "usage": {"cost_usd": "0.0125", "input_tokens": 120, "output_tokens": 9},
        })

    uvicorn.run(Starlette(routes=[Route("/eval", answer, methods=["POST"])]),
                host="127.0.0.1", port=int(sys.argv[1]), log_level="error")
    '''
)


@pytest.fixture(scope="module")
def arith_fixture_set(tmp_path_factory: pytest.TempPathFactory) -> FixtureSet:
    config = load_world_config(PROJECT_ROOT / "examples" / "arith" / "world.yaml")
    plugin = plugin_for_config(config)
    world = plugin.generate(config.seed, config.scale)
    answer_key = plugin.answer_key(world)
    return world_stages.freeze_suite(
        world, answer_key, tmp_path_factory.mktemp("arith-fixtures"), plugin
    )


def run_deployed(mode: str, fixture_set: FixtureSet, tmp_path: Path) -> list[tuple[object, object]]:
    script = tmp_path / "deployed.py"
    script.write_text(DEPLOYED)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(script), str(port), mode],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, server)
        judge = load_judge()
        configs = scan_model_configs().require(["sim-tool-user", judge.model])
        product = ProductSpec(
            plugin="http", options={"url": f"http://127.0.0.1:{port}/eval", "timeout_s": 20}
        )
        scored = run_and_score_in_session(
            [("deployed", configs["sim-tool-user"], LaneSettings(lane="product", product=product))],
            seeds=(0,),
            fixture_set=fixture_set,
            agent_db=tmp_path / "no-agent-db.duckdb",
            root=tmp_path / "runs",
            judge=judge,
            judge_config=configs[judge.model],
            run_id=f"http-{mode}",
            journal=tmp_path / "calls.jsonl",
        )
    finally:
        server.terminate()
        server.communicate(timeout=10)
    return scored["deployed"]  # type: ignore[return-value]


def test_a_deployed_product_is_scored_with_the_cost_it_reports(
    arith_fixture_set: FixtureSet, tmp_path: Path
) -> None:
    pairs = run_deployed("answers", arith_fixture_set, tmp_path)
    scores = {score.case_id: score.score for score, _ in pairs}  # type: ignore[attr-defined]
    assert scores["add-small"] == 1.0 and scores["add-large"] == 1.0
    assert scores["times-twelve"] == 0.0  # it adds 12 and 12
    runs = [run for _, run in pairs]
    assert all(run.cost_usd == Decimal("0.0125") for run in runs)  # type: ignore[attr-defined]
    assert all(run.call_ids == () and run.tool_calls == 1 for run in runs)  # type: ignore[attr-defined]
    events = [
        json.loads(line)
        for path in (tmp_path / "runs").rglob("traces.jsonl")
        for line in path.read_text().splitlines()
    ]
    replies = [e["data"] for e in events if e["kind"] == "model_reply"]
    assert replies and all(reply["usage"] == "reported" for reply in replies)
    assert all(e["data"]["reported"] for e in events if e["kind"] == "tool_call")


@pytest.mark.parametrize(
    ("mode", "status", "end_reason"),
    [
        ("down", "infra_error", "call_failed"),
        ("refuses", "harness_error", "call_failed"),
        ("garbage", "completed", "empty_reply"),
        ("huge", "completed", "empty_reply"),
    ],
)
def test_a_failing_endpoint_is_never_read_as_a_wrong_answer(
    arith_fixture_set: FixtureSet, tmp_path: Path, mode: str, status: str, end_reason: str
) -> None:
    runs = [run for _, run in run_deployed(mode, arith_fixture_set, tmp_path)]
    assert {(run.status, run.end_reason) for run in runs} == {(status, end_reason)}  # type: ignore[attr-defined]
