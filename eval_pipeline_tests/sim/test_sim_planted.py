"""``planted``: the 24 fixed replies, exactly, in both wire formats, over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from eval_pipeline.sim.process import SimHandle, running_sim
from eval_pipeline.sim.profiles.planted import EXPECTED_ANSWER, LABELS, planted_label
from eval_pipeline_tests.sim.helpers import planted_body, post

MAX_TOKENS = 64
WIRES = ["openai", "anthropic"]


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_sim(seed=5, profile_options={"planted": {"retry_after_s": 3}}) as handle:
        yield handle


def _text(blocks: tuple[str, ...]) -> dict[str, Any]:
    return {"blocks": blocks, "calls": (), "stop": "end"}


# What each n must show, wire-neutrally: HTTP status, or the reply's text blocks (for
# OpenAI joined; None = no text), tool calls (name, raw arguments) and stop kind.
EXPECTED: dict[int, dict[str, Any]] = {
    0: {"status": 503},
    1: {"status": 429},
    2: {"status": 500},
    3: {"drop": True},
    4: _text(("",)),
    5: {"blocks": (), "calls": (), "stop": "end"},
    6: {"raw": b""},
    7: {"raw": b"{}"},
    8: {"blocks": ('{"artist_id": "ART-0001", "amount": "4"}',), "calls": (), "stop": "max_tokens"},
    9: {"blocks": ('{"artist_id": "ART-0001", "amount": "4',), "calls": (), "stop": "max_tokens"},
    10: {"blocks": ('[{"artist_id": "ART-0001", "amount": 4',), "calls": (), "stop": "max_tokens"},
    11: {"blocks": (), "calls": (("lookup", '{"query": "ART-0'),), "stop": "max_tokens"},
    12: _text(("The net payable for the artist comes to forty-two dollars.",)),
    13: {"blocks": (), "calls": (("lookup", '{"query": "ART-0001",,}'),), "stop": "tool_use"},
    14: {"blocks": (), "calls": (("lookup", "{}"),), "stop": "tool_use"},
    15: {"blocks": (), "calls": (("get_weather", '{"query": "ART-0001"}'),), "stop": "tool_use"},
    16: _text(("ANSWER: 41",)),
    17: _text(("Summing the statement lines for the period.\nANSWER: 41",)),
    18: _text(("ANSWER: 40\nRechecking one refunded line.\nANSWER: 41",)),
    19: _text(("Checked the ledger.\n", "ANSWER: 41")),
    20: _text(("ANSWER: 42",)),
    21: _text(("Summing the statement lines for the period.\nANSWER: 42",)),
    22: _text(("ANSWER: 41\nRechecking one refunded line.\nANSWER: 42",)),
    23: _text(("Checked the ledger.\n", "ANSWER: 42")),
}
OPENAI_FINISH = {"end": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
ANTHROPIC_STOP = {"end": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}


def _check_openai(body: dict[str, Any], want: dict[str, Any]) -> None:
    (choice,) = body["choices"]
    message = choice["message"]
    assert choice["finish_reason"] == OPENAI_FINISH[want["stop"]]
    assert message["content"] == ("".join(want["blocks"]) if want["blocks"] else None)
    calls = tuple(
        (c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls", [])
    )
    assert calls == want["calls"]
    if want["stop"] == "max_tokens":
        assert body["usage"]["completion_tokens"] == MAX_TOKENS


def _check_anthropic(body: dict[str, Any], want: dict[str, Any]) -> None:
    assert body["stop_reason"] == ANTHROPIC_STOP[want["stop"]]
    texts = tuple(b["text"] for b in body["content"] if b["type"] == "text")
    assert texts == want["blocks"]
    calls = []
    for block in body["content"]:
        if block["type"] == "tool_use":
            raw = block["input"]
            calls.append((block["name"], raw if isinstance(raw, str) else json.dumps(raw)))
    assert tuple(calls) == want["calls"]
    if want["stop"] == "max_tokens":
        assert body["usage"]["output_tokens"] == MAX_TOKENS


@pytest.mark.parametrize("wire", WIRES)
def test_the_24_planted_replies_are_exact(sim: SimHandle, wire: str) -> None:
    naive_hits = 0
    for n in range(24):
        want = EXPECTED[n]
        for _occurrence in range(2):  # every occurrence is the same
            if want.get("drop"):
                with pytest.raises(httpx.RemoteProtocolError):
                    post(sim, wire, planted_body(wire, n, MAX_TOKENS))
                continue
            response = post(sim, wire, planted_body(wire, n, MAX_TOKENS))
            if "status" in want:
                assert response.status_code == want["status"], n
                if n == 1:
                    assert response.headers["retry-after"] == "3"
                    assert response.headers["retry-after-ms"] == "3000"
                continue
            assert response.status_code == 200, n
            if "raw" in want:
                assert response.content == want["raw"], n
                continue
            body = response.json()
            (_check_openai if wire == "openai" else _check_anthropic)(body, want)
            if _occurrence == 0 and EXPECTED_ANSWER in response.text:
                naive_hits += 1
    assert naive_hits == 4  # "HTTP 200 and the expected text": 4/24


def test_labels_and_yield() -> None:
    labels = [planted_label(n) for n in range(24)]
    assert labels == [label for label in LABELS for _ in range(4)]
    answers = {n: EXPECTED[n]["blocks"] for n in range(16, 24)}
    right = [
        n for n, blocks in answers.items() if "".join(blocks).splitlines()[-1] == EXPECTED_ANSWER
    ]
    assert right == [20, 21, 22, 23]  # accuracy on yield: 4/8


def test_untagged_and_out_of_range_requests_are_refused(sim: SimHandle) -> None:
    for text in ("no tag here", "PLANTED-24", "PLANTED-x"):
        body = {"model": "planted", "messages": [{"role": "user", "content": text}]}
        assert post(sim, "openai", body).status_code == 400
