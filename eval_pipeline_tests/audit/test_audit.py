"""`evalp audit`'s core on small real stores built in each test: a warehouse on disk with
case runs and call envelopes, the committed fixture set (and a tampered copy), a Dagster
instance with real materializations, an MLflow store with a real registration, and an
experiment's arms journaled where `rescore_arm` reads them. Each test re-derives the
document's numbers and checks that a tampered number, a stale run, a missing envelope or
a broken provenance link is caught and named word for word."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from scipy.stats import binomtest

from eval_pipeline import paths
from eval_pipeline.audit.audit import (
    AuditError,
    AuditResult,
    _check_provenance,
    _derive_experiments,
    _envelopes_missing,
    audit_against_project,
    audit_document,
)
from eval_pipeline.cases.case import Case
from eval_pipeline.cases.frozen import FixtureSet
from eval_pipeline.experiments.arms import arm_config, experiment_root
from eval_pipeline.experiments.isolated import folder_name
from eval_pipeline.experiments.parity import ParityReport, parity_report
from eval_pipeline.experiments.registry import register
from eval_pipeline.experiments.spec import ExperimentSpec, load_spec, resolve
from eval_pipeline.journal import Journal
from eval_pipeline.lane_records import CaseRun
from eval_pipeline.lanes.partition_runs import CASES_JOURNAL, LaneSettings, partition_dir
from eval_pipeline.providers.envelope import JOURNAL_NAME, EnvelopeJournal
from eval_pipeline.report.refs import (
    EXPERIMENT_STATISTICS,
    ExperimentNumberRef,
    Provenance,
    RefBook,
    References,
    Statistic,
    audited_table_marker,
    format_comparison,
)
from eval_pipeline.scoring.aggregate import summarize_lane
from eval_pipeline.scoring.gate import load_gate_config
from eval_pipeline.scoring.grading import Partition, rescore_stored
from eval_pipeline.scoring.judge import Judge, load_judge
from eval_pipeline.scoring.score import SCORER_VERSION, CaseScore, score_case
from eval_pipeline.tracking.mlflow_store import TrackingStore, default_store, open_client
from eval_pipeline.tracking.provenance import code_version
from eval_pipeline.warehouse import connect
from eval_pipeline.warehouse.envelopes import insert_envelopes
from eval_pipeline_tests.cases.committed import committed_fixture_set
from eval_pipeline_tests.scoring.cases import make_run
from eval_pipeline_tests.scoring.test_grading import warehouse
from eval_pipeline_tests.scoring.test_relabel import envelope

EXPERIMENT = "serving-path-sim-strong"
"""A shipped spec on the committed fixture set: its arms are sim-strong and
sim-strong-anthropic, product lane, seeds 0 and 1."""


def judge() -> Judge:
    return Judge(model="sim-judge", rubric_text="rubric", rubric_hash="r1", max_tokens=64)


def fixtures() -> FixtureSet:
    return committed_fixture_set()


def two_cases() -> tuple[Case, Case]:
    """Two cases the judge has no part in, of two categories."""
    by_id = {case.case_id: case for case in fixtures().cases}
    return by_id["catalog_lookup-001"], by_id["catalog_lookup-002"]


def provenance(**changes: object) -> Provenance:
    world = fixtures().manifest.world
    base: dict[str, object] = {
        "dagster_run_id": "dagster-run-1",
        "asset_key": "sweep_report",
        "mlflow_run_id": "mlflow-run-1",
        "fixture_id": fixtures().fixture_id,
        "world_seed": world.seed,
        "world_fingerprint": world.fingerprint,
        "commit": "c0ffee" + "0" * 34,
        "dirty": False,
        "scorer_version": SCORER_VERSION,
    }
    base.update(changes)
    return Provenance.model_validate(base)


def case_run(case: Case, text: str, seed: int = 0, **fields: object) -> CaseRun:
    base = make_run(case, text, seed=seed)
    update: dict[str, object] = {
        "fixture_id": fixtures().fixture_id,
        "call_ids": (f"call-{case.case_id}-{seed}",),
        **fields,
    }
    return base.model_copy(update=update)


def right_and_wrong(seed: int = 0, **fields: object) -> list[CaseRun]:
    """The first case answered right, the second wrong."""
    first, second = two_cases()
    return [
        case_run(first, f"ANSWER: {first.expected}", seed, **fields),
        case_run(second, "ANSWER: USXXX0000000", seed, **fields),
    ]


def scores_of(runs: Sequence[CaseRun]) -> list[CaseScore]:
    cases = {case.case_id: case for case in fixtures().cases}
    return [score_case(cases[run.case_id], run, []) for run in runs]


def with_envelopes(
    con: duckdb.DuckDBPyConnection, runs: Sequence[CaseRun], leave_out: int = 0
) -> None:
    """Every run's calls journaled into the warehouse, but the last `leave_out`."""
    cases = {case.case_id: case for case in fixtures().cases}
    calls = [(run, call) for run in runs for call in run.call_ids]
    kept = calls[: len(calls) - leave_out]
    insert_envelopes(
        con,
        [
            envelope(lane=run.lane, case=cases[run.case_id], response=None, call_id=call)
            for run, call in kept
        ],
    )


