"""Running the main job on a real, persistent Dagster instance (for `evalp demo`).

Before the job runs, under a lock held for the demo's whole lifetime (so that no other
demo can be running), the demo cleans up after a predecessor killed mid-run: runs it
left in progress are marked failed (Dagster's run monitoring never does this for an
in-process run) and their pool slots freed, and any call journal it never loaded is
loaded into the warehouse. Configs are checked before the run, and a step's failure is
reduced to its cause, so a user reads what is wrong instead of a stack dump.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import dagster as dg

from eval_pipeline import paths, world_stages
from eval_pipeline.crashpoints import crash_point
from eval_pipeline.dagster_client import up_to_date
from eval_pipeline.defs.keys import (
    LANES_JOB,
    MAIN_JOB,
    MODELS_PARTITIONS,
    RESULTS_JOB,
)
from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.lanes.sweep_config import SweepConfig, load_sweep_config
from eval_pipeline.locks import PROJECT_LOCK, project_lock
from eval_pipeline.warehouse import created_at
from eval_pipeline.warehouse.envelopes import load_pending_journals

if TYPE_CHECKING:
    from dagster_shared.error import SerializableErrorInfo
    from mlflow import MlflowClient

    from eval_pipeline.experiments.registry import Registration
    from eval_pipeline.experiments.spec import ExperimentSpec

ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
"""Dagster's run tags for a run over a range of partitions (a single-run backfill)."""
DEMO_LOCK = PROJECT_LOCK
DEMO_TAG = "evalp/launched_by"
IN_PROGRESS = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
ORPHAN_MESSAGE = (
    "The process running this run ended without finishing it (killed); marked failed by "
    "the next `evalp demo`, which held the demo lock, so nothing else was running it."
)


@dataclass(frozen=True)
class StepFailure:
    """A failed step and the cause a user can act on (the outermost error of ours)."""

    step: str
    message: str
    ours: bool
    """The cause is an error of ours that asks for a fix before running again (`evalp`
    exits 2); otherwise the run failed (exits 1)."""


@dataclass(frozen=True)
class Recovery:
    """What a predecessor killed mid-run left behind, now cleaned up."""

    failed_runs: tuple[str, ...] = ()
    loaded_journals: tuple[str, ...] = ()
    loaded_envelopes: int = 0


@dataclass(frozen=True)
class JobOutcome:
    """One job run: what it materialized, its checks, and the causes of any failure."""

    run_id: str
    success: bool
    materializations: dict[str, dict[str, object]]
    checks: dict[str, bool]
    failures: tuple[StepFailure, ...] = ()
    partition: str | None = None
    skipped: bool = False
    """Nothing in it was stale or missing: not run; its latest materializations stand."""


@dataclass(frozen=True)
class ExperimentOutcome:
    """One registered experiment run by the main job: its registration, one run per arm
    partition, then its parity report (or the reason it could not run)."""

    experiment: str
    runs: tuple[JobOutcome, ...] = ()
    registration_run_id: str | None = None
    newly_registered: bool = False
    refused: str | None = None

    @property
    def success(self) -> bool:
        return self.refused is None and bool(self.runs) and all(r.success for r in self.runs)


class MissionProgress(Protocol):
    """Told what the main job is doing: how many steps in all, then each step as it starts."""

    def begin(self, total: int) -> None: ...

    def step(self, description: str) -> None: ...

    def ended(self, description: str) -> None:
        """A step that ran beside others ended (counted as one step)."""

    def status(self, text: str, detail: str = "") -> None:
        """What the steps running beside each other are doing now (`detail` changes
        often: progress within the same state)."""


class NoProgress:
    def begin(self, total: int) -> None:
        pass

    def step(self, description: str) -> None:
        pass

    def ended(self, description: str) -> None:
        pass

    def status(self, text: str, detail: str = "") -> None:
        pass


