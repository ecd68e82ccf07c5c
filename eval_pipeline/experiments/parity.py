"""The parity report: paired per-case differences, a case-clustered bootstrap interval, an
exact McNemar test, and a verdict against the registered margin.

Each arm's case value is its mean over the arm's scored seeds (the case score in points,
or 100 × the majority vote when the primary metric is `majority_pass`); cases never heard
(‡, †) in an arm have no value there and are left out of the pairs, and counted. The
difference is candidate − reference over the cases both arms scored.

Verdicts (Δ = candidate − reference, m = margin, [lo, hi] the interval):
- equivalence: confirmed when −m < lo and hi < m; refuted when lo ≥ m or hi ≤ −m;
- non-inferiority: confirmed when lo > −m; refuted when hi ≤ −m;
- superiority: confirmed when lo > m; refuted when hi ≤ m;
- otherwise inconclusive (the interval straddles the margin). An arm with unhealed
  infrastructure errors cannot confirm anything; a category breaking the category rule
  refutes a confirmation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import mean
from typing import Literal

from eval_pipeline import paths
from eval_pipeline.experiments.spec import ArmSpec, ExperimentSpec
from eval_pipeline.providers.config import SIMULATED
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.aggregate import summarize_lane
from eval_pipeline.scoring.compare import case_values, category_gaps, paired_difference
from eval_pipeline.scoring.gate import (
    GATE_LANE,
    GateConfig,
    evaluate_gate,
    gate_markdown,
    load_baseline,
)
from eval_pipeline.scoring.score import CaseScore

Verdict = Literal["confirmed", "refuted", "inconclusive"]
UNHEARD = ("infra_error", "harness_error", "judge_error")


def experiment_reports_dir() -> Path:
    """Where each experiment's parity report is published (`<id>.md`, `<id>.json`), and
    where the sweep report reads them from."""
    return paths.var_dir() / "reports" / "experiments"


class ArmSummary(FrozenRecord):
    arm: str
    label: str
    model: str
    provider: str
    """The model config's provider ("simulated": the project's simulated provider)."""
    lane: str
    seeds: tuple[int, ...]
    cases: int
    scored: int
    """Case × seed pairs scored."""
    infra_errors: int
    """‡: never heard (infrastructure, harness or judge error), unhealed."""
    budget_stopped: int
    """†"""
    mean_points: float | None
    gate: str
    """The arm's own ship gate, as markdown ('not applicable' outside the product lane)."""
    gate_passed: bool | None


class CategoryDifference(FrozenRecord):
    category: str
    shared: int
    reference: float | None
    candidate: float | None
    difference: float | None
    low: float | None
    high: float | None
    small_n: bool
    breaks_rule: bool


class Comparison(FrozenRecord):
    reference: str
    candidate: str
    shared_cases: int
    left_out: dict[str, int]
    """Cases without a value in an arm, by arm name (never heard there)."""
    difference: float | None
    low: float | None
    high: float | None
    mcnemar_reference_only: int
    """Cases passed (majority vote) by the reference only."""
    mcnemar_candidate_only: int
    mcnemar_p: float | None
    verdict: Verdict
    reasons: tuple[str, ...]
    categories: tuple[CategoryDifference, ...]


class ParityReport(FrozenRecord):
    experiment_id: str
    spec_hash: str
    kind: str
    margin: float
    confidence: float
    primary_metric: str
    fixture_id: str
    arms: tuple[ArmSummary, ...]
    comparisons: tuple[Comparison, ...]
    design: str = "parity"
    """`parity` (one comparison) or `ablation` (one per guard turned off); reports written
    before this field existed are parity reports."""


def verdict_meaning(kind: str, design: str, margin: float, verdict: Verdict) -> str:
    """What a verdict says about the hypothesis, in words (a refuted equivalence in an
    ablation is a finding, the guard matters, not a failure)."""
    band = {
        "equivalence": f"±{margin:g}",
        "non_inferiority": f"−{margin:g}",
        "superiority": f"+{margin:g}",
    }[kind]
    if verdict == "inconclusive":
        return f"undecided: the interval straddles {band}; more cases or seeds would decide"
    if design == "ablation":
        return {
            "confirmed": f"guard makes no difference: the interval lies within {band}",
            "refuted": f"guard matters: the difference lies outside {band}",
        }[verdict]
    return {
        ("equivalence", "confirmed"): f"equivalent: the interval lies within {band}",
        ("equivalence", "refuted"): f"different: the interval lies outside {band}",
        ("non_inferiority", "confirmed"): f"not worse: the interval lies above {band}",
        ("non_inferiority", "refuted"): f"worse: the interval lies below {band}",
        ("superiority", "confirmed"): f"better: the interval lies above {band}",
        ("superiority", "refuted"): f"not better: the interval lies below {band}",
    }[(kind, verdict)]


