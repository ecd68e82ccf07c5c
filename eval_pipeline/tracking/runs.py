"""Logging runs with explicit ids: params, metrics and tags in batches, text artifacts.

Every call names its run id (`MlflowClient`, never `mlflow.start_run`'s process-global
active run), so parallel Dagster steps and processes log side by side without sharing state.
MLflow caps one `log_batch` at 1000 metrics, 100 params and 100 tags; batches are cut to fit.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_pipeline.tracking.provenance import CodeVersion

if TYPE_CHECKING:
    from mlflow import MlflowClient

PARENT_TAG = "mlflow.parentRunId"
MAX_PARAM_LENGTH = 6000
_METRICS_PER_BATCH = 1000
_PARAMS_PER_BATCH = 100
_TAGS_PER_BATCH = 100


def micro_usd(amount: Decimal) -> int:
    """Cost as an integer count of micro-dollars (a float metric holds it exactly)."""
    return int((amount * 1_000_000).to_integral_value())


def flatten(prefix: str, value: Any) -> dict[str, str]:
    """Nested settings as `prefix.key.sub` params; None is left out (not a value)."""
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for key, item in value.items():
            out.update(flatten(f"{prefix}.{key}" if prefix else str(key), item))
        return out
    if value is None:
        return {}
    if isinstance(value, list | tuple):
        return {prefix: json.dumps(list(value))}
    return {prefix: str(value).lower() if isinstance(value, bool) else str(value)}


def code_params(code: CodeVersion) -> dict[str, str]:
    return {
        "code.commit": code.commit,
        "code.dirty": str(code.dirty).lower(),
        "code.uv_lock_sha256": code.lock_sha256,
        **{f"package.{name}": version for name, version in code.key_packages().items()},
    }


def start_run(
    client: MlflowClient,
    experiment_id: str,
    name: str,
    *,
    tags: Mapping[str, str],
    parent_run_id: str | None = None,
) -> str:
    """A new run (nested under `parent_run_id` when given); returns its id."""
    all_tags = dict(tags)
    if parent_run_id is not None:
        all_tags[PARENT_TAG] = parent_run_id
    run = client.create_run(experiment_id, run_name=name, tags=all_tags)
    return str(run.info.run_id)


def log_values(
    client: MlflowClient,
    run_id: str,
    *,
    params: Mapping[str, str] | None = None,
    metrics: Mapping[str, float | int] | None = None,
    tags: Mapping[str, str] | None = None,
) -> int:
    """Log in as few batches as MLflow allows; NaN metrics (no value) are refused, so a
    metric that has no value is left out by the caller, never logged as a stand-in."""
    from mlflow.entities import Metric, Param, RunTag

    stamp = int(time.time() * 1000)
    metric_items = list((metrics or {}).items())
    for key, value in metric_items:
        if isinstance(value, float) and math.isnan(value):
            raise ValueError(f"metric {key!r} of run {run_id} is NaN")
    param_items = [(k, v[:MAX_PARAM_LENGTH]) for k, v in (params or {}).items()]
    tag_items = list((tags or {}).items())
    while metric_items or param_items or tag_items:
        batch_metrics = metric_items[:_METRICS_PER_BATCH]
        batch_params = param_items[:_PARAMS_PER_BATCH]
        batch_tags = tag_items[:_TAGS_PER_BATCH]
        metric_items = metric_items[_METRICS_PER_BATCH:]
        param_items = param_items[_PARAMS_PER_BATCH:]
        tag_items = tag_items[_TAGS_PER_BATCH:]
        client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), stamp, 0) for k, v in batch_metrics],
            params=[Param(k, v) for k, v in batch_params],
            tags=[RunTag(k, v) for k, v in batch_tags],
            synchronous=True,
        )
    return len(metrics or {})


def log_texts(client: MlflowClient, run_id: str, files: Mapping[str, str]) -> None:
    """Text artifacts, uploaded in one call (one folder per run)."""
    if not files:
        return
    with tempfile.TemporaryDirectory(prefix="evalp-artifacts-") as folder:
        for name, text in files.items():
            path = Path(folder) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        client.log_artifacts(run_id, folder)


def finish(client: MlflowClient, run_id: str, status: str = "FINISHED") -> None:
    client.set_terminated(run_id, status=status)
