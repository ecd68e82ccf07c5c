"""The report's HTML as a person sees it: headless Chromium (from the OS packages) renders
the one self-contained file, every plot decodes and has a size, and the screenshot holds
the plots' colours (a page whose images failed shows text on white only). The plots'
layout is measured on the figures themselves: no text drawn over another, none cut off."""

from __future__ import annotations

import functools
import itertools
import os
import random
import shutil
import subprocess
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import NamedTuple
from unittest import mock

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib import image as mpimg
from matplotlib.backend_bases import RendererBase
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Affine2D, Bbox, BboxBase

from eval_pipeline.experiments.parity import CategoryDifference, Comparison, ParityReport
from eval_pipeline.providers.labels import LABELS
from eval_pipeline.report import sweep_report
from eval_pipeline.report.refs import Provenance
from eval_pipeline.report.sweep_report import build_sweep_report
from eval_pipeline.scoring.aggregate import ALL, LaneSummary, summarize_scores
from eval_pipeline.scoring.score import CaseScore
from eval_pipeline.world.label.versions import CATEGORIES as FIXTURE_CATEGORIES
from eval_pipeline_tests.scoring.cases import case_score

CATEGORIES = ("royalty_math", "contract_terms", "catalog_lookup")


def _browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    message = (
        "no Chromium on PATH: install it from the OS packages (apt-get install chromium); "
        ".ci/run installs it"
    )
    if os.environ.get("EVALP_REQUIRE_BROWSER"):
        pytest.fail(message)
    pytest.skip(message)


def _scores() -> list[CaseScore]:
    draw = random.Random(7)
    scores = []
    for lane in ("model", "product"):
        for model, skill in (("sim-strong", 0.95), ("sim-small", 0.7)):
            for seed in (0, 1, 2):
                for index in range(30):
                    value = 1.0 if draw.random() < skill else 0.0
                    scores.append(
                        CaseScore(
                            lane=lane,
                            model=model,
                            seed=seed,
                            case_id=f"c{index:02d}",
                            category=CATEGORIES[index % 3],
                            core=index < 5,
                            attempt=1,
                            run_id="r",
                            fixture_id="fx-browser",
                            settings_hash=f"{lane}-{model}",
                            status="scored",
                            exact=value,
                            trace=None,
                            judged=None,
                            score=value,
                            failed_checks=(),
                            security_violation=False,
                            answer=None,
                            reason="",
                            label="right" if value else "wrong",
                            cost_usd=Decimal("0.0125"),
                            tokens=300,
                        )
                    )
    return scores


CHECK_IMAGES = """
<script>
window.addEventListener('load', () => {
  const images = Array.from(document.images);
  const drawn = images.filter(i => i.complete && i.naturalWidth > 0 && i.naturalHeight > 0);
  const marker = document.createElement('div');
  marker.id = 'evalp-images';
  marker.textContent = `${drawn.length}/${images.length}`;
  document.body.appendChild(marker);
});
</script>
"""


