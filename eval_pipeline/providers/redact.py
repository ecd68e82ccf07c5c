"""Keep secrets out of everything the process keeps: replies, envelopes, lanes, logs.

Request headers are never stored at all. What comes back from the wire (response bodies,
the replies read from them, error texts) passes through a :class:`Redactor` that knows
the key values read from the environment variables the model configs name, because a
provider may echo a key back ("incorrect API key provided: sk-...") and a model may answer
with it. The harness redacts an attempt's outcome where it leaves the transport, so the
lanes, the judge, tracking and the reports only ever see redacted text.

A key can come back written differently from the raw value, so each secret is matched in
several spellings:

- as sent (raw);
- base64, standard and URL-safe alphabets, with or without padding; and, because a key
  encoded inside longer base64 text (`Basic <base64 of user:key>`) is shifted by its
  offset modulo 3 bytes, the characters every such encoding shares whatever precedes or
  follows the key, at each of the three alignments (:func:`base64_spellings`);

and in each spelling any character may be written as a JSON escape (`\\u0073`, `\\/`),
which covers a stored body as well as the text it decodes to, or percent-encoded
(`%2F`, `%2f`, each UTF-8 byte), which covers a key in a URL.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Iterator
from typing import TypeVar

from pydantic import BaseModel

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
_ALPHABETS = (b"+/", b"-_")
"""base64's two alphabets (RFC 4648, sections 4 and 5): they differ in these two."""


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


def _char_forms(char: str) -> list[str]:
    """`char` raw, JSON-escaped, or percent-encoded (its UTF-8 bytes, hex in either case)."""
    encoded = "".join(f"%(?i:{byte:02x})" for byte in char.encode("utf-8", "surrogatepass"))
    return [*_json_escape_forms(char), encoded]


