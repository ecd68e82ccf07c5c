"""Numbers that carry their own provenance.

Every number a report publishes in a results table is written as a markdown link
`[93.7](#r-product-sim-small-all-mean)`, and the document ends with a machine-readable
block (`<!-- evalp:references {...} -->`) holding, per reference, what the number is (lane,
model, category, statistic, seeds, fixture set and settings hashes) and where it came
from (Dagster run and materialized asset, MLflow run, world seed and fingerprint, commit,
scorer version). `evalp audit` reads both back and re-derives each number.
"""

from __future__ import annotations

import json
import re
from typing import Literal

from eval_pipeline.experiments.parity import Comparison, ParityReport
from eval_pipeline.records import FrozenRecord
from eval_pipeline.scoring.aggregate import CategoryRow, LaneSummary
from eval_pipeline.scoring.compare import (
    ComparisonStatistic,
    ModelComparison,
    format_comparison_statistic,
)

Statistic = Literal["mean", "low", "high", "n", "infra", "budget"]
ExperimentStatistic = Literal[
    "difference", "low", "high", "shared", "unheard_reference", "unheard_candidate"
]
EXPERIMENT_STATISTICS: tuple[ExperimentStatistic, ...] = (
    "difference",
    "low",
    "high",
    "shared",
    "unheard_reference",
    "unheard_candidate",
)
STATISTICS: tuple[Statistic, ...] = ("mean", "low", "high", "n", "infra", "budget")
BLOCK_START = "<!-- evalp:references "
BLOCK_END = " -->"
NUMBER_LINK = re.compile(
    r"\[(?P<text>[-+]?\d[\d,]*(?:\.\d+)?%?)\]\(#(?P<ref>[rxc]-[A-Za-z0-9._-]+)\)"
)
BLOCK = re.compile(re.escape(BLOCK_START) + r"(?P<json>\{.*?\})" + re.escape(BLOCK_END), re.DOTALL)


class Provenance(FrozenRecord):
    """Where a report's numbers come from (shared by all its references)."""

    dagster_run_id: str
    """The run that materialized the asset; "latest" for a document (the README) that
    points at whatever the latest materialization is."""
    asset_key: str
    mlflow_run_id: str | None
    fixture_id: str
    world_seed: int
    world_fingerprint: str
    commit: str
    dirty: bool
    scorer_version: str


class NumberRef(FrozenRecord):
    ref: str
    text: str
    """The number as printed."""
    lane: str
    model: str
    category: str
    statistic: Statistic
    seeds: tuple[int, ...]
    settings_hashes: tuple[str, ...]


class ExperimentNumberRef(FrozenRecord):
    """A number of a pre-registered experiment's comparison, re-derived by the audit from
    the arms' stored runs under the registration `spec_hash` names."""

    ref: str
    text: str
    experiment_id: str
    spec_hash: str
    reference: str
    candidate: str
    statistic: ExperimentStatistic


class ComparisonNumberRef(FrozenRecord):
    """A number of the headline's comparison of two models of one lane, re-derived by the
    audit from both models' re-scored runs (the same ones behind their headline numbers)."""

    ref: str
    text: str
    lane: str
    candidate: str
    reference: str
    statistic: ComparisonStatistic


class References(FrozenRecord):
    provenance: Provenance
    numbers: tuple[NumberRef, ...]
    experiment_numbers: tuple[ExperimentNumberRef, ...] = ()
    comparison_numbers: tuple[ComparisonNumberRef, ...] = ()

    def block(self) -> str:
        return BLOCK_START + self.model_dump_json() + BLOCK_END


def format_statistic(row: CategoryRow, statistic: Statistic) -> str | None:
    """How each statistic is printed (the audit compares these strings exactly)."""
    value: float | int | None = {
        "mean": row.mean,
        "low": row.low,
        "high": row.high,
        "n": row.scored,
        "infra": row.infra_errors,
        "budget": row.budget_stopped,
    }[statistic]
    if value is None:
        return None
    return str(value) if isinstance(value, int) else f"{value:.1f}"


def format_comparison(
    report: ParityReport, comparison: Comparison, statistic: ExperimentStatistic
) -> str | None:
    """How each experiment statistic is printed (the audit compares these strings)."""
    if statistic in ("difference", "low", "high"):
        value = getattr(comparison, statistic)
        return None if value is None else f"{value:+.1f}"
    if statistic == "shared":
        return str(comparison.shared_cases)
    arm = comparison.reference if statistic == "unheard_reference" else comparison.candidate
    return str(next(a.infra_errors for a in report.arms if a.arm == arm))


