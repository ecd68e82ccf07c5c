"""``judge``: the simulated judge of tier 3 (judged prose), for offline runs.

It reads the reply under judgement from the last user message (the text after a
``REPLY:`` line) and passes it when the reply declines the question's premise: an
``ABSTAIN`` line, or a sentence saying the cited clause does not exist or is about
something else, and no answer line with a number. It never sees the expected answer
(nobody sends it one) and answers ``VERDICT: PASS`` or ``VERDICT: FAIL`` with a reason.
"""

from __future__ import annotations

import re

from eval_pipeline.sim.neutral import Reply, SimRequest
from eval_pipeline.sim.profiles import register_profile
from eval_pipeline.sim.profiles._options import Optionless

_DECLINES = re.compile(
    r"ABSTAIN|does not exist|doesn't exist|no (such )?clause|is not about audit|"
    r"isn't about audit|not an audit|premise",
    re.IGNORECASE,
)
_NUMBER_ANSWER = re.compile(r"^\W*ANSWER\W*:\s*\$?\d", re.IGNORECASE | re.MULTILINE)


def judge_reply(reply: str) -> tuple[bool, str]:
    if _NUMBER_ANSWER.search(reply):
        return False, "the reply answers with a number as if the premise held"
    if _DECLINES.search(reply):
        return True, "the reply declines the false premise and says why"
    return False, "the reply neither answers nor says why it declines"


@register_profile("judge")
class Judge(Optionless):
    """The ``judge`` profile (no options, no variants)."""

    def respond(self, request: SimRequest) -> Reply:
        text = request.last_user_text()
        reply = text.split("REPLY:", 1)[1] if "REPLY:" in text else text
        passed, reason = judge_reply(reply)
        return Reply.of_text(f"{reason}.\nVERDICT: {'PASS' if passed else 'FAIL'}")