def document(
    summary_scores: Sequence[CaseScore],
    cells: Sequence[tuple[str, Statistic]],
    *,
    settings: tuple[str, ...] = ("s",),
    prov: Provenance | None = None,
    extra_table: str = "",
    experiment_refs: Sequence[ExperimentNumberRef] = (),
) -> str:
    """A report as the sweep writes one: an audited table of linked numbers and the
    references block (built with the report's own RefBook)."""
    summary = summarize_lane("product", "m", summary_scores)
    book = RefBook({("product", "m"): settings})
    linked = [book.number(summary, category, statistic) for category, statistic in cells]
    for ref in experiment_refs:
        book.experiment_numbers[ref.ref] = ref
    table = [
        audited_table_marker(1),
        "| model | " + " | ".join(f"{c} {s}" for c, s in cells) + " |",
        "|---|" + "---:|" * len(cells),
        "| m | " + " | ".join(linked) + " |",
    ]
    experiment_cells = " ".join(f"[{ref.text}](#{ref.ref})" for ref in experiment_refs)
    return "\n".join(
        [
            "# Sweep",
            "",
            *table,
            "",
            extra_table,
            experiment_cells,
            "",
            book.references(prov or provenance()).block(),
            "",
        ]
    )


def audit(
    text: str, con: duckdb.DuckDBPyConnection, progress: list[str] | None = None, **kwargs: object
) -> AuditResult:
    options: dict[str, object] = {
        "fixtures_root": paths.FIXTURES_DIR,
        "judge": judge(),
        "instance": None,
        "mlflow": None,
    }
    options.update(kwargs)
    return audit_document(
        text,
        con=con,
        progress=None if progress is None else progress.append,
        **options,  # type: ignore[arg-type]
    )


def the_chain(envelopes: int, seeds: str = "0", mlflow_run: str = "mlflow-run-1") -> str:
    return (
        f"sweep_report @ Dagster run dagster-run-1 → MLflow run {mlflow_run} → partitions "
        f"product/m/{seeds} (settings s) → {envelopes} call envelopes → fixture "
        f"{fixtures().fixture_id}, world {fixtures().manifest.world.fingerprint[:12]}, "
        "commit c0ffee000000"
    )


CELLS: list[tuple[str, Statistic]] = [
    ("all", "mean"),
    ("all", "n"),
    ("catalog_lookup", "mean"),
    ("all", "infra"),
]


def test_a_document_re_derived_exactly_is_clean_and_each_number_shows_its_chain(
    tmp_path: Path,
) -> None:
    runs = right_and_wrong(0) + right_and_wrong(1)
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs)
    scores = scores_of(runs)
    assert {s.score for s in scores} == {0.0, 1.0}, "one case right, one wrong, per seed"
    text = document(scores, CELLS)
    progress: list[str] = []
    result = audit(text, con, progress)
    assert result.problems == () and result.clean
    assert [(n.ref, n.printed, n.derived) for n in result.numbers] == [
        ("r-product-m-all-mean", "50.0", "50.0"),
        ("r-product-m-all-n", "4", "4"),
        ("r-product-m-catalog_lookup-mean", "50.0", "50.0"),
        ("r-product-m-all-infra", "0", "0"),
    ]
    assert {n.chain for n in result.numbers} == {the_chain(4, "0,1")}
    assert progress == ["re-scoring product/m/0", "re-scoring product/m/1"]
    assert audit(text, con).clean  # no progress callback


def test_a_number_edited_by_hand_is_named_against_its_reference_and_the_re_derivation(
    tmp_path: Path,
) -> None:
    runs = right_and_wrong()
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs)
    text = document(scores_of(runs), CELLS)
    edited = text.replace("[50.0](#r-product-m-all-mean)", "[55.0](#r-product-m-all-mean)")
    result = audit(edited, con)
    assert not result.clean
    assert result.problems == (
        "r-product-m-all-mean: the document prints 55.0, its reference recorded 50.0",
        "r-product-m-all-mean: printed 55.0, re-derived 50.0",
    )
    first = result.numbers[0]
    assert (first.ref, first.printed, first.derived, first.chain) == (
        "r-product-m-all-mean",
        "55.0",
        "50.0",
        the_chain(2),
    )


def test_a_number_edited_in_the_block_too_is_caught_by_the_re_derivation(
    tmp_path: Path,
) -> None:
    runs = right_and_wrong()
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs)
    text = document(scores_of(runs), CELLS)
    both = text.replace("[50.0](#r-product-m-all-mean)", "[60.0](#r-product-m-all-mean)")
    both = both.replace(
        '"text":"50.0","lane":"product","model":"m","category":"all"',
        ('"text":"60.0","lane":"product","model":"m","category":"all"'),
    )
    assert '"text":"60.0"' in both
    assert audit(both, con).problems == ("r-product-m-all-mean: printed 60.0, re-derived 50.0",)


