"""A provider's slots hand out calls in flight as `asyncio.Semaphore` does, in O(1).

`ProviderSlots` hands a released slot to the longest waiter instead of scanning the
queue. Over generated schedules (calls arriving, holding their slot for some turns of
the event loop, some cancelled while they wait or just after being handed a slot) it
grants slots in the same order as `asyncio.Semaphore`, never to more calls than the
limit, and ends with every slot free.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from hypothesis import given, settings
from hypothesis import strategies as st

from eval_pipeline.providers.harness import ProviderSlots


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
            assert holding <= limit
            events.append(f"grant {index}")
            await _turns(hold)
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
