"""Tests for textnb.mail.parse: bytes -> ParsedEmail, never raising on bad mail."""

import base64
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from textnb.mail.parse import Attachment, MailLimits, ParsedEmail, TextPart, parse_message


def msg(*lines: str, body: bytes = b"") -> bytes:
    """An LF message from header lines plus a body."""
    return ("\n".join(lines) + "\n\n").encode() + body


def texts(parsed: ParsedEmail) -> list[str]:
    return [part.text for part in parsed.parts]


ALTERNATIVE = msg(
    "From: Alice <alice@example.com>",
    "Subject: lunch",
    "MIME-Version: 1.0",
    'Content-Type: multipart/alternative; boundary="XX"',
    body=(
        b"preamble is ignored\n"
        b"--XX\n"
        b"Content-Type: text/plain; charset=utf-8\n"
        b"Content-Transfer-Encoding: base64\n\n"
        + base64.encodebytes("Caf\u00e9 at noon?\n".encode())
        + b"--XX\n"
        b"Content-Type: text/html; charset=iso-8859-1\n"
        b"Content-Transfer-Encoding: quoted-printable\n\n"
        b"<p>Caf=E9 at <b>no</b>on? <a href=3D\"http://example.com/menu?a=3D1&amp;b=3D2\">menu</a>=\n"
        b"</p>\n"
        b"--XX--\n"
        b"epilogue\n"
    ),
)


def test_multipart_alternative_base64_and_quoted_printable():
    parsed = parse_message(ALTERNATIVE)
    assert parsed.parts == (
        TextPart("text/plain", "utf-8", "Caf\u00e9 at noon?\n"),
        TextPart("text/html", "iso-8859-1", "Caf\u00e9 at noon? menu"),
    )
    assert parsed.urls == ("http://example.com/menu?a=1&b=2",)
    assert parsed.header("SUBJECT") == ["lunch"]
    assert parsed.defects == ()


def test_html_visible_text_entities_links_and_script():
    html = (
        b"<html><head><title>Deal</title><style>p {color: red}</style>"
        b"<script>document.write('<b>hidden</b>')</script></head>"
        b"<body>V<!-- x -->ia<b>gra</b> &amp; more&nbsp;&#x41;&eacute;"
        b"<table><tr><td>Buy</td><td>now</td></tr></table>"
        b"<a href='http://spam.example/?x=1&amp;y=2'>here</a><img src=\"cid:logo\">"
        b"</body></html>"
    )
    parsed = parse_message(msg("Content-Type: text/html", body=html))
    text = parsed.parts[0].text
    assert "Viagra & more A\u00e9" in text  # comment dropped, inline tags glue, &nbsp; is a space
    assert "hidden" not in text and "color" not in text
    assert "Buy\nnow" in text  # table cells do not glue into one word
    assert parsed.urls == ("http://spam.example/?x=1&y=2", "cid:logo")


def test_html_the_stdlib_parser_rejects_is_still_read():
    # CPython 3.11's html.parser raises AssertionError on "<![foo[".
    parsed = parse_message(msg("Content-Type: text/html", body=b"<p>cheap <a href=x>meds</a><![foo[ now"),
                           MailLimits(html_renderer="stdlib"))
    assert "bad-html" in parsed.defects
    assert parsed.parts[0].text.split()[:2] == ["cheap", "meds"]
    assert parsed.urls == ("x",)


@pytest.mark.parametrize(
    "charset, text",
    [
        ("iso-8859-1", "Gr\u00fc\u00dfe aus K\u00f6ln"),
        ("koi8-r", "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440"),
        ("iso-2022-jp", "\u3053\u3093\u306b\u3061\u306f"),
        ("windows-1252", "\u201cquoted\u201d \u2013 dash"),
    ],
)
def test_declared_charset(charset, text):
    raw = msg(f"Content-Type: text/plain; charset={charset.upper()}", body=text.encode(charset))
    parsed = parse_message(raw)
    assert parsed.parts == (TextPart("text/plain", charset, text),)
    assert parsed.defects == ()


