"""`evalp audit`: every referenced number of a published document re-derived from what is
stored, with the chain behind it printed.

For a report or the README (anything with an `evalp:references` block), the audit:
- checks every linked number against its reference (a number edited by hand differs from
  the text its reference recorded, and from what re-deriving gives);
- names every number in an audited table that carries no reference;
- follows the provenance: the Dagster run (and that it materialized the asset), the MLflow
  run, the fixture set (re-hashed, and its world seed and fingerprint compared), the scorer
  version (a number recorded by other scorers is re-derived only by their commit);
- re-scores every referenced partition from its stored case runs, traces and judge
  verdicts (no model call; a reply the judge never ruled on is ‡), checks that every call
  of those case runs has its envelope, and re-aggregates: the printed text must come out
  exactly;
- for each experiment number, checks the spec still hashes to the registration the number
  names and that MLflow holds it, re-scores every arm from its stored runs, traces and kept
  verdicts, checks the arms' call envelopes, and recomputes the comparison.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from eval_pipeline.cases.frozen import FixtureSet, load_fixtures
from eval_pipeline.errors import EvalPipelineError
from eval_pipeline.records import FrozenRecord
from eval_pipeline.report.refs import (
    ComparisonNumberRef,
    ExperimentNumberRef,
    NumberRef,
    References,
    chain,
    format_comparison,
    format_statistic,
    linked_numbers,
    read_references,
    ref_id,
    unlinked_table_numbers,
)
from eval_pipeline.scoring.aggregate import ALL, summarize_lane
from eval_pipeline.scoring.compare import compare_models, format_comparison_statistic
from eval_pipeline.scoring.grading import Partition, rescore_stored
from eval_pipeline.scoring.judge import Judge
from eval_pipeline.scoring.score import SCORER_VERSION, CaseScore
from eval_pipeline.warehouse.envelopes import TABLE as ENVELOPES

if TYPE_CHECKING:
    from dagster import DagsterInstance
    from mlflow import MlflowClient


class AuditError(EvalPipelineError):
    """The document cannot be audited at all (no references block)."""


class AuditedNumber(FrozenRecord):
    ref: str
    printed: str
    derived: str | None
    chain: str


class AuditResult(FrozenRecord):
    numbers: tuple[AuditedNumber, ...]
    problems: tuple[str, ...]

    @property
    def clean(self) -> bool:
        return not self.problems


def _check_provenance(
    references: References,
    fixtures_root: Path,
    instance: DagsterInstance | None,
    mlflow: MlflowClient | None,
    problems: list[str],
) -> tuple[FixtureSet | None, str, str]:
    """The fixture set, and the Dagster run and MLflow run the numbers resolve to."""
    provenance = references.provenance
    fixture_set: FixtureSet | None = None
    try:
        fixture_set = load_fixtures(fixtures_root / provenance.fixture_id)
    except EvalPipelineError as error:
        problems.append(f"fixture set {provenance.fixture_id} does not verify: {error}")
    if fixture_set is not None:
        world = fixture_set.manifest.world
        if (world.seed, world.fingerprint) != (
            provenance.world_seed,
            provenance.world_fingerprint,
        ):
            problems.append(
                f"fixture set {provenance.fixture_id} was built from world seed {world.seed} "
                f"fingerprint {world.fingerprint[:16]}, the document says seed "
                f"{provenance.world_seed} fingerprint {provenance.world_fingerprint[:16]}"
            )
    if provenance.scorer_version != SCORER_VERSION:
        problems.append(
            f"the numbers were scored by {provenance.scorer_version}, this code has "
            f"{SCORER_VERSION}: audit with commit {provenance.commit}"
        )
    run_id = provenance.dagster_run_id
    mlflow_run = provenance.mlflow_run_id or "none"
    if instance is not None:
        import dagster as dg

        key = dg.AssetKey.from_user_string(provenance.asset_key)
        if run_id == "latest":
            event = instance.get_latest_materialization_event(key)
            if event is None:
                problems.append(f"no materialization of {provenance.asset_key} in the instance")
            else:
                run_id = event.run_id
                recorded = (
                    event.asset_materialization.metadata.get("mlflow_run_id")
                    if (event.asset_materialization is not None)
                    else None
                )
                if recorded is not None:
                    mlflow_run = str(recorded.value)
        else:
            run = instance.get_run_by_id(run_id)
            if run is None:
                problems.append(f"Dagster run {run_id} (of {provenance.asset_key}) not found")
            else:
                # the run's own materializations: the asset's latest N could miss an old run
                materialized = instance.get_records_for_run(
                    run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
                ).records
                if not any(record.asset_key == key for record in materialized):
                    problems.append(
                        f"Dagster run {run_id} did not materialize {provenance.asset_key}"
                    )
    if mlflow is not None and mlflow_run != "none":
        from mlflow.exceptions import MlflowException

        try:
            mlflow.get_run(mlflow_run)
        except MlflowException:
            problems.append(f"MLflow run {mlflow_run} not found in the tracking store")
    return fixture_set, run_id, mlflow_run


def _envelopes_missing(con: duckdb.DuckDBPyConnection, call_ids: list[str]) -> int:
    if not call_ids:
        return 0
    [(present,)] = con.execute(
        f"SELECT count(DISTINCT call_id) FROM {ENVELOPES} WHERE call_id IN (SELECT unnest(?))",
        [call_ids],
    ).fetchall()
    return len(set(call_ids)) - int(present)


def audit_document(
    text: str,
    *,
    con: duckdb.DuckDBPyConnection,
    fixtures_root: Path,
    judge: Judge,
    instance: DagsterInstance | None,
    mlflow: MlflowClient | None,
    progress: Callable[[str], None] | None = None,
) -> AuditResult:
    references = read_references(text)
    if references is None:
        raise AuditError("no evalp:references block: this document carries no referenced numbers")
    problems: list[str] = []
    by_ref: dict[str, NumberRef | ExperimentNumberRef | ComparisonNumberRef] = {
        number.ref: number for number in references.numbers
    }
    by_ref.update({number.ref: number for number in references.experiment_numbers})
    by_ref.update({number.ref: number for number in references.comparison_numbers})
    linked = linked_numbers(text)
    for printed, ref in linked:
        if ref not in by_ref:
            problems.append(f"{printed} links to {ref}, which the references block does not hold")
    problems += [f"number without a reference: {line}" for line in unlinked_table_numbers(text)]
    fixture_set, run_id, mlflow_run = _check_provenance(
        references, fixtures_root, instance, mlflow, problems
    )
    derived: dict[str, str | None] = {}
    chains: dict[str, str] = {}
    if fixture_set is not None:
        cases = {case.case_id: case for case in fixture_set.cases}
        rescored: dict[tuple[str, str], list[CaseScore]] = {}
        groups: dict[tuple[str, str], list[NumberRef]] = defaultdict(list)
        for number in references.numbers:
            groups[(number.lane, number.model)].append(number)
        for (lane, model), numbers in groups.items():
            seeds = numbers[0].seeds
            hashes = set(numbers[0].settings_hashes)
            rows: list[CaseScore] = []
            calls: list[str] = []
            for seed in seeds:
                if progress:
                    progress(f"re-scoring {lane}/{model}/{seed}")
                inputs, scores = rescore_stored(
                    con, Partition(lane=lane, model=model, seed=seed), cases, judge
                )
                stale = {s.settings_hash for s in scores} - hashes
                if stale:
                    problems.append(
                        f"{lane}/{model}/{seed}: the stored runs are under settings "
                        f"{', '.join(sorted(stale))}, the document's under "
                        f"{', '.join(sorted(hashes))} (re-run since it was published)"
                    )
                rows += [s for s in scores if s.settings_hash in hashes]
                calls += [call for run in inputs.runs for call in run.call_ids]
            missing = _envelopes_missing(con, calls)
            if missing:
                problems.append(
                    f"{lane}/{model}: {missing} of {len(set(calls))} call envelopes behind "
                    "the numbers are missing from runs.call_envelopes"
                )
            rescored[(lane, model)] = rows
            summary = summarize_lane(lane, model, rows) if rows else None
            for number in numbers:
                value = None
                if summary is not None and any(r.category == number.category for r in summary.rows):
                    value = format_statistic(summary.row(number.category), number.statistic)
                derived[number.ref] = value
                chains[number.ref] = chain(
                    references.provenance,
                    dagster_run=run_id,
                    mlflow_run=mlflow_run,
                    lane=lane,
                    model=model,
                    seeds=seeds,
                    settings_hashes=tuple(hashes),
                    envelopes=len(set(calls)),
                )
        _derive_comparisons(references.comparison_numbers, rescored, chains, derived)
    if fixture_set is not None and references.experiment_numbers:
        _derive_experiments(
            references, fixture_set, mlflow, run_id, derived, chains, problems, progress
        )
    audited: list[AuditedNumber] = []
    for printed, ref in linked:
        recorded = by_ref.get(ref)
        if recorded is None:
            continue
        value = derived.get(ref)
        if printed != recorded.text:
            problems.append(
                f"{ref}: the document prints {printed}, its reference recorded {recorded.text}"
            )
        if value != printed:
            problems.append(f"{ref}: printed {printed}, re-derived {value or 'nothing'}")
        audited.append(
            AuditedNumber(ref=ref, printed=printed, derived=value, chain=chains.get(ref, "–"))
        )
    unprinted = sorted(set(by_ref) - {ref for _, ref in linked})
    problems += [f"reference {ref} is not printed in the document" for ref in unprinted]
    return AuditResult(numbers=tuple(audited), problems=tuple(problems))


def _derive_comparisons(
    numbers: Sequence[ComparisonNumberRef],
    rescored: Mapping[tuple[str, str], Sequence[CaseScore]],
    chains: dict[str, str],
    derived: dict[str, str | None],
) -> None:
    """Each headline comparison recomputed from the two models' re-scored runs (those
    behind their own headline numbers); a model without them re-derives nothing."""
    for number in numbers:
        candidate = rescored.get((number.lane, number.candidate))
        reference = rescored.get((number.lane, number.reference))
        if not candidate or not reference:
            derived[number.ref] = None
            continue
        comparison = compare_models(
            number.lane, number.reference, reference, number.candidate, candidate
        )
        derived[number.ref] = format_comparison_statistic(comparison, number.statistic)
        behind = [
            chains.get(ref_id(number.lane, model, ALL, "mean"), "–")
            for model in (number.candidate, number.reference)
        ]
        chains[number.ref] = (
            f"comparison {number.lane}: {number.candidate} − {number.reference}, paired "
            f"over the re-scored runs of both: {' | '.join(behind)}"
        )


def _derive_experiments(
    references: References,
    fixture_set: FixtureSet,
    mlflow: MlflowClient | None,
    dagster_run: str,
    derived: dict[str, str | None],
    chains: dict[str, str],
    problems: list[str],
    progress: Callable[[str], None] | None,
) -> None:
    """Each experiment's numbers recomputed from its arms' stored records (no call)."""
    from eval_pipeline.experiments.arms import rescore_arm
    from eval_pipeline.experiments.parity import parity_report
    from eval_pipeline.experiments.registry import find_registration
    from eval_pipeline.experiments.spec import load_spec, resolve
    from eval_pipeline.scoring.gate import load_gate_config

    groups: dict[str, list[ExperimentNumberRef]] = defaultdict(list)
    for number in references.experiment_numbers:
        groups[number.experiment_id].append(number)
    provenance = references.provenance
    for experiment, numbers in groups.items():
        spec_hash = numbers[0].spec_hash
        try:
            spec = load_spec(experiment)
            material, configs, judge = resolve(spec)
        except EvalPipelineError as error:
            problems.append(f"experiment {experiment}: its spec cannot be read: {error}")
            continue
        if material.digest() != spec_hash:
            problems.append(
                f"experiment {experiment}: the spec now hashes to {material.digest()[:12]}, "
                f"the document's numbers were registered under {spec_hash[:12]}"
            )
            continue
        registration = find_registration(mlflow, experiment) if mlflow is not None else None
        if registration is None or registration.spec_hash != spec_hash:
            problems.append(
                f"experiment {experiment}: no registration {spec_hash[:12]} in the MLflow store"
            )
        if spec.fixture_id != fixture_set.fixture_id:
            problems.append(
                f"experiment {experiment}: registered on fixture set {spec.fixture_id}, the "
                f"document's numbers are on {fixture_set.fixture_id}"
            )
            continue
        scores: dict[str, list[CaseScore]] = {}
        calls: list[str] = []
        for arm in spec.arms():
            if progress:
                progress(f"re-scoring experiment {experiment} arm {arm}")
            stored = rescore_arm(spec, arm, fixture_set=fixture_set, configs=configs, judge=judge)
            if not stored.scores:
                problems.append(f"experiment {experiment}: arm {arm} has no stored runs")
            if stored.calls_missing:
                problems.append(
                    f"experiment {experiment}: arm {arm}: {stored.calls_missing} of "
                    f"{stored.calls} call envelopes behind its cases are missing"
                )
            scores[arm] = list(stored.scores)
            calls.append(f"{arm} {stored.calls}")
        report = parity_report(
            spec,
            spec_hash,
            scores,
            load_gate_config(),
            {name: configs[name].provider for name in spec.models()},
        )
        comparisons = {c.candidate: c for c in report.comparisons}
        held = "none" if registration is None else registration.run_id
        for number in numbers:
            comparison = comparisons.get(number.candidate)
            derived[number.ref] = (
                None
                if comparison is None
                else format_comparison(report, comparison, number.statistic)
            )
            chains[number.ref] = (
                f"{provenance.asset_key} @ Dagster run {dagster_run} → experiment {experiment} "
                f"(registration run {held}, spec {spec_hash[:12]}) → arms, call envelopes: "
                f"{', '.join(calls)} → fixture {provenance.fixture_id}, world "
                f"{provenance.world_fingerprint[:12]}, commit {provenance.commit[:12]}"
            )


def audit_against_project(text: str) -> AuditResult:
    """Audit `text` against this project's stores (the warehouse read-only, the Dagster
    instance in DAGSTER_HOME, the MLflow store): what `evalp audit` runs."""
    import dagster as dg

    from eval_pipeline import paths
    from eval_pipeline.scoring.judge import load_judge
    from eval_pipeline.tracking.mlflow_store import default_store, open_client
    from eval_pipeline.warehouse import connect

    conn = connect(paths.warehouse_path(), read_only=True)
    try:
        with dg.DagsterInstance.get() as instance:
            return audit_document(
                text,
                con=conn,
                fixtures_root=paths.fixtures_root(),
                judge=load_judge(),
                instance=instance,
                mlflow=open_client(default_store()),
            )
    finally:
        conn.close()
