"""Off a terminal, each step's line is followed by its own time, never the previous step's
time on the next step's line (as it once was: "(previous step 7.2 s)")."""

from __future__ import annotations

import io
import re

from rich.console import Console

from eval_pipeline.dagster_client.display import MissionBar


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


def test_partitions_running_side_by_side_print_their_state_and_each_ends_on_its_own_line() -> None:
    """The lanes run in other processes: the queue's state prints when it changes (not at
    every case), each partition's end is one line with its own time, and the step before
    them gets its "done in" line before the first state line."""
    out = io.StringIO()
    bar = MissionBar(Console(file=out, force_terminal=False, width=200))
    bar.begin(4)
    bar.step("main job")
    bar.status("lanes in Dagster's run queue: 2 running", "0 case runs recorded")
    bar.status("lanes in Dagster's run queue: 2 running", "130 case runs recorded")
    bar.ended("lanes: sim-strong seed 0: done in 12.0 s (Dagster run abcd1234)")
    bar.status("lanes in Dagster's run queue: 1 running, 1 ended", "266 case runs recorded")
    bar.ended("lanes: sim-small seed 0: done in 14.0 s (Dagster run efab5678)")
    bar.step("results")
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/4] main job"
    assert re.fullmatch(r"\[1/4\] done in \d+\.\d s", lines[1])
    assert lines[2] == "      lanes in Dagster's run queue: 2 running; 0 case runs recorded"
    assert lines[3] == "[2/4] lanes: sim-strong seed 0: done in 12.0 s (Dagster run abcd1234)"
    assert lines[4] == (
        "      lanes in Dagster's run queue: 1 running, 1 ended; 266 case runs recorded"
    )
    assert lines[5] == "[3/4] lanes: sim-small seed 0: done in 14.0 s (Dagster run efab5678)"
    assert lines[6] == "[4/4] results"
    assert re.fullmatch(r"\[4/4\] done in \d+\.\d s", lines[7])
    assert re.fullmatch(r"mission: 4 steps in \d+ s", lines[8])
    assert len(lines) == 9
