"""The tokenizer's shortcuts give what the slow calls they skip would give.

Each shortcut rests on a fact about the code it skips (spaCy's lexical attributes,
email.utils.getaddresses, a regular expression); these tests check the facts, so an
upgrade of spaCy or Python that changed one would fail here rather than change tokens.
The whole-corpus check is ``python -m bench.same_tokens --before DIR``.
"""

import re
from email.utils import getaddresses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from textnb.mail.parse import parse_message
from textnb.text.tokenize import (
    _ADDRESS_HEADERS,
    _HOSTNAME,
    _hostnames,
    _simple_addresses,
    lexical_attributes,
)

WORDS = ["free", "FREE", "x", "http://localhost", "https://a", "http:/x", "ftp://x.y",
         "www.", "www.a", "example.com", "a.b", ".com", "com.", "e.g.", "bob@example.org",
         "bob@localhost", "@", "a@b", "@b.c", "1.5", "$5", "naïve", "日本語", "a:b", "a/b.c",
         "localhost:8080", "x.io/", "café.fr", "u.s.a", "a..b", "www.x", "HTTP://X"]


def test_spacys_like_url_needs_a_dot_or_a_scheme_and_like_email_an_at_sign():
    lex = lexical_attributes()
    for word in WORDS:
        if "." not in word and not word.startswith(("http://", "https://")):
            assert not lex.like_url(word), word
        if "@" not in word:
            assert not lex.like_email(word), word


ADDRESS_VALUES = [
    "a@b.c", "  a@b.c  ", "\ta@b.c\n", "A.B+tag@Example.COM", ".a@b", "a..b@c..d", "a@b.",
    "a@.", "o'brien@x.ie", "x=y/z?{w}|~@h-1.example", "<a@b.c>", "Name <a@b.c>",
    "Name<a@b.c>", "  John   Q.  Public  <j@p.org>  ", "J.\tSmith <s@x.y>", "\"Smith\" <s@x.y>",
    "\"  Smith,  John  \" <s@x.y>", "\"\" <s@x.y>", "\"(not a comment)\" <s@x.y>",
    "\"O'Brien\"<o@x.ie>", "a@b.c, d@e.f", "a@b.c,d@e.f", "Ann <a@b.c>, Bob <b@c.d>",
    "a@b.c,\n\tBob <b@c.d>", "Bob\n <b@c.d>",
    # shapes left to getaddresses (the shortcut must say None, not guess)
    "a@b.c (Name)", "\"Smith, John\" <s@x.y>, a@b.c", "a@b.c,", "a@b.c,,d@e.f", "a@", "@b.c",
    "<@route:a@b.c>", "group: a@b.c;", "a@[1.2.3.4]", "<a @ b.c>", "\"a\\\"b\" <a@b.c>",
    "Ünïcode <u@x.de>", "u@exämple.de", "a@b@c.d", "Name <a@b.c> trailing", "",
]


def test_simple_address_shapes_parse_as_getaddresses():
    for value in ADDRESS_VALUES:
        fast = _simple_addresses(value)
        if fast is not None:
            assert fast == getaddresses([value]), value
    assert _simple_addresses("Name <a@b.c>") == [("Name", "a@b.c")]
    assert _simple_addresses("a@b.c (Name)") is None
    assert _simple_addresses("\"Smith, John\" <s@x.y>, a@b.c") is None


def test_simple_address_shapes_hold_on_the_public_corpus(shared_corpora):
    from textnb.mail.corpora import iter_corpus

    values = {value for example in iter_corpus("spamassassin", shared_corpora)
              for name, value in parse_message(example.raw).headers if name in _ADDRESS_HEADERS}
    fast = {value: _simple_addresses(value) for value in values}
    assert sum(pairs is not None for pairs in fast.values()) > 0.9 * len(values)
    for value, pairs in fast.items():
        if pairs is not None:
            assert pairs == getaddresses([value]), value


