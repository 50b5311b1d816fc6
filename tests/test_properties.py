"""Property-based tests (hypothesis): the parser on structured-random MIME, the
tokeniser's output invariants, and the count/forget invariants of the model.

tests/test_mail.py already feeds the parser arbitrary and mutated bytes; here the
inputs are built MIME trees (headers, encoded-words, nested multiparts, transfer
encodings right and wrong) and the checks go on through the tokeniser and the counts.

Example counts come from the "textnb-ci" settings profile, sized so this file runs
in well under a minute on CI; ``TEXTNB_HYPOTHESIS_EXAMPLES=2000`` runs a longer search.
"""

from __future__ import annotations

import base64
import os
import quopri

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from textnb.config import TokenizerConfig
from textnb.mail.parse import MailLimits, ParsedEmail, parse_message
from textnb.spamfilter import SpamFilter
from textnb.text.tokenize import EmailTokenizer

settings.register_profile(
    "textnb-ci",
    max_examples=int(os.environ.get("TEXTNB_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)
CI = settings.get_profile("textnb-ci")

TOKENIZER = EmailTokenizer(TokenizerConfig())
ALL_HEADERS = EmailTokenizer(TokenizerConfig(header_mode="all", bigrams=True, max_tokens=300))

# -- strategies: MIME trees --------------------------------------------------------------

CHARSETS = ["utf-8", "iso-8859-1", "us-ascii", "windows-1252", "koi8-r", "shift_jis",
            "utf-16", "x-unknown", "unicode_escape", ""]
WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
ASCII_WORD = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12)


@st.composite
def encoded_word(draw) -> str:
    """An RFC 2047 encoded-word, well-formed or broken."""
    text = draw(WORDS)
    charset = draw(st.sampled_from(["utf-8", "iso-8859-1", "x-bogus", "utf-8*en"]))
    data = text.encode("utf-8")
    kind = draw(st.sampled_from(["B", "Q", "b", "X", "broken-b64", "unterminated"]))
    if kind in ("B", "b"):
        return f"=?{charset}?{kind}?{base64.b64encode(data).decode()}?="
    if kind == "Q":
        return f"=?{charset}?Q?{quopri.encodestring(data, header=True).decode().replace(' ', '_')}?="
    if kind == "broken-b64":
        return f"=?{charset}?B?{base64.b64encode(data).decode()[:-1]}!?="
    if kind == "unterminated":
        return f"=?{charset}?q?{text[:5]}"
    return f"=?{charset}?X?{text}?="


@st.composite
def header_block(draw) -> bytes:
    names = st.sampled_from(["Subject", "From", "To", "Received", "X-Mailer", "Message-ID",
                             "Date", "Reply-To", "X-Odd", "Content-Disposition"])
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        value = " ".join(draw(st.lists(st.one_of(ASCII_WORD, encoded_word()), max_size=5)))
        if draw(st.booleans()):
            value = value.replace(" ", "\n ", 1)  # folded
        lines.append(f"{draw(names)}: {value}")
    return "\n".join(lines).encode("utf-8", "surrogateescape")


def encode_body(data: bytes, cte: str, draw) -> bytes:
    if cte == "base64":
        blob = base64.encodebytes(data)
        return draw(st.sampled_from([blob, blob[:-3], b"not base64 at all!\n" + blob]))
    if cte == "quoted-printable":
        return quopri.encodestring(data) + draw(st.sampled_from([b"", b"=", b"=ZZ", b"=\n" * 5]))
    return data


@st.composite
def leaf(draw) -> bytes:
    content_type = draw(st.sampled_from(["text/plain", "text/html", "application/zip",
                                         "image/png", "text/enriched"]))
    charset = draw(st.sampled_from(CHARSETS))
    cte = draw(st.sampled_from(["", "7bit", "8bit", "base64", "quoted-printable", "x-bogus"]))
    text = draw(WORDS)
    if content_type == "text/html":
        text = draw(st.sampled_from(["<p>{}</p>", "<a href='http://x.example/{}'>go</a>",
                                     "<!-- {} -->", "<b>{}", "{}<![foo[", "<<{}>>"])).format(text)
    codec = charset if charset and charset not in ("x-unknown", "unicode_escape") else "utf-8"
    try:
        data = text.encode(codec)
    except (UnicodeEncodeError, LookupError):
        data = text.encode("utf-8")  # a lying charset: also a case worth having
    params = f"; charset={charset}" if charset else ""
    head = f"Content-Type: {content_type}{params}\n"
    if cte:
        head += f"Content-Transfer-Encoding: {cte}\n"
    return head.encode() + b"\n" + encode_body(data, cte, draw)


def mime_tree(max_leaves: int = 12):
    def container(children):
        @st.composite
        def build(draw) -> bytes:
            parts = draw(st.lists(children, max_size=4))
            boundary = draw(st.sampled_from(["B", "==_x", "a b", "x" * 80, ""]))
            subtype = draw(st.sampled_from(["mixed", "alternative", "related", "digest"]))
            body = b"".join(b"--" + boundary.encode() + b"\n" + part + b"\n" for part in parts)
            if draw(st.booleans()):
                body += b"--" + boundary.encode() + b"--\n"  # else the close delimiter is missing
            head = f'Content-Type: multipart/{subtype}; boundary="{boundary}"\n\n'.encode()
            if draw(st.integers(0, 5)) == 0:
                head = b"Content-Type: message/rfc822\n\n" + head
            return head + draw(st.sampled_from([b"", b"preamble\n"])) + body
        return build()

    return st.recursive(leaf(), container, max_leaves=max_leaves)


@st.composite
def message(draw) -> bytes:
    raw = draw(header_block()) + b"\n" + draw(mime_tree())
    if draw(st.booleans()):
        raw = raw.replace(b"\n", b"\r\n")
    if draw(st.integers(0, 4)) == 0:
        raw = b"From someone@example.com Sat Jan  3 01:05:34 1996\n" + raw
    return raw


SMALL_LIMITS = MailLimits(max_bytes=4000, max_parts=3, max_depth=2, max_headers=3, max_html_chars=50)


def check_parsed(parsed: ParsedEmail, limits: MailLimits) -> None:
    assert isinstance(parsed, ParsedEmail)
    assert list(parsed.defects) == sorted(set(parsed.defects))
    assert "parser-error" not in parsed.defects  # the floor under stdlib failures
    assert len(parsed.parts) + len(parsed.attachments) <= limits.max_parts
    assert len(parsed.headers) <= limits.max_headers
    assert all(isinstance(part.text, str) for part in parsed.parts)
    assert all(name == name.lower() for name, _ in parsed.headers)


# -- the parser ---------------------------------------------------------------------------


@CI
@given(message())
def test_parser_never_raises_on_structured_mime(raw):
    check_parsed(parse_message(raw), MailLimits())


@CI
@given(message())
def test_small_bounds_are_respected_and_named(raw):
    parsed = parse_message(raw, SMALL_LIMITS)
    check_parsed(parsed, SMALL_LIMITS)
    if len(raw) > SMALL_LIMITS.max_bytes:
        assert "truncated" in parsed.defects


@CI
@given(st.lists(st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60),
                min_size=1, max_size=6))
def test_well_formed_base64_text_parts_round_trip(texts):
    parts = b"".join(b"--B\nContent-Type: text/plain; charset=utf-8\n"
                     b"Content-Transfer-Encoding: base64\n\n"
                     + base64.encodebytes(text.encode()) + b"\n" for text in texts)
    raw = b'Subject: t\nContent-Type: multipart/mixed; boundary="B"\n\n' + parts + b"--B--\n"
    parsed = parse_message(raw)
    assert [part.text for part in parsed.parts] == [t.replace("\r\n", "\n") for t in texts]
    assert parsed.defects == ()


# -- the tokeniser ------------------------------------------------------------------------

# Namespaces the tokeniser writes (textnb/text/tokenize.py); header fields add their own name.
NAMESPACES = {"header", "subject", "url", "url-path", "href", "href-path", "email", "money", "num",
              "skip", "content", "attachment", "control", "received", "date", "bi", "script"}


def check_tokens(tokens: list[str], tokenizer: EmailTokenizer, parsed: ParsedEmail) -> None:
    cfg = tokenizer.cfg
    header_names = {name for name, _ in parsed.headers}
    content = [t for t in tokens if not t.startswith("control:")]
    assert len(content) <= cfg.max_tokens
    for token in tokens:
        assert isinstance(token, str) and token
        namespace, colon, _ = token.partition(":")
        if not colon:
            assert len(token) <= cfg.max_token_length, token  # a bare body word
        else:
            own = namespace.removeprefix("header-")  # a field named after our own namespaces
            assert namespace in NAMESPACES or namespace in header_names or (
                own in header_names and own != namespace), token


# Body text without ':' (see test_body_text_can_forge_a_namespaced_token).
BODY = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters=":"),
               max_size=300)


