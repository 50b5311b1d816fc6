"""A catalogue of hostile and broken messages, each built by code, with what must happen.

Spam is written by adversaries: a filter that crashes, hangs or balloons on a crafted
message lets it through, or loses mail. Every case here goes through parse ->
tokenise -> classify in tests/test_hostile.py (and, one subprocess per case, through
bench/hostile.py for the time and memory figures in docs/performance.md, "Hostile mail"). A case says:

- ``build``: a function returning the bytes (called when needed: some are 50 MB);
- ``expect``: in words, what the filter must do with it;
- ``controls``: defect names that must appear as ``control:<name>`` tokens;
- ``stdlib_controls``: more that must appear when HTML is rendered by the stdlib parser
  (``mail.html_renderer = "stdlib"``), which gives up where Lexbor, a browser's parser,
  reads on (tests/test_html_lexbor.py checks them);
- ``words``: tokens that must appear (the evidence is still read);
- ``seconds``: the time parse + tokenise + classify may take, generous for a slow
  CI machine (the measured times are in bench/results/hostile.json);
- ``kind``: "message" (raw bytes of one message) or "mbox" (an mbox file's bytes,
  read through textnb.mail.sources; ``originals`` gives the messages it must read back as).

The Maildir-being-written case needs a thread and lives in tests/test_hostile.py.
Related single-purpose tests in tests/test_mail.py are not repeated here.
"""

from __future__ import annotations

import base64
import io
import re
import struct
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass

MB = 1_000_000


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], bytes]
    expect: str
    controls: tuple[str, ...] = ()
    stdlib_controls: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    seconds: float = 30.0
    kind: str = "message"
    # mbox cases: the messages the mbox must read back as, exactly
    originals: Callable[[], list[bytes]] | None = None


def msg(*headers: str, body: bytes = b"") -> bytes:
    """An LF message from header lines and a body."""
    return ("\n".join(headers) + "\n\n").encode() + body


def multipart(parts: list[bytes], boundary: str = "B", subtype: str = "mixed",
              headers: tuple[str, ...] = ("Subject: parts",)) -> bytes:
    body = b"".join(b"--" + boundary.encode() + b"\n" + part + b"\n" for part in parts)
    return msg(*headers, f'Content-Type: multipart/{subtype}; boundary="{boundary}"',
               body=body + b"--" + boundary.encode() + b"--\n")


def nested(depth: int) -> bytes:
    head = b"".join(b'Content-Type: multipart/mixed; boundary="b%d"\n\n--b%d\n' % (i, i)
                    for i in range(depth))
    tail = b"".join(b"\n--b%d--\n" % i for i in reversed(range(depth)))
    return b"Subject: deep\n" + head + b"Content-Type: text/plain\n\ninnermost\n" + tail


def html_message(markup: bytes, subject: str = "html") -> bytes:
    return msg(f"Subject: {subject}", "Content-Type: text/html; charset=utf-8", body=markup)


