"""Asset, group and job names: one place, so code and UI agree."""

from __future__ import annotations

WORLD_GROUP = "world"
WORLD_ASSET = "world"
ANSWER_KEY_ASSET = "answer_key"
FIXTURES_ASSET = "fixtures"
MAIN_JOB = "evaluation_pipeline"