def _ref(kind: str, *parts: str) -> str:
    """A reference id: its kind's letter, then its parts, safe in a URL fragment."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join((kind, *parts)))


def experiment_ref_id(experiment: str, candidate: str, statistic: str) -> str:
    return _ref("x", experiment, candidate, statistic)


def comparison_ref_id(lane: str, candidate: str, reference: str, statistic: str) -> str:
    return _ref("c", lane, candidate, "vs", reference, statistic)


def ref_id(lane: str, model: str, category: str, statistic: str) -> str:
    return _ref("r", lane, model, category, statistic)


class RefBook:
    """Collects the references of one document while it is written."""

    def __init__(self, settings_hashes: dict[tuple[str, str], tuple[str, ...]]) -> None:
        self._hashes = settings_hashes
        self.numbers: dict[str, NumberRef] = {}
        self.experiment_numbers: dict[str, ExperimentNumberRef] = {}
        self.comparison_numbers: dict[str, ComparisonNumberRef] = {}

    def comparison_number(self, comparison: ModelComparison, statistic: ComparisonStatistic) -> str:
        """A comparison's statistic as a linked number, or an en dash without a value."""
        text = format_comparison_statistic(comparison, statistic)
        if text is None:
            return "–"
        ref = comparison_ref_id(
            comparison.lane, comparison.candidate, comparison.reference, statistic
        )
        self.comparison_numbers[ref] = ComparisonNumberRef(
            ref=ref,
            text=text,
            lane=comparison.lane,
            candidate=comparison.candidate,
            reference=comparison.reference,
            statistic=statistic,
        )
        return f"[{text}](#{ref})"

    def experiment_number(
        self, report: ParityReport, comparison: Comparison, statistic: ExperimentStatistic
    ) -> str:
        """An experiment's statistic as a linked number, or an en dash without a value."""
        text = format_comparison(report, comparison, statistic)
        if text is None:
            return "–"
        ref = experiment_ref_id(report.experiment_id, comparison.candidate, statistic)
        self.experiment_numbers[ref] = ExperimentNumberRef(
            ref=ref,
            text=text,
            experiment_id=report.experiment_id,
            spec_hash=report.spec_hash,
            reference=comparison.reference,
            candidate=comparison.candidate,
            statistic=statistic,
        )
        return f"[{text}](#{ref})"

    def number(self, summary: LaneSummary, category: str, statistic: Statistic) -> str:
        """The statistic as a linked number, or an en dash when it has no value."""
        text = format_statistic(summary.row(category), statistic)
        if text is None:
            return "–"
        ref = ref_id(summary.lane, summary.model, category, statistic)
        self.numbers[ref] = NumberRef(
            ref=ref,
            text=text,
            lane=summary.lane,
            model=summary.model,
            category=category,
            statistic=statistic,
            seeds=summary.seeds,
            settings_hashes=self._hashes[(summary.lane, summary.model)],
        )
        return f"[{text}](#{ref})"

    def references(self, provenance: Provenance) -> References:
        return References(
            provenance=provenance,
            numbers=tuple(self.numbers.values()),
            experiment_numbers=tuple(self.experiment_numbers.values()),
            comparison_numbers=tuple(self.comparison_numbers.values()),
        )


def chain(
    provenance: Provenance,
    *,
    dagster_run: str,
    mlflow_run: str | None,
    lane: str,
    model: str,
    seeds: tuple[int, ...],
    settings_hashes: tuple[str, ...],
    envelopes: int,
) -> str:
    """What stands behind a (lane, model)'s numbers, outermost first: the asset's
    materialization, the MLflow run, the partitions, the call envelopes, and the fixture
    set, world and commit (what `evalp audit` prints and the report's lineage shows)."""
    return (
        f"{provenance.asset_key} @ Dagster run {dagster_run} → MLflow run {mlflow_run} → "
        f"partitions {lane}/{model}/{','.join(map(str, seeds))} (settings "
        f"{','.join(sorted(settings_hashes))}) → {envelopes} call envelopes → fixture "
        f"{provenance.fixture_id}, world {provenance.world_fingerprint[:12]}, commit "
        f"{provenance.commit[:12]}"
    )


def read_references(text: str) -> References | None:
    """The references block of a document, or None when it has none."""
    found = BLOCK.search(text)
    if found is None:
        return None
    return References.model_validate(json.loads(found.group("json")))


def linked_numbers(text: str) -> list[tuple[str, str]]:
    """Every (number as printed, ref id) linked in the document."""
    return [(m.group("text"), m.group("ref")) for m in NUMBER_LINK.finditer(text)]


AUDITED_TABLE = re.compile(r"^<!-- evalp:audited-table labels=(?P<labels>\d+) -->$")
_BARE_NUMBER = re.compile(r"(?<![\w.-])[-+]?\d[\d,]*(?:\.\d+)?%?(?![\w.])")


def audited_table_marker(labels: int) -> str:
    """The line before a table whose every number past its first `labels` columns must
    carry a reference."""
    return f"<!-- evalp:audited-table labels={labels} -->"


def unlinked_table_numbers(text: str) -> list[str]:
    """Numbers in audited tables that carry no reference, each named with its row."""
    found: list[str] = []
    labels: int | None = None
    in_table = False
    for line in text.splitlines():
        marker = AUDITED_TABLE.match(line.strip())
        if marker:
            labels, in_table = int(marker.group("labels")), False
            continue
        if labels is None:
            continue
        if not line.startswith("|"):
            if in_table:
                labels, in_table = None, False
            continue
        in_table = True
        if set(line.strip()) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        for cell in cells[labels:]:
            for bare in _BARE_NUMBER.findall(NUMBER_LINK.sub("", cell)):
                found.append(f"{bare} in row {line.strip()}")
    return found