def test_links_without_a_reference_bare_numbers_and_references_never_printed_are_named(
    tmp_path: Path,
) -> None:
    runs = right_and_wrong()
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs)
    bare = "\n".join([audited_table_marker(1), "| row | value |", "|---|---:|", "| x | 12.5 |", ""])
    text = document(scores_of(runs), CELLS, extra_table=bare)
    linked = "[2](#r-product-m-all-n)"
    assert linked in text
    text = text.replace(linked, "[2](#r-product-m-all-nn)")
    result = audit(text, con)
    assert result.problems == (
        "2 links to r-product-m-all-nn, which the references block does not hold",
        "number without a reference: 12.5 in row | x | 12.5 |",
        "reference r-product-m-all-n is not printed in the document",
    )
    assert [n.ref for n in result.numbers] == [
        "r-product-m-all-mean",
        "r-product-m-catalog_lookup-mean",
        "r-product-m-all-infra",
    ]


def test_a_document_without_references_cannot_be_audited(tmp_path: Path) -> None:
    con = warehouse(tmp_path, [])
    with pytest.raises(AuditError, match=r"^no evalp:references block: this document carries"):
        audit("# a report\n\n| a | 1 |\n", con)


def test_runs_stored_under_other_settings_are_named_and_left_out(tmp_path: Path) -> None:
    runs = right_and_wrong(0) + right_and_wrong(1, settings_hash="s2")
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs)
    published = scores_of(right_and_wrong(0) + right_and_wrong(1))
    result = audit(document(published, CELLS), con)
    assert result.problems == (
        "product/m/1: the stored runs are under settings s2, the document's under s "
        "(re-run since it was published)",
        "r-product-m-all-n: printed 4, re-derived 2",
    )
    # the other numbers come out the same from seed 0 alone
    assert [n.derived for n in result.numbers] == ["50.0", "2", "50.0", "0"]


def test_numbers_with_nothing_behind_them_re_derive_to_nothing(tmp_path: Path) -> None:
    runs = right_and_wrong(0, settings_hash="s2")
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs)
    text = document(scores_of(right_and_wrong(0)), [("all", "mean"), ("all", "n")])
    result = audit(text, con)
    assert result.problems == (
        "product/m/0: the stored runs are under settings s2, the document's under s "
        "(re-run since it was published)",
        "r-product-m-all-mean: printed 50.0, re-derived nothing",
        "r-product-m-all-n: printed 2, re-derived nothing",  # not the 0 of an empty summary
    )
    assert [n.derived for n in result.numbers] == [None, None]


def test_a_category_the_stored_runs_do_not_have_re_derives_to_nothing(tmp_path: Path) -> None:
    runs = right_and_wrong()
    con = warehouse(tmp_path, runs[:1])
    with_envelopes(con, runs[:1])
    first, _ = two_cases()
    other = {c.category for c in fixtures().cases} - {first.category}
    moved = [scores_of(runs)[0], scores_of(runs)[1].model_copy(update={"category": min(other)})]
    text = document(moved, [(min(other), "n")])
    result = audit(text, con)
    assert result.problems == (f"r-product-m-{min(other)}-n: printed 1, re-derived nothing",)


def test_missing_call_envelopes_are_counted_against_every_call_behind_the_numbers(
    tmp_path: Path,
) -> None:
    runs = right_and_wrong(0) + right_and_wrong(1)
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs, leave_out=3)
    result = audit(document(scores_of(runs), CELLS), con)
    assert result.problems == (
        "product/m: 3 of 4 call envelopes behind the numbers are missing from runs.call_envelopes",
    )


def test_envelopes_missing_counts_distinct_calls(tmp_path: Path) -> None:
    runs = right_and_wrong()
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs[:1])
    present, absent = (run.call_ids[0] for run in runs)
    assert _envelopes_missing(con, []) == 0
    assert _envelopes_missing(con, [present, present]) == 0
    assert _envelopes_missing(con, [present, absent, absent]) == 1
    assert _envelopes_missing(con, [absent, "another"]) == 2


def test_a_tampered_fixture_set_is_named_and_nothing_is_re_derived(tmp_path: Path) -> None:
    runs = right_and_wrong()
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs)
    root = tmp_path / "fixtures"
    shutil.copytree(paths.FIXTURES_DIR, root)
    cases_file = root / fixtures().fixture_id / "cases.jsonl"
    cases_file.write_text(cases_file.read_text("utf-8").replace("USALC2100046", "USALC2100047"))
    result = audit(document(scores_of(runs), [("all", "mean")]), con, fixtures_root=root)
    (broken, not_derived) = result.problems
    assert broken.startswith(f"fixture set {fixtures().fixture_id} does not verify: ")
    assert "cases.jsonl" in broken
    assert not_derived == "r-product-m-all-mean: printed 50.0, re-derived nothing"
    assert [(n.derived, n.chain) for n in result.numbers] == [(None, "–")]
    spec = load_spec(EXPERIMENT)
    refs = experiment_refs(expected_report(spec, arm_runs(spec)))[:1]
    text = document(scores_of(runs), [("all", "mean")], experiment_refs=refs)
    result = audit(text, con, fixtures_root=root)
    assert result.problems[1:] == (
        "r-product-m-all-mean: printed 50.0, re-derived nothing",
        f"{refs[0].ref}: printed {refs[0].text}, re-derived nothing",
    )