@dataclass(frozen=True)
class MainJobOutcome:
    run_id: str
    success: bool
    dagster_home: str
    materializations: dict[str, dict[str, object]]
    checks: dict[str, bool]
    failures: tuple[StepFailure, ...] = ()
    warnings: tuple[str, ...] = ()
    recovery: Recovery = field(default_factory=Recovery)
    lanes: tuple[JobOutcome, ...] = ()
    """One lanes-job run per partition of the sweep (after the main job succeeded)."""
    experiments: tuple[ExperimentOutcome, ...] = ()
    """The sweep's registered experiments, after every lane partition succeeded."""
    results: JobOutcome | None = None
    """The results job (summary, gate, tracking, report), after every lane partition
    succeeded (whether or not an experiment did)."""
    skipped: tuple[str, ...] = ()
    """The steps that were up to date and not run (in mission order)."""


def _our_errors() -> dict[str, type[EvalPipelineError]]:
    """Every error class of ours, by the name Dagster records."""
    found: dict[str, type[EvalPipelineError]] = {}
    pending: list[type[EvalPipelineError]] = [EvalPipelineError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def step_failure_cause(step: str, error: SerializableErrorInfo) -> StepFailure:
    """The first error of ours in the chain Dagster recorded, from the outside in (the one
    our code raised to say what is wrong; what it was raised from is detail), else the
    innermost error."""
    ours = _our_errors()
    found: SerializableErrorInfo | None = None
    innermost = error
    current: SerializableErrorInfo | None = error
    while current is not None and found is None:
        innermost = current
        if current.cls_name in ours:
            found = current
        current = current.cause
    chosen = found or innermost
    text = chosen.message.strip()
    prefix = f"{chosen.cls_name}: "
    if prefix in text.split("\n", 1)[0]:
        text = text.split(prefix, 1)[1]
    # A disk that filled under the run is a failed run (exit 1), not bad input (2).
    bad_input = found is not None and ours[str(found.cls_name)].exit_code == 2
    return StepFailure(step=step, message=text, ours=bad_input)


def recover_interrupted_runs(instance: dg.DagsterInstance) -> tuple[str, ...]:
    """Mark failed the runs left in progress by a killed demo; free their slots.

    Runs executed in process (no code-location origin) died with the demo. A run a daemon
    launched is failed only once its worker process is gone from this machine (a worker
    that outlived the demo finishes its run); one still queued waits for the next daemon.
    Call only while holding the demo lock.
    """
    from eval_pipeline.dagster_client.queue import fail_if_worker_died

    failed: list[str] = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=IN_PROGRESS)):
        if run.remote_job_origin is not None:
            if fail_if_worker_died(instance, run):
                failed.append(run.run_id)
            continue
        instance.report_run_failed(run, message=ORPHAN_MESSAGE)
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        failed.append(run.run_id)
    return tuple(failed)


def recover_after_crash(instance: dg.DagsterInstance) -> Recovery:
    """Clean up what a demo killed mid-run left: its runs in progress marked failed, its
    unloaded call journals loaded. Call only while holding the demo lock."""
    from eval_pipeline.warehouse import connect

    warehouse = paths.warehouse_path()
    if warehouse.exists():  # one DuckDB cannot open is named now, before any run starts
        connect(warehouse).close()
    failed = recover_interrupted_runs(instance)
    loaded = load_pending_journals(paths.runs_dir(), warehouse)
    return Recovery(
        failed_runs=failed,
        loaded_journals=tuple(str(path) for path in loaded),
        loaded_envelopes=sum(loaded.values()),
    )


