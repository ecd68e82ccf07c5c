"""How many calls a run may have in flight, per provider.

`ProviderSlots` bounds one process's calls: a run's share of the provider's limit when runs
may be on several machines (the run queue bounds how many share it). `MachineSlots` is the
provider's whole `max_in_flight` shared by every process on this machine that calls it:
with a fixed share per run (`run_limits.calls_in_flight_per_run`) slots sit idle whenever
fewer runs call than the queue allows (while a run's worker starts, in a partition's tail,
in a sweep's last runs). There a slot is a lock file, a call in flight holds one with
`flock`, and any run takes whatever slots are free. The kernel releases a process's locks
when it ends, so a killed run's slots come back without anyone cleaning up.

A process grants its own waiters first come, first served (call ids stay deterministic);
when no slot is free it looks again, less often the longer it finds none (`POLL_MAX_S`).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import random
import resource
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from eval_pipeline.errors import StateError, state_os_error
from eval_pipeline.providers.run_limits import calls_in_flight_per_run

if TYPE_CHECKING:
    from eval_pipeline.providers.config import ModelConfig


class ProviderSlots:
    """A provider's limit on calls in flight: `asyncio.Semaphore`'s order, in O(1).

    `asyncio.Semaphore` keeps a woken waiter in its queue until the waiter runs, and
    finds the next one to wake by scanning the queue from the front, past every waiter
    woken but not yet run: when a wave of replies lands in one turn of the event loop
    (hundreds of calls in flight, thousands queued) that scan is quadratic in the wave.
    Here a woken waiter leaves the queue and is counted (`_woken`) until it runs; the
    rest is the semaphore's rule, step for step: a newcomer queues while any slot is
    promised to a waiter (woken or not), a waiter that runs with a slot to spare wakes
    the next, and one cancelled after being woken gives its slot back.
    `test_call_slots.py` checks the grants equal the semaphore's over generated
    schedules of arrivals, holds and cancellations.
    """

    __slots__ = ("_free", "_waiters", "_woken")

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError("a limit on calls in flight cannot be negative")
        self._free = limit
        self._waiters: deque[asyncio.Future[None]] = deque()
        """Waiters not woken yet, in arrival order (a cancelled one stays until skipped)."""
        self._woken = 0

    def locked(self) -> bool:
        """Whether a newcomer must wait (the semaphore's `locked`)."""
        return (
            self._free == 0
            or self._woken > 0
            or any(not waiter.cancelled() for waiter in self._waiters)
        )

    async def acquire(self) -> None:
        if not self.locked():
            self._free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if not waiter.cancelled():  # woken before the cancel landed: give the slot back
                self._woken -= 1
                self.release()
            elif waiter in self._waiters:  # O(n), on cancellation only
                self._waiters.remove(waiter)
            raise
        self._woken -= 1
        if self._free > 0:
            self._wake_next()

    def release(self) -> None:
        self._free += 1
        self._wake_next()

    def _wake_next(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():  # a cancelled waiter is skipped
                self._free -= 1
                self._woken += 1
                waiter.set_result(None)
                return

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *_exc: object) -> None:
        self.release()


POLL_S = 0.005
POLL_MAX_S = 0.08
"""A process with waiting calls looks for a slot another process freed after `POLL_S`,
then twice as long after each look that found none, up to `POLL_MAX_S` (a look costs a
`flock` per slot: 0.15 ms for 128; with many runs starved at once, one of them looks
every few milliseconds). A process's own freed slots go straight to its waiters."""


FILES_BESIDE_SLOTS = 256
"""Open files a run needs beside its slot files (sockets, journals, the warehouse)."""


def make_room_for_files(count: int) -> None:
    """Raise this process's soft limit on open files toward its hard one when `count` more
    files would not fit beside what a run holds; name the limit if even the hard one is
    too low (instead of a run failing later on "Too many open files")."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = count + FILES_BESIDE_SLOTS
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise StateError(
            f"a max_in_flight of {count} holds {count} slot files open, but this process may "
            f"open only {hard} files (`ulimit -n`, with {FILES_BESIDE_SLOTS} kept for the run "
            "itself): lower the model config's max_in_flight or raise the limit"
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


class MachineSlots:
    """`limit` calls in flight across the processes that open `folder` (slot files
    `slot-0000` … of it: a config with a lower limit uses the first ones only, so each
    config's limit holds and together they stay within the highest)."""

    __slots__ = ("_fds", "_free_here", "_held", "_poll_s", "_pump", "_waiters")

    def __init__(self, folder: Path, limit: int, poll_s: float = POLL_S) -> None:
        if limit < 1:
            raise ValueError("a limit on calls in flight must be at least 1")
        make_room_for_files(limit)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._fds = [
                os.open(folder / f"slot-{index:04d}", os.O_RDWR | os.O_CREAT, 0o644)
                for index in range(limit)
            ]
        except OSError as error:
            raise state_os_error(error, error.filename or folder) from error
        order = list(range(limit))
        random.shuffle(order)  # processes starting together try different slots first
        self._free_here: deque[int] = deque(order)
        """Slots this process does not hold (only these are tried: a second `flock` on a
        descriptor that holds the lock succeeds)."""
        self._waiters: deque[asyncio.Future[int]] = deque()
        self._poll_s = poll_s
        self._pump: asyncio.Task[None] | None = None
        self._held: list[int] = []
        """Slots held through `async with` (the harness shares one object per provider:
        which of this process's slots a call gives back does not matter)."""

    def close(self) -> None:
        """Close the slot files (releasing any slot still held)."""
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    def _take(self) -> int | None:
        """A slot no process holds, now locked by this one; None if every slot is held."""
        for _ in range(len(self._free_here)):
            index = self._free_here.popleft()
            try:
                fcntl.flock(self._fds[index], fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self._free_here.append(index)
                continue
            return index
        return None

    async def acquire(self) -> int:
        """A slot (its index, for `release`); waits behind this process's earlier callers."""
        if not self._waiters:
            index = self._take()
            if index is not None:
                return index
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._grant())
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # granted as the cancel landed
                self.release(waiter.result())
            raise

    def release(self, index: int) -> None:
        """The slot goes to this process's next waiter if one waits (no other process saw
        it free: the pool is used as fully either way, and the waiter does not wait for the
        next look), else back to the machine."""
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(index)
                return
        fcntl.flock(self._fds[index], fcntl.LOCK_UN)
        self._free_here.append(index)

    async def _grant(self) -> None:
        """Hand slots other processes freed to this process's waiters, in order, until
        none waits."""
        waiters = self._waiters
        pause = self._poll_s
        while waiters:
            if waiters[0].done():  # cancelled while waiting
                waiters.popleft()
                continue
            index = self._take()
            if index is None:
                await asyncio.sleep(pause)
                pause = min(pause * 2, max(POLL_MAX_S, self._poll_s))
                continue
            pause = self._poll_s
            waiters.popleft().set_result(index)

    async def __aenter__(self) -> None:
        self._held.append(await self.acquire())

    async def __aexit__(self, *_exc: object) -> None:
        self.release(self._held.pop())


CallSlots = ProviderSlots | MachineSlots


class RunSlots:
    """A run's calls in flight per provider, shared by the run's call sessions (a
    partition's two lanes: one lane's tail leaves its slots to the other).

    With `machine` (a folder of slot pools: every run of the instance runs on this
    machine), a provider's whole `max_in_flight` is one pool for every process; with
    `share` (a queued run that may sit on another machine), the run keeps its share
    (`run_limits.calls_in_flight_per_run`); with neither (a process calling on its own,
    outside the run queue), the whole `max_in_flight` is this process's. `provider_limits`
    sets a provider's limit for this run alone (a test's bound)."""

    def __init__(
        self,
        machine: Path | None = None,
        provider_limits: Mapping[str, int] | None = None,
        *,
        share: bool = False,
    ) -> None:
        if machine is not None and share:
            raise ValueError("a run either shares the machine's pool or keeps a share")
        self.machine = machine
        self.share = share
        self.provider_limits = dict(provider_limits or {})
        self._slots: dict[str, CallSlots] = {}

    def for_config(self, config: ModelConfig) -> CallSlots:
        """The slots `config`'s calls take: on this machine, its provider's pool up to its own
        limit; as a share or on its own, its provider's (the provider's first config sets
        the limit)."""
        given = self.provider_limits.get(config.provider)
        pool = self.machine / config.provider if self.machine and given is None else None
        key = config.provider if pool is None else f"{config.provider}/{config.max_in_flight}"
        slots = self._slots.get(key)
        if slots is None:
            if pool is not None:
                slots = MachineSlots(pool, config.max_in_flight)
            else:
                limit = (
                    calls_in_flight_per_run(config.provider, config.max_in_flight)
                    if self.share
                    else config.max_in_flight
                )
                slots = ProviderSlots(limit if given is None else given)
            self._slots[key] = slots
        return slots

    def close(self) -> None:
        for slots in self._slots.values():
            if isinstance(slots, MachineSlots):
                slots.close()
        self._slots.clear()

    def __enter__(self) -> RunSlots:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
