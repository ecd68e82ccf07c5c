"""A quick run on a subset of the fixture set's cases: the loop a user iterates in.

A subset is never the suite. It runs in a folder of its own, `<var>/subsets/<run>/` (as an
experiment's arms and the ablation do), is scored in memory as the sweep scores, and its
result file says which cases of which fixture set it holds and how they were chosen. It
never reaches the warehouse, the sweep's partitions, the summary, the gate, MLflow, the
report or the README: nothing a subset computes can be published as the suite's number.
Every quick run calls again (nothing is reused between runs): it is what you run after a
change, to see its effect.
"""

from __future__ import annotations

import fnmatch
import os
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field

from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.errors import ConfigError
from eval_pipeline.experiments.isolated import run_and_score_in_session
from eval_pipeline.lane_records import Lane
from eval_pipeline.lanes.guards import GuardSettings
from eval_pipeline.lanes.partition_runs import LaneSettings
from eval_pipeline.paths import call_slots_dir, var_dir
from eval_pipeline.products import ProductSpec
from eval_pipeline.providers.call_slots import RunSlots
from eval_pipeline.providers.config import SIMULATED, ModelConfig
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.aggregate import summarize_scores, summary_markdown
from eval_pipeline.scoring.compare import comparisons_text, lane_comparisons
from eval_pipeline.scoring.judge import Judge
from eval_pipeline.scoring.score import CaseScore, failed, failing_tier

RESULT_FILE = "subset_result.json"
LANES: tuple[Lane, ...] = ("model", "product")


class CaseSelection(FrozenRecord):
    """Which cases a quick run takes: case ids or shell-style patterns (`royalty_math-*`),
    categories, and at most `limit` of what those leave, taken from each category in turn
    (so five cases are five categories, not the first category's first five)."""

    cases: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    limit: int | None = Field(default=None, ge=1)

    @property
    def chosen_anything(self) -> bool:
        return bool(self.cases or self.categories or self.limit)

    def describe(self) -> str:
        parts = []
        if self.cases:
            parts.append(f"--cases {','.join(self.cases)}")
        if self.categories:
            parts.append(f"--categories {','.join(self.categories)}")
        if self.limit is not None:
            parts.append(f"--limit {self.limit}")
        return " ".join(parts) or "every case"

    def choose(self, cases: Sequence[Case]) -> list[Case]:
        """The selected cases in the fixture set's order; a pattern or category that
        matches nothing is an error naming it (a typo must not run a smaller subset)."""
        known = sorted({case.category for case in cases})
        unknown = [name for name in self.categories if name not in known]
        if unknown:
            raise ConfigError(
                f"--categories: no case is in {', '.join(unknown)}; the fixture set's "
                f"categories are {', '.join(known)}"
            )
        chosen = [c for c in cases if not self.categories or c.category in self.categories]
        if self.cases:
            unmatched = [
                pattern
                for pattern in self.cases
                if not any(fnmatch.fnmatchcase(c.case_id, pattern) for c in chosen)
            ]
            if unmatched:
                raise ConfigError(
                    f"--cases: {', '.join(unmatched)} matches no case"
                    + (" in the chosen categories" if self.categories else "")
                    + f" (case ids look like {chosen[0].case_id if chosen else cases[0].case_id})"
                )
            chosen = [
                c for c in chosen if any(fnmatch.fnmatchcase(c.case_id, p) for p in self.cases)
            ]
        if self.limit is not None and len(chosen) > self.limit:
            chosen = _in_turn(chosen, self.limit)
        return chosen


def _in_turn(cases: Sequence[Case], limit: int) -> list[Case]:
    """`limit` cases taken one per category in turn, returned in the fixture set's order."""
    by_category: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        by_category[case.category].append(case)
    queues = list(by_category.values())
    taken: set[str] = set()
    depth = 0
    while len(taken) < limit:
        for queue in queues:
            if depth < len(queue) and len(taken) < limit:
                taken.add(queue[depth].case_id)
        depth += 1
    return [case for case in cases if case.case_id in taken]


def parse_case_option(text: str) -> tuple[tuple[str, ...], int | None]:
    """`--cases`: comma-separated ids or patterns; a bare number N means N cases (as
    `--limit N`)."""
    parts = tuple(part.strip() for part in text.split(",") if part.strip())
    if len(parts) == 1 and parts[0].isdigit():
        count = int(parts[0])
        if count < 1:
            raise ConfigError(f"--cases {text}: a count of cases must be at least 1")
        return (), count
    if not parts:
        raise ConfigError(f"--cases {text!r} names no case")
    return parts, None