@pytest.mark.parametrize(
    "body, text",
    [("na\u00efve caf\u00e9".encode(), "na\u00efve caf\u00e9"), (b"caf\xe9 \x93q\x94", "caf\u00e9 \u201cq\u201d")],
    ids=["utf-8", "cp1252"],
)
def test_undeclared_8bit_is_utf8_if_valid_else_cp1252(body, text):
    parsed = parse_message(msg("Subject: x", body=body))
    assert texts(parsed) == [text]
    assert "undeclared-8bit" in parsed.defects


def test_lying_charset_utf8_label_on_latin1_bytes():
    parsed = parse_message(msg("Content-Type: text/plain; charset=utf-8", body=b"caf\xe9"))
    assert texts(parsed) == ["caf\u00e9"]
    assert "undecodable-bytes" in parsed.defects


def test_lying_charset_latin1_label_on_utf8_bytes():
    parsed = parse_message(msg('Content-Type: text/plain; charset="us-ascii"', body="caf\u00e9".encode()))
    assert texts(parsed) == ["caf\u00e9"]
    assert "charset-mismatch" in parsed.defects


@pytest.mark.parametrize("charset", ["x-bogus", "unicode_escape", "zlib", "default_charset"])
def test_unknown_charset_falls_back(charset):
    raw = msg(f"Content-Type: text/plain; charset={charset}", body=b"caf\xe9 \\x41")
    parsed = parse_message(raw)
    assert texts(parsed) == ["caf\u00e9 \\x41"]
    assert "unknown-charset" in parsed.defects


@pytest.mark.parametrize(
    "subject, decoded, defect",
    [
        ("=?utf-8?B?SGVsbG8gV29ybGQ=?=", "Hello World", None),
        ("=?ISO-8859-1?Q?Caf=E9_au_lait?=", "Caf\u00e9 au lait", None),
        ("Re: =?utf-8?q?a?= =?utf-8?q?b?= c", "Re: ab c", None),  # space between words dropped
        ("=?UTF-8?B?4pyI?=\n =?UTF-8?B?77iP?=", "\u2708\ufe0f", None),  # folded
        ("=?koi8-r?B?8NLJ18XU?=", "\u041f\u0440\u0438\u0432\u0435\u0442", None),
        ("=?iso-2022-jp?B?GyRCJDMkcyRLJEEkTxsoQg==?=", "\u3053\u3093\u306b\u3061\u306f", None),
        ("=?utf-8?B?SGVsbG8?=", "Hello", None),  # missing padding is repaired
        ("=?utf-8?B?!!!?= x", "=?utf-8?B?!!!?= x", "bad-encoded-word"),
        ("=?utf-8?X?abc?=", "=?utf-8?X?abc?=", "bad-encoded-word"),
        ("Win =?utf-8?B?SGVsbG8", "Win =?utf-8?B?SGVsbG8", "bad-encoded-word"),
        ("=?x-bogus?Q?caf=E9?=", "caf\u00e9", "unknown-charset"),
        ("  many    spaces\n\tfolded  ", "many spaces folded", None),
    ],
)
def test_rfc2047_subjects(subject, decoded, defect):
    parsed = parse_message(f"Subject: {subject}\n\nbody\n".encode())
    assert parsed.header("subject") == [decoded]
    assert (defect in parsed.defects) if defect else parsed.defects == ()


def test_raw_8bit_header_is_decoded():
    parsed = parse_message("Subject: caf\u00e9\n\nx".encode())
    assert parsed.header("subject") == ["caf\u00e9"]


@pytest.mark.parametrize(
    "raw, defects",
    [
        (b"", ("empty", "no-headers")),
        (b"\n\n  \n", ("empty", "no-headers")),
        (b"From MAILER-DAEMON Mon Jan  1 00:00:00 2001\n", ("empty", "no-headers")),
        (b"hello there\nno headers at all\n", ("missing-header-body-separator", "no-headers")),
    ],
)
def test_empty_and_headerless(raw, defects):
    parsed = parse_message(raw)
    assert parsed.defects == defects
    assert parsed.headers == ()


def test_headerless_text_is_still_read():
    assert texts(parse_message(b"hello there\n")) == ["hello there\n"]


def test_nul_bytes_are_removed_and_reported():
    parsed = parse_message(b"Subject: a\0b\n\nte\0xt\n")
    assert parsed.header("subject") == ["ab"]
    assert texts(parsed) == ["text\n"]
    assert parsed.defects == ("nul-bytes",)


