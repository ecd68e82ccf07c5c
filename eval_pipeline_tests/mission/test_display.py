"""Off a terminal, each step's line is followed by its own time, never the previous step's
time on the next step's line (as it once was: "(previous step 7.2 s)")."""

from __future__ import annotations

import io
import re

from rich.console import Console

from eval_pipeline.mission.display import MissionBar


def test_each_step_says_its_own_time_on_a_line_of_its_own() -> None:
    out = io.StringIO()
    bar = MissionBar(Console(file=out, force_terminal=False, width=200))
    bar.begin(2)
    bar.step("main job")
    bar.step("lanes: sim-strong seed 0")
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/2] main job"
    assert re.fullmatch(r"\[1/2\] done in \d+\.\d s", lines[1])
    assert lines[2] == "[2/2] lanes: sim-strong seed 0"
    assert re.fullmatch(r"\[2/2\] done in \d+\.\d s", lines[3])
    assert re.fullmatch(r"mission: 2 steps in \d+ s", lines[4])
    assert len(lines) == 5
