"""The Redactor's spellings of a key, over generated keys and texts (hypothesis, derandomized
so a run in CI draws what a run here drew): raw, JSON-escaped, base64 (both alphabets,
padded or not, alone or inside longer base64 at any byte offset), percent-encoded (either
hex case); and its fast path (`finds`) agrees with the pattern on texts built to trip it
(escapes that start before the key and end inside it, stray markers, hex digits)."""

from __future__ import annotations

import base64
import json
import re
import urllib.parse

from hypothesis import example, given, settings
from hypothesis import strategies as st

from eval_pipeline.providers.redact import (
    MIN_SECRET_LENGTH,
    REDACTED,
    Redactor,
    base64_spellings,
    secret_pattern,
    unescaped,
)

REPRODUCIBLE = settings(derandomize=True, max_examples=150, deadline=None)

KEY_CHARS = st.sampled_from(
    "abcdefABCDEF0123456789xyzXYZ-_+/=.:~!?é€\U0001f511"  # hex digits on purpose
)
KEYS = st.text(KEY_CHARS, min_size=MIN_SECRET_LENGTH, max_size=48)
NOISE = st.text(st.sampled_from('abc 0123456789ABCDEF%\\u"/:=+-_\n'), max_size=12)


def _b64(data: bytes, alphabet: bytes = b"+/") -> str:
    return base64.b64encode(data, altchars=alphabet).decode()


def spellings(key: str) -> list[str]:
    """The key written the ways a provider or a log may write it, standing alone."""
    data = key.encode()
    return [
        key,
        json.dumps(key)[1:-1],
        json.dumps(key, ensure_ascii=False)[1:-1].replace("/", "\\/"),
        "".join(f"\\u{ord(c):04X}" if ord(c) < 0x10000 else c for c in key),
        _b64(data),
        _b64(data).rstrip("="),
        _b64(data, b"-_"),
        _b64(data, b"-_").rstrip("="),
        urllib.parse.quote(key, safe=""),
        re.sub(
            "%[0-9A-F]{2}", lambda hexed: hexed.group().lower(), urllib.parse.quote(key, safe="")
        ),
        urllib.parse.quote_plus(key, safe=""),
        "".join(f"%{byte:02x}" for byte in data),
        json.dumps(urllib.parse.quote(key, safe=""))[1:-1],
    ]