def run_sweep(
    models: list[str], seeds: list[int], progress: MissionProgress | None = None
) -> MainJobOutcome:
    """The sweep's lanes for `models` × `seeds`, then the results job, on the fixture set
    the main job froze (real providers read their keys from the environment)."""
    from eval_pipeline.lanes.sweep_config import SweepConfig

    shown = progress or NoProgress()
    home = paths.prepared_dagster_home()
    os.environ["DAGSTER_HOME"] = str(home)
    sweep = SweepConfig(name="cli", models=tuple(models), seeds=tuple(seeds))
    with project_lock("evalp sweep"):
        from eval_pipeline.definitions import defs

        shown.begin(1 + len(models) * len(seeds))
        with dg.DagsterInstance.get() as instance:
            recovery = recover_after_crash(instance)
            results_job = defs.resolve_job_def(RESULTS_JOB)
            chain = ChainRequests(defs, instance, results_job)
            lanes = run_sweep_partitions(
                instance, defs.resolve_job_def(LANES_JOB), sweep, shown, launched_by="evalp sweep"
            )
            outcome = MainJobOutcome(
                run_id=lanes[-1].run_id if lanes else "",
                success=all(lane.success for lane in lanes),
                dagster_home=str(home),
                materializations={},
                checks={},
                recovery=recovery,
                lanes=lanes,
            )
            if not outcome.success:
                return outcome
            requested = chain.requested()
            shown.step(
                "results: " + ", ".join(key.to_user_string() for key in requested)
                if requested
                else "results: not requested by their automation conditions (nothing new, or "
                "a lane run still in progress)"
            )
            results = (
                run_selection(instance, results_job, requested, "evalp sweep")
                if requested
                else _stored_outcome(instance, results_job, None)
            )
            return dataclasses.replace(outcome, results=results, success=results.success)


class ChainRequests:
    """What the automation conditions declared on a job's assets (`defs.automation`) request
    since this was made: the results the daemon's `evaluation_chain` sensor would run after a
    night's lanes. Made before the lanes run (the conditions fire on what changed since an
    evaluation), asked once they ended."""

    def __init__(
        self, defs: dg.Definitions, instance: dg.DagsterInstance, job: dg.JobDefinition
    ) -> None:
        self.defs, self.instance = defs, instance
        self.keys = sorted(job.asset_layer.selected_asset_keys, key=lambda k: k.to_user_string())
        self.selection = dg.AssetSelection.assets(*self.keys)
        self._cursor = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=self.selection
        ).cursor

    def requested(self) -> list[dg.AssetKey]:
        """The job's assets requested now (each unpartitioned: one run materializes them)."""
        evaluated = dg.evaluate_automation_conditions(
            defs=self.defs, instance=self.instance, asset_selection=self.selection,
            cursor=self._cursor,
        )  # fmt: skip
        self._cursor = evaluated.cursor
        return [key for key in self.keys if evaluated.get_num_requested(key)]


def run_selection(
    instance: dg.DagsterInstance,
    job: dg.JobDefinition,
    selection: Sequence[dg.AssetKey] | None,
    launched_by: str,
    partition: str | None = None,
) -> JobOutcome:
    """`selection` of `job`'s assets (all of them if None) in one run in process, quietly,
    tagged with the command that started it."""
    result = job.execute_in_process(
        instance=instance,
        raise_on_error=False,
        tags={DEMO_TAG: launched_by},
        run_config=QUIET,
        partition_key=partition,
        asset_selection=None if selection is None else list(selection),
    )
    return _job_outcome(result, partition=partition)


def run_job(
    instance: dg.DagsterInstance,
    job: dg.JobDefinition,
    launched_by: str,
    defs: dg.Definitions | None = None,
    partition: str | None = None,
    progress: MissionProgress | None = None,
    step: str = "",
) -> JobOutcome:
    """One job in process, quietly, tagged with the command that started it. Given the
    definitions, only what is stale or missing runs (with what is downstream of it in the
    job); a job with nothing stale does not run and reports its stored results."""
    selected = job.asset_layer.selected_asset_keys
    selection = None
    if defs is not None:
        stale = up_to_date.stale_or_missing(defs, instance, selected, partition)
        stale += [
            key
            for key in [
                *up_to_date.missing_from_warehouse(
                    defs, instance, selected, partition, created_at(paths.warehouse_path())
                ),
                *up_to_date.missing_from_tracking(
                    instance, selected, partition, tracking_has_run()
                ),
            ]
            if key not in stale
        ]
        if not stale:
            if progress is not None:
                progress.step(f"{step} (up to date, not run)")
            return _stored_outcome(instance, job, partition)
        selection = up_to_date.with_downstream(defs, stale, selected)
        if set(selection) == set(selected):
            selection = None
    if progress is not None:
        shown = ", ".join(key.to_user_string() for key in selection) if selection else ""
        progress.step(f"{step} (only {shown})" if shown else step)
    return run_selection(instance, job, selection, launched_by, partition)


