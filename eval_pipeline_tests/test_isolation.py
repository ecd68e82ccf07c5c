"""A test's isolated state keeps every write away from the project: a demo run by a test
once rewrote the committed README's results table with a small test world's numbers."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline import paths


def test_an_isolated_state_points_every_written_location_into_its_home(
    isolated_state: Path,
) -> None:
    written = {
        "var": paths.var_dir(),
        "warehouse": paths.warehouse_path(),
        "fixtures": paths.fixtures_root(),
    }
    outside = {
        name: path
        for name, path in written.items()
        if path != isolated_state and isolated_state not in path.parents
    }
    assert outside == {}, f"written outside the test's home: {outside}"
