"""Reading references back from a document: linked numbers, numbers left bare in an
audited table (model names with digits are labels, not numbers), the references block."""

from __future__ import annotations

from eval_pipeline.report.refs import (
    Provenance,
    References,
    audited_table_marker,
    linked_numbers,
    read_references,
    unlinked_table_numbers,
)

PROVENANCE = Provenance(
    dagster_run_id="run",
    asset_key="sweep_report",
    mlflow_run_id=None,
    fixture_id="fx",
    world_seed=1,
    world_fingerprint="f" * 64,
    commit="c" * 40,
    dirty=False,
    scorer_version="scorer-1",
)


def test_numbers_left_bare_in_an_audited_table_are_named_and_labels_are_not() -> None:
    text = "\n".join(
        [
            "intro with a bare 12.5 outside any table",
            audited_table_marker(2),
            "| lane | model | score | n |",
            "|---|---|---:|---:|",
            "| product | gpt-4.1 | [93.7](#r-a) | 399 |",
            "| model | claude-sonnet-4-5 | [-1.5](#r-b) | [12](#r-c) |",
            "",
            "| other | table | 7 |",
        ]
    )
    assert linked_numbers(text) == [("93.7", "r-a"), ("-1.5", "r-b"), ("12", "r-c")]
    problems = unlinked_table_numbers(text)
    assert len(problems) == 1 and problems[0].startswith("399 in row | product | gpt-4.1")


def test_the_references_block_reads_back_as_written() -> None:
    block = References(provenance=PROVENANCE, numbers=()).block()
    assert read_references(f"# report\n\n{block}\n") == References(
        provenance=PROVENANCE, numbers=()
    )
    assert read_references("# a document without references") is None
