"""Raw message bytes -> ParsedEmail: headers, decoded text parts, attachments, URLs.

``parse_message`` never raises on bad mail: every fault it meets
becomes a kebab-case name in ``ParsedEmail.defects`` and the text is still decoded
as well as possible, because malformed mail is itself evidence of spam.

Defect names (sorted, each at most once)::

    empty                 nothing but whitespace after the envelope line
    no-headers            no header field could be parsed
    truncated             longer than MailLimits.max_bytes; the tail was dropped
    nul-bytes             NUL bytes, removed before parsing
    too-many-headers, too-many-parts, too-deep     a MailLimits bound was reached
    too-much-html         more HTML than MailLimits.max_html_chars; the rest was tag-stripped
    missing-boundary      multipart without a usable boundary; body read as text
    bad-base64            base64 that is not (or has bad padding/characters)
    unknown-transfer-encoding   a Content-Transfer-Encoding we cannot undo
    unknown-charset       a charset no codec knows; UTF-8 then cp1252 was used
    undecodable-bytes     bytes invalid in the declared charset (a lying charset)
    charset-mismatch      declared single-byte charset, but the bytes are UTF-8
    undeclared-8bit       8-bit bytes with no charset declared (RFC 2045 says ASCII)
    bad-encoded-word      an RFC 2047 encoded-word that does not decode
    bad-parameters        a header's RFC 2231 parameters the stdlib cannot decode; read as none
    bad-html              the HTML parser gave up; tags were stripped crudely
    parser-error          the stdlib parser failed; the body was read as plain text
    other names           the stdlib email defects, e.g. MissingHeaderBodySeparatorDefect
                          -> 'missing-header-body-separator'
"""

from __future__ import annotations

import binascii
import codecs
import email
import email.errors
import email.message
import email.policy
import re
from dataclasses import dataclass
from functools import lru_cache

from .._c.speedups import plain_fields
from .html_text import HtmlText, html_to_text

__all__ = ["MailLimits", "TextPart", "Attachment", "ParsedEmail", "parse_message"]


@dataclass(frozen=True)
class MailLimits:
    """How one message is read: bounds on the work it may cost (exceeding one is a defect,
    not an error) and the HTML renderer.

    The defaults are the ``[mail]`` section of configs/default.toml (FilterConfig.mail);
    bench/hostile.py measures each case of the hostile catalogue against them.
    """

    # Largest SpamAssassin message: 300 kB (hard_ham/00039). 10 MB is a common MTA
    # size cap. The cost is linear in it, and highest for a multipart of short lines
    # (the stdlib parser's Python step per line)
    # (docs/design/parsing-speed.md#the-parsers-on-hostile-mail).
    max_bytes: int = 10_000_000
    # Most leaf parts in one SpamAssassin message: 20. 500 leaves room for digests
    # while a flood of empty parts is cut short
    # (docs/design/parsing-speed.md#the-parsers-on-hostile-mail).
    max_parts: int = 500
    # Deepest SpamAssassin nesting: 3. The stdlib parser recurses once per level and,
    # 1000 levels deep, raises RecursionError
    # (docs/design/parsing-speed.md#the-parsers-on-hostile-mail).
    max_depth: int = 30
    # Most header fields in one SpamAssassin message: 125 (long Received chains).
    max_headers: int = 1000
    # HTML characters per message rendered by the stdlib parser; the rest is only
    # tag-stripped. Largest SpamAssassin HTML part: 82,000 characters. On tag-dense
    # markup the parser costs hundreds of times what the strip does a character
    # (docs/design/parsing-speed.md#the-parsers-on-hostile-mail).
    max_html_chars: int = 1_000_000
    # "lexbor" (textnb.mail.html_lexbor, C) or "stdlib" (textnb.mail.html_text, html.parser): the
    # text differs (docs/html-to-text.md), so a saved model keeps the one it learned with
    # (model files from before this setting: "stdlib", textnb.modelfile.store).
    html_renderer: str = "lexbor"


@dataclass(frozen=True)
class TextPart:
    """One text/* leaf, decoded."""

    content_type: str  # 'text/plain' or 'text/html' (other text/* treated as plain)
    charset: str  # declared charset, lower-cased, '' when none
    text: str  # decoded text; for HTML the visible text


@dataclass(frozen=True)
class Attachment:
    """One non-text leaf; only its description is kept, never its bytes."""

    content_type: str  # lower-cased
    filename: str  # decoded filename or ''
    size: int  # decoded bytes


@dataclass(frozen=True)
class ParsedEmail:
    """A message as the tokenizer sees it. See the module docstring for defect names."""

    headers: tuple[tuple[str, str], ...]  # (lower-cased name, decoded value), message order
    parts: tuple[TextPart, ...]
    attachments: tuple[Attachment, ...]
    urls: tuple[str, ...]  # HTML href/src values in order
    defects: tuple[str, ...]  # sorted, unique

    def header(self, name: str) -> list[str]:
        """All values of header field ``name`` (case-insensitive), in message order."""
        name = name.lower()
        return [value for key, value in self.headers if key == name]


# -- charsets -----------------------------------------------------------------

# Labels mailers write that Python's codec registry does not know.
_CHARSET_ALIASES = {"iso-8859-8-i": "iso-8859-8", "x-sjis": "shift_jis", "x-euc-jp": "euc_jp",
                    "x-gbk": "gbk", "windows-874": "cp874", "unicode-1-1-utf-7": "utf-7"}
# Codecs the registry knows that are not MIME charsets: "charset=unicode_escape"
# must not make us interpret backslashes.
_NOT_CHARSETS = frozenset({"undefined", "unicode-escape", "raw-unicode-escape", "idna", "punycode"})
# Single-byte labels mailers stamp on whatever they send. When the bytes are valid
# UTF-8 instead, UTF-8 was meant: Latin-1 text is almost never valid UTF-8 by chance.
_SINGLE_BYTE = frozenset({"ascii", "iso8859-1", "iso8859-15", "cp1252"})
# Browsers (WHATWG Encoding) read these labels as cp1252, whose 0x80-0x9f are the
# curly quotes and dashes Windows mailers send under a Latin-1 label.
_AS_CP1252 = {"ascii": "cp1252", "iso8859-1": "cp1252"}


@lru_cache(maxsize=512)
def _codec(charset: str) -> str | None:
    """Python codec name for a MIME charset label, or None when unknown."""
    try:
        info = codecs.lookup(_CHARSET_ALIASES.get(charset, charset))
    except (LookupError, ValueError):  # ValueError: a label with a NUL in it
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_CHARSETS:
        return None
    return info.name


# UTF-7 (and codecs like it) decode to lone UTF-16 surrogates, which no UTF-8 encoder
# takes: spaCy raised on them. The fuzzer found it (tests/hostile_cases.py).
_SURROGATE = re.compile("[\ud800-\udfff]")


def _whole_characters(text: str) -> str:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _guess(data: bytes) -> str:
    """Decode bytes of unknown charset: UTF-8 when valid, else cp1252."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", "replace")  # 5 unassigned bytes -> U+FFFD


def _decode_text(data: bytes, charset: str, defects: set[str]) -> str:
    """Decode ``data`` declared as ``charset`` ('' = undeclared), noting faults."""
    if not charset:
        if data.isascii():
            return data.decode("ascii")
        defects.add("undeclared-8bit")
        return _guess(data)
    codec = _codec(charset)
    if codec is None:
        defects.add("unknown-charset")
        return _guess(data)
    if codec in _SINGLE_BYTE and not data.isascii():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            if codec == "ascii":
                defects.add("undecodable-bytes")
            return data.decode(_AS_CP1252.get(codec, codec), "replace")
        defects.add("charset-mismatch")
        return text
    try:
        return _whole_characters(data.decode(codec))
    except UnicodeError:  # UnicodeDecodeError, or a stateful codec failing at the end
        defects.add("undecodable-bytes")
    if codec == "utf-8":
        return data.decode("cp1252", "replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _whole_characters(data.decode(codec, "replace"))


# -- headers ------------------------------------------------------------------

# RFC 2047 encoded-word; the text may not hold '?' or whitespace.
_ENCODED_WORD = re.compile(r"=\?([^?\s]+)\?([^?\s]+)\?([^?\s]*)\?=")
# The start of an encoded-word left unterminated.
_OPEN_WORD = re.compile(r"=\?[^?\s]+\?[bBqQ]\?")
_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def _word_bytes(encoding: str, text: str) -> bytes | None:
    """Bytes of one encoded-word's text, or None when it does not decode."""
    try:
        data = text.encode("ascii")
    except UnicodeEncodeError:
        return None
    if encoding in "qQ":
        return binascii.a2b_qp(data, header=True)
    if encoding in "bB" and data and not data.translate(None, _B64_ALPHABET):
        return _b64_lenient(data)
    return None


def _decode_header_value(value: str, defects: set[str]) -> str:
    """Unfold, collapse whitespace and decode RFC 2047 encoded-words in a header value."""
    if not value.isascii():
        # Raw 8-bit header (the parser keeps such bytes as surrogate escapes). Not
        # "ascii": get_filename() returns decoded text (U+FFFD for bad bytes) that the
        # ASCII codec cannot encode; the fuzzer found it (tests/hostile_cases.py).
        value = _guess(value.encode("utf-8", "surrogateescape"))
    value = " ".join(value.split())
    if "=?" not in value:
        return value
    out: list[str] = []
    pending: list[bytes] = []  # bytes of adjacent words that share a charset
    pending_charset = ""
    last_end = 0
    for match in _ENCODED_WORD.finditer(value):
        between = value[last_end : match.start()]
        charset, encoding, text = match.groups()
        charset = charset.split("*", 1)[0].lower()  # RFC 2231 'charset*lang'
        data = _word_bytes(encoding, text) if len(encoding) == 1 else None
        if data is None:
            defects.add("bad-encoded-word")
            continue  # leave it in the text as written
        # Whitespace between two encoded-words is not part of the text (RFC 2047
        # section 6.2); words of one charset are joined before decoding because
        # mailers split multi-byte characters across them.
        adjacent = last_end > 0 and not between.strip()
        if pending and not (adjacent and charset == pending_charset):
            out.append(_decode_text(b"".join(pending), pending_charset, defects))
            pending = []
        if not adjacent:
            out.append(between)
        pending.append(data)
        pending_charset = charset
        last_end = match.end()
    if pending:
        out.append(_decode_text(b"".join(pending), pending_charset, defects))
    rest = value[last_end:]
    if _OPEN_WORD.search(rest):
        defects.add("bad-encoded-word")
    out.append(rest)
    return " ".join("".join(out).split())


# -- bodies -------------------------------------------------------------------

_B64_CLEAN = _B64_ALPHABET + b"\r\n"
_CHARSET = re.compile(r"charset\s*=\s*[\"']?([^\"';\s]*)", re.I)
_CONTENT_TYPE_LINE = re.compile(rb"^content-type:[ \t]*((?:[^\r\n]|\r?\n[ \t])*)", re.I | re.M)
_BOUNDARY = re.compile(rb"boundary\s*=\s*(?:\"([^\"\r\n]+)\"|([^;\s\"]+))", re.I)
_DELIMITER_LINE = re.compile(rb"^--([^\r\n]+)", re.M)
_KNOWN_CTES = frozenset({"", "7bit", "8bit", "binary", "quoted-printable",
                         "x-uuencode", "uuencode", "uue", "x-uue"})

# Stdlib defect classes renamed to the names the module docstring promises;
# the rest are converted mechanically (FooBarDefect -> 'foo-bar').
_STDLIB_DEFECTS = {"NoBoundaryInMultipart": "missing-boundary", "StartBoundaryNotFound": "missing-boundary",
                   "InvalidBase64Padding": "bad-base64", "InvalidBase64Characters": "bad-base64",
                   "InvalidBase64Length": "bad-base64"}


def _defect_name(defect: Exception) -> str:
    stem = type(defect).__name__.removesuffix("Defect")
    return _STDLIB_DEFECTS.get(stem) or re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", stem).lower()


# Every byte outside the base64 alphabet. Not just " \t\r\n": a vertical tab or form
# feed that str.strip() allowed past the check threw the padding count off and
# a2b_base64 raised (found by fuzz/fuzz_parse.py; tests/hostile_cases.py).
_NOT_B64 = bytes(sorted(set(range(256)) - set(_B64_ALPHABET)))


def _b64_lenient(core: bytes) -> bytes:
    """Decode alphabet-only base64, repairing padding; never raises."""
    core = core.translate(None, _NOT_B64)
    cut = core.find(b"=")
    if cut >= 0:
        core = core[:cut]
    if len(core) % 4 == 1:  # a lone trailing character carries no whole byte
        core = core[:-1]
    return binascii.a2b_base64(core + b"=" * (-len(core) % 4))


def _b64decode(data: bytes, defects: set[str]) -> bytes:
    """Decode a base64 body, keeping any trailing plain text (e.g. a list footer)."""
    if not data.translate(None, _B64_CLEAN):
        try:
            return binascii.a2b_base64(data)
        except binascii.Error:
            defects.add("bad-base64")
            return _b64_lenient(data)
    defects.add("bad-base64")
    # Something other than base64 is in there: a mailing-list footer appended after
    # the blob, or plain text mislabelled as base64. Decode the leading run of
    # base64 lines and keep the rest as it is.
    lines = data.lstrip().splitlines(keepends=True)
    n_b64 = 0
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.translate(None, _B64_ALPHABET):
            break
        n_b64 += 1
    if n_b64 == 0:
        return data  # base64 that isn't: read it as text
    return _b64_lenient(b"".join(lines[:n_b64])) + b"\n" + b"".join(lines[n_b64:])


def _limit_structure(raw: bytes, limits: MailLimits, defects: set[str]) -> bytes:
    """Cut ``raw`` where nesting would pass max_depth or parts would pass max_parts.

    A pre-scan, because the stdlib parser recurses once per level (RecursionError
    near 1000 levels, quadratic time before) and builds every part it sees. It
    estimates a multipart's extent from its close delimiter, a message/* part's
    from its parent's. Two cheap counts clear nearly every real message first.
    """
    lower = raw.lower()
    if (lower.count(b"multipart/") + lower.count(b"message/") <= limits.max_depth
            and raw.count(b"\n--") <= limits.max_parts):
        return raw
    cut = len(raw)
    boundaries: set[bytes] = set()
    ends: list[int] = []  # end offsets of the open containers, innermost last
    for match in _CONTENT_TYPE_LINE.finditer(raw):
        start = match.start()
        while ends and ends[-1] <= start:
            ends.pop()
        end = ends[-1] if ends else len(raw)
        value = match.group(1).lstrip(b'"').lower()
        boundary = _BOUNDARY.search(match.group(1))
        if value.startswith(b"multipart/") and boundary is not None:
            boundary = boundary.group(1) or boundary.group(2)
            boundaries.add(boundary)
            close = raw.find(b"\n--" + boundary + b"--", start)
            end = end if close < 0 else min(close, end)
        elif not value.startswith(b"message/"):
            continue  # not a container: the parser does not nest into it
        if len(ends) >= limits.max_depth:
            defects.add("too-deep")
            cut = start
            break
        ends.append(end)
    n_parts = 0
    for match in _DELIMITER_LINE.finditer(raw, 0, cut):
        n_parts += match.group(1).rstrip() in boundaries
        if n_parts > limits.max_parts:
            defects.add("too-many-parts")
            return raw[: match.start()]
    return raw[:cut]


