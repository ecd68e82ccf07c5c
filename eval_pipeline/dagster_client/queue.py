"""`evalp`'s client of Dagster's run queue: lane partitions go to the queue with Dagster's own
command (`dagster job backfill`, one per provider, so each run carries its provider's tag),
the daemon starts them within the queue's limits (`providers.run_limits`: per provider, one
run per partition), and `evalp` waits on them and reports each as it ends.

One daemon serves an instance: whoever runs it (`evalp demo`, `evalp sweep`, `evalp ui`)
holds the daemon lock for as long as it lives (the daemon process itself holds it, so the
lock ends when the daemon does, even after a SIGKILL of the command that started it). A
command that finds the lock held uses the daemon already running.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from eval_pipeline import paths
from eval_pipeline.errors import EvalPipelineError, state_os_error
from eval_pipeline.providers.run_limits import PROVIDER_TAG

WORKSPACE = paths.PROJECT_ROOT / "workspace.yaml"
REQUEST_TAG = "evalp/request"
"""Names the runs one `evalp` command submitted (what it waits on)."""
DAEMON_LOCK = "dagster-daemon.lock"
FINISHED = {
    dg.DagsterRunStatus.SUCCESS,
    dg.DagsterRunStatus.FAILURE,
    dg.DagsterRunStatus.CANCELED,
}
POLL_S = 0.5
SUBMIT_TIMEOUT_S = 300
DIED_MESSAGE = (
    "its worker process (pid {pid}) ended without finishing the run (killed); marked failed "
    "by evalp, which found the process gone on this machine"
)


class QueueError(EvalPipelineError):
    """Dagster's queue refused or lost what `evalp` submitted."""

    exit_code = 1


def _bin(name: str) -> str:
    """A command of this environment (beside its python, not resolved through symlinks)."""
    return str(Path(sys.executable).parent / name)


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (Linux), so a daemon never
    outlives the command that started it."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class LocalDaemon:
    """This command's Dagster daemon, if it runs one: started when no other daemon holds the
    lock (at once, and again whenever the one serving ends, e.g. a killed demo's)."""

    def __init__(self, command: Sequence[str] | None = None) -> None:
        self.command = list(command or [_bin("dagster-daemon"), "run", "-w", str(WORKSPACE)])
        self.process: subprocess.Popen[bytes] | None = None

    def ensure(self) -> None:
        """Start one if none serves the instance; raise QueueError if ours ended."""
        if self.process is not None:
            if self.process.poll() is not None:
                raise QueueError(
                    f"the Dagster daemon ended (exit {self.process.returncode}) with runs "
                    f"still to run; see {daemon_log()}"
                )
            return
        lock = paths.dagster_home() / DAEMON_LOCK
        try:
            lock.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise state_os_error(error, lock.parent) from error
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # another command's daemon serves the instance
            try:
                daemon_log().parent.mkdir(parents=True, exist_ok=True)
                log = daemon_log().open("ab")
            except OSError as error:
                raise state_os_error(error, daemon_log().parent) from error
            with log:
                self.process = subprocess.Popen(
                    self.command,
                    env={**os.environ, "DAGSTER_HOME": str(paths.dagster_home())},
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(fd,),  # the daemon holds the lock from here on, until it ends
                    preexec_fn=_die_with_parent,
                )
        finally:
            os.close(fd)

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)


def daemon_log() -> Path:
    return paths.var_dir() / "logs" / "dagster-daemon.log"


@contextmanager
def running_daemon(command: Sequence[str] | None = None) -> Iterator[LocalDaemon]:
    """A daemon serving this instance for the block (this command's, stopped when the
    block ends, or another command's)."""
    daemon = LocalDaemon(command)
    daemon.ensure()
    try:
        yield daemon
    finally:
        daemon.stop()


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@dataclass(frozen=True)
class Submitted:
    """The runs of one `evalp` request, by partition."""

    request: str
    partitions: tuple[str, ...]


