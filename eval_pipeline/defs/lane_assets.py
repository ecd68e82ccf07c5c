"""The two lanes as partitioned assets (model × seed), their warehouse records, and the
world-only database the product lane's tools read."""

from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline import paths
from eval_pipeline.defs.code_versions import asset_code_version
from eval_pipeline.defs.figures import AssetFigures
from eval_pipeline.defs.keys import (
    AGENT_WORLD_ASSET,
    FIXTURES_ASSET,
    LANES_GROUP,
    MODEL_CONFIGS_SOURCE,
    MODEL_LANE_RUNS_ASSET,
    MODELS_PARTITIONS,
    PRICE_BOOK_SOURCE,
    PRODUCT_LANE_RUNS_ASSET,
    WAREHOUSE_POOL,
    WORLD_ASSET,
)
from eval_pipeline.defs.model_sessions import judge_asker, model_session, run_slots
from eval_pipeline.defs.resources import ModelCallSettings, SimulatedProvider, WarehouseResource
from eval_pipeline.lane_records import Lane
from eval_pipeline.lanes.guards import GuardSettings, guards_from_env
from eval_pipeline.lanes.sweep_config import load_sweep_config
from eval_pipeline.providers.labels import FailureGroup

if TYPE_CHECKING:
    import duckdb

    from eval_pipeline.lanes.partition_runs import LaneRunSummary, PartitionRequest
    from eval_pipeline.providers.call_slots import RunSlots
    from eval_pipeline.providers.config import ModelConfig
    from eval_pipeline.sim.process import SimHandle

# The lanes' code (the agent loop, the SDKs, DuckDB, polars) is imported by the steps that
# run it, not when the definitions load.

model_partitions = dg.DynamicPartitionsDefinition(name=MODELS_PARTITIONS)
lane_partitions = dg.MultiPartitionsDefinition(
    {
        "model": model_partitions,
        "seed": dg.StaticPartitionsDefinition([str(s) for s in load_sweep_config().seeds]),
    }
)
LANE_CODE_VERSION = asset_code_version("lanes", __name__)


class LaneRunFigures(AssetFigures):
    """One lane partition's run (written by the model and the product lane's run assets)."""

    provider: str
    run_id: str
    fixture_id: str
    cases: int
    cases_run: int
    cases_kept: int
    cases_healed: int
    infra_errors: int
    harness_errors: int
    budget_stopped: int
    tool_calls: int
    cost_usd: str
    unhealed_causes: tuple[FailureGroup, ...]
    """The top causes of the cases never heard (‡), the server's own words included."""

    @property
    def unheard(self) -> int:
        """Cases without a usable reply: infrastructure and harness errors (both ‡, as the
        scores show them)."""
        return self.infra_errors + self.harness_errors


class ProductLaneConfig(dg.Config):
    """The product lane's guards (each can also be turned off by EVALP_GUARD_<NAME>=off)."""

    stall_bounce: bool = True
    argument_repair: bool = True
    truncation_refusal: bool = True
    iteration_cap: bool = True
    max_iterations: int = 12


def model_and_seed(context: dg.AssetExecutionContext) -> tuple[str, int]:
    key = context.partition_key
    if not isinstance(key, dg.MultiPartitionKey):
        raise dg.Failure(f"expected a model|seed partition key, got {key!r}")
    keys = key.keys_by_dimension
    return keys["model"], int(keys["seed"])


def latest_path(context: dg.AssetExecutionContext, asset: str) -> str:
    """The `path` an upstream asset recorded at its latest materialization."""
    event = context.instance.get_latest_materialization_event(dg.AssetKey(asset))
    if event is None or event.asset_materialization is None:
        raise dg.Failure(f"{asset} has not been materialized; materialize it first")
    value = event.asset_materialization.metadata.get("path")
    if value is None:
        raise dg.Failure(f"{asset}'s latest materialization records no path")
    return str(value.value)