def base64_spellings(secret: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(whole, cores): the secret's own base64 encodings (unpadded; padding is matched
    apart), and the characters an encoding of it inside longer base64 text always holds.

    Inside longer text the key's bytes start at offset 0, 1 or 2 of a 3-byte group; at
    offset `a` the encoding's first ceil(8a/6) characters and its last partial one
    also carry bits of the neighbouring bytes, so the core is what is left between them.
    Offset 0's core is a prefix of the whole encoding.
    """
    data = secret.encode("utf-8", "surrogatepass")
    whole: list[str] = []
    cores: list[str] = []
    for alphabet in _ALPHABETS:
        whole.append(base64.b64encode(data, altchars=alphabet).decode().rstrip("="))
        for offset in range(3):
            shifted = base64.b64encode(b"\0" * offset + data, altchars=alphabet).decode()
            cores.append(shifted[-(-8 * offset // 6) : 8 * (offset + len(data)) // 6])
    return tuple(dict.fromkeys(whole)), tuple(dict.fromkeys(cores))


def spelling_pattern(spelling: str) -> str:
    """A pattern matching `spelling` with any of its characters JSON-escaped or
    percent-encoded."""
    return "".join(f"(?:{'|'.join(_char_forms(c))})" for c in spelling)


_PADDING = f"(?:{'|'.join(_char_forms('='))}){{0,2}}"


def secret_alternatives(secret: str) -> list[str]:
    """Patterns for every spelling of `secret`, each whole encoding before its core (a
    regex alternation takes the first alternative that matches, not the longest)."""
    whole, cores = base64_spellings(secret)
    return [
        spelling_pattern(secret),
        *(spelling_pattern(spelling) + _PADDING for spelling in whole),
        *(spelling_pattern(core) for core in cores),
    ]


def secret_pattern(secret: str) -> re.Pattern[str]:
    """A pattern matching `secret` in any of its spellings (see the module)."""
    return re.compile("|".join(secret_alternatives(secret)))


def escape_markers(spellings: Iterable[str]) -> tuple[str, ...]:
    """Text one of which any escaped writing of one of `spellings` contains: `\\u`, `%`,
    or the short escape of one of their characters. Text with none of them can only hold
    a spelling as is."""
    chars = {c for spelling in spellings for c in spelling}
    return ("\\u", "%", *sorted({_SHORT_ESCAPES[c] for c in chars if c in _SHORT_ESCAPES}))


_ESCAPES = re.compile(
    r"[\\%](?:(?<=\\)(?:u[0-9A-Fa-f]{4}(?:\\u[0-9A-Fa-f]{4})*|[/\"bfnrt])"
    r"|(?<=%)[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2})*)"
)
"""Runs of JSON `\\u` escapes, runs of percent-encoded bytes, and short JSON escapes
other than `\\\\`. It starts with a character set, which a search skips to (an
alternation of the three would be tried at every position: 60 times slower)."""
_SHORT_UNESCAPES = {escape: char for char, escape in _SHORT_ESCAPES.items()}
ABSORBED = 4
"""At most this many leading characters of an escaped spelling can be taken into an
escape that starts before it (`%4` + `1...`, `\\u` + `0061...`), when they are hex digits."""


_HEX_PAIRS = frozenset(
    f"{a}{b}" for a in "0123456789abcdefABCDEF" for b in "0123456789abcdefABCDEF"
)


def _holds_percent_escape(text: str) -> bool:
    """Whether a `%` of `text` starts a percent-encoded byte (`15% of` does not)."""
    at = text.find("%")
    while at != -1:
        if text[at + 1 : at + 3] in _HEX_PAIRS:
            return True
        at = text.find("%", at + 1)
    return False


def _unescape(match: re.Match[str]) -> str:
    token = match.group()
    if token[0] == "%":
        return bytes.fromhex(token.replace("%", "")).decode("utf-8", "surrogateescape")
    if token[1] == "u":
        units = "".join(chr(int(token[i + 2 : i + 6], 16)) for i in range(0, len(token), 6))
        # pairs of surrogates become the character they encode; a lone one stays
        return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _SHORT_UNESCAPES[token]


def unescaped(text: str) -> str:
    """`text` with its JSON escapes (but `\\\\`) and percent-encoded bytes decoded: the
    view in which an escaped spelling of a secret reads as the spelling, less at most its
    first `ABSORBED` characters (see `Redactor.finds`)."""
    return _ESCAPES.sub(_unescape, text)


class Redactor:
    """Replaces every known secret value, in any of its spellings, with a marker.

    Cheap on text that holds none (the hot path: every reply and envelope): substring
    searches for the spellings as they are (the raw key and the base64 cores, which every
    whole encoding contains), and only when the text holds an escape marker (`\\u`, `%`, a
    short JSON escape of a character of some spelling) the same searches in the text with
    its escapes decoded (`unescaped`); the pattern runs only on text found to hold one.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: dict[str, list[str]] = {}
        self._literals: tuple[str, ...] = ()
        self._tails: tuple[str, ...] = ()
        self._markers: tuple[str, ...] = ()
        self._decodable = True
        self._pattern: re.Pattern[str] | None = None
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str) -> None:
        """Remember a secret; short values (placeholders) are refused as too ambiguous."""
        if len(secret) < MIN_SECRET_LENGTH or secret in self._secrets:
            return
        self._secrets[secret] = secret_alternatives(secret)
        literals: dict[str, None] = {}
        spellings: list[str] = ["="]
        for known in self._secrets:
            whole, cores = base64_spellings(known)
            literals.update(dict.fromkeys((known, *cores)))
            spellings += [known, *whole, *cores]
        self._literals = tuple(literals)
        self._tails = tuple(dict.fromkeys(literal[ABSORBED:] for literal in literals))
        self._markers = escape_markers(spellings)
        # A secret holding `\\` or `%`, or a surrogate, could read otherwise once decoded:
        # text with a marker is then searched with the pattern itself.
        self._decodable = not any(
            "\\" in known or "%" in known or any(0xD800 <= ord(c) < 0xE000 for c in known)
            for known in self._secrets
        )
        self._pattern = re.compile(
            "|".join(pattern for patterns in self._secrets.values() for pattern in patterns)
        )

    def __len__(self) -> int:
        return len(self._secrets)

    def finds(self, text: str) -> bool:
        """Whether `text` holds a known secret in any spelling.

        Sound without the pattern: a match with no escape is a spelling as is, so it holds
        a literal; a match with one holds a marker, and decoding escapes reads it as its
        spelling except for at most `ABSORBED` leading characters (an escape that starts
        before the match can end inside it only on raw hex digits, since the secret's
        spellings hold no `\\` nor `%`), so the decoded text holds the spelling's tail.
        """
        pattern = self._pattern
        if pattern is None:
            return False
        for literal in self._literals:  # loops, not any(): this runs on every reply
            if literal in text:
                return True
        for marker in self._markers:
            if marker in text and (marker != "%" or _holds_percent_escape(text)):
                break
        else:
            return False
        if self._decodable:
            view = unescaped(text)
            for tail in self._tails:
                if tail in view:
                    break
            else:
                return False
        return pattern.search(text) is not None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not self.finds(text):
            return text
        return self._pattern.sub(REDACTED, text)

    def optional(self, text: str | None) -> str | None:
        return None if text is None else self(text)


R = TypeVar("R", bound=BaseModel)


def record_texts(record: BaseModel) -> Iterator[str]:
    """Every text a record holds: its string fields and those of records (or tuples of
    records) inside it."""
    for _, value in record:
        if isinstance(value, str):
            yield value
        elif isinstance(value, BaseModel):
            yield from record_texts(value)
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, str):
                    yield item
                elif isinstance(item, BaseModel):
                    yield from record_texts(item)


def redact_record(redact: Redactor, record: R) -> R:
    """`record` with every secret removed from every text it holds (see `record_texts`);
    the record itself when none changed. A copy, not validated again: a text replaced
    by text is still a text."""
    changed: dict[str, object] = {}
    for name, value in record:
        clean: object = value
        if isinstance(value, str):
            clean = redact(value)
        elif isinstance(value, BaseModel):
            clean = redact_record(redact, value)
        elif isinstance(value, tuple):
            clean = tuple(
                redact(item)
                if isinstance(item, str)
                else redact_record(redact, item)
                if isinstance(item, BaseModel)
                else item
                for item in value
            )
        if clean != value:
            changed[name] = clean
    return record.model_copy(update=changed) if changed else record
