"""The headline for a terminal (the demo prints it): no matplotlib, no links."""

from __future__ import annotations

from collections.abc import Sequence

from eval_pipeline.report.refs import format_statistic
from eval_pipeline.scoring.aggregate import LaneSummary

ALL = "all"


def headline_text(summaries: Sequence[LaneSummary]) -> str:
    """The headline for a terminal: the same numbers as the report's, aligned, no links."""
    rows = [("lane", "model", "score", "95% interval", "n", "‡", "†")]
    for s in summaries:
        row = s.row(ALL)
        low, high = format_statistic(row, "low"), format_statistic(row, "high")
        rows.append(
            (
                s.lane,
                s.model,
                format_statistic(row, "mean") or "–",
                "–" if low is None or high is None else f"[{low}, {high}]",
                format_statistic(row, "n") or "–",
                format_statistic(row, "infra") or "–",
                format_statistic(row, "budget") or "–",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if index < 2 else cell.rjust(width)
            for index, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )
