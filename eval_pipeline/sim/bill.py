"""The simulated provider's bill: one line per reply served with status 200 and a body.

The server keeps unpriced usage lines on the hot path and prices them only when the bill
is asked for, with ``eval_pipeline.providers.prices`` on each line's day (the server's
clock day when the reply was served; the book is re-read when its file changes). A
price the book cannot give is an error, never a zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import TYPE_CHECKING, Literal

from eval_pipeline.records import FrozenRecord
from eval_pipeline.sim.errors import SimAdminError

if TYPE_CHECKING:
    from eval_pipeline.providers.prices import PriceBook


class SimUsageLine(FrozenRecord):
    """A billed reply before pricing; `input_tokens` are plain (uncached) input tokens."""

    request_id: str
    day: date
    model: str
    wire_format: Literal["openai", "anthropic"]
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class SimBillLine(SimUsageLine):
    """A billed reply with its cost (a Decimal written as a string) and price tier."""

    cost_usd: str
    tier_id: str


def _load_price_book() -> PriceBook:
    try:
        from eval_pipeline.project_configs import load_price_book
    except ImportError as exc:
        raise SimAdminError(
            f"cannot price the bill: eval_pipeline.providers.prices is unavailable ({exc})"
        ) from exc
    try:
        return load_price_book()
    except Exception as exc:
        raise SimAdminError(f"cannot load the price book: {exc}") from exc


def price_lines(lines: Sequence[SimUsageLine]) -> list[SimBillLine]:
    """Price each usage line with the project's price book."""
    if not lines:
        return []
    book = _load_price_book()
    priced: list[SimBillLine] = []
    for line in lines:
        try:
            quote = book.quote(
                line.model,
                line.day,
                line.input_tokens,
                line.output_tokens,
                cache_read_tokens=line.cache_read_tokens,
                cache_write_tokens=line.cache_write_tokens,
            )
        except Exception as exc:
            raise SimAdminError(
                f"cannot price {line.model!r} on {line.day.isoformat()}: {exc}"
            ) from exc
        priced.append(
            SimBillLine(
                **line.model_dump(),
                cost_usd=str(quote.cost_usd),
                tier_id=str(quote.tier_id),
            )
        )
    return priced