def verdict_for(kind: str, margin: float, low: float, high: float) -> Verdict:
    if kind == "equivalence":
        if -margin < low and high < margin:
            return "confirmed"
        if low >= margin or high <= -margin:
            return "refuted"
        return "inconclusive"
    threshold = -margin if kind == "non_inferiority" else margin
    if low > threshold:
        return "confirmed"
    if high <= threshold:
        return "refuted"
    return "inconclusive"


def _breaks(kind: str, rule_limit: float, difference: float) -> bool:
    if kind == "equivalence":
        return abs(difference) > rule_limit
    return difference < -rule_limit


def arm_summary(
    name: str, arm: ArmSpec, scores: Sequence[CaseScore], gate_config: GateConfig, provider: str
) -> ArmSummary:
    values = case_values(scores, "case_score")
    gate_text = "not applicable: the ship gate reads the product lane only"
    gate_passed: bool | None = None
    if arm.lane == GATE_LANE and scores:
        summary = summarize_lane(arm.lane, scores[0].model, scores)
        result = evaluate_gate(summary, load_baseline(summary.model), gate_config)
        gate_text = gate_markdown([result])
        gate_passed = result.passed
    return ArmSummary(
        arm=name,
        label=arm.label,
        model=arm.model,
        provider=provider,
        lane=arm.lane,
        seeds=arm.seeds,
        cases=len({s.case_id for s in scores}),
        scored=sum(1 for s in scores if s.score is not None),
        infra_errors=sum(1 for s in scores if s.status in UNHEARD),
        budget_stopped=sum(1 for s in scores if s.status == "budget_stopped"),
        mean_points=mean(values.values()) if values else None,
        gate=gate_text,
        gate_passed=gate_passed,
    )


def compare(
    spec: ExperimentSpec,
    reference: str,
    candidate: str,
    scores: Mapping[str, Sequence[CaseScore]],
    summaries: Mapping[str, ArmSummary],
) -> Comparison:
    paired = paired_difference(
        reference,
        scores[reference],
        candidate,
        scores[candidate],
        metric=spec.primary_metric,
        confidence=spec.confidence,
    )
    if paired.difference is None or paired.low is None or paired.high is None:
        return Comparison(
            reference=reference,
            candidate=candidate,
            shared_cases=0,
            left_out=paired.left_out,
            difference=None,
            low=None,
            high=None,
            mcnemar_reference_only=0,
            mcnemar_candidate_only=0,
            mcnemar_p=None,
            verdict="inconclusive",
            reasons=("no case was scored in both arms",),
            categories=(),
        )
    low, high = paired.low, paired.high
    verdict = verdict_for(spec.kind, spec.margin, low, high)
    reasons = [
        f"Δ {paired.difference:+.2f} points, {100 * spec.confidence:.0f}% interval "
        f"[{low:+.2f}, {high:+.2f}] against margin {spec.margin:g} ({spec.kind})"
    ]
    categories = _categories(spec, scores[reference], scores[candidate])
    broken = [c.category for c in categories if c.breaks_rule]
    if verdict == "confirmed" and broken:
        verdict = "refuted"
        reasons.append(
            f"category rule broken in {', '.join(broken)} (more than "
            f"{spec.category_rule.max_difference:g} points, n ≥ {spec.category_rule.min_cases})"
        )
    unhealed = [a for a in (reference, candidate) if summaries[a].infra_errors]
    if verdict == "confirmed" and unhealed:
        verdict = "inconclusive"
        reasons.append(
            f"unhealed infrastructure errors (‡) in {', '.join(unhealed)}: an arm with cases "
            "never heard cannot confirm anything; re-run the experiment to heal them"
        )
    return Comparison(
        reference=reference,
        candidate=candidate,
        shared_cases=paired.shared_cases,
        left_out=paired.left_out,
        difference=paired.difference,
        low=low,
        high=high,
        mcnemar_reference_only=paired.reference_only,
        mcnemar_candidate_only=paired.candidate_only,
        mcnemar_p=paired.mcnemar_p,
        verdict=verdict,
        reasons=tuple(reasons),
        categories=tuple(categories),
    )


def _categories(
    spec: ExperimentSpec,
    reference_scores: Sequence[CaseScore],
    candidate_scores: Sequence[CaseScore],
) -> list[CategoryDifference]:
    rule = spec.category_rule
    rows: list[CategoryDifference] = []
    for gap in category_gaps(
        reference_scores,
        candidate_scores,
        metric=spec.primary_metric,
        confidence=spec.confidence,
    ):
        small = gap.shared < rule.min_cases
        rows.append(
            CategoryDifference(
                category=gap.category,
                shared=gap.shared,
                reference=gap.reference,
                candidate=gap.candidate,
                difference=gap.difference,
                low=gap.low,
                high=gap.high,
                small_n=small,
                breaks_rule=not small and _breaks(spec.kind, rule.max_difference, gap.difference),
            )
        )
    return rows