def _run_lanes(
    context: dg.AssetExecutionContext,
    lanes: Mapping[Lane, GuardSettings],
    sim: SimulatedProvider,
    calls: ModelCallSettings,
) -> Iterator[dg.MaterializeResult]:  # type: ignore[type-arg]
    """The partition's selected lanes side by side, sharing the run's calls in flight; a
    lane that ends is materialized even when the other failed (then the step fails).

    A simulated model is served by one simulated provider for the run: each lane's session
    and the judge's is a tenant of it (counters, occurrence memory, usage and request log of
    its own, as a server of its own had), not a process each."""
    from eval_pipeline.lanes.partition_runs import (
        LaneSettings,
        PartitionRequest,
        execute_partitions,
        latest_runs,
    )
    from eval_pipeline.project_configs import scan_model_configs
    from eval_pipeline.providers.config import SIMULATED
    from eval_pipeline.providers.envelope import split_labels
    from eval_pipeline.providers.labels import top_failures

    model, seed = model_and_seed(context)
    config = scan_model_configs().require([model])[model]
    fixture_path = latest_path(context, FIXTURES_ASSET)
    agent_db = latest_path(context, AGENT_WORLD_ASSET) if "product" in lanes else ""
    with ExitStack() as serving:
        slots = serving.enter_context(run_slots(context.instance))
        server = serving.enter_context(sim.serving_run()) if config.provider == SIMULATED else None
        with ExitStack() as stack:
            requests = []
            for lane, guards in lanes.items():
                run_id = f"{lane}-lane-{context.run.run_id}"
                session = stack.enter_context(
                    model_session(
                        sim,
                        calls,
                        run_id=run_id,
                        configs={model: config},
                        slots=slots,
                        server=server,
                    )
                )
                request = PartitionRequest(
                    lane=lane,
                    model=model,
                    seed=seed,
                    run_id=run_id,
                    fixture_path=fixture_path,
                    agent_db=agent_db,
                    settings=LaneSettings(
                        lane=lane, guards=guards, product=load_sweep_config().product
                    ),
                )
                requests.append((request, session))
            outcomes = execute_partitions(requests, config, paths.lanes_dir())
        _warm_up_for_the_warehouse_step()  # it comes next in this process, holding the pool
        failed: list[Exception] = []
        for (request, session), outcome in zip(requests, outcomes, strict=True):
            if isinstance(outcome, Exception):
                context.log.error(f"the {request.lane} lane failed: {outcome}")
                failed.append(outcome)
                continue
            final_ids = {
                run.call_ids[-1]
                for run in latest_runs(
                    Path(outcome.records), request.settings.identity(config, outcome.fixture_id)
                ).values()
                if run.call_ids
            }
            failures = top_failures(session.envelopes, session.redact) if outcome.unheard else []
            metadata = _metadata(
                outcome,
                split_labels(session.envelopes, final_ids),
                config.provider == SIMULATED,
                failures,
            )
            if request.lane == "product":
                metadata["judge_asked"] = _judge_before_the_warehouse(
                    context, request, config, outcome, sim, calls, server, slots
                )
            yield dg.MaterializeResult(asset_key=LANE_RUNS_ASSET[request.lane], metadata=metadata)
        if failed:
            raise failed[0]


def _judge_before_the_warehouse(
    context: dg.AssetExecutionContext,
    request: "PartitionRequest",
    config: "ModelConfig",
    summary: "LaneRunSummary",
    sim: SimulatedProvider,
    calls: ModelCallSettings,
    server: "SimHandle | None",
    slots: "RunSlots",
) -> int:
    """The judge asked about the lane's judged replies here, where no pool is held, not in
    the warehouse step (`scoring.verdict_journal`). A judge that cannot be asked is left to
    the scores step, which asks again and fails with the cause where the scores are missed."""
    from eval_pipeline.errors import EvalPipelineError
    from eval_pipeline.lanes.partition_runs import latest_runs
    from eval_pipeline.scoring.grading import cases_under
    from eval_pipeline.scoring.judge import load_judge
    from eval_pipeline.scoring.verdict_journal import judge_lane_replies

    folder = Path(summary.records)
    runs = latest_runs(folder, request.settings.identity(config, summary.fixture_id))
    try:
        judge = load_judge()
        return judge_lane_replies(
            folder,
            [path for path in folder.parent.iterdir() if path.is_dir() and path != folder],
            list(runs.values()),
            cases_under(paths.fixtures_root())(summary.fixture_id),
            judge,
            judge_asker(sim, calls, judge, f"judge-{context.run.run_id}", server, slots),
            f"judge-{context.run.run_id}",
        )
    except EvalPipelineError as error:
        context.log.warning(f"the judge was not asked before the warehouse step: {error}")
        return 0


def _metadata(
    summary: "LaneRunSummary",
    labels: dict[str, dict[str, int]],
    simulated: bool,
    unhealed: "Sequence[FailureGroup]",
) -> "dict[str, dg.RawMetadataValue]":
    figures = LaneRunFigures(
        provider="simulated provider (eval_pipeline.sim)" if simulated else "real provider",
        run_id=summary.run_id,
        fixture_id=summary.fixture_id,
        cases=summary.cases,
        cases_run=summary.ran,
        cases_kept=summary.kept,
        cases_healed=summary.healed,
        infra_errors=summary.infra_errors,
        harness_errors=summary.statuses.get("harness_error", 0),
        budget_stopped=summary.budget_stopped,
        tool_calls=summary.tool_calls,
        cost_usd=str(summary.cost_usd),
        unhealed_causes=tuple(unhealed),
    )
    return {
        **figures.metadata(),
        "statuses": dg.MetadataValue.json(summary.statuses),
        "end_reasons": dg.MetadataValue.json(summary.end_reasons),
        "final_answer_calls": dg.MetadataValue.json(labels["final_answer"]),
        "calls_inside_the_loop (well-formed, not graded)": dg.MetadataValue.json(
            labels["inside_the_loop"]
        ),
        "guard_firings": dg.MetadataValue.json(summary.guard_firings),
        "first_call_matches": -1
        if summary.first_call_matches is None
        else summary.first_call_matches,
        "tokens": summary.input_tokens + summary.output_tokens,
        "records": dg.MetadataValue.path(summary.records),
    }


