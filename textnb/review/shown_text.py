"""A kept message as the review page shows it: text only, parsed once on a worker thread
and kept for its next view.

A kept message may be 10 MB, and parsing 10 MB of HTML into its visible text takes about
a second of CPU (docs/design/review-page.md#a-messages-page). So one message is parsed
at a time, on the worker thread that asks for it, and the last ``SHOWN_MESSAGES`` texts
are kept: one session reloading a large message leaves every other page's reads and
rendering to the event loop (docs/review-page.md#pages-under-load), and a parse in
progress holds up no view of a message already kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["MAX_BODY_CHARS", "SHOWN_MESSAGES", "ShownTexts", "inert_text"]

# The most of a message's text a page shows.
MAX_BODY_CHARS = 100_000
# Messages shown as text, kept for their next view.
SHOWN_MESSAGES = 32


def inert_text(raw: bytes) -> tuple[str, list[str], bool]:
    """A message as text only: its decoded text parts (HTML as visible text), its
    attachments' descriptions, and whether the text was cut; never markup, links or
    images."""
    from ..mail.parse import parse_message

    parsed = parse_message(raw)
    text = "\n\n".join(part.text for part in parsed.parts)
    attachments = [f"{a.filename or '(no name)'} ({a.content_type}, {a.size} bytes)"
                   for a in parsed.attachments]
    return text[:MAX_BODY_CHARS], attachments, len(text) > MAX_BODY_CHARS


class ShownTexts:
    """(text, attachments, cut) of kept messages, by verdict row.

    raw_of (callable): a row's id -> its kept bytes, or None (read from the log).
    parse (callable): bytes -> (text, attachments, cut); :func:`inert_text`.
    """

    def __init__(self, raw_of, parse=inert_text, limit: int = SHOWN_MESSAGES):
        self.raw_of, self.parse, self.limit = raw_of, parse, limit
        self._texts: OrderedDict = OrderedDict()  # (verdict id, digest) -> the three
        self._lock, self._parsing = threading.Lock(), threading.Lock()

    def text_of(self, row) -> tuple[str, list[str], bool]:
        """The row's message as text; call on a worker thread (a first view parses)."""
        key = (row.id, row.digest)
        with self._lock:
            found = self._texts.get(key)
            if found is not None:
                self._texts.move_to_end(key)
                return found
        with self._parsing:
            with self._lock:
                found = self._texts.get(key)
            if found is None:
                raw = self.raw_of(row.id)
                found = self.parse(raw) if raw is not None else ("", [], False)
                with self._lock:
                    self._texts[key] = found
                    while len(self._texts) > self.limit:
                        self._texts.popitem(last=False)
        return found