def provenance_problems(prov: Provenance, **kwargs: object) -> tuple[list[str], object]:
    problems: list[str] = []
    options: dict[str, object] = {"instance": None, "mlflow": None}
    options.update(kwargs)
    returned = _check_provenance(
        References(provenance=prov, numbers=()),
        paths.FIXTURES_DIR,
        problems=problems,
        **options,  # type: ignore[arg-type]
    )
    return problems, returned


def test_a_fixture_set_of_another_world_or_another_scorer_is_named() -> None:
    world = fixtures().manifest.world
    fixture_id = fixtures().fixture_id
    problems, returned = provenance_problems(provenance())
    assert problems == []
    assert returned == (fixtures(), "dagster-run-1", "mlflow-run-1")
    said = (
        f"fixture set {fixture_id} was built from world seed {world.seed} fingerprint "
        f"{world.fingerprint[:16]}, the document says seed"
    )
    problems, _ = provenance_problems(provenance(world_seed=world.seed + 1))
    assert problems == [f"{said} {world.seed + 1} fingerprint {world.fingerprint[:16]}"]
    problems, _ = provenance_problems(provenance(world_fingerprint="ab" * 32))
    assert problems == [f"{said} {world.seed} fingerprint {'ab' * 8}"]
    problems, returned = provenance_problems(
        provenance(scorer_version="scorer-0", mlflow_run_id=None)
    )
    assert problems == [
        f"the numbers were scored by scorer-0, this code has {SCORER_VERSION}: audit with "
        f"commit c0ffee{'0' * 34}"
    ]
    assert returned == (fixtures(), "dagster-run-1", "none")
    problems, returned = provenance_problems(provenance(fixture_id="fx-missing"))
    assert len(problems) == 1
    assert problems[0].startswith("fixture set fx-missing does not verify: fixture set ")
    assert returned == (None, "dagster-run-1", "mlflow-run-1")


def materialize(
    instance: dg.DagsterInstance, key: str, mlflow_run: str | None, *, fail: bool = False
) -> str:
    """A run of one asset; with `fail`, a run that planned it and failed before it."""

    @dg.asset(key=dg.AssetKey.from_user_string(key))
    def published() -> dg.MaterializeResult[None]:
        if fail:
            raise RuntimeError("failed before materializing")
        metadata = {} if mlflow_run is None else {"mlflow_run_id": mlflow_run}
        return dg.MaterializeResult(metadata=metadata)

    result = dg.materialize([published], instance=instance, raise_on_error=False)
    assert result.success is not fail
    return result.run_id


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as ephemeral:
        yield ephemeral


def test_the_dagster_run_must_exist_and_have_materialized_the_asset(
    instance: dg.DagsterInstance,
) -> None:
    report_run = materialize(instance, "reports/sweep", "mlflow-from-dagster")
    other_run = materialize(instance, "reports/other", None)

    def check(**changes: object) -> tuple[list[str], object]:
        return provenance_problems(
            provenance(asset_key="reports/sweep", **changes), instance=instance
        )

    assert check(dagster_run_id=report_run) == (
        [],
        (fixtures(), report_run, "mlflow-run-1"),
    )
    assert check(dagster_run_id=other_run)[0] == [
        f"Dagster run {other_run} did not materialize reports/sweep"
    ]
    failed_run = materialize(instance, "reports/sweep", None, fail=True)
    assert check(dagster_run_id=failed_run)[0] == [
        f"Dagster run {failed_run} did not materialize reports/sweep"
    ]
    assert check(dagster_run_id="no-such-run")[0] == [
        "Dagster run no-such-run (of reports/sweep) not found"
    ]
    # "latest": the latest materialization's run, and the MLflow run it recorded
    assert check(dagster_run_id="latest") == (
        [],
        (fixtures(), report_run, "mlflow-from-dagster"),
    )
    latest_without = provenance_problems(
        provenance(asset_key="reports/other", dagster_run_id="latest"), instance=instance
    )
    assert latest_without == ([], (fixtures(), other_run, "mlflow-run-1"))
    never = provenance_problems(
        provenance(asset_key="reports/never", dagster_run_id="latest"), instance=instance
    )
    assert never == (
        ["no materialization of reports/never in the instance"],
        (fixtures(), "latest", "mlflow-run-1"),
    )


def test_the_audit_follows_latest_to_the_run_and_mlflow_run_dagster_recorded(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    runs = right_and_wrong()
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs)
    dagster_run = materialize(instance, "sweep_report", "mlflow-recorded")
    text = document(scores_of(runs), [("all", "mean")], prov=provenance(dagster_run_id="latest"))
    result = audit(text, con, instance=instance)
    assert result.clean, result.problems
    assert result.numbers[0].chain == the_chain(2, mlflow_run="mlflow-recorded").replace(
        "Dagster run dagster-run-1", f"Dagster run {dagster_run}"
    )