def png_1x1() -> bytes:
    """A valid 1x1 PNG image, built by hand."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


def zip_of(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def attached(data: bytes, content_type: str, filename: str, note: bytes = b"see attached") -> bytes:
    part = (f"Content-Type: {content_type}; name={filename}\n"
            f'Content-Disposition: attachment; filename="{filename}"\n'
            "Content-Transfer-Encoding: base64\n\n").encode() + base64.encodebytes(data)
    return multipart([b"Content-Type: text/plain\n\n" + note, part])


def mbox(messages: list[bytes]) -> bytes:
    """An mbox as a writer makes it (mboxrd): each body line '>*From ' gets one more '>'."""
    return b"".join(b"From sender@example.com Sat Jan  3 01:05:34 1996\n"
                    + re.sub(rb"^(>*From )", rb">\1", m, flags=re.M) + b"\n" for m in messages)


MBOX_MESSAGES = [
    msg("Subject: one", body=b"text\nFrom the start of a line\n>From quoted once\n"),
    msg("Subject: two", body=b"From here on, right after the blank line\n\nFrom again\n"),
    msg("Subject: three", body=b"last one\n>>From twice quoted becomes thrice\n"),
]


# 10 MB of lines of text with ordinary words: the plain-text worst case at max_bytes.
def _fifty_mb() -> bytes:
    line = b"cheap meds online now, best prices guaranteed for you today\n"
    return msg("Subject: big", "From: a@b.example", body=line * (50 * MB // len(line)))


CASES: list[Case] = [
    # -- empty and partial --------------------------------------------------------
    Case("empty-file", lambda: b"", "classified on the prior alone",
         controls=("empty", "no-headers")),
    Case("whitespace-only", lambda: b"\n\r\n \t\n" * 1000, "read as empty",
         controls=("empty", "no-headers")),
    Case("envelope-line-only", lambda: b"From MAILER-DAEMON Mon Jan  1 00:00:00 2001\n",
         "the mbox 'From ' line is not a header: read as empty", controls=("empty",)),
    Case("only-headers-no-separator", lambda: b"Subject: cheap meds\nFrom: a@b.example",
         "headers read, no body", words=("subject:cheap", "from:domain:b.example")),
    Case("only-headers-with-separator", lambda: b"Subject: cheap meds\nFrom: a@b.example\n\n",
         "headers read, empty body", words=("subject:meds",)),
    Case("only-a-body", lambda: b"cheap meds online\nno headers at all, just words\n",
         "the text is read as the body", controls=("no-headers",), words=("cheap", "online")),
    Case("header-line-without-colon", lambda: b"Subject: ok\nthis is not a header\nFrom: x@y.example\n\nbody words\n",
         "the stdlib's defect is evidence; later lines become the body",
         controls=("missing-header-body-separator",), words=("subject:ok",)),
    # -- bytes that are not text ----------------------------------------------------
    Case("nul-bytes-everywhere",
         lambda: b"\0".join(bytes([c]) for c in msg("Subject: free money", body=b"cheap meds now\n")),
         "NULs removed, the message read as if they were absent", controls=("nul-bytes",),
         words=("subject:free", "cheap")),
    Case("only-nul-bytes", lambda: b"\0" * MB, "read as empty", controls=("nul-bytes", "empty")),
    Case("invalid-utf8-everywhere",
         lambda: (b"Subject: \xff\xfe\xc3 sale \x80\x81\nFrom: \xc0\xaf@b.example\n"
                  b"Content-Type: text/plain; charset=utf-8\n\n" + b"deal \xff\xc3\x28 \xed\xa0\x80 " * 10_000),
         "undecodable bytes read as cp1252, words kept", controls=("undecodable-bytes",),
         words=("deal",)),
    Case("random-binary", lambda: bytes((i * 7919 + (i >> 8) * 31) % 256 for i in range(2 * MB)),
         "2 MB of noise still gets a verdict"),
    Case("unknown-charset",
         lambda: msg("Subject: hi", "Content-Type: text/plain; charset=x-klingon", body=b"qapla cheap meds\n"),
         "read as UTF-8, else cp1252", controls=("unknown-charset",), words=("qapla",)),
    Case("charset-not-a-charset",
         lambda: msg("Content-Type: text/plain; charset=unicode_escape", body=b"\\u0041 cheap\n"),
         "a codec that is no MIME charset is not used (backslashes stay text)",
         controls=("unknown-charset",), words=("cheap",)),
    Case("lying-charset-utf8-label-latin1-bytes",
         lambda: msg("Content-Type: text/plain; charset=utf-8", body="caf\u00e9 cr\u00e8me\n".encode("latin-1")),
         "read as cp1252", controls=("undecodable-bytes",), words=("café",)),
    Case("lying-charset-ascii-label-utf8-bytes",
         lambda: msg("Content-Type: text/plain; charset=us-ascii", body="caf\u00e9 \u20ac5\n".encode()),
         "read as UTF-8", controls=("charset-mismatch",), words=("café",)),
    Case("odd-length-utf16",
         lambda: msg("Content-Type: text/plain; charset=utf-16", body=b"\xff\xfeh\x00i\x00!"),
         "the stateful codec fails at the end: read as UTF-8 instead", controls=("undecodable-bytes",)),
    # Found by fuzz/fuzz_parse.py: UTF-7 decodes to lone surrogates, and spaCy raised.
    Case("utf7-lone-surrogates",
         lambda: msg("Subject: =?utf-7?Q?+2a8-?= deal", "Content-Type: text/html; charset=utf-7",
                     body=b"<p>cheap +2a8- meds +2a/cAA-</p>"),
         "lone surrogates become U+FFFD, a pair one character", words=("cheap", "meds")),
    Case("undeclared-8bit",
         lambda: msg("Subject: x", body="na\u00efve r\u00e9sum\u00e9\n".encode()),
         "RFC 2045 says ASCII: the bytes are read as UTF-8 and noted", controls=("undeclared-8bit",)),
    # -- MIME structure -------------------------------------------------------------
    Case("multipart-without-boundary",
         lambda: msg("Content-Type: multipart/mixed", body=b"--x\n\nhidden words\n--x--\n"),
         "the body is read as text", controls=("missing-boundary",), words=("hidden",)),
    Case("boundary-never-seen",
         lambda: msg('Content-Type: multipart/mixed; boundary="NOT-THERE"', body=b"--x\n\nhidden words\n"),
         "the body is read as text", controls=("missing-boundary",), words=("hidden",)),
    Case("close-delimiter-missing",
         lambda: msg('Content-Type: multipart/mixed; boundary="B"',
                     body=b"--B\nContent-Type: text/plain\n\ncheap meds\n--B\n\nmore words\n"),
         "the parts seen are read", controls=("close-boundary-not-found",), words=("cheap", "more")),
    Case("boundary-of-10000-characters",
         lambda: multipart([b"Content-Type: text/plain\n\nlong boundary words"], boundary="z" * 10_000),
         "parsed like any boundary", words=("boundary",)),
    Case("1000-deep-nested-multipart", lambda: nested(1000),
         "nesting stops at mail.max_depth", controls=("too-deep",), words=("subject:deep",)),
    Case("1000-deep-message-rfc822",
         lambda: b"Subject: deep\n" + b"Content-Type: message/rfc822\n\n" * 1000 + b"x",
         "nesting stops at mail.max_depth", controls=("too-deep",), words=("subject:deep",)),
    Case("100000-parts",
         lambda: multipart([b"Content-Type: text/plain\n\npart words"] * 100_000),
         "parts stop at mail.max_parts", controls=("too-many-parts",), words=("part",)),
    Case("100000-attachments",
         lambda: multipart([b"Content-Type: application/octet-stream; name=a.exe\n\nMZ"] * 100_000),
         "attachments stop at mail.max_parts", controls=("too-many-parts",),
         words=("attachment:application/octet-stream",)),
    Case("message-rfc822-empty", lambda: msg("Content-Type: message/rfc822", body=b""),
         "an empty enclosed message still gets a verdict"),
    Case("content-type-with-10000-parameters",
         lambda: msg("Content-Type: text/plain; " + "; ".join(f"p{i}=v{i}" for i in range(10_000)),
                     body=b"parameter flood words\n"),
         "the body is read", words=("flood",)),
    # -- transfer encodings ----------------------------------------------------------
    Case("base64-that-is-not-base64",
         lambda: msg("Content-Transfer-Encoding: base64", body=b"this is plain text, not base64 at all!\n" * 100),
         "read as the text it is", controls=("bad-base64",), words=("plain",)),
    Case("base64-bad-padding-and-footer",
         lambda: msg("Content-Transfer-Encoding: base64",
                     body=base64.encodebytes(b"cheap meds ")[:-2] + b"\n-- \nunsubscribe here\n"),
         "the blob decoded, the footer kept", controls=("bad-base64",), words=("cheap", "unsubscribe")),
    # Found by fuzz/fuzz_parse.py: a vertical tab in a base64 line made the lenient
    # decoder raise, and the whole message fell back to plain text, its headers lost.
    Case("base64-with-vertical-tab",
         lambda: msg("Subject: vt", "Content-Transfer-Encoding: base64",
                     body=b"Y2hlYXAgbWVkcw\x0b\nplain footer!\n"),
         "the blob decoded, the footer kept", controls=("bad-base64",),
         words=("subject:vt", "cheap", "meds", "footer")),
    # Found by fuzz/fuzz_parse.py: 8-bit bytes in a base64 body labelled UTF-7 came
    # back from the stdlib as lone surrogates, and reading the body raised.
    Case("base64-utf7-with-8bit-bytes",
         lambda: msg("Subject: u7", "Content-Type: text/plain; charset=utf-7",
                     "Content-Transfer-Encoding: base64", body=b"Y2hlYXAgbWVkcw==\n\xff +2a8-\n"),
         "the blob decoded, the rest read", controls=("bad-base64",),
         words=("subject:u7", "cheap", "meds")),
    Case("base64-garbage-9MB",
         lambda: msg("Content-Transfer-Encoding: base64", body=b"!!@@##$$%%^^&&**\n" * 500_000),
         "read as text, bounded by max_tokens", controls=("bad-base64",)),
    Case("unknown-transfer-encoding",
         lambda: msg("Content-Transfer-Encoding: x-rot13", body=b"purnc zrqf\n"),
         "the raw body is read", controls=("unknown-transfer-encoding",), words=("purnc",)),
    Case("quoted-printable-soft-break-abuse",
         lambda: msg("Content-Transfer-Encoding: quoted-printable",
                     body=b"v=\ni=\na=\ng=\nr=\na " + b"=\n" * 2_000_000 + b"end\n"),
         "soft breaks glue the word back together", words=("viagra", "end")),
    Case("quoted-printable-invalid-escapes",
         lambda: msg("Content-Transfer-Encoding: quoted-printable", body=b"=ZZ=G1=" * 1_000_000),
         "bad escapes are kept as text; one 7 MB 'word' is cut, not split into millions"),
    # -- headers ---------------------------------------------------------------------
    Case("10000-headers",
         lambda: b"".join(b"X-Header-%d: value %d\n" % (i, i) for i in range(10_000)) + b"Subject: late\n\nbody\n",
         "headers stop at mail.max_headers", controls=("too-many-headers",)),
    Case("10000-received-lines",
         lambda: b"".join(b"Received: from h%d.example.com (192.0.2.%d)\n" % (i, i % 256)
                          for i in range(10_000)) + b"\nbody\n",
         "headers stop at mail.max_headers", controls=("too-many-headers",),
         words=("received:h0.example.com",)),
    Case("header-of-5MB-folded",
         lambda: b"Subject: start\n" + b"X-Long: x\n" + b" folded words\n" * 400_000 + b"\nbody\n",
         "one header field is cut to its first 10,000 characters", words=("subject:start",)),
    Case("10000-recipients",
         lambda: msg("To: " + ", ".join(f"user{i}@example{i % 7}.com" for i in range(10_000)),
                     body=b"hello all\n"),
         "at most 20 addresses are tokenised", words=("to:many-recipients",)),
    Case("encoded-word-flood",
         lambda: b"Subject: " + b"=?utf-8?B?Y2hlYXAg?= " * 100_000 + b"\n\nbody\n",
         "100,000 encoded-words decode; the field is cut", words=("subject:cheap",)),
    Case("encoded-word-bad-base64",
         lambda: msg("Subject: =?utf-8?B?!!!not-base64!!!?= sale"), "left as written",
         controls=("bad-encoded-word",), words=("subject:sale",)),
    Case("encoded-word-unterminated",
         lambda: msg("Subject: =?utf-8?q?cheap meds"), "left as written",
         controls=("bad-encoded-word",), words=("subject:meds",)),
    Case("encoded-word-unknown-charset",
         lambda: msg("Subject: =?x-klingon?Q?qapla?="), "decoded as UTF-8",
         controls=("unknown-charset",), words=("subject:qapla",)),
    Case("encoded-word-open-flood",
         lambda: b"Subject: " + b"=?utf-8?q?" * 200_000 + b"\n\nbody\n",
         "200,000 unterminated encoded-words", controls=("bad-encoded-word",)),
    # -- HTML ------------------------------------------------------------------------
    Case("html-100000-nested-tags",
         lambda: html_message(b"<div>" * 100_000 + b"deep cheap words" + b"</div>" * 100_000),
         "rendered in linear time", words=("cheap", "content:html")),
    Case("html-1M-lone-lt", lambda: html_message(b"<" * MB + b" cheap"),
         "'<' that opens no tag is text", words=("cheap",)),
    Case("html-unclosed-tags-a-lt", lambda: html_message(b"cheap <p>" + b"<a<" * 300_000),
         "an unfinished tag is tag-stripped, in linear time", controls=("bad-html",), words=("cheap",)),
    Case("html-unclosed-comment",
         lambda: html_message(b"visible words <!--" + b"hidden comment text " * 100_000),
         "a comment that never ends: hidden (Lexbor), or stripped crudely (stdlib)",
         stdlib_controls=("bad-html",), words=("visible",)),
    Case("html-10MB-of-tags",
         lambda: html_message(b"<p>cheap</p>" + b"<b>" * 3_300_000),
         "parsed up to mail.max_html_chars, the rest tag-stripped",
         controls=("too-much-html",), words=("cheap",), seconds=60),
    Case("html-stdlib-assertion", lambda: html_message(b"<p>cheap <a href=x>meds</a><![foo[ now"),
         "the stdlib parser's AssertionError: tag-stripped instead (Lexbor reads it)",
         stdlib_controls=("bad-html",),
         words=("cheap", "href:x")),
    # -- attachments -----------------------------------------------------------------
    Case("zip-attachment",
         lambda: attached(zip_of({"invoice.exe": b"MZ" + bytes(1000)}), "application/zip", "invoice.zip"),
         "described, never opened", words=("attachment:application/zip", "attachment:ext:zip")),
    Case("zip-bomb-attachment",
         lambda: attached(zip_of({"zeros.bin": bytes(50 * MB)}), "application/zip", "bomb.zip"),
         "never decompressed: costs its base64 size only", words=("attachment:application/zip",)),
    # Found by fuzz/fuzz_parse.py: an 8-bit byte in a filename raised inside the parser,
    # and the whole message fell back to plain text, its headers lost.
    Case("attachment-filename-with-8bit-bytes",
         lambda: multipart([(b"Content-Type: image/png\n"
                             b'Content-Disposition: attachment; filename="bad\xff\xfe.png"\n\nxx')]),
         "the filename is decoded (cp1252/U+FFFD), headers and parts kept",
         words=("subject:parts", "attachment:image/png", "attachment:ext:png")),
    Case("attachment-filename-rfc2231-bad-utf8",
         lambda: multipart([(b"Content-Type: application/pdf\n"
                             b"Content-Disposition: attachment; filename*=utf-8''bad%FF.pdf\n\nxx")]),
         "an RFC 2231 filename of bad UTF-8 is decoded with replacement",
         words=("subject:parts", "attachment:application/pdf", "attachment:ext:pdf")),
    Case("image-attachment", lambda: attached(png_1x1(), "image/png", "logo.png"),
         "described, never decoded as an image", words=("attachment:image/png", "attachment:ext:png")),
    # -- size ------------------------------------------------------------------------
    Case("50MB-message", _fifty_mb, "read up to mail.max_bytes, tokens up to tokenizer.max_tokens",
         controls=("truncated",), words=("cheap", "subject:big"), seconds=60),
    Case("10MB-single-line",
         lambda: msg("Subject: one line", body=b"a" * 10 * MB + b"\n"),
         "one 10 MB word: one skip token", controls=("truncated",), words=("subject:line",), seconds=60),
    Case("10MB-of-empty-lines", lambda: msg("Subject: blank", body=b"\n" * 10 * MB),
         "the stdlib parser's slowest input per byte (one step per line)",
         controls=("truncated",), seconds=60),
    Case("10MB-part-of-short-lines",
         lambda: multipart([b"Content-Type: text/plain\n\n" + b"a\n" * (5 * MB)]),
         "a multipart body goes through the stdlib parser line by line: the slowest "
         "input per byte that remains", controls=("truncated",), seconds=60),
    Case("10MB-of-cr-only-lines", lambda: b"Subject: old mac\r\r" + b"a\r" * (5 * MB),
         "old Mac line ends: the stdlib parser reads them line by line",
         controls=("truncated",), words=("subject:mac",), seconds=60),
    Case("10MB-header-section", lambda: b"Subject: start\n" + b"X-Fold: a\n" + b" b\n" * (3 * MB) + b"\nbody\n",
         "one folded field of 3 million lines: the field is cut to its first 10,000 "
         "characters", words=("subject:start",), seconds=60),
    Case("10MB-of-short-words", lambda: msg("Subject: words", body=b"ab " * (10 * MB // 3)),
         "reading stops at tokenizer.max_tokens", controls=("truncated",), words=("ab",), seconds=60),
    # -- line ends -------------------------------------------------------------------
    Case("crlf-lf-mixture",
         lambda: (b"Subject: mixed\r\nFrom: a@b.example\n"
                  b'Content-Type: multipart/alternative; boundary="B"\r\n\r\n'
                  b"--B\nContent-Type: text/plain\r\n\ncheap\r\nmeds\n--B--\r\n"),
         "both line ends read", words=("subject:mixed", "cheap", "meds")),
    Case("cr-only-line-ends", lambda: b"Subject: old mac\r\rcheap meds\r",
         "old Mac line ends", words=("subject:mac", "cheap")),
    # -- mbox ------------------------------------------------------------------------
    Case("mbox-from-line-quoting",
         lambda: mbox(MBOX_MESSAGES),
         "split only at 'From ' lines after a blank line; '>From ' unquoted once: the "
         "messages read back byte for byte", kind="mbox", originals=lambda: MBOX_MESSAGES),
]
