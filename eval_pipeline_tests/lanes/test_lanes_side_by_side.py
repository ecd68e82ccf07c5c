"""A partition's two lanes run side by side in one event loop (issue 26: "within a partition
the model lane and the product lane can overlap where the provider limit allows"): their
calls overlap in time, together they never have more calls in flight than the run's share
of the provider's limit, and a lane that fails does not take the other down with it."""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest

from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.lanes.guards import GuardSettings
from eval_pipeline.lanes.partition_runs import (
    LaneRunSummary,
    LaneSettings,
    PartitionRequest,
    execute_partitions,
)
from eval_pipeline.project_configs import scan_model_configs
from eval_pipeline.providers.call_slots import RunSlots
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.envelope import CallEnvelope
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.providers.run_limits import calls_in_flight_per_run
from eval_pipeline.sim.process import running_sim
from eval_pipeline.sim.sessions import session_for

pytestmark = pytest.mark.slow  # two lanes over the small suite at 30 ms a call: ~10 s

MODEL = "sim-strong"
LATENCY_MS = 30


def _config() -> ModelConfig:
    return scan_model_configs().require([MODEL])[MODEL]


def _run_both(
    fixture_set: FixtureSet, agent_db: Path, root: Path, *, shared: bool
) -> tuple[list[LaneRunSummary | Exception], list[CallSession]]:
    config = _config()
    slots = RunSlots(share=True)  # a queued run's share of the provider's limit
    with ExitStack() as stack:
        requests: list[tuple[PartitionRequest, CallSession]] = []
        for lane, db in (("model", ""), ("product", str(agent_db))):
            run_id = f"{lane}-lane-{'shared' if shared else 'apart'}"
            session = stack.enter_context(
                session_for(
                    {MODEL: config},
                    run_id=run_id,
                    journal=root / "runs" / run_id / "envelopes.jsonl",
                    start_sim=lambda: running_sim(latency_ms=LATENCY_MS),
                    slots=slots if shared else RunSlots(share=True),
                )
            )
            request = PartitionRequest(
                lane=lane,  # type: ignore[arg-type]
                model=MODEL,
                seed=0,
                run_id=run_id,
                fixture_path=str(fixture_set.path),
                agent_db=db,
                settings=LaneSettings(lane=lane, guards=GuardSettings()),  # type: ignore[arg-type]
            )
            requests.append((request, session))
        outcomes = execute_partitions(requests, config, root / "lanes")
    return outcomes, [session for _, session in requests]


def _most_in_flight(envelopes: list[CallEnvelope]) -> int:
    """The most calls whose attempts (each held its provider slot) overlapped in time."""
    edges = sorted(
        edge
        for envelope in envelopes
        for edge in (
            (envelope.started_at, 1),
            (envelope.started_at + timedelta(milliseconds=envelope.elapsed_ms), -1),
        )
    )
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def _overlap(a: list[CallEnvelope], b: list[CallEnvelope]) -> bool:
    def span(envelopes: list[CallEnvelope]) -> tuple[object, object]:
        starts = [e.started_at for e in envelopes]
        return min(starts), max(starts)

    (a_start, a_end), (b_start, b_end) = span(a), span(b)
    return a_start < b_end and b_start < a_end  # type: ignore[operator]


def test_the_lanes_overlap_and_share_the_runs_calls_in_flight(
    small_fixture_set: FixtureSet, agent_db: Path, tmp_path: Path
) -> None:
    share = calls_in_flight_per_run(_config().provider, _config().max_in_flight)
    outcomes, (model, product) = _run_both(small_fixture_set, agent_db, tmp_path, shared=True)
    assert all(isinstance(outcome, LaneRunSummary) for outcome in outcomes), outcomes
    cases = len(small_fixture_set.cases)
    assert [o.cases for o in outcomes if isinstance(o, LaneRunSummary)] == [cases, cases]
    assert _overlap(model.envelopes, product.envelopes)
    # together within the run's one share, and both lanes used more than half of it
    assert _most_in_flight([*model.envelopes, *product.envelopes]) <= share
    assert _most_in_flight([*model.envelopes, *product.envelopes]) > share // 2


def test_without_shared_slots_each_lane_would_take_a_share_of_its_own(
    small_fixture_set: FixtureSet, agent_db: Path, tmp_path: Path
) -> None:
    """What the shared slots prevent: two sessions, each with the run's whole share."""
    share = calls_in_flight_per_run(_config().provider, _config().max_in_flight)
    _, (model, product) = _run_both(small_fixture_set, agent_db, tmp_path, shared=False)
    assert _most_in_flight([*model.envelopes, *product.envelopes]) > share


def test_a_failing_lane_leaves_the_other_to_finish(
    small_fixture_set: FixtureSet, tmp_path: Path
) -> None:
    outcomes, _ = _run_both(small_fixture_set, tmp_path / "no-such.duckdb", tmp_path, shared=True)
    model, product = outcomes
    assert isinstance(model, LaneRunSummary) and model.cases == len(small_fixture_set.cases)
    assert isinstance(product, EvalPipelineError), product
    assert "no-such.duckdb" in str(product)
