"""Tokenizer: namespaced tokens from headers, text and URLs."""

import pytest

from textnb._c import speedups
from textnb._c.speedups import PlainWords, map_chunks
from textnb.config import TokenizerConfig
from textnb.text.tokenize import _CHUNK_RULES, EmailTokenizer


@pytest.fixture(scope="module")
def tok():
    # Single tokens only: word pairs (on by default) are tested on their own below.
    return EmailTokenizer(TokenizerConfig(bigrams=False))


def test_default_tokens_add_word_pairs_after_their_second_word():
    tokens = EmailTokenizer(TokenizerConfig()).text_tokens("FREE money, write to Bob@Example.org")
    assert tokens == ["free", "money", "bi:free money", ",", "bi:money ,", "write", "bi:, write",
                      "to", "bi:write to", "email:addr", "email:domain:example.org"]


def test_body_words_lowercased_and_punctuation_split(tok):
    assert tok.text_tokens("FREE money, (now)!") == ["free", "money", ",", "(", "now", ")", "!"]


def test_numbers_and_money_become_shapes(tok):
    assert tok.text_tokens("pay $1,000 for 25 pills") == \
        ["pay", "money:$d,ddd", "for", "num:dd", "pills"]


def test_long_words_become_skip_tokens(tok):
    assert tok.text_tokens("a" * 95) == ["skip:a 90"]


def test_urls_give_host_suffix_and_path_tokens(tok):
    tokens = tok.text_tokens("see http://www.Pharma-Deals.example/buy/now.html, today")
    assert "url:www.pharma-deals.example" in tokens
    assert "url:pharma-deals.example" in tokens
    assert "url-path:buy" in tokens and "url-path:now" in tokens
    assert tokens[-1] == "today"


def test_ip_url(tok):
    assert tok.url_tokens("http://192.0.2.7/x")[:2] == ["url:192.0.2.7", "url:ip"]


def test_email_address_in_text(tok):
    assert tok.text_tokens("write to Bob@Example.org.") == \
        ["write", "to", "email:addr", "email:domain:example.org", "."]


def test_subject_tokens_are_namespaced(tok):
    assert tok.header_tokens("subject", "Cheap Pills") == \
        ["header:subject", "subject:cheap", "subject:pills"]


def test_address_headers(tok):
    tokens = tok.header_tokens("from", '"Jane Doe" <Jane@Example.COM>')
    assert tokens == ["header:from", "from:addr:jane@example.com", "from:domain:example.com",
                      "from:name:jane", "from:name:doe"]


def test_received_hosts_and_subnets(tok):
    tokens = tok.header_tokens(
        "received", "from mx.example.net (mx.example.net [198.51.100.23]) by mail.example.org")
    assert "received:mx.example.net" in tokens and "received:mail.example.org" in tokens
    assert {"received:ip:198.51.100.23", "received:ip:198.51.100", "received:ip:198.51"} <= set(tokens)


def test_header_mode_selected_ignores_other_headers():
    selected = EmailTokenizer(TokenizerConfig(header_mode="selected"))
    assert selected.header_tokens("x-random", "value") == []
    everything = EmailTokenizer(TokenizerConfig(header_mode="all"))
    assert everything.header_tokens("x-random", "value") == ["header:x-random", "x-random:value"]


def test_bigrams_option():
    bi = EmailTokenizer(TokenizerConfig(bigrams=True))
    assert bi.text_tokens("buy cheap pills") == \
        ["buy", "cheap", "bi:buy cheap", "pills", "bi:cheap pills"]


def test_case_kept_when_asked():
    cfg = TokenizerConfig(lowercase=False, bigrams=False)
    assert EmailTokenizer(cfg).text_tokens("FREE Money") == ["FREE", "Money"]


def test_empty_text(tok):
    assert tok.text_tokens("") == []


def test_a_header_named_like_our_own_namespaces_cannot_forge_their_tokens():
    tok = EmailTokenizer(TokenizerConfig(header_mode="all", bigrams=False))
    tokens = tok.header_tokens("control", "nul-bytes") + tok.header_tokens("url", "x.example")
    assert "control:nul-bytes" not in tokens and "header-control:nul-bytes" in tokens
    assert "url:x.example" not in tokens and "header:control" in tokens


def test_lexical_attributes_are_spacys_english_ones():
    """The getters lexical_attributes gives are the English pipeline's, code and data."""
    from spacy.attrs import IS_CURRENCY, IS_SPACE, LIKE_EMAIL, LIKE_NUM, LIKE_URL
    from spacy.lang.en import English
    from spacy.lang.lex_attrs import LEX_ATTRS

    from textnb.text.tokenize import lexical_attributes

    english = {**LEX_ATTRS, **English.Defaults.lex_attr_getters}
    ours = lexical_attributes()
    words = ["42", "-3.5", "1/2", "one", "Twenty", "millionth", "tenths", "x1", "$", "€", "£5",
             " ", "\n", "a b", "bob@example.org", "bob@", "www.example.com",
             "http://x.io/a?b=1", "example.com", "e.g.", "free", "III"]
    for attr, name in ((LIKE_URL, "like_url"), (LIKE_EMAIL, "like_email"),
                       (LIKE_NUM, "like_num"), (IS_CURRENCY, "is_currency"),
                       (IS_SPACE, "is_space")):
        mine, theirs = getattr(ours, name), english[attr]
        assert mine.__code__ == theirs.__code__, name
        assert [mine(w) for w in words] == [theirs(w) for w in words], name
    assert ours.like_num.__globals__["_num_words"] == \
        English.Defaults.lex_attr_getters[LIKE_NUM].__globals__["_num_words"]
    assert ours.like_num.__globals__["_ordinal_words"] == \
        English.Defaults.lex_attr_getters[LIKE_NUM].__globals__["_ordinal_words"]


