"""What `evalp demo` shows while the mission runs and when it ends: a progress display over
its steps, then the headline, the gate's verdict with its reasons, each experiment's
verdict, and where to look."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from eval_pipeline.mission.runner import ExperimentOutcome, JobOutcome


class MissionBar:
    """A progress bar over the mission's steps on a terminal (the lanes draw their own
    per-case bars under it); elsewhere (CI logs, pipes) a line as each step starts and one
    with its own time as it ends."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.total = 0
        self.done = -1
        self.started = time.monotonic()
        self.step_started = self.started
        self.timed = False
        """The current step ended on its own line already (`ended`): no "done in" for it."""
        self.last_status = ""

    def begin(self, total: int) -> None:
        self.total = total
        self.started = self.step_started = time.monotonic()
        if self.console.is_terminal:
            self.progress = Progress(
                TextColumn("[bold]mission"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self.console,
            )
            self.progress.start()
            self.task = self.progress.add_task("starting", total=total)

    def step(self, description: str) -> None:
        now = time.monotonic()
        took = now - self.step_started
        self.step_started = now
        self.done += 1
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, completed=self.done, description=description)
            return
        if self.done and not self.timed:
            self._finished(self.done, took)
        self.timed = False
        self.console.print(
            f"[{self.done + 1}/{self.total}] {description}", highlight=False, soft_wrap=True
        )

    def ended(self, description: str) -> None:
        """A step that ran beside others has ended (its own time is in `description`)."""
        self.step(description)
        self.timed = True

    def status(self, text: str, detail: str = "") -> None:
        """What steps running beside each other are doing now: on a terminal as it changes,
        elsewhere a line each time `text` changes (not for every change of `detail`)."""
        shown = f"{text}; {detail}" if detail else text
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=shown)
        elif text != self.last_status:
            if self.done >= 0 and not self.timed:  # the step before these ended here
                self._finished(self.done + 1, time.monotonic() - self.step_started)
                self.timed = True
            self.console.print(f"      {shown}", highlight=False, soft_wrap=True)
        self.last_status = text

    def _finished(self, step: int, took: float) -> None:
        """A step's own time, on a line of its own (not on the next step's line)."""
        self.console.print(
            f"[{step}/{self.total}] done in {took:.1f} s", highlight=False, soft_wrap=True
        )

    def close(self) -> None:
        if not self.total:
            return
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, completed=self.done + 1, description="done")
            self.progress.stop()
        elif self.done >= 0 and not self.timed:
            self._finished(self.done + 1, time.monotonic() - self.step_started)
        elapsed = time.monotonic() - self.started
        self.console.print(
            f"mission: {self.done + 1} steps in {elapsed:.0f} s", highlight=False, soft_wrap=True
        )


def echo_headline(results: JobOutcome) -> None:
    summary = results.materializations.get("sweep_summary", {})
    headline = summary.get("headline")
    if isinstance(headline, str):
        click.echo(
            "\nHeadline: mean case score in points over every case (each case's mean over its "
            "seeds), 95% bootstrap interval over cases; n = case × seed pairs scored, "
            "‡ never heard, † budget-stopped"
        )
        click.echo("\n".join("  " + line for line in headline.splitlines()))
    comparisons = summary.get("comparisons")
    if isinstance(comparisons, str) and comparisons:
        click.echo(
            "\nWho leads: paired difference over shared cases (candidate − reference, "
            "points), 95% bootstrap interval, McNemar p on the majority vote, and the seed "
            "noise floor (a model against itself)"
        )
        click.echo("\n".join("  " + line for line in comparisons.splitlines()))


def echo_gate(results: JobOutcome) -> None:
    gate = results.materializations.get("ship_gate", {})
    if not gate:
        click.echo("\nShip gate: not evaluated (see the errors above)")
        return
    verdicts = gate.get("verdicts_by_model")
    verdicts = verdicts if isinstance(verdicts, dict) else {}
    passing = sum(1 for verdict in verdicts.values() if verdict == "PASSES")
    click.echo(
        f"\nShip gate: {'PASSES' if gate.get('passed') else 'FAILS'} "
        f"({passing} of {len(verdicts)} candidates pass; {gate.get('candidates_from', '?')})"
    )
    failures = gate.get("failed_rules_by_model")
    failures = failures if isinstance(failures, dict) else {}
    for model, verdict in verdicts.items():
        failed = [str(rule) for rule in failures.get(model, [])]
        click.echo(f"  {model}: {verdict}" + (f" ({'; '.join(failed)})" if failed else ""))
    notices = gate.get("notices")
    for notice in notices if isinstance(notices, list) else []:
        click.echo(f"  notice: {notice}")


def _interval(low: object, high: object) -> str:
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return "no interval"
    return f"[{low:+.1f}, {high:+.1f}]"


def echo_experiments(experiments: Sequence[ExperimentOutcome]) -> None:
    if not experiments:
        return
    click.echo("\nExperiments (pre-registered; candidate − reference, points per case):")
    for experiment in experiments:
        if experiment.refused is not None:
            click.echo(f"  {experiment.experiment}: NOT RUN: {experiment.refused}")
            continue
        registered = "registered now" if experiment.newly_registered else "registration"
        click.echo(f"  {experiment.experiment} ({registered} {experiment.registration_run_id}):")
        report = _parity_metadata(experiment)
        if report is None:
            failed = [r for r in experiment.runs if not r.success]
            where = (failed[0].partition or "parity report") if failed else "?"
            click.echo(f"    did not finish ({where}); see the errors above")
            continue
        comparisons = report.get("comparisons")
        for c in comparisons if isinstance(comparisons, list) else []:
            difference = c.get("difference")
            delta = "–" if difference is None else f"{difference:+.1f}"
            margin = f"{c.get('kind', '').replace('_', '-')} margin {c.get('margin')}"
            click.echo(
                f"    {c.get('candidate')} vs {c.get('reference')}: Δ {delta} "
                f"{_interval(c.get('low'), c.get('high'))} ({margin}): "
                f"{str(c.get('verdict')).upper()}"
                + (f": {c['meaning']}" if c.get("meaning") else "")
            )
        click.echo(f"    {report.get('path')}")


def _parity_metadata(experiment: ExperimentOutcome) -> Mapping[str, object] | None:
    key = f"experiments/{experiment.experiment}/parity_report"
    for run in experiment.runs:
        if key in run.materializations:
            return run.materializations[key]
    return None


def echo_where_to_look(results: JobOutcome) -> None:
    report = results.materializations.get("sweep_report", {})
    click.echo("\nWhere to look:")
    if report:
        click.echo(f"  report   {report.get('html')}  (markdown: {report.get('path')})")
        click.echo(f"  audit    evalp audit {report.get('path')}")
    tracked = results.materializations.get("sweep_tracking", {})
    if tracked:
        click.echo(
            f"  MLflow   experiment {tracked.get('mlflow_experiment')}, sweep run "
            f"{tracked.get('mlflow_parent_run_id')}: the score columns at "
            f"http://127.0.0.1:5000{tracked.get('mlflow_runs_page', '')}"
        )
    click.echo("  UIs      ./dev ui  (or: evalp ui): Dagster on :3000, MLflow on :5000")