class _Body:
    """Accumulates what the walk over MIME leaves finds."""

    def __init__(self, defects: set[str], limits: MailLimits) -> None:
        self.defects = defects
        self.parts: list[TextPart] = []
        self.attachments: list[Attachment] = []
        self.urls: list[str] = []
        self.html_left = limits.max_html_chars  # shared by the message's parts
        self.html_renderer = limits.html_renderer
        # Lexbor's tree costs up to the square of its tags: the message's parts share
        # one budget of them (textnb.mail.html_lexbor.MAX_TREE_TAGS).
        self.tree_tags_left: int | None = None

    def add_leaf(self, part: email.message.Message) -> None:
        content_type = part.get_content_type()
        cte = str(part.get("content-transfer-encoding", "")).strip().lower()
        if cte == "base64":
            # Our own decoder: the stdlib's turns text mislabelled as base64 into
            # binary noise and drops a list footer appended after the blob.
            # The stored payload (8-bit bytes as surrogate escapes): get_payload() decodes
            # 8-bit text with the part's charset, and UTF-7 then gave lone surrogates no
            # encoder takes (found by fuzz/fuzz_parse.py; tests/hostile_cases.py).
            stored = str(part._payload or "")
            data = _b64decode(stored.encode("utf-8", "surrogateescape"), self.defects)
        else:
            # Raw bytes (8-bit restored), quoted-printable and uuencode undone.
            data = part.get_payload(decode=True)
            data = data if isinstance(data, bytes) else b""
            if cte not in _KNOWN_CTES:
                self.defects.add("unknown-transfer-encoding")
        # A multipart/message leaf is a container the parser could not split
        # (missing boundary): its body is still text worth reading.
        if content_type.partition("/")[0] not in ("text", "multipart", "message"):
            filename = _decode_header_value(part.get_filename("") or "", self.defects)
            self.attachments.append(Attachment(content_type, filename, len(data)))
            return
        match = _CHARSET.search(str(part.get("content-type", "")))
        charset = match.group(1).lower() if match else ""
        text = _decode_text(data, charset, self.defects)
        if content_type != "text/html":
            self.parts.append(TextPart("text/plain", charset, text.replace("\r\n", "\n")))
            return
        rendered = self._render(text)
        self.html_left = max(0, self.html_left - len(text))
        if rendered.broken:
            self.defects.add("bad-html")
        if rendered.cut:
            self.defects.add("too-much-html")
        self.urls.extend(rendered.urls)
        self.parts.append(TextPart("text/html", charset, rendered.text))

    def _render(self, markup: str) -> HtmlText:
        if self.html_renderer == "stdlib":
            return html_to_text(markup, self.html_left)
        # Imported at the first HTML part: a message without one never pays for it.
        from .html_lexbor import MAX_TREE_TAGS, lexbor_to_text

        if self.tree_tags_left is None:
            self.tree_tags_left = MAX_TREE_TAGS
        rendered = lexbor_to_text(markup, self.html_left, self.tree_tags_left)
        self.tree_tags_left = max(0, self.tree_tags_left - markup.count("<", 0, self.html_left))
        return rendered


def _walk(msg: email.message.Message, limits: MailLimits, body: _Body) -> None:
    """Visit every part depth-first in message order, without recursion."""
    stack = [(msg, 0)]
    n_leaves = 0
    while stack:
        part, depth = stack.pop()
        body.defects.update(map(_defect_name, part.defects))
        if part.is_multipart():
            if depth >= limits.max_depth:
                body.defects.add("too-deep")
                continue
            children = [c for c in part.get_payload() if isinstance(c, email.message.Message)]
            stack.extend((child, depth + 1) for child in reversed(children))
            continue
        n_leaves += 1
        if n_leaves > limits.max_parts:
            body.defects.add("too-many-parts")
            return
        body.add_leaf(part)
        if part.defects:  # reading it may have found more (_Message: 'bad-parameters')
            body.defects.update(map(_defect_name, part.defects))


# The end of the first empty line: where a header section normally ends.
_FIRST_EMPTY_LINE = re.compile(rb"\n\r?\n")


