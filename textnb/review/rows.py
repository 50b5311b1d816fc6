"""What a row of the verdict log is: its tables (``SCHEMA``), one verdict as the page
shows it (:class:`Row`), and what is wrong with a log that cannot be used, in one
sentence with its fix (:func:`describe`), as :mod:`textnb.review.store` (writing) and
:mod:`textnb.review.reading` (the page's queries) both say it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["COLUMNS", "HELD", "Row", "SCHEMA", "StoreError", "describe", "missing", "reason",
           "row_from"]

# The action the milter records for mail it put in the MTA's hold queue: the rows the
# page can release (textnb.review.release).
HELD = "quarantined"

SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    user TEXT NOT NULL,
    model TEXT NOT NULL,
    source TEXT NOT NULL,
    sender TEXT NOT NULL,
    subject TEXT NOT NULL,
    label TEXT NOT NULL,
    log_odds REAL NOT NULL,
    p_spam REAL NOT NULL,
    threshold REAL NOT NULL,
    action TEXT NOT NULL,
    digest TEXT NOT NULL,
    size INTEGER NOT NULL,
    clues TEXT,
    has_raw INTEGER NOT NULL DEFAULT 0,
    taught TEXT,
    before TEXT,
    prior REAL,
    queue_id TEXT
);
DROP INDEX IF EXISTS verdicts_user;
CREATE INDEX IF NOT EXISTS verdicts_user_text ON verdicts (user, id, sender, subject);
CREATE INDEX IF NOT EXISTS verdicts_at ON verdicts (at);
CREATE INDEX IF NOT EXISTS verdicts_queue ON verdicts (user, id) WHERE has_raw AND taught IS NULL;
CREATE INDEX IF NOT EXISTS verdicts_taught ON verdicts (user, id) WHERE taught IS NOT NULL;
CREATE INDEX IF NOT EXISTS verdicts_queue_all ON verdicts (id) WHERE has_raw AND taught IS NULL;
CREATE INDEX IF NOT EXISTS verdicts_queue_close ON verdicts (user, abs(log_odds - threshold), id)
    WHERE has_raw AND taught IS NULL;
CREATE INDEX IF NOT EXISTS verdicts_queue_close_all ON verdicts (abs(log_odds - threshold), id)
    WHERE has_raw AND taught IS NULL;
CREATE INDEX IF NOT EXISTS verdicts_taught_all ON verdicts (id) WHERE taught IS NOT NULL;
CREATE INDEX IF NOT EXISTS verdicts_kept ON verdicts (user, id, size) WHERE has_raw;
CREATE TABLE IF NOT EXISTS raws (
    id INTEGER PRIMARY KEY,
    raw BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    at REAL NOT NULL,
    what TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dropped (
    reason TEXT PRIMARY KEY,
    n INTEGER NOT NULL,
    last REAL NOT NULL
);
"""


class StoreError(Exception):
    """The verdict log cannot be opened or read: damaged, locked or missing."""



@dataclass
class Row:
    """One recorded verdict, as the page shows it."""

    id: int
    at: float
    user: str
    model: str
    source: str
    sender: str
    subject: str
    label: str
    log_odds: float
    p_spam: float
    threshold: float
    action: str
    digest: str
    size: int
    clues: list
    has_raw: bool
    taught: str | None
    before: str | None
    prior: float | None = None  # the model's prior log-odds, recorded with the clues
    queue_id: str | None = None  # the MTA's queue id (the milter's verdicts)


COLUMNS = ("id, at, user, model, source, sender, subject, label, log_odds, p_spam, threshold, "
            "action, digest, size, clues, has_raw, taught, before, prior, queue_id")


def row_from(values) -> Row:
    """A Row from the values of a ``SELECT {COLUMNS}``."""
    values = list(values)
    values[14] = json.loads(values[14]) if values[14] else []
    values[15] = bool(values[15])
    return Row(*values)


def missing(path) -> str:
    return (f"the verdict log {path} is missing (moved aside or deleted); the scorer "
            "begins a new one there with its next verdict, and this page reads that one")


def describe(exc: BaseException, path) -> str:
    """What is wrong with the store, and the fix, in one sentence."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return f"the verdict log {path} is locked by another program ({text}); it is retried"
    if "full" in text or getattr(exc, "errno", None) == 28:
        return f"the disk of the verdict log {path} is full ({text}); free space or lower --record-max-mb"
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return (f"the verdict log {path} is damaged ({text}); move it aside (the scorer "
                "starts a new one on its next start)")
    return f"the verdict log {path} cannot be used ({text})"


def reason(exc: BaseException) -> str:
    """A metrics label for why a batch of verdicts was dropped."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return "locked"
    if "full" in text or getattr(exc, "errno", None) == 28:
        return "full"
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return "damaged"
    return "error"
