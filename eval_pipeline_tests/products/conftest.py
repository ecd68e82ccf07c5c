"""The lanes' small label world, fixture set and agent database, shared with the product
tests (a product runs the product lane on them)."""

from eval_pipeline_tests.lanes.conftest import agent_db, small_fixture_set, small_warehouse

__all__ = ["agent_db", "small_fixture_set", "small_warehouse"]