@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory: pytest.TempPathFactory) -> TrackingStore:
    """A real embedded MLflow store (its schema takes seconds: one per module)."""
    root = tmp_path_factory.mktemp("mlflow")
    return TrackingStore(uri=f"sqlite:///{root / 'mlflow.db'}", artifact_root=str(root / "art"))


def test_the_mlflow_run_must_be_in_the_tracking_store(mlflow_store: TrackingStore) -> None:
    client = open_client(mlflow_store)
    experiment = client.create_experiment(
        "audit-test", artifact_location=mlflow_store.artifact_root
    )
    held = client.create_run(experiment).info.run_id
    assert provenance_problems(provenance(mlflow_run_id=held), mlflow=client)[0] == []
    assert provenance_problems(provenance(mlflow_run_id="0" * 32), mlflow=client)[0] == [
        f"MLflow run {'0' * 32} not found in the tracking store"
    ]
    # a document naming no MLflow run asks the store nothing
    assert provenance_problems(provenance(mlflow_run_id=None), mlflow=client) == (
        [],
        (fixtures(), "dagster-run-1", "none"),
    )


# The experiment's numbers


def stored_arms(
    spec: ExperimentSpec, runs_by_arm: dict[str, list[CaseRun]], leave_out: int = 0
) -> None:
    """Each arm's runs journaled where `rescore_arm` reads them, under the arm's identity,
    with a call journal holding every call but the last `leave_out` of each arm."""
    _, configs, _ = resolve(spec)
    cases = {case.case_id: case for case in fixtures().cases}
    for arm, settings in spec.arms().items():
        config = arm_config(settings, configs)
        identity = LaneSettings(lane=settings.lane, guards=settings.guards).identity(
            config, fixtures().fixture_id
        )
        folder = experiment_root(spec.id) / arm
        runs = [
            run.model_copy(update={"model": config.name, "settings_hash": identity})
            for run in runs_by_arm.get(arm, [])
        ]
        for seed in sorted({run.seed for run in runs}):
            partition = partition_dir(settings.lane, config.name, seed, folder / folder_name(arm))
            with Journal[CaseRun](partition / CASES_JOURNAL) as journal:
                for run in runs:
                    if run.seed == seed:
                        journal.append(run)
        calls = [(run, call) for run in runs for call in run.call_ids]
        with EnvelopeJournal(folder / "calls" / "run-1" / JOURNAL_NAME) as journal:
            for run, call in calls[: len(calls) - leave_out]:
                journal.append(
                    envelope(lane="product", case=cases[run.case_id], response=None, call_id=call)
                )


def arm_runs(spec: ExperimentSpec) -> dict[str, list[CaseRun]]:
    """The reference right on both cases, the candidate right on one, over both seeds;
    each arm's calls named apart."""
    first, second = two_cases()
    out: dict[str, list[CaseRun]] = {}
    for arm in spec.arms():
        wrong = "ANSWER: USXXX0000000" if arm == "candidate" else f"ANSWER: {second.expected}"
        texts = [(first, f"ANSWER: {first.expected}"), (second, wrong)]
        out[arm] = [
            case_run(case, text, seed, call_ids=(f"{arm}-{case.case_id}-{seed}",))
            for seed in spec.arms()[arm].seeds
            for case, text in texts
        ]
    return out


def expected_report(spec: ExperimentSpec, runs_by_arm: dict[str, list[CaseRun]]) -> ParityReport:
    """The comparison as the experiment's publication computed it, from the same runs."""
    _, configs, _ = resolve(spec)
    scores = {
        arm: sorted(scores_of(runs), key=lambda s: (s.case_id, s.seed))
        for arm, runs in runs_by_arm.items()
    }
    return parity_report(
        spec,
        resolve(spec)[0].digest(),
        scores,
        load_gate_config(),
        {name: configs[name].provider for name in spec.models()},
    )


def experiment_refs(
    report: ParityReport, spec_hash: str | None = None
) -> list[ExperimentNumberRef]:
    (comparison,) = report.comparisons
    refs = []
    for statistic in EXPERIMENT_STATISTICS:
        text = format_comparison(report, comparison, statistic)
        refs.append(
            ExperimentNumberRef(
                ref=f"x-{report.experiment_id}-candidate-{statistic}",
                text=text or "–",
                experiment_id=report.experiment_id,
                spec_hash=spec_hash or report.spec_hash,
                reference=comparison.reference,
                candidate=comparison.candidate,
                statistic=statistic,
            )
        )
    return refs


def derive(
    refs: Sequence[ExperimentNumberRef], mlflow: object = None, progress: list[str] | None = None
) -> tuple[dict[str, str | None], dict[str, str], list[str]]:
    derived: dict[str, str | None] = {}
    chains: dict[str, str] = {}
    problems: list[str] = []
    _derive_experiments(
        References(provenance=provenance(), numbers=(), experiment_numbers=tuple(refs)),
        fixtures(),
        mlflow,  # type: ignore[arg-type]
        "dagster-run-1",
        derived,
        chains,
        problems,
        None if progress is None else progress.append,
    )
    return derived, chains, problems


