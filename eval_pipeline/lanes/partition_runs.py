"""Running every case of a fixture set in one lane, for one model and seed (a partition).

A partition keeps its own append-only records under ``<var>/lanes/<lane>/<model>/<seed>/``:
``cases.jsonl`` (one :class:`CaseRun` per case and attempt) and ``traces.jsonl``. Running a
partition again re-runs only the cases whose latest attempt never heard a usable reply —
an infrastructure error (‡) or a harness error (a 4xx: a wrong key, a server refusing our
requests, fixed since) — under the same fixture set, model config and lane settings, and
keeps the rest:
the failed attempt stays on record and the new one supersedes it (healing). Anything else
that changed (another fixture set, a guard turned off) starts the partition afresh.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from contextlib import AbstractContextManager, ExitStack, nullcontext
from decimal import Decimal
from pathlib import Path

from pydantic import Field
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import FixtureSet, load_fixtures
from eval_pipeline.journal import Journal, read_records
from eval_pipeline.lane_records import CaseRun, CaseStatus, Lane, LaneIdentity, TraceEvent
from eval_pipeline.lanes.conversation import (
    MAX_TOKENS,
    CaseContext,
    open_toolbox,
    run_model_lane_case,
    system_prompt,
)
from eval_pipeline.lanes.guards import GuardSettings
from eval_pipeline.paths import var_dir
from eval_pipeline.products import ProductSpec, ProductTools, WorldTools, product_for
from eval_pipeline.providers.config import NOT_IN_IDENTITY, ModelConfig
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.providers.types import ToolSpec
from eval_pipeline.records import FrozenRecord

CASES_JOURNAL = "cases.jsonl"
TRACES_JOURNAL = "traces.jsonl"
IDENTITIES_JOURNAL = "identities.jsonl"


RERUN_STATUSES: frozenset[CaseStatus] = frozenset({"infra_error", "harness_error"})
"""Case outcomes the next run of the partition re-runs (heals): the model was never heard,
for a cause outside it that the user can fix (the path, the key, the server)."""


class LaneSettings(FrozenRecord):
    """How a lane runs its cases (recorded with every case, part of its identity)."""

    lane: Lane
    guards: GuardSettings = Field(default_factory=GuardSettings)
    max_tokens: int = Field(default=MAX_TOKENS, gt=0)
    concurrency: int = Field(default=16, ge=1)
    product: ProductSpec = Field(default_factory=ProductSpec)
    """What the product lane runs (`eval_pipeline.products`; the model lane runs none)."""

    def identity(self, config: ModelConfig, fixture_id: str) -> str:
        """What a kept result must share with a new run: lane, guards, product, limits, the
        model config and the fixture set (concurrency changes nothing and is left out; the
        built-in agent loop adds nothing, so results from before products keep theirs)."""
        material = {
            "lane": self.lane,
            "guards": self.guards.model_dump(mode="json") if self.lane == "product" else None,
            "max_tokens": self.max_tokens,
            "model": config.model_dump(mode="json", exclude=NOT_IN_IDENTITY),
            "fixture_id": fixture_id,
        }
        if self.lane == "product" and not self.product.is_default:
            material["product"] = self.product.model_dump(mode="json")
        digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
        return digest[:20]


class LaneRunSummary(FrozenRecord):
    """What one materialization of a partition did (for metadata and printing)."""

    run_id: str
    lane: Lane
    model: str
    seed: int
    fixture_id: str
    cases: int
    ran: int
    kept: int
    healed: int
    statuses: dict[str, int]
    end_reasons: dict[str, int]
    infra_errors: int
    budget_stopped: int
    tool_calls: int
    guard_firings: dict[str, int]
    first_call_matches: int | None
    cost_usd: Decimal
    input_tokens: int
    output_tokens: int
    records: str

    @property
    def unheard(self) -> int:
        """Cases left without a usable reply (what the next run re-runs)."""
        return sum(n for status, n in self.statuses.items() if status in RERUN_STATUSES)


def case_progress_columns() -> tuple[ProgressColumn, ...]:
    """A progress bar per lane counting cases (a case may take many calls)."""
    return (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cases"),
        TimeElapsedColumn(),
    )


def case_progress() -> Progress:
    return Progress(*case_progress_columns(), console=Console(stderr=True), refresh_per_second=4)


def partition_dir(lane: Lane, model: str, seed: int, root: Path | None = None) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model)
    return (root or var_dir() / "lanes") / lane / safe / str(seed)


def latest_runs(path: Path, identity: str) -> dict[str, CaseRun]:
    """The latest attempt of each case recorded under ``identity`` in a partition folder."""
    latest: dict[str, CaseRun] = {}
    for run in read_records(path / CASES_JOURNAL, CaseRun):
        if run.settings_hash == identity:
            current = latest.get(run.case_id)
            if current is None or run.attempt >= current.attempt:
                latest[run.case_id] = run
    return latest


def record_identity(
    folder: Path,
    identity: str,
    lane: Lane,
    config: ModelConfig,
    fixture_id: str,
    settings: LaneSettings,
) -> None:
    """Journal what `identity` stands for, once per partition folder."""
    path = folder / IDENTITIES_JOURNAL
    if any(known.settings_hash == identity for known in read_records(path, LaneIdentity)):
        return
    with Journal[LaneIdentity](path) as journal:
        journal.append(
            LaneIdentity(
                settings_hash=identity,
                lane=lane,
                model=config.name,
                fixture_id=fixture_id,
                settings=settings.model_dump(mode="json"),
                config=config.model_dump(mode="json"),
            )
        )


async def run_partition(
    *,
    lane: Lane,
    config: ModelConfig,
    seed: int,
    fixture_set: FixtureSet,
    session: CallSession,
    settings: LaneSettings,
    product_tools: ProductTools | None,
    folder: Path,
    cases: Sequence[Case] | None = None,
    progress: Progress | None = None,
) -> LaneRunSummary:
    """Run (or heal) one partition: every case not yet completed under the same identity
    (counted on `progress` when given, else on a bar of its own). The product lane runs the
    settings' product with `product_tools` (what `open_product_tools` opened)."""
    identity = settings.identity(config, fixture_set.fixture_id)
    chosen = list(cases if cases is not None else fixture_set.cases)
    previous = latest_runs(folder, identity)
    to_run = [
        c
        for c in chosen
        if c.case_id not in previous or previous[c.case_id].status in RERUN_STATUSES
    ]
    product = product_for(settings.product) if lane == "product" else None
    toolbox = product_tools.toolbox if product_tools is not None else None
    tools = (
        product_tools.specs
        if product_tools is not None
        else tuple(ToolSpec.model_validate(tool) for tool in fixture_set.tools)
    )
    system = system_prompt(fixture_set)
    client = session.client(config)
    limit = asyncio.Semaphore(settings.concurrency)
    folder.mkdir(parents=True, exist_ok=True)
    record_identity(folder, identity, lane, config, fixture_set.fixture_id, settings)
    with (
        Journal[CaseRun](folder / CASES_JOURNAL) as case_journal,
        Journal[TraceEvent](folder / TRACES_JOURNAL) as trace_journal,
    ):

        async def one(case: Case, progress: Progress, task: TaskID) -> CaseRun:
            before = previous.get(case.case_id)
            context = CaseContext(
                run_id=session.run_id,
                lane=lane,
                model=config.name,
                seed=seed,
                case=case,
                attempt=1 if before is None else before.attempt + 1,
                fixture_id=fixture_set.fixture_id,
                settings_hash=identity,
                tools=tools,
                client=client,
                emit=trace_journal.append,
                system_prompt=system,
                execute=toolbox.run if toolbox is not None else None,
                read_arguments=toolbox.read if toolbox is not None else None,
                guards=settings.guards,
                max_tokens=settings.max_tokens,
            )
            async with limit:
                run = await (
                    product.run_case(context)
                    if product is not None
                    else run_model_lane_case(context)
                )
            case_journal.append(run)
            progress.advance(task)
            return run

        with nullcontext(progress) if progress is not None else case_progress() as shown:
            task = shown.add_task(f"{lane} lane {config.name} seed {seed}", total=len(to_run))
            fresh = await asyncio.gather(*(one(case, shown, task) for case in to_run))
    current = {**previous, **{run.case_id: run for run in fresh}}
    final = [current[c.case_id] for c in chosen if c.case_id in current]
    healed = sum(1 for run in fresh if run.case_id in previous and run.status not in RERUN_STATUSES)
    return summarize_runs(
        session.run_id,
        lane,
        config.name,
        seed,
        fixture_set.fixture_id,
        final,
        len(fresh),
        healed,
        folder,
    )