@pytest.mark.parametrize(
    ("sweep_scores", "height"),
    [(lambda: _scores(), 6000), (lambda: _sweep_scores(), 9000)],
    ids=["two-models", "six-models-ten-categories"],
)
def test_the_report_html_renders_its_plots_in_a_headless_browser(
    tmp_path: Path, sweep_scores: Callable[[], list[CaseScore]], height: int
) -> None:
    """`height`: a window tall enough that the screenshot reaches the last plot."""
    browser = _browser()
    summaries = summarize_scores(sweep_scores())
    hashes = {(s.lane, s.model): (f"{s.lane}-{s.model}",) for s in summaries}
    provenance = Provenance(
        dagster_run_id="run",
        asset_key="sweep_report",
        mlflow_run_id="mlflow",
        fixture_id="fx-browser",
        world_seed=1,
        world_fingerprint="0" * 64,
        commit="c" * 40,
        dirty=False,
        scorer_version="scorer-1",
    )
    report = build_sweep_report(summaries, hashes, provenance)
    assert len(report.plots) >= 5
    page = tmp_path / "report.html"
    page.write_text(report.html, encoding="utf-8")
    assert 'src="plots/' not in report.html, "plots must be inlined, not linked"

    probe = tmp_path / "probe.html"
    probe.write_text(report.html.replace("</body>", CHECK_IMAGES + "</body>"), encoding="utf-8")
    common = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--allow-file-access-from-files",
    ]
    dom = subprocess.run(
        [*common, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    plots = report.html.count("<img")
    assert f'<div id="evalp-images">{plots}/{plots}</div>' in dom, dom[-500:]

    shot = tmp_path / "report.png"
    subprocess.run(
        [*common, f"--window-size=1280,{height}", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    pixels = mpimg.imread(shot)[..., :3]
    spread = pixels.max(axis=-1) - pixels.min(axis=-1)
    coloured = float((spread > 0.25).mean())
    assert coloured > 0.02, f"only {coloured:.4f} of the screenshot is coloured: plots not drawn"


# The plots' layout, measured on the figures themselves: every text a plot draws (titles,
# axis labels, tick labels, legend entries, annotations, cell values) must lie inside the
# figure and clear of every other text.

SWEEP_MODELS = (
    # name, skill, cost per call (USD), twin: models sharing a twin draw the same outcomes,
    # so they land on nearly the same cost and score
    ("sim-tool-responder-anthropic", 0.82, "0.01250", "responder"),
    ("sim-tool-responder-openai", 0.82, "0.01252", "responder"),
    ("sim-tool-responder-gemini", 0.82, "0.01255", "responder"),
    ("sim-strong", 0.95, "0.03000", "strong"),
    ("sim-small", 0.70, "0.00400", "small"),
    ("sim-medium-long-context", 0.85, "0.02000", "medium"),
)


def _sweep_scores(models: int = len(SWEEP_MODELS)) -> list[CaseScore]:
    """A realistic sweep: each model × 2 lanes × 10 categories × 3 seeds, 4 cases per
    category, the six labels among the failures."""
    scores = []
    for lane in ("model", "product"):
        for model, skill, cost, twin in SWEEP_MODELS[:models]:
            draw = random.Random(f"{lane}-{twin}")
            for seed in (0, 1, 2):
                for index in range(40):
                    value = 1.0 if draw.random() < skill else 0.0
                    label = "right" if value else draw.choice(LABELS[:5])
                    scores.append(
                        case_score(
                            model,
                            index,
                            value,
                            category=FIXTURE_CATEGORIES[index % len(FIXTURE_CATEGORIES)],
                            seed=seed,
                            lane=lane,
                        ).model_copy(
                            update={
                                "core": index < 5,
                                "fixture_id": "fx-sweep",
                                "settings_hash": f"{lane}-{model}",
                                "label": label,
                                "cost_usd": Decimal(cost),
                                "tokens": 300,
                            }
                        )
                    )
    return scores


@functools.cache
def _sweep_summaries(models: int = len(SWEEP_MODELS)) -> tuple[LaneSummary, ...]:
    return tuple(summarize_scores(_sweep_scores(models)))


def _parity_reports() -> tuple[ParityReport, ParityReport]:
    """A parity report and an ablation report (three guards off) over the ten categories."""

    def comparison(candidate: str, shift: float) -> Comparison:
        categories = tuple(
            CategoryDifference(
                category=category,
                shared=4,
                reference=80.0,
                candidate=80.0 + shift + index,
                difference=shift + index,
                low=shift + index - 6,
                high=shift + index + 6,
                small_n=index % 4 == 3,
                breaks_rule=False,
            )
            for index, category in enumerate(FIXTURE_CATEGORIES)
        )
        return Comparison(
            reference="every-guard-on",
            candidate=candidate,
            shared_cases=40,
            left_out={},
            difference=shift,
            low=shift - 4,
            high=shift + 4,
            mcnemar_reference_only=2,
            mcnemar_candidate_only=1,
            mcnemar_p=0.5,
            verdict="inconclusive",
            reasons=(),
            categories=categories,
        )

    def report(experiment_id: str, design: str, candidates: tuple[str, ...]) -> ParityReport:
        return ParityReport(
            experiment_id=experiment_id,
            spec_hash="s",
            kind="non_inferiority",
            margin=5.0,
            confidence=0.95,
            primary_metric="case_score",
            fixture_id="fx-sweep",
            arms=(),
            comparisons=tuple(comparison(c, -3.0 * i) for i, c in enumerate(candidates)),
            design=design,
        )

    return (
        report("sim-tool-responder-anthropic-parity", "parity", ("sim-tool-responder-openai",)),
        report(
            "guards-ablation",
            "ablation",
            ("stall_bounce-off", "iteration_cap-off", "injection_filter-off"),
        ),
    )


class _Drawn(NamedTuple):
    text: str
    extent: Bbox
    """The axis-aligned box around the text as drawn, display pixels."""
    outline: np.ndarray
    """The corners of the text's own box, turned with the text: a slanted tick label's
    extent is wider than the label and overlaps its neighbours' where no glyphs do."""


def _drawn_texts(figure: Figure) -> list[_Drawn]:
    """Every non-empty text the figure draws: the texts recorded as they are drawn (a tick
    outside the view limits has a label but never draws it), measured after the draw, in
    the layout engine's final positions."""
    drawn: list[Text] = []
    draw = Text.draw

    def recording(text: Text, renderer: RendererBase) -> None:
        drawn.append(text)
        draw(text, renderer)

    with mock.patch.object(Text, "draw", recording):
        figure.canvas.draw()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    seen: set[int] = set()
    texts = []
    for text in drawn:
        if id(text) in seen or not text.get_visible() or not text.get_text().strip():
            continue
        seen.add(id(text))
        extent = text.get_window_extent(renderer)
        texts.append(_Drawn(text.get_text(), extent, _outline(figure, text, extent, renderer)))
    return texts


def _outline(figure: Figure, text: Text, extent: Bbox, renderer: RendererBase) -> np.ndarray:
    """The text's upright size turned by its rotation, centred on its extent (the extent is
    the axis-aligned box around exactly that turned box, which is checked)."""
    upright = Text(0, 0, text.get_text(), fontproperties=text.get_fontproperties())
    upright.set_figure(figure)
    size = upright.get_window_extent(renderer)
    half_w, half_h = size.width / 2, size.height / 2
    corners = [(-half_w, -half_h), (half_w, -half_h), (half_w, half_h), (-half_w, half_h)]
    turned = Affine2D().rotate_deg(text.get_rotation()).transform(np.array(corners))
    outline: np.ndarray = turned + np.array(
        [(extent.x0 + extent.x1) / 2, (extent.y0 + extent.y1) / 2]
    )
    around = [*outline.min(axis=0), *outline.max(axis=0)]
    assert np.allclose(around, [extent.x0, extent.y0, extent.x1, extent.y1], atol=1.5), (
        f"{text.get_text()!r}: the turned box {around} is not the extent {_box(extent)}"
    )
    return outline


def _layout_problems(figure: Figure) -> list[str]:
    """What a reader would see as broken: a text cut off at the figure's edge (the PNG is
    cropped to the figure's content, but a browser or a `bbox_inches=None` save is not), or
    two texts drawn over each other."""
    texts = _drawn_texts(figure)
    assert texts, "the figure drew no text at all"
    edge = figure.bbox
    problems = [
        f"{t.text!r} at {_box(t.extent)} is cut off: the figure is {_box(edge)}"
        for t in texts
        if t.extent.x0 < edge.x0 - 0.5
        or t.extent.y0 < edge.y0 - 0.5
        or t.extent.x1 > edge.x1 + 0.5
        or t.extent.y1 > edge.y1 + 0.5
    ]
    problems += [
        f"{a.text!r} at {_box(a.extent)} overlaps {b.text!r} at {_box(b.extent)}"
        for a, b in itertools.combinations(texts, 2)
        if _overlap(a.outline, b.outline)
    ]
    return problems


def _box(box: BboxBase) -> str:
    return f"[{box.x0:.0f}, {box.y0:.0f}, {box.x1:.0f}, {box.y1:.0f}]"


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Two convex outlines share area beyond half a pixel (touching is not overlapping):
    they are apart when, along the normal of some edge of either, their shadows are."""
    for outline in (a, b):
        for corner, following in itertools.pairwise([*outline, outline[0]]):
            edge = following - corner
            normal = np.array([-edge[1], edge[0]]) / np.hypot(edge[0], edge[1])
            on_a, on_b = a @ normal, b @ normal
            if min(on_a.max(), on_b.max()) - max(on_a.min(), on_b.min()) <= 0.5:
                return False
    return True


def _shown(problems: list[str]) -> str:
    return f"{len(problems)} layout problems:\n" + "\n".join(problems[:15])


@pytest.fixture
def figures() -> Iterator[list[Figure]]:
    """Figures a test built, closed after it (pyplot keeps every open figure)."""
    built: list[Figure] = []
    yield built
    for figure in built:
        plt.close(figure)


def test_the_layout_check_sees_texts_drawn_over_each_other(figures: list[Figure]) -> None:
    figure, axis = plt.subplots(figsize=(4, 3))
    figures.append(figure)
    axis.set_title("a title")
    axis.annotate("sim-strong (model lane)", (0.5, 0.5))
    axis.annotate("sim-small (model lane)", (0.51, 0.5))
    figure.text(0.9, 0.5, "beyond the edge")
    axis.set_xticks([0.2, 0.4, 0.6], ["catalog_lookup", "contract_terms", "royalty_math"])
    axis.tick_params(axis="x", labelrotation=30)
    axis.text(0.1, 0.2, "slanted", rotation=30)
    axis.text(0.1, 0.2, "drawn over", rotation=30)
    problems = _layout_problems(figure)
    assert any("overlaps" in p and "sim-strong" in p and "sim-small" in p for p in problems)
    assert any("'slanted'" in p and "'drawn over'" in p for p in problems), problems
    # slanted neighbours whose upright boxes would collide (their extents do) but whose
    # glyphs are apart are not an overlap
    assert not any("'catalog_lookup'" in p and "overlaps" in p for p in problems), problems
    assert any("'beyond the edge'" in p and "cut off" in p for p in problems), problems


@pytest.mark.parametrize("models", [3, 6])
def test_the_category_chart_keeps_each_lanes_title_clear_of_the_ticks_above(
    models: int, figures: list[Figure]
) -> None:
    figure = sweep_report._figure_categories(_sweep_summaries(models))
    figures.append(figure)
    problems = _layout_problems(figure)
    assert not problems, _shown(problems)
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    upper, lower = figure.axes[:2]
    assert lower.get_title() == "product lane: mean case score per category"
    title = lower.title.get_window_extent(renderer)
    ticks = min(t.get_window_extent(renderer).y0 for t in upper.get_xticklabels())
    assert title.y1 <= ticks, f"the product title's top {title.y1:.0f} > ticks above {ticks:.0f}"


def test_cost_against_score_labels_never_overlap_for_models_alike(
    figures: list[Figure],
) -> None:
    summaries = _sweep_summaries()
    points = [(float(s.cost_usd), s.row(ALL).mean or 0.0) for s in summaries]
    widest = max(cost for cost, _ in points)
    alike = [
        (a, b)
        for a, b in itertools.combinations(points, 2)
        if abs(a[0] - b[0]) < 0.01 * widest and abs(a[1] - b[1]) < 1
    ]
    assert alike, "the inputs must hold models with nearly equal cost and score"
    figure = sweep_report._figure_cost(summaries)
    figures.append(figure)
    problems = _layout_problems(figure)
    assert not problems, _shown(problems)
    # every lane and model is still named in the plot, once
    texts = [drawn.text for drawn in _drawn_texts(figure)]
    for summary in summaries:
        name = f"{summary.model} ({summary.lane} lane)"
        assert sum(name in text for text in texts) == 1, (name, texts)


@pytest.mark.parametrize("models", [3, 6])
def test_the_six_labels_chart_shows_every_tick_label_whole(
    models: int, figures: list[Figure]
) -> None:
    summaries = _sweep_summaries(models)
    figure = sweep_report._figure_labels(summaries)
    figures.append(figure)
    problems = _layout_problems(figure)
    assert not problems, _shown(problems)
    names = [text.get_text() for text in figure.axes[0].get_xticklabels()]
    assert names == [f"{s.model} ({s.lane} lane)" for s in summaries]


@pytest.mark.parametrize("plot", ["lanes", "noise", "parity", "ablation"])
def test_the_other_plots_draw_no_text_over_text_or_past_the_edge(
    plot: str, figures: list[Figure]
) -> None:
    parity, ablation = _parity_reports()
    figure = {
        "lanes": lambda: sweep_report._figure_lanes(_sweep_summaries()),
        "noise": lambda: sweep_report._figure_noise(_sweep_summaries()),
        "parity": lambda: sweep_report._figure_parity([parity, ablation]),
        "ablation": lambda: sweep_report._figure_ablation(ablation),
    }[plot]()
    figures.append(figure)
    problems = _layout_problems(figure)
    assert not problems, _shown(problems)