def experiment_chain(held: str, spec_hash: str, calls: str = "reference 4, candidate 4") -> str:
    return (
        f"sweep_report @ Dagster run dagster-run-1 → experiment {EXPERIMENT} (registration "
        f"run {held}, spec {spec_hash[:12]}) → arms, call envelopes: {calls} → fixture "
        f"{fixtures().fixture_id}, world {fixtures().manifest.world.fingerprint[:12]}, "
        "commit c0ffee000000"
    )


def test_an_experiments_numbers_are_recomputed_from_its_arms_and_its_registration_is_found(
    mlflow_store: TrackingStore, tmp_path: Path
) -> None:
    spec = load_spec(EXPERIMENT)
    material, _, _ = resolve(spec)
    runs = arm_runs(spec)
    stored_arms(spec, runs)
    report = expected_report(spec, runs)
    (comparison,) = report.comparisons
    assert (comparison.shared_cases, comparison.difference) == (2, -50.0)
    assert comparison.mcnemar_p == binomtest(0, 1, 0.5).pvalue
    refs = experiment_refs(report)
    client = open_client(mlflow_store)
    registration, _ = register(client, mlflow_store, spec, material, code_version())
    progress: list[str] = []
    derived, chains, problems = derive(refs, client, progress)
    assert problems == []
    assert derived == {ref.ref: ref.text for ref in refs}
    assert derived[f"x-{EXPERIMENT}-candidate-difference"] == "-50.0"
    assert derived[f"x-{EXPERIMENT}-candidate-shared"] == "2"
    assert set(chains.values()) == {experiment_chain(registration.run_id, material.digest())}
    assert set(chains) == set(derived)
    assert progress == [
        f"re-scoring experiment {EXPERIMENT} arm reference",
        f"re-scoring experiment {EXPERIMENT} arm candidate",
    ]
    # the whole audit passes the client on: the registration is found, a missing run named
    con = warehouse(tmp_path, [])
    text = document([], [], prov=provenance(mlflow_run_id="0" * 32), experiment_refs=refs)
    result = audit(text, con, mlflow=client)
    assert result.problems == (f"MLflow run {'0' * 32} not found in the tracking store",)
    assert [n.derived for n in result.numbers] == [ref.text for ref in refs]
    # without a store: the registration cannot be found, the numbers still re-derive
    derived, chains, problems = derive(refs)
    assert problems == [
        f"experiment {EXPERIMENT}: no registration {material.digest()[:12]} in the MLflow store"
    ]
    assert derived == {ref.ref: ref.text for ref in refs}
    assert set(chains.values()) == {experiment_chain("none", material.digest())}


def test_a_comparison_the_spec_does_not_make_re_derives_to_nothing() -> None:
    spec = load_spec(EXPERIMENT)
    runs = arm_runs(spec)
    stored_arms(spec, runs)
    (ref, *_) = experiment_refs(expected_report(spec, runs))
    elsewhere = ref.model_copy(update={"candidate": "other", "ref": "x-other"})
    derived, chains, _ = derive([elsewhere])
    assert derived == {"x-other": None}
    assert list(chains) == ["x-other"]


def test_arms_without_runs_or_with_missing_envelopes_are_named() -> None:
    spec = load_spec(EXPERIMENT)
    runs = arm_runs(spec)
    stored_arms(spec, {"reference": runs["reference"]}, leave_out=1)
    refs = experiment_refs(expected_report(spec, runs))
    derived, chains, problems = derive(refs)
    assert problems[1:] == [
        f"experiment {EXPERIMENT}: arm reference: 1 of 4 call envelopes behind its cases "
        "are missing",
        f"experiment {EXPERIMENT}: arm candidate has no stored runs",
    ]
    assert derived[f"x-{EXPERIMENT}-candidate-shared"] == "0"
    assert derived[f"x-{EXPERIMENT}-candidate-difference"] is None
    assert set(chains.values()) == {
        experiment_chain("none", resolve(spec)[0].digest(), "reference 4, candidate 0")
    }


def test_a_changed_spec_an_unreadable_one_or_another_fixture_set_re_derive_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(EXPERIMENT)
    runs = arm_runs(spec)
    stored_arms(spec, runs)
    refs = experiment_refs(expected_report(spec, runs))
    digest = resolve(spec)[0].digest()
    stale = [ref.model_copy(update={"spec_hash": "ab" * 32}) for ref in refs]
    assert derive(stale) == (
        {},
        {},
        [
            f"experiment {EXPERIMENT}: the spec now hashes to {digest[:12]}, the document's "
            f"numbers were registered under {'ab' * 6}"
        ],
    )
    unknown = [ref.model_copy(update={"experiment_id": "no-such-experiment"}) for ref in refs]
    derived, chains, problems = derive(unknown)
    assert (derived, chains) == ({}, {})
    (problem,) = problems
    assert problem.startswith(
        "experiment no-such-experiment: its spec cannot be read: no experiment 'no-such-experiment'"
    )
    # the same spec on another fixture set
    folder = tmp_path / "experiments"
    folder.mkdir()
    moved = spec.model_copy(update={"fixture_id": "fx-other"})
    text = (paths.CONFIGS_DIR / "experiments" / f"{EXPERIMENT}.yaml").read_text("utf-8")
    (folder / f"{EXPERIMENT}.yaml").write_text(
        text.replace(f"fixture_id: {spec.fixture_id}", "fixture_id: fx-other"), "utf-8"
    )
    monkeypatch.setenv("EVALP_EXPERIMENTS_DIR", str(folder))
    assert load_spec(EXPERIMENT) == moved
    moved_hash = resolve(moved)[0].digest()
    derived, chains, problems = derive(
        [ref.model_copy(update={"spec_hash": moved_hash}) for ref in refs]
    )
    assert (derived, chains) == ({}, {})
    assert problems == [
        f"experiment {EXPERIMENT}: no registration {moved_hash[:12]} in the MLflow store",
        f"experiment {EXPERIMENT}: registered on fixture set fx-other, the document's "
        f"numbers are on {fixtures().fixture_id}",
    ]


