"""Budget reservations: a cap that holds under concurrency.

A gate that counts only landed spend cannot see the calls in flight, so with many calls
running it lets them all through and the run overshoots its cap by up to the whole
in-flight cost. Here every call reserves its worst-case cost before it is sent; the gate
compares reserved + landed (+ the new reservation) with the cap; when the call lands its
reservation is released to the actual cost. Because the actual cost never exceeds the
worst case, landed spend can never exceed the cap.

Worst case: input tokens bounded by the UTF-8 byte length of the serialized request
(each token of a byte-level tokenizer covers at least one byte; provider-side additions
not in the bytes — chat template, tool-use system prompt — come from the model config's
`input_token_overhead`), each at the dearest input price of the tier (a cache write costs
more than plain input), plus the output limit the wire body actually carries, at the
output price.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from eval_pipeline.providers.errors import BudgetError, BudgetStoppedError
from eval_pipeline.providers.types import OUTPUT_LIMIT_KEYS
from eval_pipeline.providers.wire import encode_wire_body
from eval_pipeline.records import FrozenRecord


def input_token_bound(data: bytes, overhead: int = 0) -> int:
    """An upper bound on input tokens: the bytes of the serialized request plus overhead."""
    return len(data) + overhead


def worst_case_input_tokens(wire_body: Mapping[str, Any], overhead: int = 0) -> int:
    """`input_token_bound` of a wire body not serialized yet (a dry run's bound)."""
    return input_token_bound(encode_wire_body(wire_body), overhead)


def wire_output_limit(wire_body: Mapping[str, Any]) -> int:
    """The output limit the wire body carries: the largest of its limit fields.

    Read from the body that is sent, not from the request, so that nothing added on the
    way (an `extra` parameter, a transport's own field) can raise the limit unpriced.
    """
    limits = [wire_body[key] for key in OUTPUT_LIMIT_KEYS if key in wire_body]
    if not limits or not all(isinstance(v, int) and not isinstance(v, bool) for v in limits):
        raise BudgetError(
            f"the wire body has no integer output limit ({', '.join(OUTPUT_LIMIT_KEYS)}): "
            "its worst case cannot be bounded"
        )
    return int(max(limits))


class Reservation(FrozenRecord):
    """Money set aside for one call in flight."""

    id: int
    amount_usd: Decimal


class BudgetState(FrozenRecord):
    """A snapshot of the gate."""

    cap_usd: Decimal
    reserved_usd: Decimal
    landed_usd: Decimal
    in_flight: int


class BudgetGate:
    """Reserve-before-send budget gate; thread-safe, and atomic within an event loop.

    `reserve` refuses at once when the cap is crossed; `acquire` (async) waits while the
    amount would fit once calls in flight settle, and refuses only when it cannot fit even
    if every call in flight cost nothing (landed + amount > cap). Either way the sum of
    landed spend never exceeds the cap.
    """

    def __init__(self, cap_usd: Decimal) -> None:
        if cap_usd < 0:
            raise ValueError("a budget cap cannot be negative")
        self.cap_usd = cap_usd
        self._lock = threading.Lock()
        self._reserved: dict[int, Decimal] = {}
        self._reserved_total = Decimal(0)
        self._landed = Decimal(0)
        self._ids = itertools.count(1)
        self._settled: asyncio.Event | None = None

    def _refuse(self, amount_usd: Decimal, what: str) -> BudgetStoppedError:
        return BudgetStoppedError(
            f"budget stop for {what}: worst case ${amount_usd} on top of "
            f"${self._landed} landed and ${self._reserved_total} reserved "
            f"would cross the cap of ${self.cap_usd}"
        )

    def _take(self, amount_usd: Decimal) -> Reservation:
        reservation = Reservation(id=next(self._ids), amount_usd=amount_usd)
        self._reserved[reservation.id] = amount_usd
        self._reserved_total += amount_usd
        return reservation

    def reserve(self, amount_usd: Decimal, what: str = "call") -> Reservation:
        """Set `amount_usd` aside, or raise BudgetStoppedError if it would cross the cap."""
        with self._lock:
            if self._reserved_total + self._landed + amount_usd > self.cap_usd:
                raise self._refuse(amount_usd, what)
            return self._take(amount_usd)

    async def acquire(self, amount_usd: Decimal, what: str = "call") -> Reservation:
        """Reserve, waiting for calls in flight to settle while the amount could still fit."""
        while True:
            with self._lock:
                if self._landed + amount_usd > self.cap_usd:
                    raise self._refuse(amount_usd, what)
                if self._reserved_total + self._landed + amount_usd <= self.cap_usd:
                    return self._take(amount_usd)
                if self._settled is None:
                    self._settled = asyncio.Event()
                settled = self._settled
            await settled.wait()

    def settle(self, reservation: Reservation, actual_usd: Decimal) -> None:
        """Release the reservation to the actual cost of the call that landed (0 if unbilled)."""
        with self._lock:
            amount = self._reserved.pop(reservation.id)
            self._reserved_total -= amount
            self._landed += actual_usd
            settled, self._settled = self._settled, None
        if settled is not None:
            settled.set()

    def state(self) -> BudgetState:
        with self._lock:
            return BudgetState(
                cap_usd=self.cap_usd,
                reserved_usd=self._reserved_total,
                landed_usd=self._landed,
                in_flight=len(self._reserved),
            )