def tracking_has_run() -> Callable[[str], bool]:
    """Whether the MLflow store the assets log to holds a run (the client is opened on
    first use: most jobs record no MLflow run, and opening one costs about 2 s)."""
    from eval_pipeline.tracking.mlflow_store import default_store, has_run, open_client

    clients: list[MlflowClient] = []

    def holds(run_id: str) -> bool:
        if not clients:
            clients.append(open_client(default_store()))
        return has_run(clients[0], run_id)

    return holds


def _stored_outcome(
    instance: dg.DagsterInstance, job: dg.JobDefinition, partition: str | None
) -> JobOutcome:
    layer = job.asset_layer
    check_keys = [
        key
        for key in layer.asset_graph.asset_check_keys
        if key.asset_key in layer.selected_asset_keys
    ]
    blocking = {key.name for key in check_keys if layer.asset_graph.get_check_spec(key).blocking}
    return _stored_assets(instance, layer.selected_asset_keys, partition, check_keys, blocking)


def _stored_assets(
    instance: dg.DagsterInstance,
    keys: Iterable[dg.AssetKey],
    partition: str | None,
    check_keys: Iterable[dg.AssetCheckKey] = (),
    blocking: Iterable[str] = (),
) -> JobOutcome:
    stored = up_to_date.stored_result(instance, keys, check_keys, partition)
    blocks = set(blocking)
    failed = sorted(name for name, passed in stored.checks.items() if not passed and name in blocks)
    # Nothing changed since these checks failed: the verdict stands, and so does the failure.
    failures = tuple(
        StepFailure(
            step=", ".join(sorted(stored.materializations)),
            message=f"up to date, not run again; its blocking check(s) {', '.join(failed)} "
            f"failed in run {', '.join(stored.run_ids)}",
            ours=False,
        )
        for _ in [failed]
        if failed
    )
    return JobOutcome(
        run_id=stored.run_ids[0] if stored.run_ids else "",
        success=not failures,
        materializations=stored.materializations,
        checks=stored.checks,
        failures=failures,
        partition=partition,
        skipped=True,
    )


def mission_steps(sweep: SweepConfig, specs: list[ExperimentSpec]) -> int:
    """The main job, one lanes run per partition, each experiment's arms and report, and
    the results job."""
    return 2 + len(sweep.models) * len(sweep.seeds) + 2 * len(specs)