def test_the_audit_derives_experiment_numbers_beside_the_lanes(tmp_path: Path) -> None:
    spec = load_spec(EXPERIMENT)
    runs = arm_runs(spec)
    stored_arms(spec, runs)
    refs = experiment_refs(expected_report(spec, runs))
    lane_runs = right_and_wrong()
    con = warehouse(tmp_path, lane_runs)
    with_envelopes(con, lane_runs)
    text = document(scores_of(lane_runs), [("all", "mean")], experiment_refs=refs)
    progress: list[str] = []
    result = audit(text, con, progress)
    assert progress == [
        "re-scoring product/m/0",
        f"re-scoring experiment {EXPERIMENT} arm reference",
        f"re-scoring experiment {EXPERIMENT} arm candidate",
    ]
    assert result.problems == (
        f"experiment {EXPERIMENT}: no registration {refs[0].spec_hash[:12]} in the MLflow store",
    )
    assert [(n.ref, n.derived) for n in result.numbers] == [
        ("r-product-m-all-mean", "50.0"),
        *[(ref.ref, ref.text) for ref in refs],
    ]
    assert result.numbers[1].chain == experiment_chain("none", refs[0].spec_hash)


def test_evalp_audit_reads_the_projects_own_stores_read_only(tmp_path: Path) -> None:
    """`audit_against_project`: the warehouse (opened read-only, so it audits beside another
    reader), the fixtures root, the pinned judge, the Dagster instance in DAGSTER_HOME and
    the MLflow store under the project's var folder."""
    shutil.copytree(paths.FIXTURES_DIR, paths.fixtures_root())
    judged = next(c for c in fixtures().cases if "judged" in c.tiers)
    runs = [*right_and_wrong(), case_run(judged, "ABSTAIN: the records do not say")]
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs)
    _, scores = rescore_stored(
        con, Partition(lane="product", model="m", seed=0), dict(case_items()), load_judge()
    )
    assert {s.status for s in scores} == {"scored", "judge_error"}
    con.close()
    shutil.move(tmp_path / "warehouse.duckdb", paths.warehouse_path())
    client = open_client(default_store())
    experiment = client.create_experiment("sweep")
    mlflow_run = client.create_run(experiment).info.run_id
    with dg.DagsterInstance.get() as instance:
        dagster_run = materialize(instance, "sweep_report", mlflow_run)
    text = document(
        scores,
        [("all", "n"), ("all", "infra"), ("all", "mean")],
        prov=provenance(dagster_run_id="latest", mlflow_run_id=None),
    )
    reader = connect(paths.warehouse_path(), read_only=True)  # another reader, as the UI
    try:
        result = audit_against_project(text)
    finally:
        reader.close()
    assert result.problems == ()
    assert [(n.printed, n.derived) for n in result.numbers] == [
        ("2", "2"),
        ("1", "1"),
        ("50.0", "50.0"),
    ]
    assert result.numbers[0].chain.startswith(
        f"sweep_report @ Dagster run {dagster_run} → MLflow run {mlflow_run} → partitions "
        "product/m/0 (settings s) → 3 call envelopes → "
    )
    edited = text.replace("[50.0](#r-product-m-all-mean)", "[51.0](#r-product-m-all-mean)")
    assert audit_against_project(edited).problems[-1] == (
        "r-product-m-all-mean: printed 51.0, re-derived 50.0"
    )
    # an MLflow run the project's store does not hold
    elsewhere = provenance(dagster_run_id=dagster_run, mlflow_run_id="0" * 32)
    assert audit_against_project(document(scores, [("all", "n")], prov=elsewhere)).problems == (
        f"MLflow run {'0' * 32} not found in the tracking store",
    )


def case_items() -> list[tuple[str, Case]]:
    return [(case.case_id, case) for case in fixtures().cases]