def parity_report(
    spec: ExperimentSpec,
    spec_hash: str,
    scores: Mapping[str, Sequence[CaseScore]],
    gate_config: GateConfig,
    providers: Mapping[str, str],
) -> ParityReport:
    """The report over every comparison the spec registered; `providers` names each arm
    model's provider, so results from the simulated provider say so."""
    arms = spec.arms()
    missing = sorted(set(arms) - set(scores))
    if missing:
        raise ValueError(f"experiment {spec.id}: no scores for arm(s) {', '.join(missing)}")
    summaries = {
        name: arm_summary(name, arm, scores[name], gate_config, providers[arm.model])
        for name, arm in arms.items()
    }
    return ParityReport(
        experiment_id=spec.id,
        spec_hash=spec_hash,
        kind=spec.kind,
        margin=spec.margin,
        confidence=spec.confidence,
        primary_metric=spec.primary_metric,
        fixture_id=spec.fixture_id,
        design=spec.design,
        arms=tuple(summaries.values()),
        comparisons=tuple(
            compare(spec, reference, candidate, scores, summaries)
            for reference, candidate in spec.comparisons()
        ),
    )


def _provider(provider: str) -> str:
    return "simulated provider" if provider == SIMULATED else f"provider {provider}"


def _num(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "–"
    return f"{value:+.1f}" if sign else f"{value:.1f}"


def report_markdown(spec: ExperimentSpec, report: ParityReport) -> str:
    """The report a reader checks the verdict against: hypothesis, arms, each comparison's
    difference with its interval against the margin, McNemar, categories, gates."""
    lines = [
        f"# Experiment {spec.id}: {spec.title}",
        "",
        f"**Hypothesis (registered):** {spec.hypothesis}",
        "",
        f"Spec hash `{report.spec_hash[:16]}`, fixture set `{spec.fixture_id}`, primary "
        f"metric `{spec.primary_metric}` in points, {spec.kind.replace('_', '-')} with margin "
        f"{spec.margin:g}, {100 * spec.confidence:.0f}% bootstrap intervals clustered by case.",
        "",
        "Falsifiers: " + "; ".join(spec.falsifiers),
        "",
        f"Sample size: {spec.sample_size.cases} cases × {spec.sample_size.seeds} seed(s): "
        f"{spec.sample_size.why}",
        "",
        "## Arms",
        "",
        "| arm | configuration | lane | seeds | cases | n scored | mean | ‡ | † | gate |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for arm in report.arms:
        gate = "–" if arm.gate_passed is None else ("passes" if arm.gate_passed else "FAILS")
        lines.append(
            f"| {arm.arm} | {arm.label} ({arm.model}, {_provider(arm.provider)}) | {arm.lane} | "
            f"{','.join(map(str, arm.seeds))} | {arm.cases} | {arm.scored} | "
            f"{_num(arm.mean_points)} | {arm.infra_errors} | {arm.budget_stopped} | {gate} |"
        )
    against = {
        "equivalence": f"±{spec.margin:g}",
        "non_inferiority": f"−{spec.margin:g}",
        "superiority": f"+{spec.margin:g}",
    }[spec.kind]
    for comparison in report.comparisons:
        left_out = ", ".join(f"{arm} {n}" for arm, n in comparison.left_out.items())
        lines += [
            "",
            f"## {comparison.candidate} vs {comparison.reference}: **{comparison.verdict}** "
            f"({verdict_meaning(spec.kind, report.design, spec.margin, comparison.verdict)})",
            "",
            f"Paired over {comparison.shared_cases} shared cases (left out, never heard: "
            f"{left_out}). Δ = {_num(comparison.difference, True)} points, interval "
            f"[{_num(comparison.low, True)}, {_num(comparison.high, True)}] against {against}.",
            "",
            f"McNemar (exact binomial, majority vote per case): reference only "
            f"{comparison.mcnemar_reference_only}, candidate only "
            f"{comparison.mcnemar_candidate_only}, p = "
            + ("–" if comparison.mcnemar_p is None else f"{comparison.mcnemar_p:.3g}")
            + ".",
            "",
            *[f"- {reason}" for reason in comparison.reasons],
            "",
            "| category | n shared | reference | candidate | Δ | interval | note |",
            "|---|---:|---:|---:|---:|---|---|",
        ]
        for row in comparison.categories:
            note = "small n: does not decide" if row.small_n else ""
            if row.breaks_rule:
                note = "**breaks the category rule**"
            lines.append(
                f"| {row.category} | {row.shared} | {_num(row.reference)} | "
                f"{_num(row.candidate)} | {_num(row.difference, True)} | "
                f"[{_num(row.low, True)}, {_num(row.high, True)}] | {note} |"
            )
    lines += ["", "## Each arm's own ship gate", ""]
    for arm in report.arms:
        lines += [f"### {arm.arm}", "", arm.gate, ""]
    return "\n".join(lines)