def run_main_job(
    progress: MissionProgress | None = None, *, world_only: bool = False
) -> MainJobOutcome:
    """The whole mission in process on the instance in DAGSTER_HOME (created if needed): the
    main job, the sweep's lanes, its registered experiments, then the results job; with
    `world_only`, the main job alone (a quick run on a subset runs beside it, not here).

    Raises LockedError if another demo is running, and the config's own error when a
    config the mission reads is invalid (before any run starts).
    """
    from eval_pipeline.experiments.spec import load_spec, resolve

    shown = progress or NoProgress()
    home = paths.prepared_dagster_home()
    os.environ["DAGSTER_HOME"] = str(home)
    with project_lock("evalp demo"):
        crash_point("demo.locked")
        warnings = world_stages.check_main_job_inputs(paths.default_world_config())
        sweep = load_sweep_config()
        specs = [load_spec(experiment) for experiment in sweep.experiments]
        for spec in specs:
            resolve(spec)
        from eval_pipeline.definitions import defs

        job = defs.resolve_job_def(MAIN_JOB)
        shown.begin(1 if world_only else mission_steps(sweep, specs))
        with dg.DagsterInstance.get() as instance:
            recovery = recover_after_crash(instance)
            crash_point("demo.recovered")
            up_to_date.observe_configs(defs, instance, QUIET)
            main = run_job(
                instance,
                job,
                "evalp demo",
                defs,
                None,
                shown,
                "main job: world, answer key, fixtures, calibration",
            )
            outcome = _outcome(main, home, warnings, recovery)
            if not outcome.success or world_only:
                return outcome
            lanes = run_sweep_partitions(
                instance, defs.resolve_job_def(LANES_JOB), sweep, shown, defs
            )
            if not all(lane.success for lane in lanes):
                return dataclasses.replace(outcome, lanes=lanes, success=False)
            experiments = tuple(
                run_registered_experiment(instance, spec, shown, defs) for spec in specs
            )
            results = run_job(
                instance,
                defs.resolve_job_def(RESULTS_JOB),
                "evalp demo",
                defs,
                None,
                shown,
                "results: summary, gate, tracking, report",
            )
            skipped = [
                *(["main job"] if main.skipped else []),
                *(f"lanes {lane.partition}" for lane in lanes if lane.skipped),
                *(
                    f"experiment {e.experiment}"
                    for e in experiments
                    if e.runs and all(run.skipped for run in e.runs)
                ),
                *(["results"] if results.skipped else []),
            ]
            return dataclasses.replace(
                outcome,
                lanes=lanes,
                experiments=experiments,
                results=results,
                success=results.success and all(e.success for e in experiments),
                skipped=tuple(skipped),
            )


# Dagster's console log would print each failure's whole stack; the demo prints the cause,
# and the full log stays in the instance (UI).
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def run_sweep_partitions(
    instance: dg.DagsterInstance,
    lanes_job: dg.JobDefinition,
    sweep: SweepConfig | None = None,
    progress: MissionProgress | None = None,
    defs: dg.Definitions | None = None,
    launched_by: str = "evalp demo",
) -> tuple[JobOutcome, ...]:
    """Every (model, seed) partition of the sweep through the lanes job: the ones to run go
    to Dagster's run queue at once (one run each, tagged with its provider) and run in
    parallel within the queue's limits; given the definitions, a partition with nothing
    stale or missing is not submitted and its stored results stand."""
    from eval_pipeline.dagster_client.queue import running_daemon, submit_partitions, wait_for
    from eval_pipeline.project_configs import scan_model_configs

    sweep = sweep or load_sweep_config()
    shown = progress or NoProgress()
    known = set(instance.get_dynamic_partitions(MODELS_PARTITIONS))
    missing = [model for model in sweep.models if model not in known]
    if missing:
        instance.add_dynamic_partitions(MODELS_PARTITIONS, missing)
    providers = {name: config.provider for name, config in scan_model_configs().configs.items()}
    order = [
        str(dg.MultiPartitionKey({"model": model, "seed": str(seed)}))
        for model in sweep.models
        for seed in sweep.seeds
    ]
    outcomes: dict[str, JobOutcome] = {}
    to_run: dict[str, list[str]] = {}
    for key in order:
        # A partition left with cases never heard (‡) is run again even when Dagster finds
        # it fresh: that run re-runs just those cases (healing).
        if defs is not None and not _left_unheard(instance, lanes_job, key):
            selected = lanes_job.asset_layer.selected_asset_keys
            if not _must_run(defs, instance, selected, key):
                shown.step(f"{_lane_step(key)} (up to date, not run)")
                outcomes[key] = _stored_outcome(instance, lanes_job, key)
                continue
        model = key.split("|", 1)[0]
        to_run.setdefault(providers.get(model, "unknown"), []).append(key)
    if to_run:

        def finished(record: dg.RunRecord) -> None:
            outcome = launched_outcome(instance, record)
            outcomes[str(outcome.partition)] = outcome
            seconds = (record.end_time or time.time()) - (record.start_time or time.time())
            state = "done" if outcome.success else "FAILED"
            shown.ended(
                f"{_lane_step(str(outcome.partition))}: {state} in {seconds:.1f} s "
                f"(Dagster run {record.dagster_run.run_id[:8]})"
            )

        recorded = CaseRunsRecorded([key for keys in to_run.values() for key in keys])
        with running_daemon() as daemon:
            submitted = submit_partitions(lanes_job.name, to_run, {DEMO_TAG: launched_by})
            wait_for(
                instance,
                submitted,
                finished,
                daemon,
                lambda text: shown.status(text, f"{recorded.since_start()} case runs recorded"),
            )
    return tuple(outcomes[key] for key in order)