def test_spacys_vocabulary_is_bounded_and_a_fresh_one_tokenises_the_same(monkeypatch):
    """Past _SPACY_STRINGS strings the spaCy tokenizer is rebuilt; the tokens do not change
    (our caches are keyed by chunk and by word). The infixes ("w/x", "a=b") make chunks
    that only spaCy splits (tokenize._words_without_spacy)."""
    from textnb.text import tokenize

    texts = [f'Offer "{i}": buy (widget/x{i}) at <example{i}.com> today, a=b{i} {i * 7}!'
             for i in range(60)]
    unbounded = EmailTokenizer(TokenizerConfig())
    expected = [unbounded.text_tokens(t) for t in texts]
    monkeypatch.setattr(tokenize, "_SPACY_STRINGS", 40)
    built = []
    make = tokenize.make_spacy_tokenizer
    monkeypatch.setattr(tokenize, "make_spacy_tokenizer", lambda: built.append(1) or make())
    bounded = EmailTokenizer(TokenizerConfig())
    got = []
    for t in texts:
        got.append(bounded.text_tokens(t))
        assert len(bounded.spacy.vocab.strings) <= 40 + 20  # one text's new strings at most
    assert got == expected
    assert len(built) > 2  # built, then rebuilt as the strings passed the bound


@pytest.mark.parametrize("settings", [{}, {"lowercase": False},
                                      {"min_token_length": 3, "max_token_length": 6}])
def test_a_plain_ascii_word_maps_as_the_full_rules_map_it(settings):
    """``_new_word`` maps a plain ASCII word (ASCII, no digit, ".", "@", ":" or "$") by
    its length alone (the C loop over new chunks does the same); every
    other rule of ``_map_word`` leaves such a word as it is: number words, roman
    numerals, currency and URL rules included. Words with those characters take the
    full rules, and get the same tokens both ways."""
    import random

    tokenizer = EmailTokenizer(TokenizerConfig(**settings))
    tokenizer.spacy  # the lexical attributes
    lex = tokenizer._attributes
    rng = random.Random(5)
    words = ["a", "I", "free", "FREE", "Twenty", "millionth", "III", "http", "www", "com",
             "x" * 40, "y" * 41, "Supercalifragilisticexpialidocious" * 2,
             # plain ASCII words that are not letters alone
             "don't", "re-send", "!!!", "-", "'", "#", "%", "a&b", "x_y", "(c)", "\x01a",
             "http//", "www-com", "e-mail", "USD", "C++", "---" * 20, "a/b", "~user",
             "$", "$5", "5", "a.b", "a@b", "a:b", "https://x", "www.x", "un@known.com"]
    words += ["".join(rng.choices("abcXYZ", k=rng.randint(1, 60))) for _ in range(300)]
    # every printable ASCII character but whitespace, the excluded ones included
    printable = [chr(c) for c in range(33, 127)] + ["\x01", "\x7f"]
    words += ["".join(rng.choices(printable, k=rng.randint(1, 45))) for _ in range(1500)]
    cfg = tokenizer.cfg
    for namespace in ("", "subject:", "x-sübject:"):
        plain = PlainWords(namespace, cfg.lowercase, cfg.min_token_length,
                           cfg.max_token_length, 10**6)
        for word in words:
            full = () if lex.is_space(word) else tokenizer._map_word(word, lex)
            expected = tuple(namespace + m for m in full) if namespace else full
            assert tokenizer._new_word(word, {}, namespace, lex, plain) == expected, word
        # the C loop maps them itself (new_word is not asked, for an ASCII namespace), to
        # the same tokens
        cached, asked = {}, []

        def new_word(text):
            asked.append(text)
            return tokenizer._new_word(text, cached, namespace, lex, plain)

        # (the chunks that are one word each: the others split at their affixes first)
        whole = [w for w in dict.fromkeys(words) if list(_CHUNK_RULES.split(w) or ()) == [w]]
        assert len(whole) > 500
        values, _ = map_chunks(whole, cached, new_word, False, _CHUNK_RULES, plain)
        assert values == {word: tokenizer._new_word(word, {}, namespace, lex, plain)
                          for word in whole}
        if speedups.implementation() == "C" and namespace.isascii():
            assert set(asked) == {w for w in whole if speedups.plain_word_tokens_python(
                w, plain) is None}


def test_caches_stay_bounded_however_many_header_names(monkeypatch):
    """Each header field tokenised as text has caches of its own; past _MAX_NAMESPACES
    they are all emptied, and the tokens are those of a tokenizer that never was."""
    from textnb.text import tokenize

    monkeypatch.setattr(tokenize, "_MAX_NAMESPACES", 50)
    seen, fresh = EmailTokenizer(TokenizerConfig()), EmailTokenizer(TokenizerConfig())
    for i in range(400):
        name, value = f"x-field-{i}", f"value{i % 7} shared words, and more"
        tokens = seen.header_tokens(name, value)
        assert len(seen._chunk_cache) <= 50 and len(seen._word_cache) <= 50
        if i % 37 == 0:
            assert tokens == fresh.header_tokens(name, value)
    assert seen.header_tokens("subject", "free money") == fresh.header_tokens("subject",
                                                                             "free money")
