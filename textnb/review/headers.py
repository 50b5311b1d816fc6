"""From and Subject of a raw message, for the verdict log: a scan of the header block,
decoded (RFC 2047 encoded words in place, raw bytes as UTF-8 or Latin-1), without
control characters, cut to ``FIELD_CHARS``."""

from __future__ import annotations

import re

__all__ = ["FIELD_CHARS", "HEAD_BYTES", "headers_of"]

# Sender and subject are cut to this many characters: enough for any list view, and a
# 1 MB Subject header costs a row nothing.
FIELD_CHARS = 200
# The head of a message read for From and Subject: headers past it are not looked at.
HEAD_BYTES = 64 * 1024
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def headers_of(raw: bytes) -> tuple[str, str]:
    """(From, Subject) of a raw message, decoded (RFC 2047 words; raw bytes as UTF-8 or
    Latin-1), without control characters, cut to ``FIELD_CHARS``.

    A scan of the header block for the two fields, not a parse of the message: the
    recorder's writer calls it for every verdict, and a parse with email.parser costs
    many times this scan (docs/design/review-page.md#from-and-subject-of-every-verdict).
    """
    head = bytes(raw[:HEAD_BYTES])
    for blank in (b"\n\n", b"\r\n\r\n"):
        end = head.find(blank)
        if end >= 0:
            head = head[:end]
            break
    found: dict[bytes, bytes] = {}
    current = None
    for line in head.split(b"\n"):
        if line[:1] in (b" ", b"\t"):  # a folded continuation of the field before
            if current is not None:
                found[current] += b" " + line.strip()
            continue
        name, colon, value = line.partition(b":")
        key = name.strip().lower()
        current = key if colon and key in (b"from", b"subject") and key not in found else None
        if current is not None:
            found[current] = value.strip()
    return _decoded(found.get(b"from", b"")), _decoded(found.get(b"subject", b""))


# An RFC 2047 encoded word: =?charset?Q|B?text?= (an RFC 2231 language after '*' ignored).
_WORD = re.compile(r"=\?([^?*\s]+)(?:\*[^?\s]*)?\?([QqBb])\?([^?\s]*)\?=")
# Whitespace between two encoded words is not part of the text (RFC 2047, section 6.2).
_BETWEEN_WORDS = re.compile(r"(\?=)\s+(?==\?[^?*\s]+(?:\*[^?\s]*)?\?[QqBb]\?)")


def _decoded(value: bytes) -> str:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = value.decode("latin-1")
    if "=?" in text:
        # each encoded word in place, the text around it as it came: email.header's
        # decode_header turns a field that mixes raw UTF-8 with encoded words into
        # escaped bytes or leaves the words undecoded
        text = _WORD.sub(_word, _BETWEEN_WORDS.sub(r"\1", text))
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates (UTF-7 words)
    return " ".join(_CONTROL.sub(" ", text).split())[:FIELD_CHARS]


def _word(match) -> str:
    import base64
    import binascii
    import codecs

    charset, encoding, payload = match.group(1), match.group(2).upper(), match.group(3)
    try:
        if encoding == "B":
            data = base64.b64decode(payload + "=" * (-len(payload) % 4))
        else:
            data = re.sub(rb"=([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]),
                          payload.replace("_", " ").encode("ascii", "replace"))
        return data.decode(codecs.lookup(charset).name, "replace")
    except (LookupError, ValueError, binascii.Error):  # an unknown charset, bad base64
        return match.group(0)
