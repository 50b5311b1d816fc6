"""Header fields added after a message arrives: not part of the message as sent.

Delivery agents, mailbox formats, mail clients (flags, sizes, IMAP state) and filters
add or rewrite these while a message sits in a folder. They are neither part of a
message's identity (``textnb.models.ledger.normalise`` removes them) nor tokens
(``textnb.text.tokenize``): a client that flags a message or a filter that scores it
must not turn it into a new message, nor leak a label no filter sees at delivery
(docs/accuracy.md).
"""

from __future__ import annotations

__all__ = ["ADDED_FIELDS", "ADDED_PREFIXES", "added_after_delivery"]

# Header fields (lower case) added or rewritten after the sender's MTA: by the final
# delivery agent, by mailbox formats and clients (flags, sizes, IMAP state) and by filters.
ADDED_FIELDS = frozenset({
    "delivered-to", "x-original-to", "envelope-to",                    # delivery agents
    "status", "x-status", "x-keywords", "x-uid", "x-imap", "x-imapbase",  # mbox clients
    "content-length", "lines",                                          # mbox sizes
    "x-mozilla-status", "x-mozilla-status2", "x-mozilla-keys",          # Thunderbird
    "x-gmail-labels", "x-gm-thrid",                                     # Google Takeout
    "x-bogosity",                                                       # bogofilter
})
ADDED_PREFIXES = ("x-spam", "x-textnb-", "x-dspam-", "x-rspamd-", "x-crm114-",
                  "x-virus-", "x-evolution")


def added_after_delivery(name: str) -> bool:
    """Whether a header field (lower-case name) is one that delivery agents, mail
    clients or other filters add or change after a message arrives: not part of the
    message as sent, so neither its identity (the ledger) nor a token (the tokenizer)."""
    return name in ADDED_FIELDS or name.startswith(ADDED_PREFIXES)
