"""Who leads and by how much: paired per-case differences between two sets of case scores.

Two sets (two models, two lanes, two arms) are compared over the cases both scored: each
case's value is its mean score over the set's seeds (in points), the difference is
candidate − reference per case, and its interval is a percentile bootstrap resampling
cases (pairs stay pairs; fixed RNG, so the interval is reproducible). McNemar's exact test
runs on the majority vote per case. Beside every gap stands the noise floor: the largest
paired gap between two seeds of one set, the spread of a model against itself, so a reader
sees whether a gap is larger than what re-running the same model gives.

Cases never heard (‡) or budget-stopped (†) in a set have no value there: they are left
out of the pairs and counted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from itertools import combinations
from math import comb
from statistics import mean
from typing import Literal

import numpy as np

from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.aggregate import majority
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline.world import ordered_categories

Metric = Literal["case_score", "majority_pass"]
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20261130
CONFIDENCE = 0.95
ALL_PAIRS_UP_TO = 6
"""Up to this many models in a lane, every pair is compared; beyond, each model against
the lane's leader (or the configured reference)."""


def case_values(
    scores: Iterable[CaseScore], metric: Metric | str = "case_score"
) -> dict[str, float]:
    """Each case's value in points over the seeds it was scored in."""
    by_case: dict[str, list[float]] = defaultdict(list)
    for score in scores:
        if score.score is not None:
            by_case[score.case_id].append(score.score)
    if metric == "majority_pass":
        return {case: 100.0 * bool(majority(values)) for case, values in by_case.items()}
    return {case: 100.0 * mean(values) for case, values in by_case.items()}


def majority_passes(scores: Iterable[CaseScore]) -> dict[str, bool]:
    """Each scored case's majority vote over its seeds."""
    return {case: value == 100.0 for case, value in case_values(scores, "majority_pass").items()}