@pytest.mark.parametrize(
    "content_type",
    ["multipart/mixed", 'multipart/mixed; boundary="NOT-THERE"'],
    ids=["no-boundary-param", "boundary-never-seen"],
)
def test_broken_boundary_reads_body_as_text(content_type):
    raw = msg(f"Content-Type: {content_type}", body=b"--other\n\nhidden words\n--other--\n")
    parsed = parse_message(raw)
    assert "missing-boundary" in parsed.defects
    assert "hidden words" in " ".join(texts(parsed))


# Found by the fuzzer (fuzz/fuzz_parse.py): an RFC 2231 parameter given both
# unnumbered and numbered makes the stdlib's decode_params compare None with an int.
def test_a_multiparts_parameters_the_stdlib_cannot_decode_are_read_as_none():
    raw = msg("Content-Type: multipart/mixed; boundary=x; name*=utf-8''a; name*1=b",
              body=b"--x\n\nhidden words\n--x--\n")
    parsed = parse_message(raw)
    assert "parser-error" not in parsed.defects
    assert {"bad-parameters", "missing-boundary"} <= set(parsed.defects)
    assert "hidden words" in " ".join(texts(parsed))


def test_a_parts_parameters_the_stdlib_cannot_decode_are_read_as_none():
    raw = msg("Content-Type: multipart/mixed; boundary=x",
              body=b"--x\n\nvisible words\n--x\nContent-Type: application/pdf\n"
                   b"Content-Disposition: attachment; filename*=utf-8''a.pdf; filename*1=b\n\n"
                   b"%PDF\n--x--\n")
    parsed = parse_message(raw)
    assert "parser-error" not in parsed.defects and "bad-parameters" in parsed.defects
    assert texts(parsed) == ["visible words"]


def test_the_fuzzers_unsortable_parameters_input():
    raw = (b"Subject: parts\nContent-TSubject: parts\nContent-Type: multipart/mi\x00\x00xed; "
           b"bousage-ID: <202403120@lindenworks.\xd0ent; filena5me*=utf-8''bas202403120\t\x00"
           b"@lindenworks.\xd0ent; filena5me*=utf-8ypeepworks.\xd0ent; filena5me*1=utfage-ID: "
           b"<202403120@lindenworks.\xd0ent; filena5me*=utf-8''ba\n")
    parsed = parse_message(raw)
    assert "parser-error" not in parsed.defects and "bad-parameters" in parsed.defects


def nested_multipart(depth: int) -> bytes:
    head = b"".join(b'Content-Type: multipart/mixed; boundary="b%d"\n\n--b%d\n' % (i, i) for i in range(depth))
    tail = b"".join(b"\n--b%d--\n" % i for i in reversed(range(depth)))
    return b"Subject: deep\n" + head + b"Content-Type: text/plain\n\ninnermost\n" + tail


@pytest.mark.parametrize(
    "raw",
    [nested_multipart(1000), b"Subject: deep\n" + b"Content-Type: message/rfc822\n\n" * 1000 + b"x"],
    ids=["multipart", "message-rfc822"],
)
def test_deep_nesting_stops_at_max_depth_quickly(raw):
    start = time.perf_counter()
    parsed = parse_message(raw)
    assert time.perf_counter() - start < 1.0
    assert "too-deep" in parsed.defects
    assert parsed.header("subject") == ["deep"]


def test_nesting_within_limit_is_kept():
    parsed = parse_message(nested_multipart(5))
    assert texts(parsed) == ["innermost\n"] and parsed.defects == ()


def test_too_many_parts():
    raw = msg("Content-Type: multipart/mixed; boundary=B", body=b"--B\n\nx\n" * 20 + b"--B--\n")
    parsed = parse_message(raw, MailLimits(max_parts=5))
    assert len(parsed.parts) == 5
    assert "too-many-parts" in parsed.defects


def test_too_many_headers():
    raw = b"".join(b"X-H%d: v\n" % i for i in range(10)) + b"\nbody"
    parsed = parse_message(raw, MailLimits(max_headers=4))
    assert [name for name, _ in parsed.headers] == ["x-h0", "x-h1", "x-h2", "x-h3"]
    assert "too-many-headers" in parsed.defects


def test_truncation_by_max_bytes():
    parsed = parse_message(msg("Subject: long", body=b"word " * 1000), MailLimits(max_bytes=100))
    assert "truncated" in parsed.defects
    assert 0 < len(parsed.parts[0].text) < 100


