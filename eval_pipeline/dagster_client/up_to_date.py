"""What the mission can skip: assets whose code, configs and inputs did not change.

Dagster decides: every asset has a code version, the world, answer key and fixtures carry
their fingerprints as data versions, the other assets get data versions Dagster derives from
their code and inputs, and the config files are observed source assets
(`defs.config_sources`). An asset is run again when it is missing or stale (its code
version, an input's data version or an observed config changed since it was materialized);
one that is fresh is skipped and its latest materialization stands for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._core.definitions.temporal_context import TemporalContext
from dagster._core.events import DagsterEventType
from dagster._time import get_current_datetime

from eval_pipeline.defs.keys import OBSERVE_CONFIGS_JOB

# The stale-status resolver is the one Dagster's UI and `stale_assets_only` run requests use;
# it is not exported from `dagster` itself, hence the private imports above (pinned version).


@dataclass(frozen=True)
class StoredResult:
    """A skipped step's assets as their latest materializations left them."""

    run_ids: tuple[str, ...]
    materializations: dict[str, dict[str, object]]
    checks: dict[str, bool]


def observe_configs(
    defs: dg.Definitions, instance: dg.DagsterInstance, run_config: Mapping[str, Any]
) -> None:
    """Record the config files' current versions (a short observation run)."""
    job = defs.resolve_job_def(OBSERVE_CONFIGS_JOB)
    result = job.execute_in_process(instance=instance, raise_on_error=True, run_config=run_config)
    if not result.success:
        raise RuntimeError("observing the config files failed; see the run in the Dagster UI")


MUST_RUN = (StaleStatus.STALE, StaleStatus.MISSING)
"""What makes an asset run again."""


def stale_or_missing(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    keys: Iterable[dg.AssetKey],
    partition: str | None = None,
) -> list[dg.AssetKey]:
    """The assets among `keys` (at `partition`, for partitioned ones) that must run."""
    graph = defs.resolve_asset_graph()
    asked = [(key, partition if graph.get(key).is_partitioned else None) for key in keys]
    return [key for key, _ in _with_status(defs, instance, asked, MUST_RUN)]


def stale_upstream(
    defs: dg.Definitions, instance: dg.DagsterInstance, key: dg.AssetKey
) -> list[str]:
    """`key` and every asset it is derived from (each materialized partition of a
    partitioned one) that is stale: while any is, `key`'s numbers are not current, even
    where Dagster finds `key` itself fresh (a stale input not yet re-run). One never
    materialized is not counted: `key` did not read it (an experiment the sweep does not
    run)."""
    graph = defs.resolve_asset_graph()
    lineage = dg.AssetSelection.assets(key).upstream().resolve(graph)
    asked: list[tuple[dg.AssetKey, str | None]] = []
    for upstream in sorted(lineage, key=lambda k: k.to_user_string()):
        node = graph.get(upstream)
        if not node.is_materializable:
            continue
        if node.is_partitioned:
            done = sorted(instance.get_materialized_partitions(upstream))
            asked.extend((upstream, partition) for partition in done)
        else:
            asked.append((upstream, None))
    return [
        key.to_user_string() + (f"[{partition}]" if partition else "")
        for key, partition in _with_status(defs, instance, asked, (StaleStatus.STALE,))
    ]


def _with_status(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    asked: Sequence[tuple[dg.AssetKey, str | None]],
    statuses: tuple[StaleStatus, ...],
) -> list[tuple[dg.AssetKey, str | None]]:
    """The (asset, partition) pairs among `asked` whose stale status is one of `statuses`,
    from one resolver (its cache shared across the pairs)."""
    graph = defs.resolve_asset_graph()
    view = AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance,
        asset_graph=graph,
    )
    resolver = CachingStaleStatusResolver(instance, graph, view)
    return [
        (key, partition)
        for key, partition in asked
        if resolver.get_status(key, partition) in statuses
    ]


TRACKED_RUN_FIELDS = ("mlflow_parent_run_id", "mlflow_result_run_id")
"""Materialization metadata naming the MLflow run an asset logged: the asset stands only
while the tracking store still holds that run."""


