"""sim-strong on the committed fixture set, over the default world it was frozen from
(about 468,000 statement lines): the full-scale twin of the small-world test. Slow."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline import world_stages
from eval_pipeline.lanes.agent_db import build_agent_world_db
from eval_pipeline.sim.process import running_sim
from eval_pipeline.warehouse import connect
from eval_pipeline.world.label.plugin import LabelWorld
from eval_pipeline.world.label.toolbox import LabelToolbox
from eval_pipeline_tests.sim.agent_driver import Driver
from eval_pipeline_tests.sim.test_agents_first_call import committed_fixture_set
from eval_pipeline_tests.sim.test_agents_solve import by_category, right_ids


@pytest.mark.slow
def test_sim_strong_answers_the_committed_fixtures_on_the_default_world(tmp_path: Path) -> None:
    fixtures = committed_fixture_set()
    provenance = fixtures.manifest.world
    plugin = LabelWorld()
    world = plugin.generate(seed=provenance.seed, scale=provenance.scale)
    assert world.fingerprint == provenance.fingerprint, "the fixtures' own world"
    warehouse = tmp_path / "warehouse.duckdb"
    conn = connect(warehouse)
    try:
        world_stages.store_world(conn, world)
    finally:
        conn.close()
    agent_db = build_agent_world_db(warehouse, tmp_path / "agent")
    cases = fixtures.cases
    with running_sim() as sim, LabelToolbox(agent_db) as toolbox:
        driver = Driver(sim, toolbox, "sim-strong", seed=1)
        try:
            runs = driver.run_all(cases)
        finally:
            driver.close()
    print("sim-strong on the default world:", by_category(cases, runs))
    wrong = sorted({c.case_id for c in cases} - right_ids(cases, runs))
    assert len(wrong) <= 0.05 * len(cases), [(w, runs[w].final_text) for w in wrong]
