"""From case scores to the numbers a person defends: per lane and model, over seeds.

- per case, a majority vote over seeds (passed when its score is at least 0.5 in more
  than half of the seeds it was scored in; a tie fails);
- per category, the mean score per seed and its mean and spread over seeds;
- pass^k: the share of cases passed in every one of the k seeds;
- a 95% bootstrap interval of the category mean, resampling cases (each with all its seed
  replicates: the case is the cluster), from a fixed RNG so the interval is reproducible;
- yield and accuracy-on-yield from the six labels of each case's final call;
- every row states its denominator and the ‡ (never heard) and † (budget-stopped) cases
  beside the score; nothing silently leaves a denominator.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from decimal import Decimal
from statistics import mean, pstdev

import numpy as np

from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline.world import ordered_categories

BOOTSTRAP_RESAMPLES = 2_000
BOOTSTRAP_SEED = 20260101
ALL = "all"


class CategoryRow(FrozenRecord):
    """One category (or `all`) for one lane and model, in points (0-100)."""

    category: str
    cases: int
    scored: int
    """case x seed pairs scored (the denominator of `mean`)."""
    infra_errors: int
    budget_stopped: int
    mean: float | None
    per_seed: dict[str, float]
    spread: float | None
    """max - min of the per-seed means."""
    stdev: float | None
    low: float | None
    high: float | None
    pass_k: float | None
    majority_passed: int
    majority_decided: int


class LaneSummary(FrozenRecord):
    lane: str
    model: str
    seeds: tuple[int, ...]
    fixture_id: str
    rows: tuple[CategoryRow, ...]
    core_passed: int
    core_decided: int
    core_total: int
    labels: dict[str, int]
    yield_rate: float | None
    accuracy_on_yield: float | None
    security_violations: int
    unhealed_infra_errors: int
    cost_usd: Decimal
    tokens: int

    def row(self, category: str) -> CategoryRow:
        return next(r for r in self.rows if r.category == category)


def majority(scores: Sequence[float]) -> bool | None:
    """Passed in more than half of the scored seeds; None when none was scored."""
    if not scores:
        return None
    return sum(1 for s in scores if s >= 0.5) * 2 > len(scores)


def bootstrap_interval(case_means: Sequence[float]) -> tuple[float, float] | None:
    """95% percentile interval of the mean, resampling cases (fixed RNG)."""
    if not case_means:
        return None
    values = np.asarray(case_means, dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, len(values), size=(BOOTSTRAP_RESAMPLES, len(values)))
    means = values[picks].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def _row(
    category: str, scores: Sequence[CaseScore], seeds: Sequence[int], intervals: bool = True
) -> CategoryRow:
    by_case: dict[str, list[float]] = defaultdict(list)
    by_seed: dict[int, list[float]] = defaultdict(list)
    for s in scores:
        if s.score is not None:
            by_case[s.case_id].append(s.score)
            by_seed[s.seed].append(s.score)
    cases = {s.case_id for s in scores}
    per_seed = {str(seed): 100 * mean(by_seed[seed]) for seed in seeds if by_seed.get(seed)}
    seed_means = list(per_seed.values())
    # in case-id order: the resampled interval must not depend on the order rows were read
    case_means = [mean(by_case[case]) for case in sorted(by_case)]
    interval = bootstrap_interval(case_means) if intervals else None
    votes = [majority(by_case.get(case, [])) for case in cases]
    all_seeds = [
        case
        for case, values in by_case.items()
        if len(values) == len(seeds) and all(v >= 0.5 for v in values)
    ]
    complete = [case for case, values in by_case.items() if len(values) == len(seeds)]
    scored = sum(len(v) for v in by_case.values())
    return CategoryRow(
        category=category,
        cases=len(cases),
        scored=scored,
        infra_errors=sum(
            1 for s in scores if s.status in ("infra_error", "harness_error", "judge_error")
        ),
        budget_stopped=sum(1 for s in scores if s.status == "budget_stopped"),
        mean=100 * mean(case_means) if case_means else None,
        per_seed=per_seed,
        spread=(max(seed_means) - min(seed_means)) if seed_means else None,
        stdev=pstdev(seed_means) if len(seed_means) > 1 else None,
        low=None if interval is None else 100 * interval[0],
        high=None if interval is None else 100 * interval[1],
        pass_k=(len(all_seeds) / len(complete)) if complete else None,
        majority_passed=sum(1 for v in votes if v),
        majority_decided=sum(1 for v in votes if v is not None),
    )


def summarize_lane(
    lane: str, model: str, scores: Iterable[CaseScore], *, intervals: bool = True
) -> LaneSummary:
    """The summary of one lane and model over every seed it was scored in; yield and
    accuracy-on-yield come from each case's six-label (`CaseScore.label`)."""
    rows = list(scores)
    seeds = sorted({s.seed for s in rows})
    fixture_ids = sorted({s.fixture_id for s in rows})
    categories = ordered_categories({s.category for s in rows})
    table = [_row(c, [s for s in rows if s.category == c], seeds, intervals) for c in categories]
    table.append(_row(ALL, rows, seeds, intervals))
    core: dict[str, list[float]] = defaultdict(list)
    core_cases = {s.case_id for s in rows if s.core}
    for s in rows:
        if s.core and s.score is not None:
            core[s.case_id].append(s.score)
    core_votes = [majority(core.get(case, [])) for case in core_cases]
    counts: dict[str, int] = defaultdict(int)
    for s in rows:
        if s.label is not None:
            counts[s.label] += 1
    graded = counts.get("right", 0) + counts.get("wrong", 0)
    labelled = sum(counts.values())
    return LaneSummary(
        lane=lane,
        model=model,
        seeds=tuple(seeds),
        fixture_id=",".join(fixture_ids),
        rows=tuple(table),
        core_passed=sum(1 for v in core_votes if v),
        core_decided=sum(1 for v in core_votes if v is not None),
        core_total=len(core_cases),
        labels=dict(counts),
        yield_rate=graded / labelled if labelled else None,
        accuracy_on_yield=counts.get("right", 0) / graded if graded else None,
        security_violations=sum(1 for s in rows if s.security_violation),
        unhealed_infra_errors=sum(
            1 for s in rows if s.status in ("infra_error", "harness_error", "judge_error")
        ),
        cost_usd=sum((s.cost_usd for s in rows), Decimal(0)),
        tokens=sum(s.tokens for s in rows),
    )


