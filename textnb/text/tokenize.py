"""ParsedEmail -> list of namespaced token strings.

Body words are bare (``free``); everything else carries a namespace so header,
URL and synthetic features never collide with body words: ``subject:free``,
``from:domain:example.com``, ``url:example.com``, ``received:ip:192.0.2``,
``control:bad-base64``, ``skip:h 50`` (SpamBayes' trick for over-long words).

The splitting is spaCy's ``Tokenizer``, with prefix/suffix rules narrowed to the
punctuation that actually sticks to words in mail. spaCy's default English rules cost
several times more on mail text, and their extra splits (hyphens, apostrophes) carry
little spam evidence (docs/design/tokenizer-speed.md#rules-narrowed-to-mail). The
lexical attributes (``like_num``, ``like_url``, ``like_email``, ``is_currency``) are
spaCy's English ones, computed once per distinct word; what a whitespace-free chunk of
text maps to is cached too (``EmailTokenizer.text_tokens``), so each distinct chunk is
split once; spaCy splits those with an infix, and the others are split by spaCy's affix
loop written out for our rules (``_words_without_spacy``, checked against spaCy).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from email.utils import getaddresses
from functools import partial
from itertools import chain
from typing import TYPE_CHECKING

from .._c.speedups import (ChunkRules, PlainWords, chunk_cache, count_words, find_hostnames,
                           find_ipv4, join_chunks, map_chunks, plain_word_tokens_python)
from ..config import TokenizerConfig
from ..mail.added_headers import added_after_delivery
from . import segment
from .namespaces import OWN_NAMESPACES
from .spacy_import import import_spacy

# spaCy's attribute id of a token's verbatim text (spacy.attrs.ORTH), fixed by spaCy's ABI;
# importing it would load spaCy at import time. _SPACY: "a space follows the token".
_ORTH = 65
_SPACY = 81
# Entries per namespace in each of the tokenizer's caches: enough to keep the corpora's
# chunks warm, and a bound on the memory a long run's caches take; a cache is emptied
# when full (docs/design/memory.md#the-tokenizers-caches).
_CACHE_LIMIT = 200_000
# Every header field tokenised as text is a namespace with caches of its own (SpamAssassin's
# 4,814 training messages: 329 of them). A stream of messages with ever new field names
# (a scorer that runs for months; a sender inventing names) would add caches without
# bound, so past this many namespaces every cache is emptied: memory only, the tokens
# are the same (tests/test_tokenize.py).
_MAX_NAMESPACES = 1_000
# spaCy's vocabulary (a StringStore and a lexeme per string) grows with every distinct
# word it is shown, without bound, so a long-running scorer on a mailbox whose words keep
# changing would grow with it. Past this many strings the tokenizer is rebuilt, which is
# cheap and leaves the tokens as they were
# (docs/design/memory.md#the-save-streams-spacys-vocabulary-is-bounded).
_SPACY_STRINGS = 200_000
# A whitespace-free chunk is cut to this many characters before spaCy sees it. The
# longest in SpamAssassin's 6,047 messages (bodies and headers) has 990; spaCy split
# 9 MB of '=ZZ=ZZ...' in one chunk into 3 million words, in time and memory that grow
# with the chunk (docs/hostile-mail.md).
_MAX_CHUNK = 2_000
# With a token budget (``text_tokens(limit=)``), text goes to spaCy in pieces of about
# this many characters, and reading stops once the budget is met: a 10 MB body costs
# the work of its first ``max_tokens`` words, not of all of them.
_PIECE = 100_000
# One whitespace character (not a run: searching for a run from each piece's end
# scanned 10 MB of newlines once per piece).
_ONE_SPACE = re.compile(r"\s")

if TYPE_CHECKING:  # spaCy is loaded on demand, never at import (start-up time matters)
    from .._c.speedups import ChunkCache
    from ..mail.parse import ParsedEmail

# Punctuation that sticks to the front or back of words in mail text.
_PREFIX_CHARS = "[(\"'<{*`|~"
_SUFFIX_CHARS = "])\"'>},;:.!?*`|"
_PREFIX = re.compile(f"^[{re.escape(_PREFIX_CHARS)}]")
_SUFFIX = re.compile(f"[{re.escape(_SUFFIX_CHARS)}]$")
# Split words glued by these (``word/word``, ``a=b``): keeps URL parts apart in text.
_INFIX_CHARS = "/=&"
_INFIX = re.compile(f"(?<=[A-Za-z])[{re.escape(_INFIX_CHARS)}](?=[A-Za-z])")
# A chunk with none of these (a prefix, a suffix, an infix) is one spaCy word as it is.
_AFFIX = re.compile(f"{_PREFIX.pattern}|{_SUFFIX.pattern}|{_INFIX.pattern}")
# URLs and e-mail addresses stay whole so they can be turned into host tokens. The C
# loop over new chunks asks this pattern only of strings that
# start with one of its schemes or "www." (in any case) or hold an "@" (_speedups.c,
# may_token_match): a branch that can match other strings must be added there too
# (tests/test_tokenize_fast_paths.py checks that no other string matches).
_TOKEN_MATCH = re.compile(
    r"^(?:(?:https?|ftp)://|www\.)\S+$|^[^@\s<>()\"']+@[^@\s<>()\"']+\.[A-Za-z]{2,}$",
    re.IGNORECASE,
)
_URL_TRAILING = ".,;:!?)]}>\"'"
_URL_SCHEMES = ("http://", "https://")  # spaCy's like_url: a URL even without a "."
_HOST = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?(?:[^@/\s]*@)?([^/:?#\s]+)", re.IGNORECASE)
_IPV4 = re.compile(r"\b(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\b")
# The lookahead only says what every match starts with (a label and its "."), so the
# matches are the same; it fails at once on the words without one, where the labels'
# backtracking was tried (docs/design/tokenizer-speed.md#header-values).
_HOSTNAME = re.compile(r"\b(?=[a-z0-9-]+\.)((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,})\b",
                       re.IGNORECASE)
# The same on lower-cased ASCII text, without IGNORECASE, which slows every match; for
# ASCII, lower-casing first finds the same matches, lower-cased (_hostnames).
_HOSTNAME_LOWER = re.compile(_HOSTNAME.pattern)
_URL_IN_TEXT = re.compile(r"(?:https?|ftp)://[^\s<>\"']+|www\.[^\s<>\"']+", re.IGNORECASE)
_DIGITS = re.compile(r"\d")
_URL_PATH_SEPARATORS = re.compile(r"[/?#&=.\-_+%]+")  # a URL's path cut into words
_WHITESPACE = re.compile(r"\s+")

# Header fields whose values are addresses: tokenised as address, domain and name words.
_ADDRESS_HEADERS = frozenset({"from", "to", "cc", "reply-to", "sender", "return-path",
                              "delivered-to", "errors-to", "x-original-to"})
# The common shapes of an address field, read without email.utils.getaddresses (a
# Python character loop over every value): "a@b.c", "Name <a@b.c>", "\"Any name\"
# <a@b.c>", and lists of the first two, most of the corpora's address values
# (docs/design/tokenizer-speed.md#header-values). Each gives exactly what getaddresses
# gives (its phrase's words joined by one space, a quoted name as it is, the address as
# written); anything else (comments, quoted names in lists, routes, groups, a
# character outside these sets) goes to getaddresses (tests/test_tokenize.py checks
# shapes at their edges against the stdlib).
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]"  # RFC 5322 atext, and "." (obs-phrase)
_ADDR_SPEC = rf"{_ATEXT}+@[A-Za-z0-9.-]+"
_FWS = r"[ \t\r\n]*"
_BARE_ADDRESS = re.compile(rf"{_FWS}({_ADDR_SPEC}){_FWS}")
_QUOTED_NAME_ADDRESS = re.compile(rf'{_FWS}"([^"\\\r\n]*)"{_FWS}<({_ADDR_SPEC})>{_FWS}')
_NAME_ADDRESS = re.compile(
    rf"{_FWS}((?:{_ATEXT}+[ \t\r\n]+)*{_ATEXT}+)?{_FWS}<({_ADDR_SPEC})>{_FWS}")


def make_spacy_tokenizer():
    """Build the spaCy tokenizer: our punctuation rules on a vocabulary that computes
    no lexical attributes (``lexical_attributes`` gives the few we read, on demand).

    A blank English pipeline's vocabulary computes 23 attributes for every new
    string (shape, norm, stop word, ...), a large share of the tokenising time, and
    building the pipeline slows start-up
    (docs/design/tokenizer-speed.md#plain-words-without-spacy).
    """
    import_spacy()  # without spaCy's command line (textnb.text.spacy_import)
    from spacy.tokenizer import Tokenizer
    from spacy.vocab import Vocab

    return Tokenizer(
        Vocab(),
        prefix_search=_PREFIX.search,
        suffix_search=_SUFFIX.search,
        infix_finditer=_INFIX.finditer,
        token_match=_TOKEN_MATCH.match,
    )


def import_spacy_modules() -> None:
    """Import the spaCy modules that ``make_spacy_tokenizer`` and ``lexical_attributes``
    use (most of their cost), ahead of the tokenizer's first use, e.g. while a model
    loads (``store.load_while``)."""
    import_spacy()
    import spacy.attrs  # noqa: F401
    import spacy.lang.en  # noqa: F401
    import spacy.lang.lex_attrs  # noqa: F401
    import spacy.tokenizer  # noqa: F401
    import spacy.vocab  # noqa: F401


@dataclass(frozen=True)
class LexicalAttributes:
    """The lexical attributes ``EmailTokenizer._map_word`` reads, as functions str -> bool."""

    like_url: Callable[[str], bool]
    like_email: Callable[[str], bool]
    like_num: Callable[[str], bool]
    is_currency: Callable[[str], bool]
    is_space: Callable[[str], bool]


def lexical_attributes() -> LexicalAttributes:
    """spaCy's English lexical attribute functions: those a ``spacy.blank("en")``
    vocabulary stores in each lexeme's flags, here called only when a rule asks.

    (Running ``spacy/lang/en/lex_attrs.py`` from its file instead of importing the
    English package saves too little of ``textnb filter``'s start-up to be worth code
    that reaches into spaCy's package layout: docs/design/startup.md#measured-and-not-built.)"""
    import_spacy()
    from spacy.attrs import IS_CURRENCY, IS_SPACE, LIKE_EMAIL, LIKE_NUM, LIKE_URL
    from spacy.lang.en import English
    from spacy.lang.lex_attrs import LEX_ATTRS

    getters = {**LEX_ATTRS, **English.Defaults.lex_attr_getters}  # as spacy.vocab.create_vocab
    return LexicalAttributes(getters[LIKE_URL], getters[LIKE_EMAIL], getters[LIKE_NUM],
                             getters[IS_CURRENCY], getters[IS_SPACE])


class EmailTokenizer:
    """Turn a ParsedEmail into namespaced tokens (with repeats: counts matter for tf).

    cfg (TokenizerConfig): the choices; see configs/default.toml for the reasons.
    """

    def __init__(self, cfg: TokenizerConfig):
        self.cfg = cfg
        self._spacy = None
        self._attributes: LexicalAttributes | None = None  # loaded with spaCy
        # namespace -> word -> the tokens that word maps to
        self._word_cache: dict[str, dict[str, tuple[str, ...]]] = {}
        # namespace -> whitespace-free chunk -> its tokens (bigram mode: its words' tuples)
        self._chunk_cache: dict[str, ChunkCache] = {}  # per namespace (speedups.chunk_cache)
        # (field name, value) -> tokens of an address field
        self._address_cache: dict[tuple[str, str], tuple[str, ...]] = {}

    @property
    def spacy(self):
        if self._spacy is None:
            self._spacy = make_spacy_tokenizer()
            self._attributes = lexical_attributes()
        return self._spacy

    # -- the whole message -------------------------------------------------
    def __call__(self, email: "ParsedEmail") -> list[str]:
        """The message's tokens: at most ``max_tokens`` from its content (headers, text,
        URLs, attachments, in that order), then one ``control:`` token per defect, and
        ``control:too-many-tokens`` when content was left unread. Work stops at the
        budget, so a hostile message costs about as much as a long real one."""
        budget = self.cfg.max_tokens + 1  # one over the cap tells that the cap was reached
        tokens: list[str] = []
        for name, value in email.headers:
            if len(tokens) >= budget:
                break
            tokens.extend(self.header_tokens(name, value))
        for part in email.parts:
            if len(tokens) >= budget:
                break
            if part.content_type == "text/html":
                tokens.append("content:html")
            tokens.extend(self.text_tokens(part.text, limit=budget - len(tokens)))
        for url in email.urls:
            if len(tokens) >= budget:
                break
            tokens.extend(self.url_tokens(url, namespace="href"))
        for attachment in email.attachments:  # at most MailLimits.max_parts
            tokens.append(f"attachment:{attachment.content_type}")
            ext = attachment.filename.rpartition(".")[2].lower() if "." in attachment.filename else ""
            if ext:
                tokens.append(f"attachment:ext:{ext[:10]}")
        cut = len(tokens) > self.cfg.max_tokens
        if cut:
            # Bounded counts per message; the defects below are kept, since a message
            # this long is usually hostile and they are the evidence of it.
            del tokens[self.cfg.max_tokens :]
        tokens.extend(f"control:{d}" for d in email.defects)
        if cut:
            tokens.append("control:too-many-tokens")
        return tokens

    # -- body text ---------------------------------------------------------
    def text_tokens(self, text: str, namespace: str = "", limit: int | None = None) -> list[str]:
        """Words of a text, each mapped through the per-word rules.

        With ``limit``, reading stops once that many tokens are made (the result
        is then a prefix of the unlimited one, at least ``limit`` long). Chunks
        longer than ``_MAX_CHUNK`` characters are cut to it first.

        spaCy's tokenizer splits a text at whitespace first and then splits each
        whitespace-free chunk on its own (its own cache is keyed by the chunk), so
        a chunk's tokens, and the tokens our rules map them to, depend on the
        chunk alone. They are cached per (namespace, chunk); only chunks not seen
        before go to spaCy, all in one call. Whitespace runs become spaCy tokens
        that map to nothing, so splitting with ``str.split`` (the same notion of
        whitespace) loses nothing. The output is that of one spaCy call per text
        (tests/test_speed_invariance.py checks it on the sample corpus and slices
        of SpamAssassin and Enron; why: docs/design/tokenizer-speed.md#chunks-cached).
        """
        if not text:
            return []
        cache = self._chunk_cache.get(namespace)
        if cache is None:
            if len(self._chunk_cache) >= _MAX_NAMESPACES:
                self._chunk_cache.clear()
                self._word_cache.clear()
            cache = self._chunk_cache[namespace] = chunk_cache()
        if limit is None:
            mapped = self._mapped(text, cache, namespace)
        else:
            mapped, n_tokens = [], 0
            for piece in _pieces(text, _PIECE):
                values = self._mapped(piece, cache, namespace)
                mapped.extend(values)
                # Tokens, not words: one word in Chinese can give a thousand.
                n_tokens += count_words(values) if self.cfg.bigrams else sum(map(len, values))
                if n_tokens >= limit:
                    break
        if not self.cfg.bigrams:
            return list(chain.from_iterable(mapped))
        # Bigram mode caches, per chunk, its tokens with the word pairs inside it
        # (``_chunk_entry``); only the pair across two chunks is made here.
        return join_chunks(mapped)

    def _mapped(self, text: str, cache: ChunkCache, namespace: str) -> list[tuple | str]:
        """What each whitespace-free chunk of ``text`` (cut to ``_MAX_CHUNK``) maps to:
        from the cache, else from one spaCy call."""
        mapped, positions, new = cache.lookup(text, _MAX_CHUNK)
        if new:
            values = self._map_new_chunks(list(dict.fromkeys(new)), cache, namespace)
            for at, chunk in zip(positions, new):
                mapped[at] = values[chunk]
        return mapped

    def _map_new_chunks(self, new: list[str], cache: ChunkCache, namespace: str
                        ) -> dict[str, tuple | str]:
        """What each of ``new`` (distinct chunks) maps to, also cached: split without spaCy
        where no infix needs it (``speedups.map_chunks``), the rest in one spaCy call."""
        lex, bigrams = self._attributes, self.cfg.bigrams
        if lex is None:
            self.spacy  # loads the attributes with spaCy
            lex = self._attributes
        # A chunk with no infix (_words_without_spacy: most new chunks) is split without
        # spaCy, which makes and stores a lexeme for each word and builds a Doc
        # (docs/design/tokenizer-speed.md#plain-words-without-spacy).
        words = self._word_cache.get(namespace)
        if words is None:
            words = self._word_cache[namespace] = {}
        cfg = self.cfg
        plain = PlainWords(namespace, cfg.lowercase, cfg.min_token_length, cfg.max_token_length,
                           _CACHE_LIMIT)
        new_word = partial(self._new_word, words=words, namespace=namespace, lex=lex,
                           plain=plain)
        values, split_by_spacy = map_chunks(new, words, new_word, bigrams, _CHUNK_RULES, plain)
        if not split_by_spacy:
            return self._cache_values(values, cache)
        new = split_by_spacy
        # Single spaces between whitespace-free chunks: spaCy sees exactly these
        # chunks, and the SPACY flag (a space follows) marks each one's last word.
        doc = self.spacy(" ".join(new))
        rows = doc.to_array([_ORTH, _SPACY]).tolist()
        strings = doc.vocab.strings
        current: list = []
        i = 0
        for h, space_after in rows:
            text = strings[h]
            word = words.get(text)
            if word is None:
                word = self._new_word(text, words, namespace, lex, plain)
            if bigrams:
                if word:
                    current.append(word)
            else:
                current.extend(word)
            if space_after:
                values[new[i]] = _chunk_entry(current) if bigrams else tuple(current)
                current = []
                i += 1
        values[new[i]] = _chunk_entry(current) if bigrams else tuple(current)
        if i + 1 != len(new):  # cannot happen: every chunk yields at least one word
            raise AssertionError(f"spaCy split {len(new)} chunks into {i + 1}")
        if len(strings) > _SPACY_STRINGS:
            # spaCy's vocabulary keeps every string it has seen; start a fresh one (our
            # caches are keyed by the chunk and by the word's text, which do not
            # depend on the vocabulary, so they stay valid).
            self._spacy = make_spacy_tokenizer()
        return self._cache_values(values, cache)

    def _new_word(self, text: str, words: dict, namespace: str, lex: LexicalAttributes,
                  plain: PlainWords) -> tuple[str, ...]:
        """The tokens of a word not in the namespace's word cache (``words``), cached."""
        # A plain ASCII word: no rule of _map_plain but the length ones can apply (no ".",
        # "@", ":", "$" or digit; not a space, a currency or a script to segment;
        # tests/test_tokenize.py checks it against the full rules). The C loop
        # (speedups.map_chunks with PlainWords) maps such words itself; this is the path
        # without it (docs/design/tokenizer-speed.md#plain-words-without-spacy).
        word = plain_word_tokens_python(text, plain)
        if word is None:
            word = () if lex.is_space(text) else self._map_word(text, lex)
            if namespace:
                word = tuple(namespace + m for m in word)
        if len(words) < _CACHE_LIMIT:
            words[text] = word
        return word

    @staticmethod
    def _cache_values(values: dict[str, tuple | str], cache: ChunkCache
                      ) -> dict[str, tuple | str]:
        if len(cache) + len(values) > _CACHE_LIMIT:
            cache.clear()  # bounded memory on huge mailboxes; frequent chunks return at once
        cache.update(values)
        return values

    def _map_word(self, text: str, lex: LexicalAttributes) -> tuple[str, ...]:
        """The tokens one spaCy word stands for (its text, and its lexical attributes);
        words in scripts written without spaces are cut first (textnb/text/segment.py)."""
        if segment.needs_segmenting(text):
            def plain(piece: str) -> list[str]:  # spaCy's affix rules, then the word rules
                words = [w.text for w in self.spacy(piece)]
                return [m for w in words if not lex.is_space(w) for m in self._map_plain(w, lex)]
            return segment.segment(text, plain)
        return self._map_plain(text, lex)

    def _map_plain(self, text: str, lex: LexicalAttributes) -> tuple[str, ...]:
        cfg = self.cfg
        # spaCy's like_url is False for a word with no "." unless it starts with
        # http(s):// (it scans for the "." in a Python loop), and like_email's pattern
        # needs an "@": most words are spared both calls (tests/test_tokenize.py checks
        # these two facts against spaCy's functions).
        if (("." in text or text.startswith(_URL_SCHEMES)) and lex.like_url(text)
                or _TOKEN_MATCH.match(text) and "@" not in text):
            return tuple(self.url_tokens(text.rstrip(_URL_TRAILING)))
        if "@" in text and lex.like_email(text):
            user, _, domain = text.lower().rpartition("@")
            return ("email:addr", f"email:domain:{domain.rstrip(_URL_TRAILING)}")
        word = text.lower() if cfg.lowercase else text
        if lex.is_currency(text) or (len(text) > 1 and text[0] in "$£€¥" and text[1:2].isdigit()):
            return (f"money:{_DIGITS.sub('d', word)}",) if cfg.number_shapes else (word,)
        if (cfg.number_shapes and not text.isalpha() and any(map(str.isdigit, text))
                and lex.like_num(text)):  # the cheap tests first: most words are letters
            # Exact numbers are too sparse to learn from; their shapes (``d,ddd``) are not.
            return (f"num:{_DIGITS.sub('d', word)[:12]}",)
        if (":" in word and word.strip(":")
                and cfg.min_token_length <= len(word) <= cfg.max_token_length):
            # ':' separates a token's namespace; a word holding one could pose as a header,
            # URL or control token (a spammer writing "from:domain:yourbank.example" in
            # the text). U+2236 RATIO looks the same and namespaces nothing (one
            # character for one: the length stays).
            word = word.replace(":", "\u2236")
        return self._sized(word)

    def _sized(self, word: str) -> tuple[str, ...]:
        """A plain word's token by its length: none when too short; when too long, its
        first character and size (SpamBayes: long "words" are mostly encoded junk)."""
        if len(word) < self.cfg.min_token_length:
            return ()
        if len(word) > self.cfg.max_token_length:
            return (f"skip:{word[0]} {len(word) // 10 * 10}",)
        return (word,)

    # -- URLs --------------------------------------------------------------
    def url_tokens(self, url: str, namespace: str = "url") -> list[str]:
        match = _HOST.match(url)
        host = match.group(1).lower().rstrip(".") if match else ""
        tokens = [f"{namespace}:{host}"] if host else [f"{namespace}:nohost"]
        if self.cfg.url_parts and host:
            if _IPV4.fullmatch(host):
                tokens.append(f"{namespace}:ip")
            else:
                labels = host.split(".")
                # Registered-domain-ish suffixes: shared across a spammer's many hosts.
                for k in (2, 3):
                    if len(labels) > k:
                        tokens.append(f"{namespace}:{'.'.join(labels[-k:])}")
            if match and len(url) > match.end():
                path = url[match.end():].lower()
                for piece in _URL_PATH_SEPARATORS.split(path):
                    if 1 < len(piece) <= self.cfg.max_token_length:
                        tokens.append(f"{namespace}-path:{piece}")
        return tokens

    # -- headers -----------------------------------------------------------
    def header_tokens(self, name: str, value: str) -> list[str]:
        cfg = self.cfg
        if cfg.header_mode != "all":
            if name not in cfg.headers:
                return []
        elif added_after_delivery(name):
            # Mail-client state (X-Keywords, Status), delivery stamps (Delivered-To) and
            # other filters' verdicts (X-Spam-*, X-TextNB-*) are not in the message at
            # the time it is filtered, only in the copy learned later; the ledger drops
            # them from a message's identity for the same reason. In the SpamAssassin
            # corpus X-Keywords marks 31% of the spam and 0.6% of the ham.
            return []
        tokens = [f"header:{name}"]
        if name in OWN_NAMESPACES:  # "Control:" must not pose as textnb's control tokens
            name = f"header-{name}"
        value = value[:10_000]  # a 10 MB header line gives no more evidence than its start
        if name == "subject":
            tokens.extend(self.text_tokens(value, namespace="subject:"))
        elif name in _ADDRESS_HEADERS:
            # Cached: 28,144 address fields in the SpamAssassin training split hold
            # 7,019 distinct values, and email.utils.getaddresses is slow.
            key = (name, value)
            address_tokens = self._address_cache.get(key)
            if address_tokens is None:
                address_tokens = tuple(self._address_tokens(name, value))
                if len(self._address_cache) >= _CACHE_LIMIT // 5:
                    self._address_cache.clear()
                self._address_cache[key] = address_tokens
            tokens.extend(address_tokens)
        elif name == "received":
            tokens.extend(self._received_tokens(value))
        elif name in ("message-id", "in-reply-to", "references"):
            for host in _hostnames(value)[:5]:
                tokens.append(f"{name}:{host}")
        elif name in ("content-type", "content-transfer-encoding", "content-disposition"):
            tokens.extend(f"{name}:{w}" for w in _WHITESPACE.split(value.lower().replace(";", " "))
                          if w and len(w) <= cfg.max_token_length)
        elif name in ("date",):
            # Only the time-zone and the weekday/format shape; the date itself is noise.
            parts = value.split()
            if parts:
                tokens.append(f"date:zone:{parts[-1].lower()}")
                tokens.append(f"date:shape:{_DIGITS.sub('d', ' '.join(parts[:1]).lower())}")
        else:
            words = self.text_tokens(value, namespace=f"{name}:")
            tokens.extend(words[: cfg.max_header_tokens])
        return tokens

    def _address_tokens(self, name: str, value: str) -> list[str]:
        tokens = []
        try:
            pairs = _simple_addresses(value) or getaddresses([value])
        except Exception:  # the stdlib parser can fail on hostile input; fall back to no pairs
            pairs = []
            tokens.append(f"{name}:unparsable")
        for display, addr in pairs[:20]:
            addr = addr.lower()
            if "@" in addr:
                user, _, domain = addr.rpartition("@")
                tokens.append(f"{name}:addr:{addr[:80]}")
                tokens.append(f"{name}:domain:{domain[:80]}")
            elif addr:
                tokens.append(f"{name}:noaddr")
            if display:
                tokens.extend(self.text_tokens(display, namespace=f"{name}:name:")[:10])
        if len(pairs) > 20:
            tokens.append(f"{name}:many-recipients")
        return tokens

    def _received_tokens(self, value: str) -> list[str]:
        tokens = []
        for host in _hostnames(value)[:10]:
            tokens.append(f"received:{host}")
        for a, b, c, d in find_ipv4(value, _IPV4)[:10]:
            tokens.append(f"received:ip:{a}.{b}.{c}.{d}")
            if self.cfg.received_subnets:
                # bogofilter's block_on_subnets: spam comes from neighbouring addresses.
                tokens.append(f"received:ip:{a}.{b}.{c}")
                tokens.append(f"received:ip:{a}.{b}")
        return tokens


def _hostnames(value: str) -> list[str]:
    """The host names in ``value`` (``_HOSTNAME``), lower-cased."""
    if value.isascii():
        return find_hostnames(value.lower(), _HOSTNAME_LOWER)
    return [host.lower() for host in _HOSTNAME.findall(value)]


def _simple_address(value: str) -> tuple[str, str] | None:
    """(name, address) of one address in a common shape, else None."""
    match = _BARE_ADDRESS.fullmatch(value)
    if match:
        return ("", match[1])
    match = _QUOTED_NAME_ADDRESS.fullmatch(value)
    if match:
        return (match[1], match[2])
    match = _NAME_ADDRESS.fullmatch(value)
    if match:
        return (" ".join(match[1].split()) if match[1] else "", match[2])
    return None


def _simple_addresses(value: str) -> list[tuple[str, str]] | None:
    """getaddresses([value]) for the common shapes (``_BARE_ADDRESS`` etc.), else None.
    A list is cut at commas only when no name is quoted and no comment can hold one."""
    if "," not in value:
        pair = _simple_address(value)
        return None if pair is None else [pair]
    if '"' in value or "(" in value:
        return None
    pairs = []
    for item in value.split(","):
        pair = _simple_address(item)
        if pair is None:
            return None
        pairs.append(pair)
    return pairs


def _words_without_spacy(chunk: str) -> tuple[str, ...] | None:
    """The words spaCy's tokenizer splits ``chunk`` into under our rules, for every
    chunk whose core has no infix; None for the others (spaCy splits them).

    This is spaCy's own affix loop (``Tokenizer._split_affixes`` in its
    tokenizer.pyx, which ``Tokenizer.explain`` also follows), with our rules and
    without special cases (our tokenizer has none): until the rest is a URL or an
    address (``_TOKEN_MATCH``) or no prefix or suffix is left, strip one prefix and
    one suffix; the core is then one word when ``_TOKEN_MATCH`` keeps it whole or
    ``_INFIX`` finds nothing in it. spaCy builds a Doc and lexemes for a chunk with
    affixes and calls our rules from its loop, and most new chunks of mail have one
    (docs/design/tokenizer-speed.md#plain-words-without-spacy). tests/test_tokenize_fast_paths.py
    checks it against spaCy; on SpamAssassin's 155,198 distinct training chunks it
    agrees on every one."""
    if chunk.isalpha() or _AFFIX.search(chunk) is None:  # (no affix is a letter)
        return (chunk,)
    prefixes, suffixes = [], []
    rest, last_size = chunk, 0
    while rest and len(rest) != last_size:
        if _TOKEN_MATCH.match(rest):
            break
        last_size = len(rest)
        match = _PREFIX.search(rest)
        pre = match.end() - match.start() if match else 0
        match = _SUFFIX.search(rest[pre:])
        suf = match.end() - match.start() if match else 0
        if pre and suf and pre + suf <= len(rest):
            prefixes.append(rest[:pre])
            suffixes.append(rest[-suf:])
            rest = rest[pre:-suf]
        elif pre:
            prefixes.append(rest[:pre])
            rest = rest[pre:]
        elif suf:
            suffixes.append(rest[-suf:])
            rest = rest[:-suf]
    if rest:
        if not _TOKEN_MATCH.match(rest) and _INFIX.search(rest):
            return None
        prefixes.append(rest)
    prefixes.extend(reversed(suffixes))
    return tuple(prefixes)


def _chunk_entry(words: list[tuple[str, ...]]) -> tuple | str:
    """What bigram mode caches for a whitespace-free chunk, from its non-empty mapped
    words: () for none; the token itself for one word of one token (most chunks: the
    entry is one object, not three, which is what joining them touches, per
    occurrence); else (the first word's tokens, the rest's tokens with the word pairs
    between them, the first word's first token and whether it pairs, the same for the
    last word, and the number of word tokens). A pair joins two consecutive words'
    first tokens when neither is namespaced (holds a ':'), as ``text_tokens`` made it
    word by word; now only the pair across two chunks is made per occurrence
    (``speedups.join_chunks``)."""
    if not words:
        return ()
    if len(words) == 1 and len(words[0]) == 1:
        return words[0][0]
    head, tail = words[0], []
    prev = head[0]
    for word in words[1:]:
        tail.extend(word)
        first = word[0]
        if ":" not in first and ":" not in prev:
            tail.append(f"bi:{prev} {first}")
        prev = first
    return (head, tuple(tail), head[0], ":" not in head[0], prev, ":" not in prev,
            sum(map(len, words)))


# What _map_new_chunks splits without spaCy (speedups.map_chunks: in C, the rules' four
# first fields; in Python, the two functions above, its reference).
_CHUNK_RULES = ChunkRules(_PREFIX_CHARS, _SUFFIX_CHARS, _INFIX_CHARS, _TOKEN_MATCH.match,
                          _words_without_spacy, _chunk_entry)


def _pieces(text: str, size: int) -> Iterator[str]:
    """``text`` in consecutive pieces of about ``size`` characters, cut at whitespace
    (so that no chunk is split)."""
    start, n = 0, len(text)
    while start < n:
        end = start + size
        if end < n:
            space = _ONE_SPACE.search(text, end)
            end = space.start() if space else n
        yield text[start:end]
        start = end


def tokenize_texts(tokenizer: EmailTokenizer, texts: Iterable[str]) -> Iterator[list[str]]:
    """Token lists for bare texts (SMS, pre-tokenised corpora): body rules only."""
    for text in texts:
        yield tokenizer.text_tokens(text)