class CaseRunsRecorded:
    """How many case runs the lanes of `partitions` have journaled since this was made: the
    progress a user sees while the runs work in other processes (their journals, appended
    one line per case run, are on this machine). Each look reads only what was appended
    since the last (a journal line holds a whole case run: rereading every journal twice a
    second cost the waiting command more CPU than a lane run)."""

    def __init__(self, partitions: Iterable[str]) -> None:
        from eval_pipeline.lanes.partition_runs import CASES_JOURNAL, partition_dir

        self.journals = [
            partition_dir(lane, model, int(seed), paths.lanes_dir()) / CASES_JOURNAL
            for partition in partitions
            for model, _, seed in [partition.partition("|")]
            for lane in ("model", "product")
        ]
        self._read = dict.fromkeys(self.journals, 0)
        """Bytes of each journal counted so far."""
        self._lines = dict.fromkeys(self.journals, 0)
        self.before = {journal: self._count(journal) for journal in self.journals}

    def _count(self, journal: Path) -> int:
        """The journal's lines, reading only the bytes appended since the last count (a
        journal that shrank, rewritten by a healing run, is counted from its start)."""
        try:
            with journal.open("rb") as lines:
                size = lines.seek(0, os.SEEK_END)
                if size < self._read[journal]:
                    self._read[journal] = self._lines[journal] = 0
                lines.seek(self._read[journal])
                appended = lines.read(size - self._read[journal])
        except FileNotFoundError:
            return 0
        complete = appended.rfind(b"\n") + 1  # a line still being written counts later
        self._read[journal] += complete
        self._lines[journal] += appended.count(b"\n", 0, complete)
        return self._lines[journal]

    def since_start(self) -> int:
        return sum(self._count(j) - self.before[j] for j in self.journals)


def _lane_step(partition: str) -> str:
    model, _, seed = partition.partition("|")
    return f"lanes: {model} seed {seed}"


def _must_run(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    selected: Iterable[dg.AssetKey],
    partition: str,
) -> bool:
    """Whether any of `selected` at `partition` is stale, missing, or missing from the
    warehouse or the tracking store."""
    keys = list(selected)
    return bool(
        up_to_date.stale_or_missing(defs, instance, keys, partition)
        or up_to_date.missing_from_warehouse(
            defs, instance, keys, partition, created_at(paths.warehouse_path())
        )
        or up_to_date.missing_from_tracking(instance, keys, partition, tracking_has_run())
    )


def launched_outcome(instance: dg.DagsterInstance, record: dg.RunRecord) -> JobOutcome:
    """A finished run the daemon ran: what it materialized, its checks, its failures."""
    run = record.dagster_run
    materializations: dict[str, dict[str, object]] = {}
    checks: dict[str, bool] = {}
    failures: list[StepFailure] = []
    for entry in instance.all_logs(
        run.run_id,
        of_type={
            dg.DagsterEventType.ASSET_MATERIALIZATION,
            dg.DagsterEventType.ASSET_CHECK_EVALUATION,
            dg.DagsterEventType.STEP_FAILURE,
            dg.DagsterEventType.RUN_FAILURE,
        },
    ):
        event = entry.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            materialization = event.step_materialization_data.materialization
            materializations[materialization.asset_key.to_user_string()] = {
                key: value.value for key, value in materialization.metadata.items()
            }
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = event.asset_check_evaluation_data
            checks[evaluation.check_name] = evaluation.passed
        elif event.event_type == dg.DagsterEventType.STEP_FAILURE:
            if event.step_failure_data.error is not None:
                failures.append(
                    step_failure_cause(event.step_key or "?", event.step_failure_data.error)
                )
        elif not failures:  # a run that failed with no step failing: its worker died
            failures.append(
                StepFailure(
                    step="run",
                    message="its worker process ended before the run did (killed, or out of "
                    f"memory); a new run re-runs only what did not land. Dagster: "
                    f"{event.message or entry.user_message}",
                    ours=False,
                )
            )
    return JobOutcome(
        run_id=run.run_id,
        success=run.status == dg.DagsterRunStatus.SUCCESS,
        materializations=materializations,
        checks=checks,
        failures=tuple(failures),
        partition=run.tags.get("dagster/partition"),
    )


