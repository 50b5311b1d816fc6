"""The verdict log: every verdict the scorer gives, per user, in one SQLite file (WAL).

One row per verdict in ``verdicts``: when, for which user (and which model scored it:
``model`` one model, ``shared``, ``user``), where it came from (``serve``, ``milter``), the sender
and subject (decoded, at most ``FIELD_CHARS`` characters), the label, log-odds, P(spam)
and threshold, what the mail path did (``action``), the message's ledger digest, the
MTA's queue id (``queue_id``, the milter's verdicts: what a held message is released
by), and the top clues when they were computed (JSON ``[[token, contribution], ...]``). The raw
message is kept, in ``raws``, only for the review queue: verdicts in the review band
(:func:`in_review_band`). What the page taught is on the row too: ``taught`` (``spam``,
``ham``, ``forgotten``) and ``before`` (the message's state in the model before the
page first taught it: ``spam``, ``ham`` or ``absent``), which is what undo restores.

Bounds (:meth:`VerdictStore.prune`): rows older than ``days`` are deleted; a user
whose kept messages pass ``max_user_bytes`` loses their own oldest ones (one user's
flood of spam does not push everybody else's mail out of the review queue); and when
the file (with its write-ahead log) passes ``max_bytes`` the oldest raw messages go
first, then the oldest rows, a tenth at a time, and the freed pages are given back
(``auto_vacuum = FULL``: a commit that frees pages shortens the file).
tests/test_review_store.py records 10,000 verdicts into a 2 MB cap and checks the file
stays under it.

The page's queries (history, search, the review queue, one verdict, the statistics'
counts), each a bounded index range, are :class:`textnb.review.reading.LogReading`'s,
which this store is; the tables, the :class:`Row` and what a failure is called are
:mod:`textnb.review.rows`'. This module opens the log, writes it and keeps it within
its bounds.

Verdicts the recorder could not record (its queue full, the store locked, full or
damaged) are counted in ``dropped`` by reason, written with the next batch that gets
in, so the page can say how many are missing. ``events`` holds what every reader is
told about the log itself (that it was begun anew after the one before was moved or
deleted). With the clues, ``prior`` keeps the model's prior log-odds, so the page can
show the score as prior + clues + the rest.

Only the writer thread of :mod:`textnb.review.recorder` writes verdicts and creates
the file; ``textnb web`` reads them and writes the ``taught``/``before`` columns, each
lesson in a transaction of its own around the scorer's answer (:meth:`begin_lesson`;
WAL lets readers go on meanwhile; a writer waits at most ``BUSY_MS`` for the other).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from .headers import FIELD_CHARS, HEAD_BYTES, headers_of  # noqa: F401 - part of this module's face
from .reading import SEARCH_ROWS, LogReading
from .rows import SCHEMA, Row, StoreError, describe, missing  # noqa: F401 - as above

__all__ = ["FIELD_CHARS", "REVIEW_BAND", "Row", "SEARCH_ROWS", "StoreError", "VerdictStore",
           "headers_of", "in_review_band", "missing"]

# Verdicts whose log-odds lie within this distance of the threshold keep their raw
# message for the review queue (with the default threshold 0: P(spam) between 0.12 and
# 0.88), as does every spam verdict (mail the user may want back) and every 'unsure'.
# The widest band that keeps at most about one ham verdict in fifty on every validation
# cell, while holding 41% of the spams let through (bench/review_band.py,
# docs/review-page.md#how-it-fits-together).
REVIEW_BAND = 2.0
# prune() cuts the data to this share of the cap: the rest is room for what comes in
# before the next prune (a tenth of the cap) and for the write-ahead log.
PRUNE_TO = 0.7
# One user's kept messages may take at most this share of the size cap (their oldest
# go first past it): a flood of spam to one address leaves the others' review queues.
USER_SHARE = 0.25
# How long a writer (the recorder, or the page marking a row taught) waits for the other.
BUSY_MS = 1000


def in_review_band(label: str, log_odds: float, threshold: float,
                   band: float = REVIEW_BAND) -> bool:
    """Whether a verdict's raw message is kept for the review queue."""
    return label in ("spam", "unsure") or abs(log_odds - threshold) < band


