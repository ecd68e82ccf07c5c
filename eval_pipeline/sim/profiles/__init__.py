"""Behaviour profiles of the simulated provider: a registry of plugins.

A request's ``model`` is ``<profile>`` or ``<profile>:<variant>``. A profile is built once
per server process from a :class:`ProfileSetup` and then answers every request for its
name with :meth:`Profile.respond`, a pure function of the wire-neutral
:class:`~eval_pipeline.sim.neutral.SimRequest` (it must not read the clock, files, the
network or the answer key, so that behaviour stays deterministic).

Adding a profile: put a module in this package (every module here is imported by the
server at start-up), or anywhere else and pass its module name to the server with
``--plugin MODULE`` / ``plugins=[...]``; in it::

    @register_profile("my-agent")
    class MyAgent:
        def __init__(self, setup: ProfileSetup) -> None: ...
        def accepts_variant(self, variant: str | None) -> bool: return variant is None
        def respond(self, request: SimRequest) -> Outcome: ...
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from eval_pipeline.sim.errors import ProfileError
from eval_pipeline.sim.neutral import Outcome, SimRequest

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass(frozen=True)
class ProfileSetup:
    """What a profile is built from.

    ``options`` is the ``"<name>"`` section of ``--profile-options``; ``variant_options``
    holds the ``"<name>:<variant>"`` sections, keyed by variant.
    """

    name: str
    server_seed: int
    options: Mapping[str, Any] = field(default_factory=dict)
    variant_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


class Profile(Protocol):
    """A behaviour profile: decides the outcome of each request for its model name."""

    def accepts_variant(self, variant: str | None) -> bool:
        """Whether ``<name>:<variant>`` (or bare ``<name>`` for ``None``) is a known model."""
        ...

    def respond(self, request: SimRequest) -> Outcome:
        """The outcome for one request; deterministic in the request."""
        ...


ProfileFactory = Callable[[ProfileSetup], Profile]
_F = TypeVar("_F", bound=ProfileFactory)

_REGISTRY: dict[str, ProfileFactory] = {}


def register_profile(name: str, *, replace: bool = False) -> Callable[[_F], _F]:
    """Class/function decorator registering a profile factory under ``name``."""
    if not _NAME.match(name):
        raise ProfileError(f"profile name {name!r} must match {_NAME.pattern}")

    def decorate(factory: _F) -> _F:
        if name in _REGISTRY and not replace and _REGISTRY[name] is not factory:
            raise ProfileError(f"profile {name!r} is already registered")
        _REGISTRY[name] = factory
        return factory

    return decorate


def registered_profiles() -> Mapping[str, ProfileFactory]:
    """Every registered profile factory by name (after :func:`discover_profiles`)."""
    return dict(_REGISTRY)


def discover_profiles(plugins: Iterable[str] = ()) -> None:
    """Import every module of this package, then each module named in ``plugins``."""
    for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")
    for plugin in plugins:
        try:
            importlib.import_module(plugin)
        except ImportError as exc:
            raise ProfileError(f"cannot import profile plugin module {plugin!r}: {exc}") from exc


def build_profiles(
    server_seed: int, profile_options: Mapping[str, Any] | None = None
) -> dict[str, Profile]:
    """Build one instance of every registered profile; options naming no profile are an error."""
    options = dict(profile_options or {})
    sections: dict[str, dict[str, Any]] = {name: {} for name in _REGISTRY}
    variants: dict[str, dict[str, Mapping[str, Any]]] = {name: {} for name in _REGISTRY}
    for key, value in options.items():
        base, sep, variant = str(key).partition(":")
        if base not in _REGISTRY:
            known = ", ".join(sorted(_REGISTRY))
            raise ProfileError(f"profile options name unknown profile {base!r} (known: {known})")
        if not isinstance(value, Mapping):
            raise ProfileError(f"profile options for {key!r} must be a JSON object")
        if sep:
            variants[base][variant] = value
        else:
            sections[base] = dict(value)
    return {
        name: factory(
            ProfileSetup(
                name=name,
                server_seed=server_seed,
                options=sections[name],
                variant_options=variants[name],
            )
        )
        for name, factory in sorted(_REGISTRY.items())
    }
