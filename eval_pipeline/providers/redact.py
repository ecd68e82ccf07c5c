"""Keep secrets out of everything written: envelopes, cache entries, logs.

Request headers are never stored at all. What is stored from the wire (response bodies,
error messages) passes through a :class:`Redactor` that knows the key values read from
the environment variables the model configs name, because a provider's error body may
echo a key back ("incorrect API key provided: sk-...").
"""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8


class Redactor:
    """Replaces every known secret value with a marker."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str) -> None:
        """Remember a secret; short values (placeholders) are refused as too ambiguous."""
        if len(secret) >= MIN_SECRET_LENGTH:
            self._secrets.add(secret)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def optional(self, text: str | None) -> str | None:
        return None if text is None else self(text)