@CI
@given(message())
def test_tokens_are_namespaced_strings_within_bounds(raw):
    parsed = parse_message(raw)
    # Strip ':' from body text: the header namespaces are the ones under test here.
    parts = tuple(type(p)(p.content_type, p.charset, p.text.replace(":", " ")) for p in parsed.parts)
    parsed = ParsedEmail(parsed.headers, parts, parsed.attachments, parsed.urls, parsed.defects)
    for tokenizer in (TOKENIZER, ALL_HEADERS):
        check_tokens(tokenizer(parsed), tokenizer, parsed)


@CI
@given(message())
def test_tokens_are_deterministic_cold_and_warm(raw):
    parsed = parse_message(raw)
    cold = EmailTokenizer(TokenizerConfig())(parsed)
    assert TOKENIZER(parsed) == cold  # the shared tokenizer has warm caches
    assert TOKENIZER(parsed) == cold


@CI
@given(BODY, st.integers(1, 40))
def test_token_budget_gives_a_prefix(text, limit):
    full = TOKENIZER.text_tokens(text)
    limited = TOKENIZER.text_tokens(text, limit=limit)
    assert limited == full[: len(limited)]
    assert len(limited) >= min(limit, len(full))


def test_body_text_cannot_forge_a_namespaced_token():
    """A body word holding ':' once kept it, so a sender could write ``control:nul-bytes``
    or ``from:domain:yourbank.example`` in the text and have it counted as that feature
    (found by the namespace property above). Such words now keep a look-alike instead."""
    tokens = TOKENIZER.text_tokens("control:nul-bytes from:domain:example.com Re: 10:30")
    assert {"control:nul-bytes", "from:domain:example.com"}.isdisjoint(tokens)
    assert "control\u2236nul-bytes" in tokens and ":" in tokens  # a lone colon stays itself