def test_hostnames_are_the_case_blind_patterns_matches_lower_cased():
    old = re.compile(r"\b((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,})\b", re.IGNORECASE)
    values = [
        "from Mail.Example.COM (HELO x) by mx1.ISP.net with ESMTP id ab12.cd; Tue, 1 Oct 2002",
        "by localhost (Postfix) [127.0.0.1]", "<1234.5678@Host-1.Example.org>", "a.b c.d. e..f",
        "x" * 70 + ".com -lead.ing.org trail-.ing.net 1.2.3.4 a-b.c-d.ef", "dot.at.end.",
        "\u212aelvin.example.com \u017fhort.example.org ıstanbul.example.tr Straße.de",
        "ÜBER.example.DE mixed.ÄÖ.example", "", "no hosts here",
    ]
    for value in values:
        expected = [host.lower() for host in old.findall(value)]
        assert _hostnames(value) == expected, value
        assert [h.lower() for h in _HOSTNAME.findall(value)] == expected, value


@pytest.mark.parametrize("value", ["mx.Example.com", "\u212a.example.com"])
def test_hostnames_lower_case_both_paths(value):
    assert _hostnames(value) == [h.lower() for h in _HOSTNAME.findall(value)]


CHUNKS = ["free", "FREE", "12345", "abc123", "e-mail", "it's", "x.com", "www.example.com",
          "http://x.io/a?b=1", "bob@example.org", "a/1", "1/a", "&amp", "$5", "50%", "café",
          "您好，我们公司", "Ｆｒｅｅ", "a_b", "a+b", "#1", "^^", "--", "a=1", "中文/English",
          ",", ".", "'", "(", "a", "é", "-"]
MARKS = ["", ",", ".", "!", "?", ":", ";", ")", "]", "}", ">", "'", '"', "*", "`", "|", "..", ",)"]


def _spacy_words(chunk: str) -> tuple[str, ...]:
    from textnb.config import TokenizerConfig
    from textnb.text.tokenize import EmailTokenizer

    global _SPACY
    if _SPACY is None:
        _SPACY = EmailTokenizer(TokenizerConfig()).spacy
    return tuple(t.text for t in _SPACY(chunk))


_SPACY = None


def test_chunks_split_without_spacy_are_the_words_spacy_makes_of_them():
    """_map_new_chunks splits a chunk with no infix without spaCy (its affix loop written
    out); spaCy splits it the same. Chunks with an infix are left to spaCy (None)."""
    from textnb.text.tokenize import _words_without_spacy

    chunks = [mark + chunk + end for chunk in CHUNKS for mark in MARKS[:8] + ["(", '"', "<", "[("]
              for end in MARKS]
    split = {chunk: _words_without_spacy(chunk) for chunk in chunks}
    assert sum(words is not None for words in split.values()) > len(chunks) * 3 // 4
    for chunk, words in split.items():
        if words is not None:
            assert _spacy_words(chunk) == words, chunk
    assert split["free,"] == ("free", ",") and split["free"] == ("free",)
    assert _words_without_spacy('("free",)') == ("(", '"', "free", '"', ",", ")")
    assert _words_without_spacy("<bob@example.org>,") == ("<", "bob@example.org", ">", ",")
    # _TOKEN_MATCH keeps a URL whole, its trailing mark too
    assert _words_without_spacy("www.example.com.") == ("www.example.com.",)
    for chunk in ("word/word", "a=b", "(a/b)", "x&y,"):  # an infix: spaCy's to split
        assert _words_without_spacy(chunk) is None


_PIECES = list("aZé1.@:/=&-_中") + list("[(\"'<{*`|~") + list("])\"'>},;:.!?*`|") + ["http://", "www."]
_AFFIX_TEXT = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=10).map("".join)


@settings(max_examples=500, deadline=None)
@given(_AFFIX_TEXT)
def test_any_chunk_split_without_spacy_is_split_as_spacy_splits_it(chunk):
    from textnb.text.tokenize import _words_without_spacy

    words = _words_without_spacy(chunk)
    if words is not None:
        assert words == _spacy_words(chunk)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES + ["HTTP://", "Www.", "ftp:/", "x.co", "@", " "]),
                min_size=1, max_size=8).map("".join))
def test_the_url_pattern_matches_only_what_the_c_loop_asks_it(text):
    """_speedups.c asks _TOKEN_MATCH only of strings that start with a scheme or "www."
    (in any case) or hold an "@" (may_token_match)."""
    from textnb.text.tokenize import _TOKEN_MATCH

    if _TOKEN_MATCH.match(text):
        assert text.lower().startswith(("http://", "https://", "ftp://", "www.")) or "@" in text