# A header section the stdlib parser reads without a special case: fields whose names
# are its printable characters but ":" (its ``headerRE``), each one line and its
# continuation lines, LF line ends. What follows is the body, after an empty line or, if
# the next line cannot be a header line, at that line (the parser then notes a missing
# separator). Anything else (a "From " line, a name with a space, a CR, a first line that
# is a continuation) goes to the parser.
_FIELD_NAME = r"[\x21-\x39\x3b-\x7e]+"
# A line's text: no CR (a line end to the parser) and none of the controls that
# str.splitlines would also cut at (3.11's parser cuts at CR and LF only; others may not).
_LINE = r"[^\n\r\x0b\x0c\x1c-\x1e]*"
# Matched on the bytes (a byte >= 0x80 is a surrogate to the parser, matched by _LINE
# either way), so a multipart message's body is never decoded here.
_PLAIN_FIELDS = re.compile(rf"(?:{_FIELD_NAME}:{_LINE}\n(?:[ \t]{_LINE}\n)*)+".encode())
_PLAIN_FIELD = re.compile(rf"^({_FIELD_NAME}):[ \t]*([^\n]*\n(?:[ \t][^\n]*\n)*)", re.MULTILINE)
# The stdlib parser's test for a header line (email.feedparser.headerRE).
_HEADER_LINE = re.compile(rb"From |[\041-\071\073-\176]*:|[\t ]")


class BadParametersDefect(email.errors.MessageDefect):
    """A header's parameters that the stdlib cannot decode (``_Message``)."""


class _Message(email.message.Message):
    """compat32's Message, whose header parameters never raise.

    The stdlib decodes RFC 2231 parameters by sorting each one's sections, and a
    parameter given both unnumbered and numbered (``name*=`` beside ``name*1=``) makes
    it compare None with an int: TypeError, out of the parser itself for a multipart's
    boundary (fuzz/fuzz_parse.py found it). Such a header's parameters read as none,
    with the defect 'bad-parameters': a multipart then has no boundary, and its body is
    read as text ('missing-boundary'), not the whole message ('parser-error')."""

    def _get_params_preserve(self, failobj, header):
        try:
            return super()._get_params_preserve(failobj, header)
        except TypeError:
            if not any(isinstance(d, BadParametersDefect) for d in self.defects):
                self.defects.append(BadParametersDefect(f"unreadable parameters in {header}"))
            return []


def _plain_message(raw: bytes) -> email.message.Message | None:
    """The stdlib parser's message for a single-part message whose header section has
    the common shape (``_PLAIN_FIELDS``), without its line-by-line feed; None for any
    other message.

    Each field is what ``compat32.header_source_parse`` makes of it (the name as
    written; the value from the first line's text after leading blanks, then its
    continuation lines, less the final line end); the body is the rest, verbatim. The
    parser's walk over the header lines was most of parsing plain-text mail
    (docs/design/parsing-speed.md#the-lean-parse-of-a-plain-message). tests/test_mail.py
    checks the two messages equal on every message of the public corpora and the
    hostile catalogue.
    """
    found = plain_fields(raw, _PLAIN_FIELDS, _PLAIN_FIELD)
    if found is None:
        return None
    body, fields = found  # where the header section ends; its (name, value) pairs
    defects: list = []
    if raw.startswith(b"\n", body):
        body += 1  # the empty line between header and body
    elif body < len(raw):
        if raw.startswith(b"\r", body) or _HEADER_LINE.match(raw, body):
            return None  # a line end or header line of a shape left to the parser
        defects.append(email.errors.MissingHeaderBodySeparatorDefect())
    msg = _Message(policy=email.policy.compat32)
    for name, value in fields:  # decoded as the stdlib's BytesParser decodes them
        msg.set_raw(name, value)
    if msg.get_content_maintype() in ("multipart", "message"):
        return None
    msg.defects.extend(defects)
    msg.set_payload(raw[body:].decode("ascii", "surrogateescape"))
    return msg


