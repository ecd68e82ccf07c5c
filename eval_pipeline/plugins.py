"""Plugins found by name through entry-point groups (worlds, products): one loader, one
error for a missing, broken, clashing or mistyped registration."""

from __future__ import annotations

import functools
from importlib.metadata import EntryPoint, entry_points
from typing import TypeVar

from eval_pipeline.errors import ConfigError

T = TypeVar("T")


@functools.cache
def entry_points_of(group: str, what: str = "plugin") -> dict[str, EntryPoint]:
    """The group's entry points by name (a name two distributions register differently is
    an error naming both)."""
    found: dict[str, EntryPoint] = {}
    for point in entry_points(group=group):
        if point.name in found and found[point.name].value != point.value:
            raise ConfigError(
                f"{what} {point.name!r} is registered twice ({found[point.name].value} "
                f"and {point.value}): uninstall one"
            )
        found[point.name] = point
    return found


@functools.cache
def load_registration(group: str, name: str, kind: type[T], what: str) -> T:
    """The object entry point `name` of `group` names, checked to be a `kind` (ConfigError
    naming the plugin and its target when it is unknown, cannot be imported or is not);
    loaded once a process."""
    points = entry_points_of(group, what)
    point = points.get(name)
    if point is None:
        known = ", ".join(sorted(points))
        raise ConfigError(
            f"unknown {what} {name!r}; known: {known}"
            if known
            else f"unknown {what} {name!r}: no {group} entry point is installed "
            "(is eval_pipeline installed? `./dev setup`)"
        )
    try:
        registration = point.load()
    except Exception as error:  # a plugin's import error, whatever it is, is one line here
        raise ConfigError(
            f"{what} {name!r} ({point.value}) cannot be loaded: {type(error).__name__}: {error}"
        ) from error
    if not isinstance(registration, kind):
        raise ConfigError(
            f"{what} {name!r} ({point.value}) names a {type(registration).__name__}, "
            f"not an {kind.__module__}.{kind.__qualname__}"
        )
    return registration
