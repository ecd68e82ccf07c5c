"""A run's calls in flight: `ProviderSlots` (one process's share) hands out slots as
`asyncio.Semaphore` does, in O(1); `MachineSlots` (a provider's limit shared by the processes
of one machine) never lets the processes together past the limit, hands its own waiters
slots in arrival order, and gets a killed process's slots back.

`ProviderSlots` hands a released slot to the longest waiter instead of scanning the
queue. Over generated schedules (calls arriving, holding their slot for some turns of
the event loop, some cancelled while they wait or just after being handed a slot) it
grants slots in the same order as `asyncio.Semaphore`, never to more calls than the
limit, and ends with every slot free.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Protocol

from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.project_configs import load_price_book
from eval_pipeline.providers.call_slots import MachineSlots, ProviderSlots, RunSlots
from eval_pipeline.providers.config import ModelConfig
from eval_pipeline.providers.harness import CallSession
from eval_pipeline.providers.run_limits import calls_in_flight_per_run


class _Slots(Protocol):
    async def __aenter__(self) -> object: ...

    async def __aexit__(self, *_exc: object) -> object: ...


DEADLINE_S = 10.0
"""A schedule runs in milliseconds; a slot that is never given back hangs it instead (the
bound is generous: under a load average of 20-30 a 1 s bound once ended a schedule that
was not hung)."""
Call = tuple[int, int, int | None]
"""(turns before it asks for a slot, turns it holds one, turn after asking it is
cancelled at, or None)."""

calls = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=4),
        st.integers(min_value=0, max_value=4),
        st.none() | st.integers(min_value=0, max_value=6),
    ),
    min_size=1,
    max_size=14,
)


async def _turns(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def _schedule(slots: _Slots, limit: int, schedule: list[Call]) -> list[str]:
    """What happened, in order: `grant i` / `cancelled i`; checks the limit throughout."""
    events: list[str] = []
    holding = 0

    async def one(index: int, delay: int, hold: int) -> None:
        nonlocal holding
        await _turns(delay)
        async with slots:
            holding += 1
            try:
                assert holding <= limit
                events.append(f"grant {index}")
                await _turns(hold)
            finally:  # a call cancelled while it holds its slot gives it back
                holding -= 1

    async def cancel_later(task: asyncio.Task[None], delay: int, after: int) -> None:
        await _turns(delay + after)
        if not task.done():
            task.cancel()

    tasks = [asyncio.ensure_future(one(i, d, h)) for i, (d, h, _) in enumerate(schedule)]
    cancellers = [
        asyncio.ensure_future(cancel_later(tasks[i], d, c))
        for i, (d, _, c) in enumerate(schedule)
        if c is not None
    ]
    await asyncio.gather(*cancellers)
    for index, result in enumerate(await asyncio.gather(*tasks, return_exceptions=True)):
        if isinstance(result, asyncio.CancelledError):
            events.append(f"cancelled {index}")
        elif isinstance(result, BaseException):  # a broken limit, not an outcome to compare
            raise result
    return events


@settings(max_examples=300, deadline=None)
@given(limit=st.integers(min_value=1, max_value=4), schedule=calls)
def test_slots_are_granted_as_an_asyncio_semaphore_grants_them(
    limit: int, schedule: list[Call]
) -> None:
    slots = ProviderSlots(limit)
    ours = asyncio.run(asyncio.wait_for(_schedule(slots, limit, schedule), DEADLINE_S))
    theirs = asyncio.run(_schedule(asyncio.Semaphore(limit), limit, schedule))
    assert ours == theirs
    assert slots._free == limit and slots._woken == 0 and not slots._waiters


def test_a_waiter_cancelled_after_it_was_handed_a_slot_passes_it_on() -> None:
    async def scenario() -> list[str]:
        slots = ProviderSlots(1)
        order: list[str] = []
        await slots.acquire()

        async def wait(name: str) -> None:
            async with slots:
                order.append(name)

        first = asyncio.ensure_future(wait("first"))
        second = asyncio.ensure_future(wait("second"))
        await asyncio.sleep(0)  # both queued
        slots.release()  # handed to `first`, which has not run yet
        first.cancel()
        await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), DEADLINE_S)
        assert slots._free == 1 and slots._woken == 0 and not slots._waiters
        return order

    assert asyncio.run(scenario()) == ["second"]


@settings(max_examples=150, deadline=None)
@given(limit=st.integers(min_value=1, max_value=4), schedule=calls)
def test_machine_slots_never_exceed_the_limit_and_end_with_every_slot_free(
    limit: int, schedule: list[Call]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        slots = MachineSlots(Path(folder), limit)
        events = asyncio.run(asyncio.wait_for(_schedule(slots, limit, schedule), DEADLINE_S))
        granted = [int(event.split()[1]) for event in events if event.startswith("grant")]
        cancelled = {int(event.split()[1]) for event in events if event.startswith("cancelled")}
        # each call granted at most once; every call not cancelled was granted
        assert len(granted) == len(set(granted))
        assert set(range(len(schedule))) - cancelled <= set(granted)
        # no slot is left locked: another process's view of the pool takes all of them
        other = MachineSlots(Path(folder), limit)
        assert all(other._take() is not None for _ in range(limit))
        assert other._take() is None
        other.close()
        slots.close()


def test_machine_slots_grant_a_processs_waiters_in_arrival_order(tmp_path: Path) -> None:
    async def scenario() -> list[int]:
        slots = MachineSlots(tmp_path, 1)
        order: list[int] = []
        held = await slots.acquire()

        async def wait(index: int) -> None:
            async with slots:
                order.append(index)
                await asyncio.sleep(0)

        waiting = [asyncio.ensure_future(wait(i)) for i in range(6)]
        await asyncio.sleep(0)
        slots.release(held)
        await asyncio.wait_for(asyncio.gather(*waiting), DEADLINE_S)
        slots.close()
        return order

    assert asyncio.run(scenario()) == list(range(6))


HOLD_S = 0.05


def _hold_slots(folder: str, limit: int, calls: int, log: str) -> None:
    """One process's calls: each holds a slot for HOLD_S; their (start, end) to `log`."""

    async def run() -> list[tuple[float, float]]:
        slots = MachineSlots(Path(folder), limit)
        spans: list[tuple[float, float]] = []

        async def call() -> None:
            async with slots:
                start = time.monotonic()
                await asyncio.sleep(HOLD_S)
                spans.append((start, time.monotonic()))

        await asyncio.gather(*(call() for _ in range(calls)))
        return spans

    spans = asyncio.run(run())
    Path(log).write_text("\n".join(f"{start} {end}" for start, end in spans))