def submit_partitions(
    job: str,
    partitions_by_provider: Mapping[str, Sequence[str]],
    tags: Mapping[str, str],
) -> Submitted:
    """One `dagster job backfill` per provider (its runs tagged with it), all named by one
    request tag; the runs wait in the queue for the daemon."""
    request = uuid.uuid4().hex[:12]
    submitted: list[str] = []
    env = {**os.environ, "DAGSTER_HOME": str(paths.dagster_home())}
    for provider, partitions in sorted(partitions_by_provider.items()):
        if not partitions:
            continue
        run_tags = {**tags, PROVIDER_TAG: provider, REQUEST_TAG: request}
        command = [
            _bin("dagster"), "job", "backfill", "-w", str(WORKSPACE), "-j", job,
            "--partitions", ",".join(partitions), "--tags", json.dumps(run_tags), "--noprompt",
        ]  # fmt: skip
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S, check=False
        )
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise QueueError(f"dagster job backfill of {job} ({provider}) failed: {last}")
        submitted.extend(partitions)
    return Submitted(request=request, partitions=tuple(submitted))


def request_runs(instance: dg.DagsterInstance, request: str) -> list[dg.RunRecord]:
    return list(instance.get_run_records(filters=dg.RunsFilter(tags={REQUEST_TAG: request})))


def worker_pid(
    instance: dg.DagsterInstance, run_id: str, found: dict[str, int] | None = None
) -> int | None:
    """The process that started executing the run (its RUN_START event), if it has.

    `found` keeps the pids read before, by run id: a run's RUN_START is written once, by
    its one worker, so its pid is read once (`wait_for` asked for every started run twice a
    second, each time opening the run's event log)."""
    if found is not None and run_id in found:
        return found[run_id]
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_START):
        pid = None if entry.dagster_event is None else entry.dagster_event.pid
        if pid is not None and found is not None:
            found[run_id] = pid
        return pid
    return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def fail_if_worker_died(
    instance: dg.DagsterInstance, run: dg.DagsterRun, pids: dict[str, int] | None = None
) -> bool:
    """Mark `run` failed (and free its pool slots) if it is started on this machine and its
    worker process is gone; True if so. `pids`: the workers' pids found before (see
    `worker_pid`), kept by a caller that asks again."""
    if run.status not in (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING):
        return False
    pid = worker_pid(instance, run.run_id, pids)
    if pid is None or pid_alive(pid):
        return False
    current = instance.get_run_by_id(run.run_id)
    if current is None or current.is_finished:  # it ended between the two reads
        return False
    instance.report_run_failed(current, message=DIED_MESSAGE.format(pid=pid))
    instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    return True


def wait_for(
    instance: dg.DagsterInstance,
    submitted: Submitted,
    on_finished: Callable[[dg.RunRecord], None],
    daemon: LocalDaemon,
    status: Callable[[str], None] = lambda text: None,
    what: str = "lanes",
) -> list[dg.RunRecord]:
    """Every run of the request, once each ended (reported to `on_finished` as it does); a
    run whose worker died is marked failed. Raises QueueError if the daemon this command
    started ends first."""
    expected = len(submitted.partitions)
    reported: set[str] = set()
    pids: dict[str, int] = {}
    while True:
        runs = request_runs(instance, submitted.request)
        if len(runs) < expected:
            raise QueueError(
                f"the queue holds {len(runs)} of the {expected} runs submitted "
                f"(request {submitted.request})"
            )
        for record in runs:
            if fail_if_worker_died(instance, record.dagster_run, pids):
                continue  # failed now: reported on the next look
            if record.dagster_run.status in FINISHED and record.dagster_run.run_id not in reported:
                reported.add(record.dagster_run.run_id)
                on_finished(record)
        counts = Counter(_state(r.dagster_run.status) for r in runs)
        status(
            f"{what} in Dagster's run queue: "
            + ", ".join(f"{counts[state]} {state}" for state in STATES if counts[state])
        )
        if len(reported) == len(runs):
            return sorted(runs, key=lambda r: submitted.partitions.index(_partition(r)))
        daemon.ensure()
        time.sleep(POLL_S)


def _partition(record: dg.RunRecord) -> str:
    return record.dagster_run.tags.get("dagster/partition", "")


STATES = ("queued", "running", "ended")


def _state(status: dg.DagsterRunStatus) -> str:
    if status in FINISHED:
        return "ended"
    return "queued" if status == dg.DagsterRunStatus.QUEUED else "running"
