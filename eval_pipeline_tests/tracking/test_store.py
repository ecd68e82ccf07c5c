"""Opening the embedded MLflow store prints nothing: creating a new store's schema once
wrote two INFO lines into the middle of the demo's progress output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_a_new_embedded_store_is_created_without_a_line_on_stderr(isolated_state: Path) -> None:
    opened = subprocess.run(
        [
            sys.executable,
            "-c",
            "from eval_pipeline.tracking.store import default_store, open_client; "
            "open_client(default_store())",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert opened.returncode == 0, opened.stderr
    assert (isolated_state / "mlflow" / "mlflow.db").is_file()
    assert opened.stderr == ""