def test_an_experiment_that_cannot_be_re_derived_does_not_stop_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(EXPERIMENT)
    runs = arm_runs(spec)
    stored_arms(spec, runs)
    good = experiment_refs(expected_report(spec, runs))[:1]
    # a spec of another id on another fixture set, beside the good one
    folder = tmp_path / "experiments"
    folder.mkdir()
    text = (paths.CONFIGS_DIR / "experiments" / f"{EXPERIMENT}.yaml").read_text("utf-8")
    (folder / f"{EXPERIMENT}.yaml").write_text(text, "utf-8")
    moved_text = text.replace(f"id: {EXPERIMENT}", "id: moved").replace(
        f"fixture_id: {spec.fixture_id}", "fixture_id: fx-other"
    )
    (folder / "moved.yaml").write_text(moved_text, "utf-8")
    monkeypatch.setenv("EVALP_EXPERIMENTS_DIR", str(folder))
    moved_hash = resolve(load_spec("moved"))[0].digest()
    first = good[0].model_copy(update={"ref": "x-first"})
    failing = {
        "unreadable": first.model_copy(update={"experiment_id": "no-such-experiment"}),
        "changed": first.model_copy(update={"experiment_id": "moved", "spec_hash": "ab" * 32}),
        "moved": first.model_copy(update={"experiment_id": "moved", "spec_hash": moved_hash}),
    }
    for why, before in failing.items():
        derived, _, problems = derive([before, *good])
        assert derived == {good[0].ref: good[0].text}, why
        assert problems[0].startswith(f"experiment {before.experiment_id}: "), why


def test_a_document_under_several_settings_lists_them_all(tmp_path: Path) -> None:
    """A partition's scores are read under its latest settings only (`read_partition`), so
    one stale hash at most per seed; the document's own may be several."""
    runs = right_and_wrong(0, settings_hash="s2")
    con = warehouse(tmp_path, runs)
    text = document(scores_of(right_and_wrong(0)), [("all", "n")], settings=("s1", "s"))
    assert audit(text, con).problems[0] == (
        "product/m/0: the stored runs are under settings s2, the document's under s, s1 "
        "(re-run since it was published)"
    )


def two_models_document(
    scores: Sequence[CaseScore], headline_models: Sequence[str] = ("m", "m2")
) -> str:
    """A report's headline and its "Who leads" table for models m and m2, as the sweep
    report writes them (one RefBook for both)."""
    from eval_pipeline.report.sweep_report import comparisons_table
    from eval_pipeline.scoring.compare import lane_comparisons

    book = RefBook({("product", "m"): ("s",), ("product", "m2"): ("s",)})
    headline = [
        audited_table_marker(1),
        "| model | score |",
        "|---|---:|",
        *(
            f"| {model} | "
            + book.number(
                summarize_lane("product", model, [s for s in scores if s.model == model]),
                "all",
                "mean",
            )
            + " |"
            for model in headline_models
        ),
    ]
    table = comparisons_table(lane_comparisons(scores), book)
    return "\n".join(
        ["# Sweep", "", *headline, "", *table, "", book.references(provenance()).block(), ""]
    )


def test_the_who_leads_numbers_are_re_derived_from_both_models_runs(tmp_path: Path) -> None:
    """Finding of issue 28: the headline gave no difference between models; the report's
    comparisons are numbers like any other, so each is re-derived and a tampered one named."""
    first, second = two_cases()
    strong = [
        case_run(case, f"ANSWER: {case.expected}", seed).model_copy(update={"model": "m2"})
        for seed in (0, 1)
        for case in (first, second)
    ]
    runs = right_and_wrong(0) + right_and_wrong(1) + strong
    con = warehouse(tmp_path, runs)
    with_envelopes(con, runs)
    text = two_models_document(scores_of(runs))
    assert "[+50.0](#c-product-m2-vs-m-difference)" in text  # m2 right on both, m on one
    result = audit(text, con)
    assert result.problems == ()
    compared = {n.ref: n for n in result.numbers if n.ref.startswith("c-")}
    assert {ref: (n.printed, n.derived) for ref, n in compared.items()} == {
        "c-product-m2-vs-m-difference": ("+50.0", "+50.0"),
        "c-product-m2-vs-m-low": ("+0.0", "+0.0"),
        "c-product-m2-vs-m-high": ("+100.0", "+100.0"),
        "c-product-m2-vs-m-shared": ("2", "2"),
        "c-product-m2-vs-m-noise_floor": ("0.0", "0.0"),
        "c-product-m2-vs-m-mcnemar_p": ("1.000", "1.000"),
    }
    assert compared["c-product-m2-vs-m-difference"].chain.startswith(
        "comparison product: m2 − m, paired over the re-scored runs of both: sweep_report @"
    )
    tampered = text.replace(
        "[+50.0](#c-product-m2-vs-m-difference)", "[+60.0](#c-product-m2-vs-m-difference)"
    )
    assert audit(tampered, con).problems == (
        "c-product-m2-vs-m-difference: the document prints +60.0, its reference recorded +50.0",
        "c-product-m2-vs-m-difference: printed +60.0, re-derived +50.0",
    )
    # A comparison whose model has no headline numbers (so no re-scored runs) re-derives
    # nothing rather than something made up.
    problems = audit(two_models_document(scores_of(runs), ("m",)), con).problems
    assert "c-product-m2-vs-m-difference: printed +50.0, re-derived nothing" in problems