def _left_unheard(
    instance: dg.DagsterInstance, lanes_job: dg.JobDefinition, partition: str
) -> bool:
    """Whether the partition's latest lane runs left cases without a usable reply."""
    stored = up_to_date.stored_result(
        instance, lanes_job.asset_layer.selected_asset_keys, partition=partition
    )
    from eval_pipeline.defs.lane_assets import LANE_RUNS_ASSET, LaneRunFigures

    found = (
        LaneRunFigures.read(stored.materializations, asset) for asset in LANE_RUNS_ASSET.values()
    )
    return any(figures.unheard for figures in found if figures is not None)


def _outcome(
    job: JobOutcome, home: Path, warnings: list[str], recovery: Recovery
) -> MainJobOutcome:
    return MainJobOutcome(
        run_id=job.run_id,
        success=job.success,
        dagster_home=str(home),
        materializations=job.materializations,
        checks=job.checks,
        failures=job.failures,
        warnings=tuple(warnings),
        recovery=recovery,
    )


def _job_outcome(result: dg.ExecuteInProcessResult, partition: str | None = None) -> JobOutcome:
    materializations: dict[str, dict[str, object]] = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        materializations[materialization.asset_key.to_user_string()] = {
            key: value.value for key, value in materialization.metadata.items()
        }
    checks = {
        evaluation.check_name: evaluation.passed
        for evaluation in result.get_asset_check_evaluations()
    }
    failures = tuple(
        step_failure_cause(event.step_key or "?", event.step_failure_data.error)
        for event in result.get_step_failure_events()
        if event.step_failure_data.error is not None
    )
    return JobOutcome(
        run_id=result.run_id,
        success=result.success,
        materializations=materializations,
        checks=checks,
        failures=failures,
        partition=partition,
    )


def run_registered_experiment(
    instance: dg.DagsterInstance,
    spec: ExperimentSpec,
    progress: MissionProgress,
    defs: dg.Definitions | None = None,
) -> ExperimentOutcome:
    """Register the spec if it is new (before any of its results exist), refuse it if it
    changed since its registration or names another fixture set, else run it."""
    from eval_pipeline.defs.experiment_assets import arm_scores_key
    from eval_pipeline.experiments.registry import (
        ExperimentError,
        check_results_registration,
        register,
        require_registration,
    )
    from eval_pipeline.experiments.spec import resolve
    from eval_pipeline.tracking.mlflow_store import default_store, open_client
    from eval_pipeline.tracking.provenance import code_version

    material, _, _ = resolve(spec)
    fixture_id = world_stages.current_fixture_set(paths.warehouse_path()).fixture_id
    store = default_store()
    client = open_client(store)
    try:
        if spec.fixture_id != fixture_id:
            raise ExperimentError(
                f"experiment {spec.id} names fixture set {spec.fixture_id}, but the main job "
                f"built {fixture_id}: not registered or run (its results would not answer "
                "the question it states)"
            )
        recorded = up_to_date.recorded_registration(instance, arm_scores_key(spec.id))
        check_results_registration(client, store, spec, recorded)
        registration, new = register(client, store, spec, material, code_version())
        require_registration(client, spec, material, fixture_id)
    except ExperimentError as error:
        for _ in range(2):
            progress.step(f"{spec.id}: refused")
        return ExperimentOutcome(experiment=spec.id, refused=str(error))
    runs = run_experiment(spec.id, instance=instance, progress=progress, defs=defs)
    return ExperimentOutcome(
        experiment=spec.id,
        runs=runs,
        registration_run_id=registration.run_id,
        newly_registered=new,
    )


