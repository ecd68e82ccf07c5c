"""The README's results table, written by the demo between two marker lines."""

from __future__ import annotations

from pathlib import Path

from eval_pipeline.errors import EvalPipelineError

START = "<!-- evalp:results:start -->"
END = "<!-- evalp:results:end -->"


def update_results(readme: Path, table: str) -> bool:
    """Replace the text between the markers with `table`; True when it changed. A README
    without both markers, in order, is an error naming it (nothing is written)."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise EvalPipelineError(
            f"{readme}: no results block ({START} ... {END}) to write the results table into"
        )
    updated = text[: start + len(START)] + "\n" + table.strip() + "\n" + text[end:]
    if updated == text:
        return False
    readme.write_text(updated, encoding="utf-8")
    return True
