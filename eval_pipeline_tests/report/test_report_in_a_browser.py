"""The report's HTML as a person sees it: headless Chromium (from the OS packages) renders
the one self-contained file, every plot decodes and has a size, and the screenshot holds
the plots' colours (a page whose images failed shows text on white only)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from matplotlib import image as mpimg

from eval_pipeline.report.refs import Provenance
from eval_pipeline.report.sweep import build_sweep_report
from eval_pipeline.scoring.aggregate import summarize_scores
from eval_pipeline.scoring.score import CaseScore

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


def test_the_report_html_renders_its_plots_in_a_headless_browser(tmp_path: Path) -> None:
    browser = _browser()
    summaries = summarize_scores(_scores())
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
        [*common, "--window-size=1280,6000", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    pixels = mpimg.imread(shot)[..., :3]
    spread = pixels.max(axis=-1) - pixels.min(axis=-1)
    coloured = float((spread > 0.25).mean())
    assert coloured > 0.02, f"only {coloured:.4f} of the screenshot is coloured: plots not drawn"