class SubsetResult(FrozenRecord):
    """A quick run's outcome, kept beside its records: never the suite's result."""

    run_id: str
    started_at: datetime
    fixture_id: str
    suite_cases: int
    selection: CaseSelection
    case_ids: tuple[str, ...]
    models: tuple[str, ...]
    seeds: tuple[int, ...]
    simulated: tuple[str, ...]
    """The models answered by the project's simulated provider."""
    scores: tuple[CaseScore, ...]

    def banner(self) -> str:
        return subset_banner(
            self.run_id,
            len(self.case_ids),
            self.suite_cases,
            self.fixture_id,
            self.selection,
            self.seeds,
            self.simulated,
        )

    def text(self) -> str:
        """What the terminal shows: the banner, scores, comparisons and failing cases."""
        summaries = summarize_scores(self.scores)
        lines = [self.banner(), "", summary_markdown(summaries)]
        comparisons = lane_comparisons(self.scores)
        if comparisons:
            lines += ["", "Who leads (on these cases only):", comparisons_text(comparisons)]
        failing = [s for s in self.scores if failed(s)]
        lines += ["", f"Failing cases ({len(failing)}):" if failing else "No case failed."]
        for score in sorted(failing, key=lambda s: (s.lane, s.model, s.case_id, s.seed)):
            lines.append(
                f"  {score.lane} lane, {score.model}: {score.case_id} seed {score.seed}: "
                f"{failing_tier(score)} ({score.reason[:160]}; read {score.answer!r})"
            )
        return "\n".join(lines)


def subset_banner(
    run_id: str,
    cases: int,
    suite_cases: int,
    fixture_id: str,
    selection: CaseSelection,
    seeds: Sequence[int],
    simulated: Sequence[str],
) -> str:
    """The first line of anything a subset prints or writes: what it is a subset of."""
    provider = f"; {', '.join(simulated)} answered by the simulated provider" if simulated else ""
    return (
        f"SUBSET run {run_id}: {cases} of the {suite_cases} cases of fixture set "
        f"{fixture_id} ({selection.describe()}), seeds {', '.join(map(str, seeds))}{provider}. "
        "Not the suite's result: nothing is published (warehouse, summary, gate, MLflow, "
        "report and README are untouched)."
    )


def subset_root(run_id: str) -> Path:
    return var_dir() / "subsets" / run_id


def new_run_id(now: datetime) -> str:
    return f"{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"


def run_subset(
    *,
    models: Sequence[str],
    seeds: Sequence[int],
    selection: CaseSelection,
    fixture_set: FixtureSet,
    agent_db: Path,
    configs: Mapping[str, ModelConfig],
    judge: Judge,
    guards: GuardSettings,
    lanes: Sequence[Lane] = LANES,
    product: ProductSpec | None = None,
) -> SubsetResult:
    """Both lanes for every model and seed on the selected cases, scored; the result is
    written beside the run's records once every configuration has run."""
    chosen = selection.choose(fixture_set.cases)
    started = datetime.now(UTC)
    run_id = new_run_id(started)
    root = subset_root(run_id)
    configurations = [
        (
            f"{lane}-{name}",
            configs[name],
            LaneSettings(lane=lane, guards=guards, product=product or ProductSpec()),
        )
        for name in models
        for lane in lanes
    ]
    with RunSlots(machine=call_slots_dir()) as slots:  # beside this machine's lane runs
        scored = run_and_score_in_session(
            configurations,
            seeds=seeds,
            fixture_set=fixture_set,
            agent_db=agent_db,
            root=root,
            judge=judge,
            judge_config=configs[judge.model],
            run_id=f"subset-{run_id}",
            journal=root / "calls" / "envelopes.jsonl",
            only=chosen,
            slots=slots,
        )
    scores = [score for pairs in scored.values() for score, _ in pairs]
    result = SubsetResult(
        run_id=run_id,
        started_at=started,
        fixture_id=fixture_set.fixture_id,
        suite_cases=len(fixture_set.cases),
        selection=selection,
        case_ids=tuple(case.case_id for case in chosen),
        models=tuple(models),
        seeds=tuple(seeds),
        simulated=tuple(name for name in models if configs[name].provider == SIMULATED),
        scores=tuple(sorted(scores, key=lambda s: (s.lane, s.model, s.case_id, s.seed))),
    )
    staged = root / (RESULT_FILE + ".partial")
    staged.write_text(result.model_dump_json(indent=1), encoding="utf-8")
    os.replace(staged, root / RESULT_FILE)
    return result