def test_the_processes_of_a_machine_share_one_limit(tmp_path: Path) -> None:
    """Three processes, each wanting more calls in flight than the whole limit: together
    they never pass it, and each got slots (no process is shut out)."""
    limit, processes, calls = 6, 3, 24
    spawn = multiprocessing.get_context("spawn")
    workers = [
        spawn.Process(
            target=_hold_slots, args=(str(tmp_path / "pool"), limit, calls, str(tmp_path / f"{i}"))
        )
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    spans = [
        tuple(float(x) for x in line.split())
        for i in range(processes)
        for line in (tmp_path / f"{i}").read_text().splitlines()
    ]
    assert len(spans) == processes * calls
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    in_flight = peak = 0
    for _, step in edges:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak <= limit
    # the pool was used, not one process at a time: more than a third of the limit at once
    assert peak > limit // processes


def _hold_all(folder: str, limit: int, ready: str) -> None:
    slots = MachineSlots(Path(folder), limit)
    assert all(slots._take() is not None for _ in range(limit))
    Path(ready).touch()
    time.sleep(600)


def test_a_killed_process_gives_its_slots_back(tmp_path: Path) -> None:
    limit = 3
    spawn = multiprocessing.get_context("spawn")
    ready = tmp_path / "ready"
    holder = spawn.Process(target=_hold_all, args=(str(tmp_path / "pool"), limit, str(ready)))
    holder.start()
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert holder.exitcode is None and time.monotonic() < deadline, "the holder failed"
        time.sleep(0.05)
    slots = MachineSlots(tmp_path / "pool", limit)

    async def take_one(timeout: float) -> int:
        return await asyncio.wait_for(slots.acquire(), timeout)

    try:
        asyncio.run(take_one(0.3))
    except TimeoutError:
        pass
    else:
        raise AssertionError("a slot was free while another process held them all")
    assert holder.pid is not None
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(timeout=30)
    assert asyncio.run(take_one(5.0)) in range(limit)
    slots.close()


def _config(provider: str, max_in_flight: int, name: str = "m") -> ModelConfig:
    return ModelConfig(
        name=name,
        api="anthropic_messages",
        provider=provider,
        model=name,
        api_key_env="ANTHROPIC_API_KEY",
        max_in_flight=max_in_flight,
    )


def test_a_run_on_this_machine_may_use_its_providers_whole_limit(tmp_path: Path) -> None:
    """Every run on this machine: one run alone takes all of `max_in_flight` (with a fixed
    share it would take half of it, its queue allowing two runs); a config with a lower
    limit (the judge's) keeps to its own within the same pool."""
    model, judge = _config("anthropic", 16), _config("anthropic", 4, name="judge")
    with RunSlots(machine=tmp_path) as slots:
        pool = slots.for_config(model)
        assert isinstance(pool, MachineSlots)
        assert sum(pool._take() is not None for _ in range(20)) == 16
        assert slots.for_config(judge) is not pool
    with RunSlots(machine=tmp_path) as slots:
        judged = slots.for_config(judge)
        assert isinstance(judged, MachineSlots)
        assert sum(judged._take() is not None for _ in range(20)) == 4
    with RunSlots(share=True) as apart:
        share = apart.for_config(model)
        assert isinstance(share, ProviderSlots)
        assert share._free == calls_in_flight_per_run("anthropic", 16) == 8


def test_a_session_outside_the_run_queue_has_its_configs_whole_limit(tmp_path: Path) -> None:
    """A call session given no run's slots (a script, a bench, `evalp` outside Dagster's
    queue) is the only process of its run: it may have all of `max_in_flight` in flight.
    It kept a queued run's share (16 // 8 = 2 for the simulated provider), so the harness
    bench measured ours at an eighth of the calls in flight it was given."""
    config = _config("simulated", 16)
    session = CallSession(
        price_book=load_price_book(), run_id="alone", journal_path=tmp_path / "envelopes.jsonl"
    )
    alone = session.slot(config)
    assert isinstance(alone, ProviderSlots)
    assert alone._free == 16


SLOTS_UNDER_A_FILE_LIMIT = """
import resource, sys
from pathlib import Path
from eval_pipeline.errors import StateError
from eval_pipeline.providers.call_slots import MachineSlots
soft, hard = int(sys.argv[2]), int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
try:
    MachineSlots(Path(sys.argv[1]), 512).close()
except StateError as error:
    print(error)
    raise SystemExit(2)
print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


def test_a_pool_raises_the_open_file_limit_it_needs_or_names_it(tmp_path: Path) -> None:
    """512 slot files beside a run's own: a soft limit of 300 is raised (the hard one allows
    it); a hard limit of 300 is named, with the setting to lower, before any file opens."""
    import subprocess
    import sys

    raised = subprocess.run(
        [sys.executable, "-c", SLOTS_UNDER_A_FILE_LIMIT, str(tmp_path / "a"), "300", "4096"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert raised.returncode == 0, raised.stderr[-2000:]
    assert int(raised.stdout.split()[-1]) >= 512
    refused = subprocess.run(
        [sys.executable, "-c", SLOTS_UNDER_A_FILE_LIMIT, str(tmp_path / "b"), "300", "300"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr[-2000:]
    assert "max_in_flight of 512" in refused.stdout and "300 files" in refused.stdout
    assert not (tmp_path / "b").exists()
