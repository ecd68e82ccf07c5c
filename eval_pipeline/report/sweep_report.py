"""The sweep report: markdown and one self-contained HTML file (plots embedded as PNG).

Tables a reader quotes are audited tables: every number in them links to a reference
(`report/refs.py`) and `evalp audit` re-derives it. Plots are drawn from the same
summaries; ‡ and † counts stand beside every score they qualify and every table states
its denominator (n = case × seed pairs scored).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from markdown_it import MarkdownIt
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from pydantic import Field

from eval_pipeline.experiments.parity import ParityReport, verdict_meaning
from eval_pipeline.providers.labels import LABELS
from eval_pipeline.records import FrozenRecord
from eval_pipeline.report.headline import ALL
from eval_pipeline.report.refs import (
    EXPERIMENT_STATISTICS,
    Provenance,
    RefBook,
    References,
    audited_table_marker,
)
from eval_pipeline.report.transcript import Transcript, transcript_html, transcript_path
from eval_pipeline.scoring.aggregate import LaneSummary
from eval_pipeline.scoring.compare import ModelComparison, comparisons_markdown
from eval_pipeline.scoring.score import failing_tier
from eval_pipeline.world import ordered_categories


class SweepReport(FrozenRecord):
    markdown: str
    html: str
    references: References
    plots: dict[str, str]
    """PNG plots by name, base64."""
    pages: dict[str, str] = Field(default_factory=dict)
    """Further HTML pages by path relative to the report (each failed case's transcript)."""


def _png(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _label(summary: LaneSummary) -> str:
    return f"{summary.model} ({summary.lane} lane)"


# Layout: every figure uses constrained layout, which measures each text (titles, tick
# labels, axis labels, legends outside the axes) and shrinks the axes to make room for it
# inside the figure. The figure sizes below are chosen so that there is room to give: a
# long slanted tick label needs height, a legend beside the axes needs width.

TICK_SIZE = 8.0
SLANT = 35.0
"""Degrees a row of long x tick labels is turned by (right-aligned on its tick)."""


def _text_inches(texts: Iterable[str], fontsize: float) -> float:
    """A generous estimate of the longest text's width (DejaVu Sans averages about half an
    em a character; 0.62 em leaves a margin)."""
    return max((len(text) for text in texts), default=0) * 0.62 * fontsize / 72


def _slant(axis: Axes, labels: Sequence[str], fontsize: float = TICK_SIZE) -> None:
    """Turned x tick labels that end at their tick (`ha="right"`, anchored there), so each
    runs down and away from its neighbours instead of centred across them."""
    axis.set_xticklabels(
        labels, rotation=SLANT, ha="right", rotation_mode="anchor", fontsize=fontsize
    )


def _slant_inches(labels: Iterable[str], fontsize: float = TICK_SIZE) -> float:
    """The height a row of slanted tick labels takes below its axis."""
    turned = math.radians(SLANT)
    return _text_inches(labels, fontsize) * math.sin(turned) + 1.4 * fontsize / 72


def _colours(models: Iterable[str]) -> dict[str, str]:
    """One colour per model (by name, so a model keeps its colour across plots and lanes)."""
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return {model: cycle[index % len(cycle)] for index, model in enumerate(sorted(set(models)))}


LANE_MARKERS = {"model": "o", "product": "s"}


def _lane_colour(colour: str, lane: str) -> tuple[float, float, float, float]:
    """The model's colour, lighter in the product lane."""
    return to_rgba(colour, 1.0 if lane == "model" else 0.45)


def _categories(summaries: Sequence[LaneSummary]) -> list[str]:
    """The categories the summaries score, in report order, then all of them."""
    present = {row.category for summary in summaries for row in summary.rows} - {ALL}
    return [*ordered_categories(present), ALL]


def _figure_categories(summaries: Sequence[LaneSummary]) -> Figure:
    """Category × model scores per lane, with the bootstrap intervals."""
    lanes = sorted({s.lane for s in summaries}, key=lambda lane: lane != "model")
    models = sorted({s.model for s in summaries})
    colours = _colours(models)
    columns = min(len(models), 4)
    legend_rows = -(-len(models) // max(columns, 1))
    per_axis = 3.0 + _slant_inches(_categories(summaries))
    figure, axes = plt.subplots(
        len(lanes),
        1,
        figsize=(11, 0.3 + 0.22 * legend_rows + per_axis * len(lanes)),
        squeeze=False,
        layout="constrained",
    )
    for axis, lane in zip(axes[:, 0], lanes, strict=True):
        rows = [s for s in summaries if s.lane == lane]
        width = 0.8 / max(len(rows), 1)
        categories = _categories(rows[:1])
        for index, summary in enumerate(rows):
            xs: list[float] = []
            ys: list[float] = []
            errors: list[list[float]] = [[], []]
            for position, category in enumerate(categories):
                row = summary.row(category)
                if row.mean is None:
                    continue
                xs.append(position + index * width)
                ys.append(row.mean)
                errors[0].append(row.mean - (row.low if row.low is not None else row.mean))
                errors[1].append((row.high if row.high is not None else row.mean) - row.mean)
            axis.bar(
                xs,
                ys,
                width,
                yerr=errors,
                capsize=2,
                color=colours[summary.model],
                label=summary.model,
            )
        axis.set_xticks([p + 0.4 - width / 2 for p in range(len(categories))])
        _slant(axis, categories)
        axis.set_ylim(0, 105)
        axis.set_ylabel("points (95% interval)")
        axis.set_title(f"{lane} lane: mean case score per category")
    # one legend for every lane, above the axes: inside an axis it hid the bars
    figure.legend(
        handles=[Patch(color=colours[model], label=model) for model in models],
        loc="outside upper center",
        ncol=max(columns, 1),
        fontsize=8,
    )
    return figure


def plot_categories(summaries: Sequence[LaneSummary]) -> str:
    """Category × model scores per lane, with the bootstrap intervals."""
    return _png(_figure_categories(summaries))


def _figure_lanes(summaries: Sequence[LaneSummary]) -> Figure:
    """Each model's overall score in the model lane beside the product lane."""
    models = sorted({s.model for s in summaries})
    figure, axis = plt.subplots(
        figsize=(max(7.0, 2.5 + 0.6 * len(models)), 3.2 + _slant_inches(models)),
        layout="constrained",
    )
    for offset, lane in ((-0.2, "model"), (0.2, "product")):
        xs, ys, lows, highs = [], [], [], []
        for index, model in enumerate(models):
            found = [s for s in summaries if s.lane == lane and s.model == model]
            if not found or found[0].row(ALL).mean is None:
                continue
            row = found[0].row(ALL)
            assert row.mean is not None
            xs.append(index + offset)
            ys.append(row.mean)
            lows.append(row.mean - (row.low if row.low is not None else row.mean))
            highs.append((row.high if row.high is not None else row.mean) - row.mean)
        axis.bar(xs, ys, 0.4, yerr=[lows, highs], capsize=3, label=f"{lane} lane")
    axis.set_xticks(range(len(models)))
    _slant(axis, models)
    axis.set_ylim(0, 105)
    axis.set_ylabel("points, all cases")
    axis.set_title("Model lane (the model alone) beside the product lane")
    figure.legend(loc="outside right upper", fontsize=8)
    return figure


def plot_lanes(summaries: Sequence[LaneSummary]) -> str:
    """Each model's overall score in the model lane beside the product lane."""
    return _png(_figure_lanes(summaries))


def _figure_labels(summaries: Sequence[LaneSummary]) -> Figure:
    """The six labels of each lane and model's final calls, stacked."""
    names = [_label(s) for s in summaries]
    figure, axis = plt.subplots(
        figsize=(max(9.0, 3.0 + 0.45 * len(names)), 3.2 + _slant_inches(names)),
        layout="constrained",
    )
    positions = range(len(summaries))
    bottom = [0] * len(summaries)
    for label in LABELS:
        counts = [s.labels.get(label, 0) for s in summaries]
        axis.bar(positions, counts, bottom=bottom, label=label)
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    axis.set_xticks(positions)
    _slant(axis, names)
    axis.set_ylabel("case × seed pairs")
    axis.set_title("Six labels of the final call, per lane and model")
    # beside the bars (above them it covered the tallest), in the stack's order top down
    handles, labels = axis.get_legend_handles_labels()
    figure.legend(handles[::-1], labels[::-1], loc="outside right upper", fontsize=7)
    return figure


def plot_labels(summaries: Sequence[LaneSummary]) -> str:
    """The six labels of each lane and model's final calls, stacked."""
    return _png(_figure_labels(summaries))


def _figure_cost(summaries: Sequence[LaneSummary]) -> Figure:
    """Cost against score: a marker per lane and model (colour: model, shape: lane) and a
    key beside the axes naming each with its score and cost, best score first. Models
    that cost and score alike sit on one another; their names never do."""
    points = sorted(
        ((s, score) for s in summaries if (score := s.row(ALL).mean) is not None),
        key=lambda point: (-point[1], _label(point[0])),
    )
    colours = _colours(s.model for s, _ in points)
    figure, axis = plt.subplots(
        figsize=(10, max(3.8, 1.0 + 0.2 * len(points))), layout="constrained"
    )
    for summary, score in points:
        colour = colours[summary.model]
        axis.scatter(
            [float(summary.cost_usd)],
            [score],
            s=45,
            marker=LANE_MARKERS.get(summary.lane, "^"),
            color=_lane_colour(colour, summary.lane),
            edgecolors=colour,
            linewidths=1,
            label=(f"{_label(summary)}: {score:.1f} points, {float(summary.cost_usd):.4f} USD"),
        )
    axis.set_xlabel("cost of the sweep's calls, USD (simulated prices)")
    axis.set_ylabel("points, all cases")
    axis.set_title("Cost against score")
    if points:
        figure.legend(loc="outside right upper", fontsize=7)
    return figure


def plot_cost(summaries: Sequence[LaneSummary]) -> str:
    """Cost against score (the cost axis is for the eye; the tables print exact cents)."""
    return _png(_figure_cost(summaries))


def _figure_noise(summaries: Sequence[LaneSummary]) -> Figure:
    """The noise floor: how far apart the seed replicates' means are, per category."""
    categories = _categories(summaries)
    colours = _colours(s.model for s in summaries)
    figure, axis = plt.subplots(
        figsize=(13, max(3.2 + _slant_inches(categories), 0.8 + 0.19 * len(summaries))),
        layout="constrained",
    )
    width = 0.8 / max(len(summaries), 1)
    for index, summary in enumerate(summaries):
        spreads = [
            next((r.spread or 0.0 for r in summary.rows if r.category == c), 0.0)
            for c in categories
        ]
        colour = colours[summary.model]
        axis.bar(
            [p + index * width for p in range(len(categories))],
            spreads,
            width,
            color=_lane_colour(colour, summary.lane),
            edgecolor=colour,
            linewidth=0.5,
            label=_label(summary),
        )
    axis.set_xticks([p + 0.4 - width / 2 for p in range(len(categories))])
    _slant(axis, categories)
    axis.set_ylabel("max − min of per-seed means")
    axis.set_title("Noise floor from seed replicates (lighter: product lane)")
    figure.legend(loc="outside right upper", fontsize=7)
    return figure


def plot_noise(summaries: Sequence[LaneSummary]) -> str:
    """The noise floor: how far apart the seed replicates' means are, per category."""
    return _png(_figure_noise(summaries))


def _figure_parity(reports: Sequence[ParityReport]) -> Figure:
    """Each comparison's interval against its registered margin."""
    rows = [(r, c) for r in reports for c in r.comparisons if c.low is not None]
    names = [f"{r.experiment_id}: {c.candidate} ({c.verdict})" for r, c in rows]
    figure, axis = plt.subplots(
        figsize=(max(8.0, 5.0 + _text_inches(names, 7)), 1.4 + 0.4 * max(len(rows), 1)),
        layout="constrained",
    )
    for index, (report, comparison) in enumerate(rows):
        assert comparison.low is not None and comparison.high is not None
        centre = comparison.difference or 0.0
        axis.errorbar(
            [centre],
            [index],
            xerr=[[centre - comparison.low], [comparison.high - centre]],
            fmt="o",
            capsize=3,
        )
        margins = {
            "equivalence": (-report.margin, report.margin),
            "non_inferiority": (-report.margin,),
            "superiority": (report.margin,),
        }[report.kind]
        for margin in margins:
            axis.plot([margin, margin], [index - 0.3, index + 0.3], color="grey", lw=1)
    axis.set_yticks(range(len(rows)))
    axis.set_yticklabels(names, fontsize=7)
    axis.axvline(0, color="black", lw=0.5)
    axis.set_xlabel("difference in points, candidate − reference (grey: registered margin)")
    axis.set_title("Parity verdicts")
    return figure


def plot_parity(reports: Sequence[ParityReport]) -> str:
    """Each comparison's interval against its registered margin."""
    return _png(_figure_parity(reports))


def _figure_ablation(report: ParityReport) -> Figure:
    """The ablation matrix: each guard turned off (rows) against the reference, per category
    and overall (columns), in points; `n<min` where a category has too few shared cases."""
    categories = ordered_categories(
        d.category for x in report.comparisons for d in x.categories if d.category != ALL
    )
    columns = [*categories, ALL]
    values = []
    for comparison in report.comparisons:
        by_category = {d.category: d for d in comparison.categories}
        row = []
        for category in categories:
            cell = by_category.get(category)
            row.append(
                float("nan")
                if cell is None or cell.difference is None or cell.small_n
                else cell.difference
            )
        row.append(float("nan") if comparison.difference is None else comparison.difference)
        values.append(row)
    limit = max([abs(v) for row in values for v in row if v == v] + [1.0])
    guards = [c.candidate for c in report.comparisons]
    figure, axis = plt.subplots(
        figsize=(
            2.0 + _text_inches(guards, 8) + 0.75 * len(columns),
            1.4 + _slant_inches(columns) + 0.45 * len(values),
        ),
        layout="constrained",
    )
    image = axis.imshow(values, cmap="RdBu", vmin=-limit, vmax=limit, aspect="auto")
    for row_index, row in enumerate(values):
        for column_index, value in enumerate(row):
            text = "n<min" if value != value else f"{value:+.1f}"
            dark = value == value and abs(value) > 0.6 * limit
            axis.text(
                column_index,
                row_index,
                text,
                ha="center",
                va="center",
                fontsize=7,
                color="white" if dark else "black",
            )
    axis.set_xticks(range(len(columns)))
    _slant(axis, columns)
    axis.set_yticks(range(len(values)))
    axis.set_yticklabels(guards, fontsize=8)
    figure.colorbar(image, ax=axis, label="points, guard off − every guard on")
    axis.set_title(f"Ablation matrix: {report.experiment_id}")
    return figure


def plot_ablation(report: ParityReport) -> str:
    """The ablation matrix: each guard turned off (rows) against the reference, per category
    and overall (columns), in points; `n<min` where a category has too few shared cases."""
    return _png(_figure_ablation(report))


def _tables(
    summaries: Sequence[LaneSummary], book: RefBook, comparisons: Sequence[ModelComparison]
) -> list[str]:
    lines = [
        "## Headline",
        "",
        "Mean case score in points over every case of the fixture set (each case's mean over "
        "its scored seeds), its 95% bootstrap interval over cases, n = case × seed pairs "
        "scored, ‡ never heard (infrastructure, harness or judge error), † budget-stopped: "
        "‡ and † are out of n and never scored as zero.",
        "",
    ]
    lines += headline_table(summaries, book)
    lines += ["", "## Who leads", "", *comparisons_table(comparisons, book)]
    lines += [
        "",
        "## Per category",
        "",
        "As above, per category (n per row).",
        "",
        audited_table_marker(3),
        "| lane | model | category | score | low | high | n | ‡ | † |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        for row in s.rows:
            if row.category == ALL:
                continue
            lines.append(
                f"| {s.lane} | {s.model} | {row.category} | "
                + " | ".join(
                    book.number(s, row.category, stat)
                    for stat in ("mean", "low", "high", "n", "infra", "budget")
                )
                + " |"
            )
    lines += [
        "",
        "## Yield, cost and tokens",
        "",
        "Yield: share of labelled final calls that were graded (right or wrong); accuracy on "
        "yield: right among those. Cost is exact (simulated prices for simulated models).",
        "",
        "| lane | model | yield | accuracy on yield | cost (USD) | tokens | security violations |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        yield_text = "–" if s.yield_rate is None else f"{100 * s.yield_rate:.1f}%"
        accuracy = "–" if s.accuracy_on_yield is None else f"{100 * s.accuracy_on_yield:.1f}%"
        lines.append(
            f"| {s.lane} | {s.model} | {yield_text} | {accuracy} | {s.cost_usd:.6f} | "
            f"{s.tokens:,} | {s.security_violations} |"
        )
    return lines


def headline_table(summaries: Sequence[LaneSummary], book: RefBook) -> list[str]:
    """The README's results table: overall score per lane and model, linked."""
    lines = [
        audited_table_marker(2),
        "| lane | model | score | low | high | n | ‡ | † |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        lines.append(
            f"| {s.lane} | {s.model} | "
            + " | ".join(
                book.number(s, ALL, stat)
                for stat in ("mean", "low", "high", "n", "infra", "budget")
            )
            + " |"
        )
    return lines


def _cell(text: str | None, limit: int = 60) -> str:
    shown = "–" if text is None else " ".join(text.split())
    shown = shown if len(shown) <= limit else shown[: limit - 1] + "…"
    return shown.replace("|", "\\|")


def failing_cases(summaries: Sequence[LaneSummary], failing: Sequence[Transcript]) -> list[str]:
    """Per lane and model, the cases that failed in some seed, with what failed them and
    a link per failed seed to its transcript."""
    lines = [
        "## Failing cases",
        "",
        "A case fails in a seed when it scores below 0.5 or is never scored (‡, †); each seed "
        "links to that run's transcript (every turn, tool call and result, guard firing, the "
        "final reply beside the expected answer). `evalp show CASE --model M --lane L` prints "
        "the same in a terminal.",
    ]
    by_group: dict[tuple[str, str], dict[str, list[Transcript]]] = {}
    for transcript in failing:
        s = transcript.score
        by_group.setdefault((s.lane, s.model), {}).setdefault(s.case_id, []).append(transcript)
    for summary in summaries:
        cases = by_group.get((summary.lane, summary.model), {})
        total = summary.row(ALL).cases
        lines += ["", f"### {summary.model}, {summary.lane} lane: {len(cases)} of {total} cases"]
        if not cases:
            lines += ["", "None failed in any seed."]
            continue
        lines += [
            "",
            "| case | category | failed in seed | failed at | expected | answer read |",
            "|---|---|---|---|---|---|",
        ]
        for case_id in sorted(cases):
            runs = sorted(cases[case_id], key=lambda t: t.score.seed)
            first = runs[0]
            seeds = ", ".join(f"[{t.score.seed}]({transcript_path(t.score)})" for t in runs)
            lines.append(
                f"| {case_id} | {first.score.category} | {seeds} | "
                f"{_cell(failing_tier(first.score))} | {_cell(first.case.expected)} | "
                f"{_cell(first.score.answer)} |"
            )
    return lines


def comparisons_table(comparisons: Sequence[ModelComparison], book: RefBook) -> list[str]:
    """Per lane, each pair of models: the paired gap, its interval, McNemar and the seed
    noise floor, every number linked to what re-derives it."""
    table = comparisons_markdown(comparisons, book.comparison_number)
    if not comparisons:
        return [table]
    legend, blank, *rows = table.splitlines()
    return [legend, blank, audited_table_marker(4), *rows]


def experiments_table(reports: Sequence[ParityReport], book: RefBook) -> list[str]:
    if not reports:
        return []
    lines = [
        "## Experiments",
        "",
        "Registered before any result; full reports under `var/reports/experiments/`. Δ is "
        "the mean per-case difference in points (candidate − reference) over the cases both "
        "arms scored (n), with its 95% interval; ‡ counts each arm's cases never heard, left "
        "out of n. The verdict is the registered test's against its margin.",
        "",
        audited_table_marker(4),
        "| experiment | comparison | test | verdict | Δ | low | high | n | ‡ reference "
        "| ‡ candidate |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for report in reports:
        test = f"{report.kind.replace('_', '-')}, margin {report.margin:g}"
        for c in report.comparisons:
            numbers = " | ".join(
                book.experiment_number(report, c, statistic) for statistic in EXPERIMENT_STATISTICS
            )
            meaning = verdict_meaning(report.kind, report.design, report.margin, c.verdict)
            lines.append(
                f"| {report.experiment_id} | {c.candidate} vs {c.reference} | {test} | "
                f"**{c.verdict}**: {meaning} | {numbers} |"
            )
    return lines


def provenance_lines(provenance: Provenance) -> list[str]:
    return [
        f"Fixture set `{provenance.fixture_id}`, world seed {provenance.world_seed} "
        f"(fingerprint `{provenance.world_fingerprint[:16]}`), code `{provenance.commit[:12]}`"
        + (" (dirty checkout)" if provenance.dirty else "")
        + f", scorers `{provenance.scorer_version}`; Dagster run `{provenance.dagster_run_id}` "
        f"({provenance.asset_key}), MLflow run `{provenance.mlflow_run_id or 'none'}`. Every "
        "number in the score tables links to its reference; `evalp audit <this file>` "
        "re-derives each one from the stored runs.",
    ]


def build_sweep_report(
    summaries: Sequence[LaneSummary],
    settings_hashes: Mapping[tuple[str, str], tuple[str, ...]],
    provenance: Provenance,
    parity: Sequence[ParityReport] = (),
    *,
    comparisons: Sequence[ModelComparison] = (),
    failing: Sequence[Transcript] = (),
    title: str = "Sweep report",
    simulated: bool = True,
    not_shown: Sequence[str] = (),
) -> SweepReport:
    book = RefBook(dict(settings_hashes))
    plots = {
        "categories": plot_categories(summaries),
        "lanes": plot_lanes(summaries),
        "labels": plot_labels(summaries),
        "cost": plot_cost(summaries),
        "noise": plot_noise(summaries),
    }
    if any(c.low is not None for r in parity for c in r.comparisons):
        plots["parity"] = plot_parity(parity)
    for report in parity:
        if report.design == "ablation" and report.comparisons:
            plots[f"ablation-{report.experiment_id}"] = plot_ablation(report)
    lines = [f"# {title}", "", *provenance_lines(provenance), ""]
    if simulated:
        lines += [
            "Results from the project's **simulated provider** (simulated agents), not a "
            "real model.",
            "",
        ]
    lines += _tables(summaries, book, comparisons)
    lines += ["", *experiments_table(parity, book)]
    lines += [f"Not shown: {line}" for line in not_shown]
    lines += ["", *failing_cases(summaries, failing)]
    lines += ["", "## Plots", ""]
    for name in plots:
        lines += [f"![{name}](plots/{name}.png)", ""]
    references = book.references(provenance)
    lines += [references.block(), ""]
    markdown = "\n".join(lines)
    return SweepReport(
        markdown=markdown,
        html=to_html(markdown, plots, title),
        references=references,
        plots=plots,
        pages={
            transcript_path(t.score): transcript_html(t, back="../../../report.html")
            for t in failing
        },
    )


def to_html(markdown: str, plots: Mapping[str, str], title: str) -> str:
    """One self-contained page: the markdown rendered, plots inlined, references kept (as
    the same comment block, and anchors for each reference)."""
    body = markdown
    for name, png in plots.items():
        body = body.replace(f"(plots/{name}.png)", f"(data:image/png;base64,{png})")
    renderer = MarkdownIt("commonmark", {"html": True}).enable("table")
    html = renderer.render(body)
    style = (
        "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;font-size:13px;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px}td{text-align:right}"
        "td:first-child,td:nth-child(2),td:nth-child(3){text-align:left}"
        "a{color:inherit;text-decoration:none;border-bottom:1px dotted #888}img{max-width:100%}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{style}</style></head><body>{html}</body></html>\n"
    )
