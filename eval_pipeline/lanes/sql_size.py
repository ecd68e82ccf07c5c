"""Row generators and value builders in an agent's query, refused by the guard (issue 25).

The hard bound on what a query may take is the worker process (`sql_worker`: the kernel
caps its memory, the parent kills it past the deadline); this is the first, cheaper wall
with a better reason. An agent querying the world tables needs no generated rows, and no
string or list longer than a few thousand characters built from a number it chose:

- row and list generators (`generate_series`, `range`, in any position) are refused;
- builders whose size is an argument (`repeat`, `lpad`/`rpad`, `list_resize`/
  `array_resize`, `bar`'s width) pass only with an integer literal of at most MAX_BUILT;
- format strings (`printf`, `format`) pass only as a literal whose widths and precisions
  are at most MAX_BUILT.

What stays allowed and can still grow large (a recursive CTE doubling a string, a
`string_agg` over a cross join) is bounded by the worker, not here.
"""

from __future__ import annotations

import re

from sqlglot import exp

MAX_BUILT = 10_000
"""The largest count or width a builder may be given (characters or list elements)."""

_GENERATORS = frozenset({"generate_series", "range"})
# Functions sqlglot reads as anonymous (it has no class for them, or the call is
# schema-qualified, `main.repeat(...)`) whose size is argument i.
_SIZED_ANONYMOUS = {
    "repeat": 1,
    "lpad": 1,
    "rpad": 1,
    "list_resize": 1,
    "array_resize": 1,
    "bar": 3,
}
_GENERATOR_REASON = (
    "generate_series() and range() are not allowed: run_sql reads the world tables; it does "
    "not generate rows or lists"
)
_FORMATTERS = frozenset({"printf", "format"})
_NUMBER = re.compile(r"\d+")


def _literal_int(node: exp.Expr | None) -> int | None:
    """The value of an integer literal (optionally negated), None for anything else."""
    negative = isinstance(node, exp.Neg)
    if negative:
        assert isinstance(node, exp.Neg)
        node = node.this
    if isinstance(node, exp.Literal) and node.is_int:
        value = int(node.name)
        return -value if negative else value
    return None


def _size_refusal(name: str, size: exp.Expr | None) -> str | None:
    value = _literal_int(size)
    if value is not None and value <= MAX_BUILT:
        return None
    if value is not None:
        shown = f"{value:,}"
    elif size is None:
        shown = "no size"
    else:
        shown = " ".join(size.sql(dialect="duckdb").split())[:40]
    return (
        f"{name}() builds a value of the size it is given: the size must be a whole number "
        f"of at most {MAX_BUILT:,} written in the query (got {shown})"
    )


def _format_refusal(name: str, pattern: exp.Expr | None) -> str | None:
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        return f"{name}() needs its format written in the query as a string literal"
    widest = max((int(digits) for digits in _NUMBER.findall(pattern.name)), default=0)
    if widest > MAX_BUILT:
        return (
            f"{name}() widths and precisions must be at most {MAX_BUILT:,} "
            f"(the format asks for {widest:,})"
        )
    return None


def size_refusal(node: exp.Func) -> str | None:
    """Why the guard refuses function `node` as a generator or an unbounded builder, or
    None when it may run."""
    if isinstance(node, exp.GenerateSeries):
        return _GENERATOR_REASON
    if isinstance(node, exp.Repeat):
        return _size_refusal("repeat", node.args.get("times"))
    if isinstance(node, exp.Pad):
        return _size_refusal("lpad" if node.args.get("is_left") else "rpad", node.expression)
    if isinstance(node, exp.Format):
        return _format_refusal("format", node.this)
    if not isinstance(node, exp.Anonymous):
        return None
    name = node.name.lower()
    arguments = node.expressions
    if name in _GENERATORS:
        return _GENERATOR_REASON
    if name in _FORMATTERS:
        return _format_refusal(name, arguments[0] if arguments else None)
    position = _SIZED_ANONYMOUS.get(name)
    if position is None or (name == "bar" and len(arguments) <= position):
        return None  # bar's width defaults to 80
    return _size_refusal(name, arguments[position] if len(arguments) > position else None)
