"""A plugin for the isolation test, loaded into the simulated provider's process only
(never import it elsewhere: it hooks the process and re-registers profiles).

Importing it installs an audit hook (PEP 578) and wraps the ``sim-strong`` and ``sim-small``
profiles so that, while either decides a reply, every file the process opens, every
directory it lists and every module it imports is recorded. The profile ``sim-audit``
answers any request with that record as JSON text, how many replies were audited, and which
modules the agents must not use are loaded in the process at all.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

import eval_pipeline.sim.profiles.label_agents  # noqa: F401 - registers the profiles wrapped here
from eval_pipeline.sim.neutral import Outcome, Reply, SimRequest
from eval_pipeline.sim.profiles import (
    Profile,
    ProfileSetup,
    register_profile,
    registered_profiles,
)
from eval_pipeline.sim.profiles._options import no_options
from eval_pipeline_tests.sim.helpers import AGENT_FORBIDDEN_MODULES

AUDITED = ("sim-strong", "sim-small")
_RECORD: dict[str, list[str]] = {"opened": [], "listed": [], "imported": []}
_EVENTS = {
    "open": "opened",
    "os.listdir": "listed",
    "os.scandir": "listed",
    "import": "imported",
}
_STATE = threading.local()
_REPLIES = [0]


def _hook(event: str, args: tuple[Any, ...]) -> None:
    kind = _EVENTS.get(event)
    if kind is not None and getattr(_STATE, "deciding", False):
        _RECORD[kind].append(str(args[0]) if args else "")


sys.addaudithook(_hook)


class _Audited:
    """A profile whose replies are decided under the audit."""

    def __init__(self, inner: Profile) -> None:
        self.inner = inner

    def accepts_variant(self, variant: str | None) -> bool:
        return self.inner.accepts_variant(variant)

    def respond(self, request: SimRequest) -> Outcome:
        _STATE.deciding = True
        try:
            return self.inner.respond(request)
        finally:
            _STATE.deciding = False
            _REPLIES[0] += 1


def _audited_factory(name: str) -> Any:
    inner = registered_profiles()[name]

    def build(setup: ProfileSetup) -> _Audited:
        return _Audited(inner(setup))

    return build


for _name in AUDITED:
    register_profile(_name, replace=True)(_audited_factory(_name))


def forbidden_loaded() -> list[str]:
    return sorted(name for name in sys.modules if name.startswith(AGENT_FORBIDDEN_MODULES))


@register_profile("sim-audit")
class SimAudit:
    """Answers with what the audited profiles touched while deciding their replies."""

    def __init__(self, setup: ProfileSetup) -> None:
        no_options(setup.name, setup.options)

    def accepts_variant(self, variant: str | None) -> bool:
        return variant is None

    def respond(self, request: SimRequest) -> Reply:
        record = {k: list(v) for k, v in _RECORD.items()}
        report = {**record, "replies": _REPLIES[0], "forbidden_loaded": forbidden_loaded()}
        return Reply.of_text(json.dumps(report))