def _points(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def summarize_scores(scores: Iterable[CaseScore]) -> list[LaneSummary]:
    """One summary per lane and model, lanes in order (model, product), models by name."""
    groups: dict[tuple[str, str], list[CaseScore]] = defaultdict(list)
    for score in scores:
        groups[(score.lane, score.model)].append(score)
    order = {"model": 0, "product": 1}
    return [
        summarize_lane(lane, model, rows)
        for (lane, model), rows in sorted(
            groups.items(), key=lambda g: (order.get(g[0][0], 2), g[0])
        )
    ]


def summary_markdown(summaries: Sequence[LaneSummary]) -> str:
    """Per lane and model: category means with intervals, spread over seeds, pass^k, and the
    ‡/† counts beside each score; the denominators are stated."""
    lines = [
        "Scores in points (0-100): mean over cases of their mean over seeds, [95% bootstrap "
        "interval over cases], ±spread of the per-seed means, pass^k; n = case × seed pairs "
        "scored; ‡ never heard (infrastructure, harness or judge error), † budget-stopped: "
        "both left out of n, never scored as zero.",
        "",
        "| lane | model | category | score | interval | spread | pass^k | n | ‡ | † |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for summary in summaries:
        for row in summary.rows:
            interval = "–" if row.low is None else f"[{row.low:.1f}, {row.high:.1f}]"
            pass_k = "–" if row.pass_k is None else f"{100 * row.pass_k:.0f}%"
            lines.append(
                f"| {summary.lane} | {summary.model} | {row.category} | {_points(row.mean)} | "
                f"{interval} | {_points(row.spread)} | {pass_k} | {row.scored} | "
                f"{row.infra_errors} | {row.budget_stopped} |"
            )
    return "\n".join(lines)
