"""Asset, group and job names: one place, so code and UI agree."""

from __future__ import annotations

from eval_pipeline.providers.run_limits import PROVIDER_TAG as PROVIDER_TAG

WORLD_GROUP = "world"
WORLD_ASSET = "world"
ANSWER_KEY_ASSET = "answer_key"
FIXTURES_ASSET = "fixtures"
MAIN_JOB = "evaluation_pipeline"

PROVIDERS_GROUP = "providers"
PROVIDER_CALIBRATION_ASSET = "provider_calibration"
PLANTED_LABELS_RECOVERED = "planted_labels_recovered"

WAREHOUSE_POOL = "warehouse"
"""Every asset that writes (or reads the file of) the DuckDB warehouse: DuckDB has one writer."""

LANES_GROUP = "lanes"
AGENT_WORLD_ASSET = "agent_world"
MODEL_LANE_RUNS_ASSET = "model_lane_runs"
PRODUCT_LANE_RUNS_ASSET = "product_lane_runs"
MODEL_LANE_RECORDS_ASSET = "model_lane_records"
PRODUCT_LANE_RECORDS_ASSET = "product_lane_records"
MODELS_PARTITIONS = "models"
LANES_JOB = "lanes"
MODEL_CONFIGS_SENSOR = "model_configs"
NIGHTLY_SCHEDULE = "nightly_sweep"
CHAIN_SENSOR = "evaluation_chain"
"""The sensor evaluating the assets' automation conditions (eval_pipeline.defs.automation)."""

MODEL_LANE_SCORES_ASSET = "model_lane_scores"
PRODUCT_LANE_SCORES_ASSET = "product_lane_scores"
RESULTS_GROUP = "results"
SWEEP_SUMMARY_ASSET = "sweep_summary"
SHIP_GATE_ASSET = "ship_gate"
SWEEP_TRACKING_ASSET = "sweep_tracking"
SWEEP_REPORT_ASSET = "sweep_report"
EXPERIMENTS_GROUP = "experiments"
GATE_READS_PRODUCT_LANE = "gate_reads_product_lane_only"
RESULTS_JOB = "results"
REGRADE_JOB = "regrade"
"""The score assets alone, per partition: `evalp regrade` re-scores what is stored."""

CONFIGS_GROUP = "configs"
OBSERVE_CONFIGS_JOB = "observe_configs"
WORLD_CONFIG_SOURCE = "world_config"
MODEL_CONFIGS_SOURCE = "model_configs"
PRICE_BOOK_SOURCE = "price_book"
JUDGE_CONFIG_SOURCE = "judge_config"
GATE_CONFIG_SOURCE = "gate_config"
SWEEP_CONFIG_SOURCE = "sweep_config"
"""The config families observed as source assets (eval_pipeline.config_versions)."""
