"""The namespaces of textnb's tokens, and which kind of evidence each one is.

A token is a plain word (``cheap``) or ``namespace:value``. The tokenizer
(textnb/text/tokenize.py) writes its own namespaces for what it finds in the content
(``bi:cheap pills``, ``url:example.com``, ``control:bad-base64``); every header field
but Subject is tokenised under its own name (``received:mail.example.com``,
``list-id:users``, ``header:list-id`` for the field's presence). So the namespace says
where a clue came from: what the message *says* (its text, links, attachments,
Subject) or who sent it and *by which route* (its header fields). Evidence selection
(textnb/models/evidence.py) keeps places for the second kind, so that a long advertisement's
words cannot crowd out the list or host it came through.
"""

from __future__ import annotations

import re

__all__ = ["CONTENT_NAMESPACES", "OWN_NAMESPACES", "PAIR_PREFIX", "is_header_token"]

# Namespaces textnb writes itself (besides the header fields it tokenises). With
# tokenizer.header_mode = "all" every field becomes a namespace, and a field named after
# one of these is renamed header-<name> so that a sender cannot forge, say,
# control:nul-bytes with a header field.
OWN_NAMESPACES = frozenset({"header", "url", "url-path", "href", "href-path", "email",
                            "money", "num", "skip", "content", "attachment", "control", "bi",
                            "script"})

PAIR_PREFIX = "bi:"  # word pairs

# What the message says: its text, the shapes in it, its links and attachments, its
# defects, and its Subject (a line of text the sender writes like the body).
CONTENT_NAMESPACES = (OWN_NAMESPACES - {"header"}) | {"subject"}

# A header field's name as the tokenizer writes it (lower case; RFC 5322 allows any
# printable character but ':' and space, and textnb's tokens keep those it sees).
_FIELD_NAME = re.compile(r"[!-9;-~]+")


def is_header_token(token: str) -> bool:
    """Whether a token comes from a header field other than Subject (``from:domain:...``,
    ``received:...``, ``header:list-id``): evidence of the sender and the route."""
    name, sep, _ = token.partition(":")
    if not sep or name in CONTENT_NAMESPACES or not _FIELD_NAME.fullmatch(name):
        return False
    return token != "header:subject"
