"""What `evalp demo` shows while the mission runs: a progress display over its steps (what
it prints when it ends is `cli.outcomes`')."""

from __future__ import annotations

import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


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
