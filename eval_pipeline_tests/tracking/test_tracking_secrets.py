"""A planted API key never reaches MLflow: a lane partition run with the key in the
environment, its records loaded and scored, then the sweep logged; every byte of the MLflow
store (the SQLite file) and of its artifact folder is searched for the key."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.lanes.lane_tables import load_partition_records, read_identities
from eval_pipeline.lanes.partition_runs import LaneSettings, partition_dir, run_partition
from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.scoring.score_tables import read_partition, score_partition
from eval_pipeline.sim.process import running_sim
from eval_pipeline.tracking.mlflow_store import TrackingStore, open_client
from eval_pipeline.tracking.provenance import code_version
from eval_pipeline.tracking.sweep_runs import log_sweep
from eval_pipeline.warehouse import connect

PLANTED_KEY = "sk-evalp-PLANTED-mlflow-key-5e4d3c2b1a09"
KEY_ENV = "EVALP_TEST_PLANTED_MLFLOW_KEY"


def forms(key: str) -> list[bytes]:
    """The key as text, its tail, and base64 (an Authorization header's encoding)."""
    return [key.encode(), key[-16:].encode(), base64.b64encode(key.encode())]


def test_a_planted_key_reaches_neither_the_mlflow_store_nor_its_artifacts(
    small_fixture_set: FixtureSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, PLANTED_KEY)
    cases = small_fixture_set.cases[:12]
    with running_sim() as sim:
        config = ModelConfig.model_validate(
            {
                "name": "keyed-model",
                "api": "openai_compatible",
                "provider": "simulated",
                "model": "sim-strong",
                "base_url": sim.openai_base_url,
                "api_key_env": KEY_ENV,
                "timeout_s": 20,
                "connect_timeout_s": 5,
            }
        )
        session = CallSession(
            price_book=load_price_book(),
            run_id="keyed-run",
            journal_path=tmp_path / "runs" / "keyed-run" / "envelopes.jsonl",
        )
        folder = partition_dir("model", config.name, 0, tmp_path / "lanes")

        async def go() -> None:
            async with session:
                await run_partition(
                    lane="model",
                    config=config,
                    seed=0,
                    fixture_set=small_fixture_set,
                    session=session,
                    settings=LaneSettings(lane="model"),
                    product_tools=None,
                    folder=folder,
                    cases=cases,
                )

        asyncio.run(go())
    con = connect(tmp_path / "warehouse.duckdb")
    try:
        load_partition_records([folder], tmp_path / "runs", con)
        scores = score_partition(
            read_partition(con, "model", config.name, 0), {c.case_id: c for c in cases}
        )
        identities = read_identities(con)
    finally:
        con.close()
    assert len(scores) == len(cases) and identities
    mlflow_dir = tmp_path / "mlflow"
    store = TrackingStore(
        uri=f"sqlite:///{mlflow_dir / 'mlflow.db'}",
        artifact_root=(mlflow_dir / "artifacts").as_uri(),
    )
    logged = log_sweep(
        open_client(store),
        store,
        scores,
        identities,
        world=small_fixture_set.manifest.world,
        code=code_version(),
        name="keyed sweep",
        tags={"dagster.run_id": "test"},
    )
    assert len(logged.nested) == 1
    written = [p for p in mlflow_dir.rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in written)
    assert any("artifacts" in p.parts for p in written)
    for path in written:
        data = path.read_bytes()
        for form in forms(PLANTED_KEY):
            assert form not in data, f"{path} holds the planted key"
    # the name of the variable is recorded (where the key came from), never its value
    client = open_client(store)
    params = client.get_run(logged.nested[0].run_id).data.params
    assert params["model_config.api_key_env"] == KEY_ENV