@CI
@given(st.text(max_size=200))
def test_no_body_word_lands_in_a_namespace(text):
    for token in TOKENIZER.text_tokens(text):
        namespace = token.partition(":")[0] if ":" in token and token.strip(":") else ""
        assert namespace in ("", "bi", "url", "url-path", "email", "money", "num", "skip",
                             "script"), token  # script: a run in a space-less script (scripts.py)


# -- counts: learn, forget, order, merge --------------------------------------------------

VOCAB = [f"w{i}" for i in range(12)] + ["subject:x", "control:empty", "url:a.example"]
DOCS = st.lists(st.tuples(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=8),
                          st.sampled_from(["ham", "spam"])), min_size=1, max_size=12)


def counts(spam_filter: SpamFilter) -> dict:
    """Counts per token, independent of column order."""
    fc, df = spam_filter.model.feature_count_, spam_filter.doc_freq_
    return {"classes": spam_filter.model.class_count_.tolist(),
            "learned": dict(spam_filter.n_learned),
            "tokens": {t: (fc[0, i], fc[1, i], df[i])
                       for i, t in enumerate(spam_filter.vocabulary.tokens_) if df[i] or fc[:, i].any()}}


def learned(docs) -> SpamFilter:
    spam_filter = SpamFilter()
    if docs:
        spam_filter.learn_tokens([d for d, _ in docs], [label for _, label in docs])
    return spam_filter


def probe_log_odds(spam_filter: SpamFilter) -> np.ndarray:
    return spam_filter.log_odds_tokens([[t] for t in VOCAB] + [VOCAB])


@CI
@given(DOCS, DOCS)
def test_learn_then_forget_restores_the_counts_exactly(base, extra):
    spam_filter = learned(base)
    scored = min(spam_filter.n_learned.values()) > 0  # log-odds need both classes
    before = counts(spam_filter)
    odds = probe_log_odds(spam_filter) if scored else None
    spam_filter.learn_tokens([d for d, _ in extra], [label for _, label in extra])
    spam_filter.learn_tokens([d for d, _ in extra], [label for _, label in extra], weight=-1)
    assert counts(spam_filter) == before
    if scored:  # bit for bit, as the README promises for forget
        assert np.array_equal(probe_log_odds(spam_filter), odds)


@CI
@given(DOCS, st.randoms(use_true_random=False))
def test_counts_do_not_depend_on_order(docs, rng):
    shuffled = list(docs)
    rng.shuffle(shuffled)
    a, b = learned(docs), learned(shuffled)
    assert counts(a) == counts(b)
    if min(a.n_learned.values()) > 0:
        assert np.allclose(probe_log_odds(a), probe_log_odds(b), rtol=0, atol=1e-9)


@CI
@given(DOCS, DOCS)
def test_merging_counts_equals_fitting_the_union(part_a, part_b):
    merged, other = learned(part_a), learned(part_b)
    merged.add_counts(other.vocabulary.tokens_, other.model.class_count_,
                      other.model.feature_count_, other.doc_freq_)
    union = learned(part_a + part_b)
    assert counts(merged) == counts(union)
    if min(union.n_learned.values()) > 0:
        assert np.allclose(probe_log_odds(merged), probe_log_odds(union), rtol=0, atol=1e-9)
