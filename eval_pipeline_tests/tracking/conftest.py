"""The small world and its fixture set (from the lanes' tests), for runs logged to MLflow."""

from eval_pipeline_tests.lanes.conftest import (  # noqa: F401 (fixtures)
    agent_db,
    small_fixture_set,
    small_warehouse,
)