def bootstrap(differences: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile interval of the mean difference, resampling cases (pairs stay pairs)."""
    values = np.asarray(differences, dtype=float)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    picks = rng.integers(0, len(values), size=(BOOTSTRAP_RESAMPLES, len(values)))
    means = values[picks].mean(axis=1)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def mcnemar_p(reference_only: int, candidate_only: int) -> float:
    """Exact two-sided McNemar p-value: a binomial test (p = 1/2) on the discordant cases.

    The binomial at 1/2 is symmetric, so the outcomes at most as likely as the one seen are
    the two tails beyond it: p = min(1, 2 P(X <= min(k, n - k))), summed here in integers.
    That is scipy's `binomtest(...).pvalue` (the tests check it against scipy), exact, and
    without scipy.stats' import (0.6-0.7 s) in every process that prints a comparison."""
    discordant = reference_only + candidate_only
    if not discordant:
        return 1.0
    tail = sum(comb(discordant, i) for i in range(min(reference_only, candidate_only) + 1))
    return float(min(Fraction(2 * tail, 2**discordant), Fraction(1)))


class PairedDifference(FrozenRecord):
    """Candidate − reference over the cases both scored, in points."""

    reference: str
    candidate: str
    shared_cases: int
    left_out: dict[str, int]
    """Cases without a value in a set (never heard or budget-stopped there), by name."""
    difference: float | None
    low: float | None
    high: float | None
    reference_only: int
    """Cases passed (majority vote) by the reference only."""
    candidate_only: int
    mcnemar_p: float | None


def paired_difference(
    reference: str,
    reference_scores: Sequence[CaseScore],
    candidate: str,
    candidate_scores: Sequence[CaseScore],
    *,
    metric: Metric | str = "case_score",
    confidence: float = CONFIDENCE,
) -> PairedDifference:
    """The paired difference, its bootstrap interval and McNemar's test; with no shared
    case, no difference (never a zero)."""
    ref_values = case_values(reference_scores, metric)
    cand_values = case_values(candidate_scores, metric)
    shared = sorted(set(ref_values) & set(cand_values))
    every_case = {s.case_id for s in (*reference_scores, *candidate_scores)}
    left_out = {
        reference: len(every_case - set(ref_values)),
        candidate: len(every_case - set(cand_values)),
    }
    if not shared:
        return PairedDifference(
            reference=reference,
            candidate=candidate,
            shared_cases=0,
            left_out=left_out,
            difference=None,
            low=None,
            high=None,
            reference_only=0,
            candidate_only=0,
            mcnemar_p=None,
        )
    differences = [cand_values[c] - ref_values[c] for c in shared]
    low, high = bootstrap(differences, confidence)
    ref_pass = majority_passes(reference_scores)
    cand_pass = majority_passes(candidate_scores)
    reference_only = sum(1 for c in shared if ref_pass.get(c) and not cand_pass.get(c))
    candidate_only = sum(1 for c in shared if cand_pass.get(c) and not ref_pass.get(c))
    return PairedDifference(
        reference=reference,
        candidate=candidate,
        shared_cases=len(shared),
        left_out=left_out,
        difference=mean(differences),
        low=low,
        high=high,
        reference_only=reference_only,
        candidate_only=candidate_only,
        mcnemar_p=mcnemar_p(reference_only, candidate_only),
    )


class CategoryGap(FrozenRecord):
    category: str
    shared: int
    reference: float
    candidate: float
    difference: float
    low: float
    high: float


def category_gaps(
    reference_scores: Sequence[CaseScore],
    candidate_scores: Sequence[CaseScore],
    *,
    metric: Metric | str = "case_score",
    confidence: float = CONFIDENCE,
) -> list[CategoryGap]:
    """The paired difference per category, over the cases both scored (categories in the
    suite's order, then any other by name)."""
    ref_values = case_values(reference_scores, metric)
    cand_values = case_values(candidate_scores, metric)
    shared = sorted(set(ref_values) & set(cand_values))
    category_of = {s.case_id: s.category for s in (*candidate_scores, *reference_scores)}
    present = {category_of[c] for c in shared}
    gaps = []
    for category in ordered_categories(present):
        cases = [c for c in shared if category_of[c] == category]
        diffs = [cand_values[c] - ref_values[c] for c in cases]
        low, high = bootstrap(diffs, confidence)
        gaps.append(
            CategoryGap(
                category=category,
                shared=len(cases),
                reference=mean(ref_values[c] for c in cases),
                candidate=mean(cand_values[c] for c in cases),
                difference=mean(diffs),
                low=low,
                high=high,
            )
        )
    return gaps


def seed_noise_floor(scores: Iterable[CaseScore]) -> float | None:
    """The largest paired gap in points between two seeds of one set, over the cases both
    seeds scored: what re-running the same model moves its score by. None with fewer than
    two seeds (the noise is then unknown, not zero)."""
    by_seed: dict[int, dict[str, float]] = defaultdict(dict)
    for score in scores:
        if score.score is not None:
            by_seed[score.seed][score.case_id] = score.score
    gaps = []
    for first, second in combinations(sorted(by_seed), 2):
        shared = sorted(set(by_seed[first]) & set(by_seed[second]))
        if shared:
            gaps.append(abs(100 * mean(by_seed[first][c] - by_seed[second][c] for c in shared)))
    return max(gaps) if gaps else None


Reading = Literal["ahead", "within noise", "no difference shown", "nothing shared"]


class ModelComparison(FrozenRecord):
    """Two models of one lane, oriented so the candidate is ahead on the shared cases
    (unless a reference was chosen: then always model − reference)."""

    lane: str
    paired: PairedDifference
    candidate_seeds: tuple[int, ...]
    reference_seeds: tuple[int, ...]
    candidate_noise: float | None
    reference_noise: float | None

    @property
    def candidate(self) -> str:
        return self.paired.candidate

    @property
    def reference(self) -> str:
        return self.paired.reference

    @property
    def noise_floor(self) -> float | None:
        """The larger of the two models' seed-vs-seed gaps (None: neither has two seeds)."""
        known = [n for n in (self.candidate_noise, self.reference_noise) if n is not None]
        return max(known) if known else None

    @property
    def reading(self) -> Reading:
        """What the gap says: `ahead` when the interval excludes zero and the gap is
        larger than the noise floor; `within noise` when the interval excludes zero but a
        seed of one model against another seed of itself moves as much."""
        paired = self.paired
        if paired.difference is None or paired.low is None or paired.high is None:
            return "nothing shared"
        if paired.low <= 0 <= paired.high:
            return "no difference shown"
        floor = self.noise_floor
        if floor is not None and abs(paired.difference) <= floor:
            return "within noise"
        return "ahead"

    def sentence(self) -> str:
        """One line a person reads: who leads, by how much, how sure."""
        paired = self.paired
        if paired.difference is None or paired.low is None or paired.high is None:
            return f"{self.candidate} vs {self.reference}: no case scored by both"
        floor = self.noise_floor
        noise = (
            "noise floor unknown (one seed)" if floor is None else f"seed noise floor ±{floor:.1f}"
        )
        gap = (
            f"{paired.difference:+.1f} points [{paired.low:+.1f}, {paired.high:+.1f}] over "
            f"{paired.shared_cases} shared cases, McNemar p = {paired.mcnemar_p:.2g}, {noise}"
        )
        verdict = {
            "ahead": f"{self.candidate} leads {self.reference}"
            if paired.difference > 0
            else f"{self.reference} leads {self.candidate}",
            "within noise": f"{self.candidate} vs {self.reference}: a gap within the seed noise",
            "no difference shown": f"{self.candidate} vs {self.reference}: no difference shown "
            "(the interval includes 0)",
            "nothing shared": "",
        }[self.reading]
        return f"{verdict}: {gap}"


def compare_models(
    lane: str,
    reference: str,
    reference_scores: Sequence[CaseScore],
    candidate: str,
    candidate_scores: Sequence[CaseScore],
) -> ModelComparison:
    """One comparison with both models' noise floors."""
    return ModelComparison(
        lane=lane,
        paired=paired_difference(reference, reference_scores, candidate, candidate_scores),
        candidate_seeds=tuple(sorted({s.seed for s in candidate_scores})),
        reference_seeds=tuple(sorted({s.seed for s in reference_scores})),
        candidate_noise=seed_noise_floor(candidate_scores),
        reference_noise=seed_noise_floor(reference_scores),
    )


def lane_comparisons(
    scores: Iterable[CaseScore], reference: str | None = None
) -> list[ModelComparison]:
    """Per lane (model lane first), the models compared pairwise: every pair up to
    ALL_PAIRS_UP_TO models, else each against the lane's leader; with a reference model,
    each model against it. Pairs are listed leader first; an automatic pair is oriented so
    its candidate is ahead on the shared cases."""
    by_lane: dict[str, dict[str, list[CaseScore]]] = defaultdict(lambda: defaultdict(list))
    for score in scores:
        by_lane[score.lane][score.model].append(score)
    order = {"model": 0, "product": 1}
    comparisons: list[ModelComparison] = []
    for lane in sorted(by_lane, key=lambda name: (order.get(name, 2), name)):
        models = by_lane[lane]
        ranked = sorted(models, key=lambda m: (-_overall(models[m]), m))
        if reference is not None and reference in models:
            pairs = [(reference, m) for m in ranked if m != reference]
            comparisons += [compare_models(lane, r, models[r], c, models[c]) for r, c in pairs]
            continue
        if len(ranked) <= ALL_PAIRS_UP_TO:
            pairs = [(ranked[j], ranked[i]) for i, j in combinations(range(len(ranked)), 2)]
        else:
            pairs = [(m, ranked[0]) for m in ranked[1:]]
        for lower, upper in pairs:
            compared = compare_models(lane, lower, models[lower], upper, models[upper])
            if compared.paired.difference is not None and compared.paired.difference < 0:
                compared = compare_models(lane, upper, models[upper], lower, models[lower])
            comparisons.append(compared)
    return comparisons


def _overall(scores: Sequence[CaseScore]) -> float:
    values = case_values(scores)
    return mean(values.values()) if values else float("-inf")


def comparisons_text(comparisons: Sequence[ModelComparison]) -> str:
    """The comparisons for a terminal, a line each, grouped by lane."""
    lines: list[str] = []
    lane = None
    for comparison in comparisons:
        if comparison.lane != lane:
            lane = comparison.lane
            lines.append(f"{lane} lane:")
        lines.append(f"  {comparison.sentence()}")
    return "\n".join(lines)


def winner(comparison: ModelComparison) -> str | None:
    """The model ahead in a comparison, when the reading is `ahead`."""
    if comparison.reading != "ahead" or comparison.paired.difference is None:
        return None
    return comparison.candidate if comparison.paired.difference > 0 else comparison.reference


def leaders(comparisons: Sequence[ModelComparison]) -> dict[str, str | None]:
    """Per lane, the one model ahead in every comparison it is in (None: no clear leader)."""
    found: dict[str, str | None] = {}
    for lane in dict.fromkeys(c.lane for c in comparisons):
        within = [c for c in comparisons if c.lane == lane]
        models = dict.fromkeys(m for c in within for m in (c.candidate, c.reference))
        winners = [
            m
            for m in models
            if all(winner(c) == m for c in within if m in (c.candidate, c.reference))
        ]
        found[lane] = winners[0] if len(winners) == 1 else None
    return found


ComparisonStatistic = Literal["difference", "low", "high", "shared", "noise_floor", "mcnemar_p"]
COMPARISON_STATISTICS: tuple[ComparisonStatistic, ...] = (
    "difference",
    "low",
    "high",
    "shared",
    "noise_floor",
    "mcnemar_p",
)
COMPARISON_HEADER = (
    "| lane | candidate | reference | reading | Δ | low | high | n | noise floor | McNemar p |",
    "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
)
COMPARISON_LEGEND = (
    "Paired over the cases both models scored (n): Δ = candidate − reference in points, "
    "each case's mean over its seeds, with its 95% bootstrap interval over cases; McNemar's "
    "exact test on the majority vote per case; the noise floor is the larger of the two "
    "models' gaps between two of their own seeds (– with one seed). `ahead`: the interval "
    "excludes 0 and the gap exceeds the noise floor; `within noise`: it excludes 0, but a "
    "model against itself moves as much."
)


def format_comparison_statistic(
    comparison: ModelComparison, statistic: ComparisonStatistic
) -> str | None:
    """How each comparison statistic is printed (the audit compares these strings)."""
    paired = comparison.paired
    if statistic == "shared":
        return str(paired.shared_cases)
    value = {
        "difference": paired.difference,
        "low": paired.low,
        "high": paired.high,
        "noise_floor": comparison.noise_floor,
        "mcnemar_p": paired.mcnemar_p,
    }[statistic]
    if value is None:
        return None
    if statistic == "mcnemar_p":
        return f"{value:.3f}"
    return f"{value:.1f}" if statistic == "noise_floor" else f"{value:+.1f}"


def comparisons_markdown(
    comparisons: Sequence[ModelComparison],
    cell: Callable[[ModelComparison, ComparisonStatistic], str] | None = None,
) -> str:
    """The comparisons as a markdown table; `cell` prints each number (the report links
    them to their references), by default as plain text."""
    if not comparisons:
        return "No comparison: each lane has a single model."

    def plain(comparison: ModelComparison, statistic: ComparisonStatistic) -> str:
        return format_comparison_statistic(comparison, statistic) or "–"

    shown = cell or plain
    lines = [COMPARISON_LEGEND, "", *COMPARISON_HEADER]
    for c in comparisons:
        numbers = " | ".join(shown(c, statistic) for statistic in COMPARISON_STATISTICS)
        lines.append(f"| {c.lane} | {c.candidate} | {c.reference} | {c.reading} | {numbers} |")
    return "\n".join(lines)


class CompareError(EvalPipelineError):
    """A side of `evalp compare` names nothing stored, or is malformed."""


class StoredSide(FrozenRecord):
    """One side of a comparison of stored runs: a model in a lane, over some seeds."""

    model: str
    lane: str
    seeds: tuple[int, ...] = ()
    """Empty: every stored seed."""

    @property
    def label(self) -> str:
        return f"{self.model}:{self.lane}"

    @classmethod
    def parse(cls, text: str, lane: str, seeds: Sequence[int] = ()) -> StoredSide:
        """`MODEL` (in `lane`) or `MODEL:LANE`."""
        model, _, named_lane = text.partition(":")
        if not model or (named_lane == "" and text.endswith(":")):
            raise CompareError(f"{text!r}: expected MODEL or MODEL:LANE")
        return cls(model=model, lane=named_lane or lane, seeds=tuple(seeds))

    def select(self, scores: Iterable[CaseScore]) -> list[CaseScore]:
        return [
            s
            for s in scores
            if s.model == self.model
            and s.lane == self.lane
            and (not self.seeds or s.seed in self.seeds)
        ]


class StoredComparison(FrozenRecord):
    """What `evalp compare` prints: the comparison, each side's fixture sets, and the gap
    per category."""

    comparison: ModelComparison
    candidate: StoredSide
    reference: StoredSide
    candidate_fixtures: tuple[str, ...]
    reference_fixtures: tuple[str, ...]
    categories: tuple[CategoryGap, ...]


def compare_stored(
    scores: Sequence[CaseScore], candidate: StoredSide, reference: StoredSide
) -> StoredComparison:
    """Candidate − reference over the stored case scores both scored; a side with nothing
    stored is named with what is stored instead."""
    chosen = {}
    for side in (candidate, reference):
        rows = side.select(scores)
        if not rows:
            stored = sorted({f"{s.model}:{s.lane}" for s in scores})
            seeds = f" seeds {','.join(map(str, side.seeds))}" if side.seeds else ""
            raise CompareError(
                f"no stored scores for {side.label}{seeds}; stored: "
                + (", ".join(stored) if stored else "none (run `evalp demo` or `evalp sweep`)")
            )
        chosen[side.label] = rows
    cand_rows, ref_rows = chosen[candidate.label], chosen.get(reference.label, [])
    if candidate.label == reference.label:
        ref_rows = cand_rows
    comparison = ModelComparison(
        lane=candidate.lane if candidate.lane == reference.lane else "across lanes",
        paired=paired_difference(reference.label, ref_rows, candidate.label, cand_rows),
        candidate_seeds=tuple(sorted({s.seed for s in cand_rows})),
        reference_seeds=tuple(sorted({s.seed for s in ref_rows})),
        candidate_noise=seed_noise_floor(cand_rows),
        reference_noise=seed_noise_floor(ref_rows),
    )
    return StoredComparison(
        comparison=comparison,
        candidate=candidate,
        reference=reference,
        candidate_fixtures=tuple(sorted({s.fixture_id for s in cand_rows})),
        reference_fixtures=tuple(sorted({s.fixture_id for s in ref_rows})),
        categories=tuple(category_gaps(ref_rows, cand_rows)),
    )