def _stdlib_parse(raw: bytes) -> email.message.Message:
    """The stdlib's parse of ``raw``, without its line-by-line walk over a plain body.

    The stdlib parser takes one Python step per line, seconds for a body of many
    short lines (docs/design/parsing-speed.md#the-parsers-on-hostile-mail), which only
    multipart and message/* bodies need. A single-part message whose
    header section has the common shape is read without the parser
    (``_plain_message``); for any other single-part one the header section is parsed
    alone and the rest appended to its payload verbatim, which is what the parser
    itself does with such a body (checked equal on all 6,047 SpamAssassin messages and
    the hostile catalogue).
    """
    msg = _plain_message(raw)
    if msg is not None:
        return msg
    end = _FIRST_EMPTY_LINE.search(raw)
    if end is not None:
        msg = email.message_from_bytes(raw[: end.end()], _class=_Message,
                                       policy=email.policy.compat32)
        if not msg.is_multipart() and msg.get_content_maintype() not in ("multipart", "message"):
            # The stored payload: get_payload() would turn 8-bit bytes into U+FFFD.
            payload = msg._payload or ""
            msg.set_payload(payload + raw[end.end():].decode("ascii", "surrogateescape"))
            return msg
    return email.message_from_bytes(raw, _class=_Message, policy=email.policy.compat32)


def _skip_envelope(raw: bytes) -> bytes:
    """Drop a leading mbox 'From ' line, which is not a header."""
    if raw.startswith(b"From "):
        newline = raw.find(b"\n")
        return raw[newline + 1 :] if newline >= 0 else b""
    return raw


def parse_message(raw: bytes, limits: MailLimits = MailLimits()) -> ParsedEmail:
    """Parse one RFC 822 message; never raises on bad mail.

    raw (bytes): the message, LF or CRLF line ends, optionally after an mbox 'From ' line.
    limits (MailLimits): bounds on size and structure; reaching one is a defect, not an error.
    RETURNS (ParsedEmail): headers, decoded text parts, attachments, URLs, defects.
    """
    if isinstance(raw, str):
        raise TypeError("parse_message expects bytes, got str; "
                        "pass raw.encode() or read the file in 'rb' mode")
    raw = bytes(raw)
    defects: set[str] = set()
    if len(raw) > limits.max_bytes:
        raw = raw[: limits.max_bytes]
        defects.add("truncated")
    if b"\0" in raw:
        raw = raw.replace(b"\0", b"")
        defects.add("nul-bytes")
    raw = _skip_envelope(raw)
    if not raw.strip():
        defects.update(("empty", "no-headers"))
        return ParsedEmail((), (), (), (), tuple(sorted(defects)))
    raw = _limit_structure(raw, limits, defects)
    body = _Body(defects, limits)
    try:
        # compat32, not policy.default: several times faster, headers and payloads
        # read or not, and default's header objects raised IndexError on one malformed
        # Message-ID (docs/design/parsing-speed.md#compat32-not-the-default-policy).
        msg = _stdlib_parse(raw)
        header_items = msg.raw_items()
        _walk(msg, limits, body)
    except RecursionError:
        # Nesting the pre-scan did not see (e.g. close delimiters planted early).
        return _fallback(raw, defects, "too-deep")
    except Exception:  # noqa: BLE001 - the stdlib parser's failure modes are not
        # documented; the never-raises contract needs a floor under all of them.
        return _fallback(raw, defects, "parser-error")
    headers = []
    for n_headers, (name, value) in enumerate(header_items):
        if n_headers == limits.max_headers:
            defects.add("too-many-headers")
            break
        headers.append((name.lower(), _decode_header_value(value, defects)))
    if not headers:
        defects.add("no-headers")
    return ParsedEmail(tuple(headers), tuple(body.parts), tuple(body.attachments),
                       tuple(body.urls), tuple(sorted(defects)))


def _fallback(raw: bytes, defects: set[str], reason: str) -> ParsedEmail:
    """The whole message as one plain-text part, when the MIME parse failed."""
    defects.add(reason)
    part = TextPart("text/plain", "", _decode_text(raw, "", set()).replace("\r\n", "\n"))
    return ParsedEmail((), (part,), (), (), tuple(sorted(defects)))