def register_experiment(spec: ExperimentSpec) -> tuple[Registration, bool]:
    """`evalp experiment register`: the spec registered (True) or its registration found
    unchanged (False); refused when results of it exist against a registration the MLflow
    store no longer holds (a registration now would postdate them)."""
    from eval_pipeline.defs.experiment_assets import arm_scores_key
    from eval_pipeline.experiments.registry import check_results_registration, register
    from eval_pipeline.experiments.spec import resolve
    from eval_pipeline.tracking.mlflow_store import default_store, open_client
    from eval_pipeline.tracking.provenance import code_version

    material, _, _ = resolve(spec)
    os.environ["DAGSTER_HOME"] = str(paths.prepared_dagster_home())
    with dg.DagsterInstance.get() as instance:
        recorded = up_to_date.recorded_registration(instance, arm_scores_key(spec.id))
    store = default_store()
    client = open_client(store)
    check_results_registration(client, store, spec, recorded)
    return register(client, store, spec, material, code_version())


def run_experiment(
    experiment: str,
    *,
    instance: dg.DagsterInstance | None = None,
    progress: MissionProgress | None = None,
    defs: dg.Definitions | None = None,
) -> tuple[JobOutcome, ...]:
    """Every arm of a registered experiment (one Dagster run over the range of its arm
    partitions), then its parity report, on `instance` (default: the one in DAGSTER_HOME).
    The caller checked the registration; each asset checks it again. Given the definitions,
    an experiment whose arms and report are all up to date is not run again."""
    if instance is None:
        home = paths.prepared_dagster_home()
        os.environ["DAGSTER_HOME"] = str(home)
        with dg.DagsterInstance.get() as opened:
            return run_experiment(experiment, instance=opened, progress=progress)
    from eval_pipeline.defs.experiment_assets import (
        arm_scores_key,
        experiment_assets,
        parity_report_key,
    )
    from eval_pipeline.defs.resources import default_resources
    from eval_pipeline.experiments.spec import load_spec

    shown = progress or NoProgress()
    spec = load_spec(experiment)
    arm_asset, report_asset = experiment_assets(spec)
    resources = default_resources()
    tags = {DEMO_TAG: f"evalp experiment run {experiment}"}
    arms = list(spec.arms())
    if (
        defs is not None
        and not any(
            up_to_date.stale_or_missing(defs, instance, [arm_scores_key(experiment)], arm)
            for arm in arms
        )
        and not up_to_date.stale_or_missing(defs, instance, [parity_report_key(experiment)])
        and not up_to_date.missing_from_tracking(
            instance, [parity_report_key(experiment)], None, tracking_has_run()
        )
    ):
        shown.step(f"{experiment}: arms up to date")
        shown.step(f"{experiment}: parity report up to date")
        return tuple(
            _stored_assets(instance, [key], partition)
            for key, partition in (
                (arm_scores_key(experiment), arms[-1]),
                (parity_report_key(experiment), None),
            )
        )
    shown.step(f"{experiment}: arms {', '.join(arms)}")
    result = dg.materialize(
        [arm_asset],
        instance=instance,
        resources=resources,
        raise_on_error=False,
        tags={
            **tags,
            ASSET_PARTITION_RANGE_START_TAG: arms[0],
            ASSET_PARTITION_RANGE_END_TAG: arms[-1],
        },
        run_config=QUIET,
    )
    outcomes: list[JobOutcome] = [_job_outcome(result, partition=f"{arms[0]}...{arms[-1]}")]
    if not result.success:
        return tuple(outcomes)
    shown.step(f"{experiment}: parity report")
    result = dg.materialize(
        [report_asset],
        instance=instance,
        resources=resources,
        raise_on_error=False,
        tags=tags,
        run_config=QUIET,
    )
    outcomes.append(_job_outcome(result))
    return tuple(outcomes)