def missing_from_tracking(
    instance: dg.DagsterInstance,
    keys: Iterable[dg.AssetKey],
    partition: str | None,
    has_run: Callable[[str], bool],
) -> list[dg.AssetKey]:
    """The assets among `keys` whose latest materialization logged an MLflow run the
    tracking store no longer holds (the store deleted, emptied or replaced since): they
    must run again, or the demo would print run ids that lead nowhere."""
    stored = {
        key: stored_result(instance, [key], (), partition).materializations.get(
            key.to_user_string(), {}
        )
        for key in keys
    }
    return [
        key
        for key, metadata in stored.items()
        if any(
            isinstance(metadata.get(field), str)
            and metadata[field]
            and not has_run(str(metadata[field]))
            for field in TRACKED_RUN_FIELDS
        )
    ]


WAREHOUSE_RESOURCE = "warehouse"


def missing_from_warehouse(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    keys: Iterable[dg.AssetKey],
    partition: str | None,
    created_at: float | None,
) -> list[dg.AssetKey]:
    """The assets among `keys` that write the warehouse and whose latest materialization
    is older than the warehouse file (`created_at`: deleted or moved aside since, and a
    new one begun): what they wrote is not in it, so they must run again."""
    graph = defs.resolve_asset_graph()
    chosen = []
    for key in keys:
        if WAREHOUSE_RESOURCE not in defs.resolve_assets_def(key).required_resource_keys:
            continue
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=key,
                asset_partitions=[partition]
                if partition and graph.get(key).is_partitioned
                else None,
            ),
            limit=1,
        ).records
        if records and (created_at is None or records[0].timestamp < created_at):
            chosen.append(key)
    return chosen


def recorded_registration(instance: dg.DagsterInstance, arm_scores: dg.AssetKey) -> str | None:
    """The MLflow registration run an experiment's latest arm results were logged against
    (None: it has no results yet)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=arm_scores), limit=1
    ).records
    if not records or records[0].asset_materialization is None:
        return None
    value = records[0].asset_materialization.metadata.get("registration_run_id")
    recorded = None if value is None else value.value
    return recorded if isinstance(recorded, str) and recorded else None


def with_downstream(
    defs: dg.Definitions, keys: Sequence[dg.AssetKey], within: Iterable[dg.AssetKey]
) -> list[dg.AssetKey]:
    """`keys` and everything downstream of them among `within` (what a re-run may change)."""
    graph = defs.resolve_asset_graph()
    allowed = set(within)
    chosen: set[dg.AssetKey] = set()
    pending = list(keys)
    while pending:
        key = pending.pop()
        if key in chosen or key not in allowed:
            continue
        chosen.add(key)
        pending.extend(graph.get(key).child_keys)
    return sorted(chosen, key=lambda key: key.to_user_string())


def stored_result(
    instance: dg.DagsterInstance,
    keys: Iterable[dg.AssetKey],
    check_keys: Iterable[dg.AssetCheckKey] = (),
    partition: str | None = None,
) -> StoredResult:
    """The latest materialization of each of `keys` (at `partition`) and the latest result
    of each check: what a skipped step reports instead of running."""
    materializations: dict[str, dict[str, object]] = {}
    run_ids: list[str] = []
    for key in keys:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=key, asset_partitions=[partition] if partition else None
            ),
            limit=1,
        ).records
        if not records or records[0].asset_materialization is None:
            continue
        record = records[0]
        materialization = record.asset_materialization
        assert materialization is not None
        materializations[key.to_user_string()] = {
            name: value.value for name, value in materialization.metadata.items()
        }
        if record.run_id not in run_ids:
            run_ids.append(record.run_id)
    executions = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        list(check_keys)
    )
    checks = {}
    for check_key, execution in executions.items():
        event = execution.event
        dagster_event = None if event is None else event.dagster_event
        if (
            dagster_event is not None
            and dagster_event.event_type == DagsterEventType.ASSET_CHECK_EVALUATION
        ):
            checks[check_key.name] = dagster_event.asset_check_evaluation_data.passed
    return StoredResult(tuple(run_ids), materializations, checks)