def summarize_runs(
    run_id: str,
    lane: Lane,
    model: str,
    seed: int,
    fixture_id: str,
    runs: Sequence[CaseRun],
    ran: int,
    healed: int,
    folder: Path,
) -> LaneRunSummary:
    statuses = Counter(run.status for run in runs)
    firings: Counter[str] = Counter()
    for run in runs:
        firings.update(run.guard_firings)
    firsts = [run.first_call for run in runs if run.first_call is not None]
    return LaneRunSummary(
        run_id=run_id,
        lane=lane,
        model=model,
        seed=seed,
        fixture_id=fixture_id,
        cases=len(runs),
        ran=ran,
        kept=len(runs) - ran,
        healed=healed,
        statuses=dict(statuses),
        end_reasons=dict(Counter(run.end_reason for run in runs)),
        infra_errors=statuses.get("infra_error", 0),
        budget_stopped=statuses.get("budget_stopped", 0),
        tool_calls=sum(run.tool_calls for run in runs),
        guard_firings=dict(firings),
        first_call_matches=sum(1 for f in firsts if f.matches_expected)
        if lane == "model"
        else None,
        cost_usd=sum((run.cost_usd for run in runs), Decimal(0)),
        input_tokens=sum(run.input_tokens for run in runs),
        output_tokens=sum(run.output_tokens for run in runs),
        records=str(folder),
    )