def test_crlf_parses_like_lf():
    crlf = ALTERNATIVE.replace(b"\n", b"\r\n")
    assert parse_message(crlf) == parse_message(ALTERNATIVE)


def test_mbox_from_line_is_skipped():
    parsed = parse_message(b"From someone@example.com Sat Jan  3 01:05:34 1996\nSubject: hi\n\nbody\n")
    assert parsed.headers == (("subject", "hi"),)


def test_headers_keep_order_and_repeats():
    parsed = parse_message(b"Received: a\nSubject: s\nreceived: b\n\nx")
    assert parsed.header("Received") == ["a", "b"]
    assert [name for name, _ in parsed.headers] == ["received", "subject", "received"]


def test_attachment_is_described_not_kept():
    png = bytes(range(256)) * 4
    raw = msg(
        "Content-Type: multipart/mixed; boundary=B",
        body=b"--B\n\nsee attached\n--B\n"
        b"Content-Type: image/PNG; name=x.png\n"
        b"Content-Disposition: attachment; filename=\"=?utf-8?B?Y2Fmw6kucG5n?=\"\n"
        b"Content-Transfer-Encoding: base64\n\n" + base64.encodebytes(png) + b"--B--\n",
    )
    parsed = parse_message(raw)
    assert parsed.attachments == (Attachment("image/png", "caf\u00e9.png", 1024),)
    assert texts(parsed) == ["see attached"]  # the newline before "--B" belongs to it


@pytest.mark.parametrize(
    "body, expected",
    [
        (b"this is not base64, just text\n", "this is not base64, just text\n"),
        (base64.encodebytes(b"hello ") + b"\n-- \nList footer: unsubscribe!\n", "hello \n\n-- \nList footer"),
        (b"aGVsbG8", "hello"),  # bad padding
    ],
    ids=["not-base64", "trailing-footer", "bad-padding"],
)
def test_bad_base64_keeps_what_can_be_read(body, expected):
    parsed = parse_message(msg("Content-Transfer-Encoding: base64", body=body))
    assert texts(parsed)[0].startswith(expected)
    assert "bad-base64" in parsed.defects


# -- never raises ---------------------------------------------------------------

SEEDS = [
    ALTERNATIVE,
    nested_multipart(3),
    msg("Subject: =?utf-8?B?w6k=?=", "Content-Type: text/html; charset=koi8-r", body=b"<a href=x>\xf0</a>"),
]


def check_invariants(parsed: ParsedEmail) -> None:
    assert isinstance(parsed, ParsedEmail)
    assert list(parsed.defects) == sorted(set(parsed.defects))
    # 'parser-error' is the floor under stdlib failures; reaching it from these
    # inputs would mean a bug in our own code.
    assert "parser-error" not in parsed.defects


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_never_raises_on_arbitrary_bytes(raw):
    check_invariants(parse_message(raw))


@st.composite
def mutated(draw):
    raw = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(raw)))
        action = draw(st.sampled_from(["insert", "delete", "duplicate"]))
        if action == "insert":
            raw[at:at] = draw(st.sampled_from([b"\0", b"\xff", b"=?", b"?=", b"--", b"\n\n", b"<", b"=", b'"', b"\r"]))
        elif action == "delete":
            del raw[at : at + draw(st.integers(1, 20))]
        else:
            raw[at:at] = raw[at : at + draw(st.integers(1, 200))]
    return bytes(raw)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_never_raises_on_mutated_messages(raw):
    check_invariants(parse_message(raw))


def test_str_input_is_a_clear_type_error():
    with pytest.raises(TypeError, match="expects bytes, got str"):
        parse_message("Subject: x\n\nbody")


# -- real corpus ----------------------------------------------------------------


