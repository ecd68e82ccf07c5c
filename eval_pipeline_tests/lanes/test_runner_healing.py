"""Which cases a partition's next run re-runs (issue 25, finding 7): a case whose call was
refused (a harness error: a wrong key, a server refusing us) is re-run once the cause is
fixed, like an infrastructure error; a completed case is kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import duckdb
from aiohttp import web

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.lanes.lane_tables import load_partition_records
from eval_pipeline.lanes.partition_runs import (
    LaneRunSummary,
    LaneSettings,
    partition_dir,
    run_partition,
)
from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.envelope import JOURNAL_NAME
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.sim.process import running_sim
from eval_pipeline.warehouse.envelopes import pending_journals

REFUSAL = {"error": {"message": "No connected db."}}


@dataclass
class Switch:
    """The server's state: refusing every call, or passing calls to the simulated provider."""

    fixed: bool = False


@asynccontextmanager
async def relay(sim_url: str, switch: Switch) -> AsyncIterator[str]:
    async with aiohttp.ClientSession() as forward:

        async def endpoint(request: web.Request) -> web.StreamResponse:
            if not switch.fixed:
                return web.json_response(REFUSAL, status=400)
            headers = {k: v for k, v in request.headers.items() if k.lower() == "x-evalp-seed"}
            async with forward.post(
                sim_url + request.path.removeprefix("/v1"),
                data=await request.read(),
                headers={**headers, "Content-Type": "application/json"},
            ) as reply:
                return web.Response(
                    status=reply.status, body=await reply.read(), content_type="application/json"
                )

        app = web.Application()
        app.router.add_post("/{tail:.*}", endpoint)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        try:
            yield f"http://{host}:{port}/v1"
        finally:
            await runner.cleanup()


def relay_config(base_url: str) -> ModelConfig:
    return ModelConfig.model_validate(
        {
            "name": "relay",
            "api": "openai_compatible",
            "provider": "relay-under-test",
            "model": "sim-strong",
            "base_url": base_url,
            "seed_header": "x-evalp-seed",
            "timeout_s": 20,
            "connect_timeout_s": 5,
        }
    )


async def one_run(
    base_url: str, run_id: str, fixture_set: FixtureSet, root: Path, cases: list[Case]
) -> LaneRunSummary:
    """One run of the model lane over `cases`, journaling under root/runs/<run_id>/."""
    session = CallSession(
        price_book=load_price_book(),
        run_id=run_id,
        journal_path=root / "runs" / run_id / JOURNAL_NAME,
    )
    async with session:
        return await run_partition(
            lane="model",
            config=relay_config(base_url),
            seed=0,
            fixture_set=fixture_set,
            session=session,
            settings=LaneSettings(lane="model"),
            product_tools=None,
            folder=partition_dir("model", "relay", 0, root / "lanes"),
            cases=cases,
        )


def test_refused_cases_are_rerun_once_the_server_is_fixed_and_completed_ones_kept(
    small_fixture_set: FixtureSet, tmp_path: Path
) -> None:
    cases = small_fixture_set.cases[:8]
    switch = Switch()

    async def go() -> tuple[LaneRunSummary, LaneRunSummary, LaneRunSummary]:
        with running_sim() as sim:
            async with relay(sim.openai_base_url, switch) as url:
                refused = await one_run(url, "refused", small_fixture_set, tmp_path, cases)
                switch.fixed = True
                fixed = await one_run(url, "fixed", small_fixture_set, tmp_path, cases)
                again = await one_run(url, "again", small_fixture_set, tmp_path, cases)
        return refused, fixed, again

    refused, fixed, again = asyncio.run(go())
    assert refused.statuses == {"harness_error": len(cases)}
    # Before the fix: ran 0, healed 0, every case still a harness error.
    assert (fixed.ran, fixed.healed) == (len(cases), len(cases))
    assert fixed.statuses == {"completed": len(cases)}
    assert (again.ran, again.kept) == (0, len(cases))
    assert (refused.unheard, fixed.unheard) == (len(cases), 0)


def test_a_run_with_nothing_left_to_run_leaves_no_journal_waiting_to_be_loaded(
    small_fixture_set: FixtureSet, tmp_path: Path
) -> None:
    """A partition run again after every case completed makes no call. Its session used to
    leave an empty journal that no case names, so the partition's records never loaded it
    and it stayed "not loaded in full" (the flake of `test_evalp_demo_killed_at_ten_points`:
    a kill after a lane step's cases landed, before Dagster recorded it, re-runs that step
    with nothing to do)."""
    cases = small_fixture_set.cases[:3]

    async def go() -> LaneRunSummary:
        with running_sim() as sim:
            async with relay(sim.openai_base_url, Switch(fixed=True)) as url:
                await one_run(url, "first", small_fixture_set, tmp_path, cases)
                return await one_run(url, "nothing-left", small_fixture_set, tmp_path, cases)

    again = asyncio.run(go())
    assert (again.ran, again.kept) == (0, len(cases))
    with duckdb.connect(str(tmp_path / "warehouse.duckdb")) as con:
        load_partition_records(
            [partition_dir("model", "relay", 0, tmp_path / "lanes")], tmp_path / "runs", con
        )
        assert pending_journals(tmp_path / "runs", con) == []
