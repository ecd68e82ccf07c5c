"""Keep secrets out of everything written: envelopes, cache entries, logs.

Request headers are never stored at all. What is stored from the wire (response bodies,
error messages, answers read from replies) passes through a :class:`Redactor` that knows
the key values read from the environment variables the model configs name, because a
provider's error body may echo a key back ("incorrect API key provided: sk-...").

A key can come back written differently from the raw value: JSON lets any character be
escaped (`\\u0073k-...`, `\\/`), and a body stored raw is decoded by whoever reads it. So
each secret is matched as raw text and as any mix of its characters' JSON escapes, which
covers the decoded text as well as the bytes: a redacted body decodes to redacted text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8
_SHORT_ESCAPES = {
    "/": r"\/",
    '"': r"\"",
    "\\": r"\\",
    "\b": r"\b",
    "\f": r"\f",
    "\n": r"\n",
    "\r": r"\r",
    "\t": r"\t",
}
"""JSON's two-character escapes (RFC 8259, section 7): with `\\uXXXX` every way JSON can
write a character other than itself."""


def _json_escape_forms(char: str) -> list[str]:
    """Every way JSON can write `char` inside a string (raw, short escape, \\u escape)."""
    forms = [re.escape(char)]
    if char in _SHORT_ESCAPES:
        forms.append(re.escape(_SHORT_ESCAPES[char]))
    code = ord(char)
    if code > 0xFFFF:  # a surrogate pair
        code -= 0x10000
        high, low = 0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)
        forms.append(rf"\\u(?i:{high:04x})\\u(?i:{low:04x})")
    else:
        forms.append(rf"\\u(?i:{code:04x})")
    return forms


def secret_pattern(secret: str) -> re.Pattern[str]:
    """A pattern matching `secret` raw or with any of its characters JSON-escaped."""
    return re.compile("".join(f"(?:{'|'.join(_json_escape_forms(c))})" for c in secret))


def escape_markers(secret: str) -> tuple[str, ...]:
    """Text one of which any escaped spelling of `secret` contains: `\\u`, or the short
    escape of one of its characters. Text with none of them can only hold it raw."""
    return ("\\u", *sorted({_SHORT_ESCAPES[c] for c in secret if c in _SHORT_ESCAPES}))


class Redactor:
    """Replaces every known secret value (raw or JSON-escaped) with a marker."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: dict[str, tuple[re.Pattern[str], tuple[str, ...]]] = {}
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str) -> None:
        """Remember a secret; short values (placeholders) are refused as too ambiguous."""
        if len(secret) >= MIN_SECRET_LENGTH and secret not in self._secrets:
            self._secrets[secret] = (secret_pattern(secret), escape_markers(secret))

    def finds(self, text: str) -> bool:
        """Whether `text` holds a known secret, raw or in any JSON spelling."""
        for secret, (pattern, markers) in self._secrets.items():
            if secret in text:
                return True
            for marker in markers:  # a loop, not any(): this runs twice per attempt
                if marker in text:
                    if pattern.search(text):
                        return True
                    break
        return False

    def __call__(self, text: str) -> str:
        for secret, (pattern, markers) in self._secrets.items():
            if secret in text:
                text = text.replace(secret, REDACTED)
            if any(marker in text for marker in markers):
                text = pattern.sub(REDACTED, text)
        return text

    def optional(self, text: str | None) -> str | None:
        return None if text is None else self(text)