def open_product_tools(
    settings: LaneSettings, fixture_set: FixtureSet, agent_db: Path
) -> AbstractContextManager[ProductTools]:
    """The tools the settings' product offers for one product-lane run: the world's (over
    its agent database, opened only when the product uses them) or its own."""
    world = WorldTools(
        specs=tuple(ToolSpec.model_validate(tool) for tool in fixture_set.tools),
        open=lambda: open_toolbox(fixture_set, agent_db),
    )
    return product_for(settings.product).open_tools(world)


class PartitionRequest(FrozenRecord):
    """Everything one lane partition run needs, as the Dagster asset hands it over."""

    lane: Lane
    model: str
    seed: int
    run_id: str
    fixture_path: str
    agent_db: str
    settings: LaneSettings


def execute_partitions(
    requests: Sequence[tuple[PartitionRequest, CallSession]],
    config: ModelConfig,
    lanes_root: Path,
) -> list[LaneRunSummary | Exception]:
    """Run a partition's lanes to the end, side by side in one event loop (each session must
    be new; it is closed here). Sessions that share their slots share the provider's calls
    in flight: one lane's last cases leave the rest to the other. A lane that fails does not
    stop the other; its error is returned in its place, for the caller to raise once what
    the other lane did has landed."""
    fixture_sets = {Path(request.fixture_path) for request, _ in requests}
    loaded = {path: load_fixtures(path) for path in fixture_sets}

    async def one(
        request: PartitionRequest, session: CallSession, progress: Progress
    ) -> LaneRunSummary:
        fixture_set = loaded[Path(request.fixture_path)]
        folder = partition_dir(request.lane, request.model, request.seed, lanes_root)
        async with session:
            with ExitStack() as stack:
                product_tools = (
                    stack.enter_context(
                        open_product_tools(request.settings, fixture_set, Path(request.agent_db))
                    )
                    if request.lane == "product"
                    else None
                )
                return await run_partition(
                    lane=request.lane,
                    config=config,
                    seed=request.seed,
                    fixture_set=fixture_set,
                    session=session,
                    settings=request.settings,
                    product_tools=product_tools,
                    folder=folder,
                    progress=progress,
                )

    async def go() -> list[LaneRunSummary | Exception]:
        with case_progress() as progress:
            outcomes = await asyncio.gather(
                *(one(request, session, progress) for request, session in requests),
                return_exceptions=True,
            )
        for outcome in outcomes:
            if not isinstance(outcome, LaneRunSummary | Exception):
                raise outcome  # KeyboardInterrupt, SystemExit, CancelledError: not a lane's
        return [outcome for outcome in outcomes if isinstance(outcome, LaneRunSummary | Exception)]

    return asyncio.run(go())


def execute_partition(
    request: PartitionRequest,
    config: ModelConfig,
    session: CallSession,
    lanes_root: Path,
) -> LaneRunSummary:
    """Run one lane of a partition to the end (the session must be new; it is closed here)."""
    (outcome,) = execute_partitions([(request, session)], config, lanes_root)
    if isinstance(outcome, Exception):
        raise outcome
    return outcome