@pytest.mark.corpus
@pytest.mark.slow
def test_every_spamassassin_message_parses(shared_corpora):
    # shared_corpora (conftest.py) finds $TEXTNB_CORPORA or ../shared/corpora, else skips.
    root = shared_corpora / "spamassassin"
    if not root.is_dir():
        pytest.skip(f"SpamAssassin corpus not found at {root}; set TEXTNB_CORPORA to the corpora folder")
    folders = ["easy_ham", "easy_ham_2", "hard_ham", "spam", "spam_2"]
    paths = [p for folder in folders for p in sorted((root / folder).iterdir()) if p.is_file()]
    n_readable = 0
    for path in paths:
        parsed = parse_message(path.read_bytes())
        check_invariants(parsed)
        subject = " ".join(parsed.header("subject")).strip()
        n_readable += bool(subject or any(part.text.strip() for part in parsed.parts))
    assert len(paths) == 6047
    assert n_readable / len(paths) > 0.99


# -- the lean path for single-part messages (mail._plain_message) ---------------------

_PLAIN_SHAPES = [
    b"Subject: hi\n\nbody\n",
    b"Subject:\n\n",
    b"Subject: x\n",  # no body
    b"Subject: \n\tfolded\n  twice \n\nbody\r\nwith CRLF\r\n",
    b"X-Odd!#$%&'*+-.^_`|~: v\nTo:  a@b.example  \n\n",
    b"Subject: caf\xc3\xa9 \xff\nFrom: x\n\nbody \xff\n",  # 8-bit bytes: surrogates
    b"A:1\nA:2\nb:\t3\n\n\n",
    b"Subject: enron style\njackie ,\nsince the inlet\n",  # no empty line: a defect
    b"Subject: x\nbody without an end",
    b"Subject: x\nnot a: header line\n",
    b"Content-Type: text/html; charset=utf-8\n\n<p>x</p>\n",
]
_NOT_PLAIN = [
    b"From someone Mon Jan  1 00:00:00 2001\nSubject: x\n\n",  # an envelope line
    b"Subject: x\r\n\r\nbody",  # CR line ends
    b"Subject: x\n\r\nbody",
    b"Subject: a\x0cb\n\n",  # a control str.splitlines cuts at
    b": no name\n\n",
    b" continued first\nSubject: x\n\n",
    b"Subject: x\n:odd\n\n",
    b"Subject: x\nFrom here on\n",
    b"Bad Name: x\n\n",
    b"\nbody only\n",
    b"Content-Type: multipart/mixed; boundary=B\n\n--B\n\nx\n--B--\n",
    b"Content-Type: message/rfc822\n\nSubject: inner\n\n",
]


def _same_message(raw: bytes) -> bool:
    """Whether the lean path takes ``raw``; if it does, its message is the parser's."""
    import email
    import email.policy

    from textnb.mail.parse import _plain_message

    lean = _plain_message(raw)
    if lean is None:
        return False
    stdlib = email.message_from_bytes(raw, policy=email.policy.compat32)
    assert [type(d) for d in lean.defects] == [type(d) for d in stdlib.defects], raw[:200]
    lean_state, stdlib_state = dict(lean.__dict__), dict(stdlib.__dict__)
    del lean_state["defects"], stdlib_state["defects"]
    assert lean_state == stdlib_state, raw[:200]
    return True


def test_the_lean_path_gives_the_stdlib_parsers_message():
    assert all(map(_same_message, _PLAIN_SHAPES))
    assert not any(map(_same_message, _NOT_PLAIN))


@pytest.mark.system  # every case of the hostile catalogue, some 10 to 50 MB
def test_the_lean_path_on_the_hostile_catalogue():
    from hostile_cases import CASES

    from textnb.mail.parse import _skip_envelope

    raws = (_skip_envelope(case.build()[:10_000_000].replace(b"\0", b"")) for case in CASES)
    taken = [_same_message(raw) for raw in raws]
    assert any(taken) and not all(taken)  # both paths met


@pytest.mark.parametrize("corpus", ["spamassassin", "enron", "lingspam"])
def test_the_lean_path_on_the_public_corpora(shared_corpora, corpus):
    """Every message of the corpus, as read and as the ledger normalises it: the lean
    path gives the parser's message, and takes most of them."""
    from textnb.mail.corpora import iter_corpus
    from textnb.mail.parse import _skip_envelope
    from textnb.models.ledger import normalise

    raws = [_skip_envelope(m.raw) for m in iter_corpus(corpus, root=shared_corpora)]
    taken = sum(map(_same_message, raws))
    taken_normalised = sum(_same_message(normalise(raw)) for raw in raws)
    assert taken_normalised > 0.5 * len(raws), (taken, taken_normalised, len(raws))