def base64_core(key: str, offset: int, alphabet: bytes) -> str:
    """What base64 text holding the key at `offset` (mod 3) always holds (the oracle,
    written apart from the module's)."""
    data = key.encode()
    encoded = _b64(b"\0" * offset + data, alphabet)
    first = {0: 0, 1: 2, 2: 3}[offset]
    return encoded[first : (8 * (offset + len(data))) // 6]


@REPRODUCIBLE
@given(KEYS, NOISE, NOISE, st.integers(0, len(spellings("x" * 8)) - 1))
@example("sk-ant/abc+def=XYZ-0123", "a ", " b", 8)
def test_every_spelling_of_a_key_is_found_and_redacted(
    key: str, before: str, after: str, which: int
) -> None:
    spelled = spellings(key)[which]
    text = f"{before} {spelled} {after}"
    redact = Redactor([key])
    assert redact.finds(text)
    clean = redact(text)
    assert REDACTED in clean
    assert not redact.finds(clean)
    assert spelled not in clean
    assert key not in clean and key not in urllib.parse.unquote(clean)


@REPRODUCIBLE
@given(
    KEYS,
    st.binary(max_size=7),
    st.binary(max_size=7),
    st.sampled_from([b"+/", b"-_"]),
    st.booleans(),
)
def test_a_key_inside_longer_base64_is_redacted_at_every_alignment(
    key: str, before: bytes, after: bytes, alphabet: bytes, in_json: bool
) -> None:
    """`Basic base64(user:key)`: the key's bytes start anywhere in a 3-byte group."""
    encoded = _b64(before + key.encode() + after, alphabet)
    text = json.dumps({"auth": f"Basic {encoded}"}) if in_json else f"Basic {encoded}"
    if in_json:
        text = text.replace("/", "\\/")
    redact = Redactor([key])
    assert redact.finds(text)
    clean = redact(text)
    core = base64_core(key, len(before) % 3, alphabet)
    assert core in encoded
    assert core not in clean and core not in clean.replace("\\/", "/")


def _written(char: str, form: int) -> str:
    """`char` raw, \\u-escaped (either case) or percent-encoded."""
    if form == 1 and ord(char) < 0x10000:
        return f"\\u{ord(char):04x}"
    if form == 2 and ord(char) < 0x10000:
        return f"\\u{ord(char):04X}"
    if form == 3:
        return "".join(f"%{byte:02X}" for byte in char.encode())
    return char


@REPRODUCIBLE
@given(
    KEYS,
    st.lists(st.integers(0, 3), min_size=48, max_size=48),
    st.sampled_from(["", "%", "%4", "\\u", "\\u0", "\\u00", "\\u006", "\\", "\\\\", "%%"]),
    NOISE,
)
@example("00611234abcd", [0, 0, 0, 0, 1] * 10, "\\u", "")  # \u0061 takes 4 of its chars
@example("41abcdefgh", [0, 0, 3] * 16, "%", "")  # %41 takes 2
def test_the_fast_path_agrees_with_the_pattern(
    key: str, forms: list[int], dangling: str, after: str
) -> None:
    """`finds` (substring searches, in the decoded text only when it holds a marker) says
    the same as searching with the pattern, on keys written with a mix of forms behind a
    dangling start of an escape that may take the key's first characters."""
    written = "".join(_written(c, f) for c, f in zip(key, forms, strict=False))
    text = f"x{dangling}{written}{after}"
    redact = Redactor([key])
    assert redact.finds(text) == (secret_pattern(key).search(text) is not None)
    assert redact.finds(text)  # the key's own forms are all found
    assert not redact.finds(redact(text))


@REPRODUCIBLE
@given(KEYS, st.text(max_size=80))
def test_text_without_the_key_is_left_as_it_is(key: str, text: str) -> None:
    redact = Redactor([key])
    pattern = secret_pattern(key)
    if pattern.search(text) is None:
        assert not redact.finds(text)
        assert redact(text) == text
    else:
        assert redact.finds(text)


def test_a_key_holding_a_backslash_or_a_percent_is_searched_with_the_pattern() -> None:
    """Decoding could make such a key read otherwise, so the pattern decides."""
    for key in ("sk-50%41off-secret", "sk-back\\slash-key"):
        redact = Redactor([key])
        for text in (key, json.dumps(key)[1:-1], urllib.parse.quote(key, safe="")):
            assert redact.finds(f"a {text} b"), text
            assert redact(f"a {text} b") == f"a {REDACTED} b", text


def test_several_keys_and_short_values() -> None:
    first, second = "sk-first-0123456789", "sk-second-abcdefghij"
    redact = Redactor([first, second, "short"])
    assert len(redact) == 2
    text = f"{first} {_b64(second.encode())} short"
    assert redact(text) == f"{REDACTED} {REDACTED} short"
    assert not Redactor().finds(text) and Redactor()(text) == text


def test_the_base64_cores_are_what_every_encoding_shares() -> None:
    key = "simulated-provider-accepts-any-key"
    whole, cores = base64_spellings(key)
    assert whole == (_b64(key.encode()).rstrip("="),)  # no + / in it: one alphabet
    for offset in range(3):
        assert base64_core(key, offset, b"+/") in cores


def test_unescaped_reads_json_and_percent_escapes() -> None:
    assert unescaped("\\u0073k-\\ud83d\\udd11 \\/ %2F%e2%82%ac 15%") == "sk-\U0001f511 / /€ 15%"
    assert unescaped("%zz \\u12 %c3") == "%zz \\u12 \udcc3"  # a lone byte stays apart