def _warm_up_for_the_warehouse_step() -> None:
    """Pay, before a step that holds the warehouse pool, what its first queries would pay
    while every other run waits on the pool: DuckDB imports pandas the first time a query
    binds a Python parameter (0.2 to 0.4 s), and the loaders and scorers are imported."""
    import duckdb

    import eval_pipeline.lanes.lane_tables
    import eval_pipeline.scoring.grading  # noqa: F401

    with duckdb.connect() as conn:
        conn.execute("SELECT ?", [0]).fetchall()


@dg.asset(
    name=AGENT_WORLD_ASSET,
    group_name=LANES_GROUP,
    deps=[WORLD_ASSET],
    pool=WAREHOUSE_POOL,
    kinds={"duckdb"},
    code_version=asset_code_version("agent-world", __name__),
)
def agent_world_asset(warehouse: WarehouseResource) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """The world tables alone in their own read-only DuckDB file: what the product lane's
    tools read, so no query can reach the answer key even past the SQL guard."""
    from eval_pipeline.lanes.agent_db import (
        build_agent_world_db,
        open_agent_world_db,
        read_agent_world_info,
    )

    path = build_agent_world_db(Path(warehouse.path), paths.agent_world_dir())
    conn = open_agent_world_db(path)
    try:
        info = read_agent_world_info(conn)
    finally:
        conn.close()
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "world_fingerprint": info.fingerprint,
            "size_bytes": path.stat().st_size,
        }
    )


LANE_RUNS_STEP = "lane_runs"
LANE_RUNS_ASSET: Mapping[Lane, str] = {
    "model": MODEL_LANE_RUNS_ASSET,
    "product": PRODUCT_LANE_RUNS_ASSET,
}


@dg.multi_asset(
    name=LANE_RUNS_STEP,
    specs=[
        dg.AssetSpec(
            MODEL_LANE_RUNS_ASSET,
            group_name=LANES_GROUP,
            deps=[FIXTURES_ASSET, MODEL_CONFIGS_SOURCE, PRICE_BOOK_SOURCE],
            code_version=LANE_CODE_VERSION,
            partitions_def=lane_partitions,
            description="Each case once, against the model alone: its first action with the "
            "tools offered.",
        ),
        dg.AssetSpec(
            PRODUCT_LANE_RUNS_ASSET,
            group_name=LANES_GROUP,
            deps=[FIXTURES_ASSET, AGENT_WORLD_ASSET, MODEL_CONFIGS_SOURCE, PRICE_BOOK_SOURCE],
            code_version=LANE_CODE_VERSION,
            partitions_def=lane_partitions,
            description="Each case through the whole product: the agent loop, the tools, the "
            "guards.",
        ),
    ],
    partitions_def=lane_partitions,
    can_subset=True,
)
def lane_runs_asset(
    context: dg.AssetExecutionContext,
    config: ProductLaneConfig,
    sim: SimulatedProvider,
    calls: ModelCallSettings,
) -> Iterator[dg.MaterializeResult]:  # type: ignore[type-arg]
    """A partition's two lanes in one step, side by side: one step per run, so the model
    lane's short cases and the product lane's long ones share the run's calls in flight
    (the provider's share `run_limits` gives the run) instead of each lane's tail leaving
    slots idle. Either lane alone when only it is selected (a heal, a re-run)."""
    selected = {key.to_user_string() for key in context.selected_asset_keys}
    lanes: dict[Lane, GuardSettings] = {}
    if MODEL_LANE_RUNS_ASSET in selected:
        lanes["model"] = GuardSettings()
    if PRODUCT_LANE_RUNS_ASSET in selected:
        lanes["product"] = guards_from_env(GuardSettings(**config.model_dump()))
    yield from _run_lanes(context, lanes, sim, calls)


def lane_records(
    context: dg.AssetExecutionContext, lane: "Lane", conn: "duckdb.DuckDBPyConnection"
) -> "dict[str, dg.RawMetadataValue]":
    """The partition's case runs, trace events and call envelopes, loaded into the
    warehouse (idempotently: the partition's own rows only); their counts."""
    from eval_pipeline.lanes.lane_tables import load_partition_records
    from eval_pipeline.lanes.partition_runs import partition_dir

    model, seed = model_and_seed(context)
    folder = partition_dir(lane, model, seed, paths.lanes_dir())
    counts = load_partition_records([folder], paths.runs_dir(), conn)
    metadata: dict[str, dg.RawMetadataValue] = dict(counts.items())
    metadata["records"] = dg.MetadataValue.path(str(folder))
    return metadata
