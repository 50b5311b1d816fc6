"""ParsedEmail -> list of namespaced token strings.

Body words are bare (``free``); everything else carries a namespace so header,
URL and synthetic features never collide with body words: ``subject:free``,
``from:domain:example.com``, ``url:example.com``, ``received:ip:192.0.2``,
``control:bad-base64``, ``skip:h 50`` (SpamBayes' trick for over-long words).

The splitting is spaCy's ``Tokenizer`` on a blank English vocabulary, with
prefix/suffix rules narrowed to the punctuation that actually sticks to words in
mail. spaCy's default English rules cost ~4x more time on mail text (a 500-message
easy_ham sample: 4.9 s default rules without URL matching, 1.3 s these rules) and
their extra splits (hyphens, apostrophes) carry little spam evidence. The lexical
attributes (``like_num``, ``like_url``, ``like_email``) come from spaCy's lexemes,
which are computed once per distinct string and cached in the vocabulary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from email.utils import getaddresses
from typing import TYPE_CHECKING

from .config import TokenizerConfig

# spaCy's attribute id of a token's verbatim text (spacy.attrs.ORTH), fixed by spaCy's ABI;
# importing it would load spaCy at import time.
_ORTH = 65

if TYPE_CHECKING:  # spaCy is loaded on demand, never at import (start-up time matters)
    from .mail import ParsedEmail

# Punctuation that sticks to the front or back of words in mail text.
_PREFIX = re.compile(r"""^[\[\(\"'<{*`|~]""")
_SUFFIX = re.compile(r"""[\]\)\"'>},;:.!?*`|]$""")
# Split words glued by these (``word/word``, ``a=b``): keeps URL parts apart in text.
_INFIX = re.compile(r"""(?<=[A-Za-z])[/=&](?=[A-Za-z])""")
# URLs and e-mail addresses stay whole so they can be turned into host tokens.
_TOKEN_MATCH = re.compile(
    r"^(?:(?:https?|ftp)://|www\.)\S+$|^[^@\s<>()\"']+@[^@\s<>()\"']+\.[A-Za-z]{2,}$",
    re.IGNORECASE,
)
_URL_TRAILING = ".,;:!?)]}>\"'"
_HOST = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?(?:[^@/\s]*@)?([^/:?#\s]+)", re.IGNORECASE)
_IPV4 = re.compile(r"\b(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\b")
_HOSTNAME = re.compile(r"\b((?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,})\b", re.IGNORECASE)
_URL_IN_TEXT = re.compile(r"(?:https?|ftp)://[^\s<>\"']+|www\.[^\s<>\"']+", re.IGNORECASE)
_DIGITS = re.compile(r"\d")
_WHITESPACE = re.compile(r"\s+")

# Header fields whose values are addresses: tokenised as address, domain and name words.
_ADDRESS_HEADERS = frozenset({"from", "to", "cc", "reply-to", "sender", "return-path",
                              "delivered-to", "errors-to", "x-original-to"})


def make_spacy_tokenizer():
    """Build the spaCy tokenizer (a blank English pipeline's vocabulary, our rules)."""
    import spacy
    from spacy.tokenizer import Tokenizer

    nlp = spacy.blank("en")
    return Tokenizer(
        nlp.vocab,
        prefix_search=_PREFIX.search,
        suffix_search=_SUFFIX.search,
        infix_finditer=_INFIX.finditer,
        token_match=_TOKEN_MATCH.match,
    )


class EmailTokenizer:
    """Turn a ParsedEmail into namespaced tokens (with repeats: counts matter for tf).

    cfg (TokenizerConfig): the choices; see configs/default.toml for the reasons.
    """

    def __init__(self, cfg: TokenizerConfig):
        self.cfg = cfg
        self._spacy = None
        self._word_cache: dict[str, dict[int, tuple[str, ...]]] = {}

    @property
    def spacy(self):
        if self._spacy is None:
            self._spacy = make_spacy_tokenizer()
        return self._spacy

    # -- the whole message -------------------------------------------------
    def __call__(self, email: "ParsedEmail") -> list[str]:
        tokens: list[str] = []
        for name, value in email.headers:
            tokens.extend(self.header_tokens(name, value))
        for part in email.parts:
            if part.content_type == "text/html":
                tokens.append("content:html")
            tokens.extend(self.text_tokens(part.text))
        for url in email.urls:
            tokens.extend(self.url_tokens(url, namespace="href"))
        for attachment in email.attachments:
            tokens.append(f"attachment:{attachment.content_type}")
            ext = attachment.filename.rpartition(".")[2].lower() if "." in attachment.filename else ""
            if ext:
                tokens.append(f"attachment:ext:{ext[:10]}")
        tokens.extend(f"control:{d}" for d in email.defects)
        if len(tokens) > self.cfg.max_tokens:
            # Bounded work per message: a hostile message cannot grow the counts without limit.
            tokens = tokens[: self.cfg.max_tokens]
            tokens.append("control:too-many-tokens")
        return tokens

    # -- body text ---------------------------------------------------------
    def text_tokens(self, text: str, namespace: str = "") -> list[str]:
        """Words of a text, each mapped through the per-word rules.

        The mapping is cached per (namespace, spaCy string hash): a mailbox repeats
        its words, and reading the ORTH hashes as one array instead of creating a
        Token object per word halves the tokenising time (1,500 SpamAssassin
        messages: 462 -> see the closing note of the speed issue).
        """
        if not text:
            return []
        doc = self.spacy(text)
        cache = self._word_cache.get(namespace)
        if cache is None:
            cache = self._word_cache[namespace] = {}
        vocab = doc.vocab
        out: list[str] = []
        bigrams = self.cfg.bigrams
        prev = None
        for h in doc.to_array(_ORTH).tolist():
            mapped = cache.get(h)
            if mapped is None:
                lexeme = vocab[h]
                mapped = () if lexeme.is_space else self._map_word(lexeme)
                if namespace:
                    mapped = tuple(namespace + m for m in mapped)
                if len(cache) < 1_000_000:  # bound the cache on huge mailboxes
                    cache[h] = mapped
            out.extend(mapped)
            if bigrams and mapped:
                first = mapped[0]
                if prev is not None and ":" not in first and ":" not in prev:
                    out.append(f"bi:{prev} {first}")
                prev = first
        return out

    def _map_word(self, tok) -> tuple[str, ...]:
        """The tokens one spaCy word (a Lexeme) stands for."""
        cfg = self.cfg
        text = tok.text
        if tok.like_url or _TOKEN_MATCH.match(text) and "@" not in text:
            return tuple(self.url_tokens(text.rstrip(_URL_TRAILING)))
        if tok.like_email:
            user, _, domain = text.lower().rpartition("@")
            return ("email:addr", f"email:domain:{domain.rstrip(_URL_TRAILING)}")
        word = text.lower() if cfg.lowercase else text
        if tok.is_currency or (len(text) > 1 and text[0] in "$£€¥" and text[1:2].isdigit()):
            return (f"money:{_DIGITS.sub('d', word)}",) if cfg.number_shapes else (word,)
        if cfg.number_shapes and tok.like_num and any(c.isdigit() for c in text):
            # Exact numbers are too sparse to learn from; their shapes (``d,ddd``) are not.
            return (f"num:{_DIGITS.sub('d', word)[:12]}",)
        if len(word) < cfg.min_token_length:
            return ()
        if len(word) > cfg.max_token_length:
            # SpamBayes: long "words" are mostly encoded junk; keep their first char and size.
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
                for piece in re.split(r"[/?#&=.\-_+%]+", path):
                    if 1 < len(piece) <= self.cfg.max_token_length:
                        tokens.append(f"{namespace}-path:{piece}")
        return tokens

    # -- headers -----------------------------------------------------------
    def header_tokens(self, name: str, value: str) -> list[str]:
        cfg = self.cfg
        if name not in cfg.headers and cfg.header_mode != "all":
            return []
        tokens = [f"header:{name}"]
        value = value[:10_000]  # a 10 MB header line gives no more evidence than its start
        if name == "subject":
            tokens.extend(self.text_tokens(value, namespace="subject:"))
        elif name in _ADDRESS_HEADERS:
            tokens.extend(self._address_tokens(name, value))
        elif name == "received":
            tokens.extend(self._received_tokens(value))
        elif name in ("message-id", "in-reply-to", "references"):
            for host in _HOSTNAME.findall(value)[:5]:
                tokens.append(f"{name}:{host.lower()}")
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
            pairs = getaddresses([value])
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
        for host in _HOSTNAME.findall(value)[:10]:
            tokens.append(f"received:{host.lower()}")
        for a, b, c, d in _IPV4.findall(value)[:10]:
            tokens.append(f"received:ip:{a}.{b}.{c}.{d}")
            if self.cfg.received_subnets:
                # bogofilter's block_on_subnets: spam comes from neighbouring addresses.
                tokens.append(f"received:ip:{a}.{b}.{c}")
                tokens.append(f"received:ip:{a}.{b}")
        return tokens


def tokenize_texts(tokenizer: EmailTokenizer, texts: Iterable[str]) -> Iterator[list[str]]:
    """Token lists for bare texts (SMS, pre-tokenised corpora): body rules only."""
    for text in texts:
        yield tokenizer.text_tokens(text)