class VerdictStore(LogReading):
    """The SQLite file of recorded verdicts.

    path (Path): the database; created (mode 0600: it holds mail) if absent.
    days (float): rows older than this are deleted by :meth:`prune`.
    max_bytes (int): the file and its write-ahead log are kept under this by :meth:`prune`.
    readonly (bool): open for reading only (a page that shows, never records).
    max_user_bytes (int | None): one user's kept messages are kept under this by
        :meth:`prune`; None: ``USER_SHARE`` of ``max_bytes``.
    wait_ms (int): how long a statement waits for a lock another connection holds.
    """

    def __init__(self, path, days: float = 30.0, max_bytes: int = 200 * 2**20,
                 readonly: bool = False, clock=time.time, max_user_bytes: int | None = None,
                 wait_ms: int = BUSY_MS, create: bool = True):
        if not days > 0 or max_bytes < 2**20:
            raise ValueError(f"days={days} must be > 0 and max_bytes={max_bytes} at least "
                             "1 MB (2**20)")
        self.path = Path(path)
        self.days, self.max_bytes = days, max_bytes
        self.max_user_bytes = (int(max_bytes * USER_SHARE) if max_user_bytes is None
                               else max_user_bytes)
        self._clock = clock
        self._wait_ms = wait_ms
        self.created = False  # this store made the file
        self.db = self._open(readonly, create)

    def _open(self, readonly: bool, create: bool) -> sqlite3.Connection:
        if not self.path.exists():
            if readonly or not create:
                raise StoreError(missing(self.path))
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            self.created = True
        self.identity = _identity(self.path)
        uri = f"file:{self.path}?mode={'ro' if readonly else 'rw'}"
        try:
            db = sqlite3.connect(uri, uri=True, timeout=self._wait_ms / 1000,
                                 check_same_thread=False, isolation_level=None)
            if not readonly and (self.created or create or not _current(db)):
                db.execute("PRAGMA auto_vacuum = FULL")  # before the first table
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")  # WAL: a power cut loses the last commits, never the file
                page = db.execute("PRAGMA page_size").fetchone()[0]
                db.execute(f"PRAGMA journal_size_limit = {min(2**20, self.max_bytes // 10)}")
                # the log is checkpointed (and reused) past a tenth of the cap
                db.execute(f"PRAGMA wal_autocheckpoint = {max(16, self.max_bytes // page // 10)}")
                db.executescript(SCHEMA)
                _add_column(db, "prior REAL")
                _add_column(db, "queue_id TEXT")
            elif not readonly:  # the page: a reader first, which a lock held elsewhere
                db.execute("PRAGMA synchronous = NORMAL")  # does not stop
            else:
                db.execute("SELECT count(*) FROM verdicts WHERE id < 0").fetchone()
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None
        except FileNotFoundError:
            raise StoreError(missing(self.path)) from None
        if _identity(self.path) != self.identity:  # replaced while being opened
            db.close()
            raise StoreError(missing(self.path))
        return db

    def replaced(self) -> bool:
        """Whether the file at the store's path is no longer the one this store has open
        (moved aside, deleted, or another put there): a stat, cheap enough for every
        request and every batch."""
        return _identity(self.path) != self.identity

    def close(self) -> None:
        self.db.close()

    # -- writing (the recorder's thread) -------------------------------------------
    def add_many(self, rows: list[dict], dropped: dict | None = None) -> list[int]:
        """Insert verdicts in one transaction; each dict has the columns, and ``raw``
        (bytes or None); ``dropped``: verdicts not recorded since the last call, by
        reason, added to the ``dropped`` table in the same transaction. RETURNS their ids."""
        db = self.db
        ids = []
        db.execute("BEGIN IMMEDIATE")
        try:
            for why, n in (dropped or {}).items():
                if n:
                    db.execute("INSERT INTO dropped (reason, n, last) VALUES (?, ?, ?) "
                               "ON CONFLICT (reason) DO UPDATE SET n = n + excluded.n, "
                               "last = excluded.last", (why, n, self._clock()))
            for r in rows:
                cur = db.execute(
                    "INSERT INTO verdicts (at, user, model, source, sender, subject, label, "
                    "log_odds, p_spam, threshold, action, digest, size, clues, has_raw, "
                    "queue_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (r["at"], r["user"], r["model"], r["source"], r["sender"], r["subject"],
                     r["label"], r["log_odds"], r["p_spam"], r["threshold"], r["action"],
                     r["digest"], r["size"], json.dumps(r["clues"]) if r["clues"] else None,
                     int(r["raw"] is not None), r.get("queue_id")))
                ids.append(cur.lastrowid)
                if r["raw"] is not None:
                    db.execute("INSERT INTO raws (id, raw) VALUES (?, ?)", (cur.lastrowid, r["raw"]))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return ids

    def set_clues(self, verdict_id: int, clues: list, prior: float | None = None) -> None:
        self.db.execute("UPDATE verdicts SET clues = ?, prior = ? WHERE id = ?",
                        (json.dumps(clues), prior, verdict_id))

    def size(self) -> int:
        """Bytes the store occupies on disk: the database file and its write-ahead log."""
        total = 0
        for name in (self.path, f"{self.path}-wal"):
            try:
                total += os.stat(name).st_size
            except FileNotFoundError:
                pass
        return total

    def prune(self) -> int:
        """Apply the retention days and the size cap; RETURNS the rows deleted.

        The data is cut to ``PRUNE_TO`` of the cap, so that what comes in before the
        next prune (the recorder prunes every tenth of the cap) stays under it; then the
        freed pages are given back and the write-ahead log emptied.
        """
        db = self.db
        deleted = self._delete("DELETE FROM verdicts WHERE at < ?",
                               (self._clock() - self.days * 86400,))
        self._cap_users()
        for _ in range(40):  # a tenth at a time: at most 40 rounds however far over
            if self._used() <= self.max_bytes * PRUNE_TO:
                break
            raws = db.execute("SELECT count(*) FROM raws").fetchone()[0]
            if raws:  # the raw messages are most of the bytes: they go first
                cut = db.execute("SELECT id FROM raws ORDER BY id LIMIT 1 OFFSET ?",
                                 (max(0, raws // 10 - 1),)).fetchone()[0]
                db.execute("BEGIN IMMEDIATE")
                db.execute("DELETE FROM raws WHERE id <= ?", (cut,))
                db.execute("UPDATE verdicts SET has_raw = 0 WHERE has_raw AND id <= ?", (cut,))
                db.execute("COMMIT")
            else:
                rows = db.execute("SELECT count(*) FROM verdicts").fetchone()[0]
                if not rows:
                    break
                cut = db.execute("SELECT id FROM verdicts ORDER BY id LIMIT 1 OFFSET ?",
                                 (max(0, rows // 10 - 1),)).fetchone()[0]
                deleted += self._delete("DELETE FROM verdicts WHERE id <= ?", (cut,))
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # a reader's snapshot may delay it
        return deleted

    def _cap_users(self) -> None:
        """Each user's kept messages cut to ``PRUNE_TO`` of ``max_user_bytes`` once past
        it, their oldest first (the rows stay, without their message)."""
        db = self.db
        keep = int(self.max_user_bytes * PRUNE_TO)
        over = db.execute("SELECT user, sum(size) FROM verdicts WHERE has_raw GROUP BY user "
                          "HAVING sum(size) > ?", (self.max_user_bytes,)).fetchall()
        for user, total in over:
            cut, freed = None, 0
            for verdict_id, size in db.execute("SELECT id, size FROM verdicts WHERE has_raw "
                                               "AND user = ? ORDER BY id", (user,)):
                cut, freed = verdict_id, freed + size
                if total - freed <= keep:
                    break
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM raws WHERE id IN (SELECT id FROM verdicts WHERE "
                           "has_raw AND user = ? AND id <= ?)", (user, cut))
                db.execute("UPDATE verdicts SET has_raw = 0 WHERE has_raw AND user = ? "
                           "AND id <= ?", (user, cut))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def _used(self) -> int:
        """Bytes of the database's pages that hold data (the logical size less free pages)."""
        page = self.db.execute("PRAGMA page_size").fetchone()[0]
        pages = self.db.execute("PRAGMA page_count").fetchone()[0]
        free = self.db.execute("PRAGMA freelist_count").fetchone()[0]
        return (pages - free) * page

    def _delete(self, sql: str, args) -> int:
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            n = db.execute(sql, args).rowcount
            db.execute("DELETE FROM raws WHERE id NOT IN (SELECT id FROM verdicts)")
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        return n

    def mark(self, verdict_id: int, taught: str | None, before: str | None) -> None:
        """Record what the page taught a verdict as; inside :meth:`begin_lesson`'s
        transaction when the page teaches (StoreError when the log cannot be written)."""
        try:
            self.db.execute("UPDATE verdicts SET taught = ?, before = ? WHERE id = ?",
                            (taught, before, verdict_id))
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None

    def mark_action(self, verdict_id: int, action: str) -> None:
        """Record what the mail path has done since (a held message ``released``);
        inside :meth:`begin_lesson`'s transaction, as :meth:`mark`."""
        try:
            self.db.execute("UPDATE verdicts SET action = ? WHERE id = ?", (action, verdict_id))
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None

    def begin_lesson(self, verdict_id: int) -> None:
        """Take the log's write lock for one verdict's lesson, before the scorer is told:
        a log that is locked or damaged refuses the lesson while nothing has changed
        (StoreError). :meth:`mark` then writes inside it and :meth:`end_lesson` commits."""
        db = self.db
        try:
            db.execute("BEGIN IMMEDIATE")
            # the row's own pages read and written now: damage there shows before teaching
            db.execute("UPDATE verdicts SET taught = taught WHERE id = ?", (verdict_id,))
        except sqlite3.Error as exc:
            self.end_lesson(commit=False)
            raise StoreError(describe(exc, self.path)) from None

    def end_lesson(self, commit: bool) -> None:
        """Commit the lesson's mark (StoreError when the log will not take it: the caller
        puts the scorer back), or roll it back."""
        db = self.db
        try:
            if db.in_transaction:
                db.execute("COMMIT" if commit else "ROLLBACK")
        except sqlite3.Error as exc:
            try:
                if db.in_transaction:
                    db.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            if commit:
                raise StoreError(describe(exc, self.path)) from None

    def note(self, what: str) -> None:
        """Record an event the page tells every reader of (a log begun anew)."""
        self.db.execute("INSERT INTO events (at, what) VALUES (?, ?)", (self._clock(), what))


def _identity(path) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def _current(db) -> bool:
    """Whether the log has this version's tables and columns (nothing to write)."""
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return ({"verdicts", "raws", "events", "dropped"} <= tables
            and {"prior", "queue_id"} <= {c[1] for c in db.execute("PRAGMA table_info(verdicts)")})


def _add_column(db, column: str) -> None:
    """A column a log written by an older textnb lacks."""
    name = column.split()[0]
    if name not in [c[1] for c in db.execute("PRAGMA table_info(verdicts)")]:
        try:
            db.execute(f"ALTER TABLE verdicts ADD COLUMN {column}")
        except sqlite3.OperationalError as exc:  # another program added it meanwhile
            if "duplicate column" not in str(exc):
                raise
