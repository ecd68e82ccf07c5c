"""The progress `evalp demo` and `evalp sweep` show while lane runs work in other processes:
case runs counted from the partitions' journals, reading only what was appended."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_pipeline.dagster_client.launch import CaseRunsRecorded
from eval_pipeline.lanes.partition_runs import CASES_JOURNAL, partition_dir


def test_case_runs_are_counted_as_their_journals_grow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALP_HOME", str(tmp_path))
    model_journal = partition_dir("model", "m", 0, tmp_path / "lanes") / CASES_JOURNAL
    product_journal = partition_dir("product", "m", 0, tmp_path / "lanes") / CASES_JOURNAL
    model_journal.parent.mkdir(parents=True)
    model_journal.write_bytes(b'{"case": 1}\n{"case": 2}\n')  # before: not counted
    recorded = CaseRunsRecorded(["m|0"])
    assert recorded.since_start() == 0
    with model_journal.open("ab") as journal:
        journal.write(b'{"case": 3}\n{"case": 4, "half written')
    assert recorded.since_start() == 1  # a line still being written counts once it ends
    with model_journal.open("ab") as journal:
        journal.write(b'"}\n')
    product_journal.parent.mkdir(parents=True)
    product_journal.write_bytes(b'{"case": 1}\n')
    assert recorded.since_start() == 3
    assert recorded.since_start() == 3  # looking again reads nothing new
    # a journal rewritten shorter (a healing run starting over) is counted from its start
    model_journal.write_bytes(b'{"case": 1}\n')
    assert recorded.since_start() == (1 - 2) + 1  # model: one line now, two before; product: one
