"""Asset, group and job names: one place, so code and UI agree."""

from __future__ import annotations

WORLD_GROUP = "world"
WORLD_ASSET = "world"
ANSWER_KEY_ASSET = "answer_key"
FIXTURES_ASSET = "fixtures"
MAIN_JOB = "evaluation_pipeline"

PROVIDERS_GROUP = "providers"
PROVIDER_CALIBRATION_ASSET = "provider_calibration"
PLANTED_LABELS_RECOVERED = "planted_labels_recovered"
