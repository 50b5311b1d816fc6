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

Reading costs the page a bounded amount whatever the log's size: every list is an
index range read newest first and cut at a page (``id < before``, never OFFSET, never a
count of the table), and a search looks at no more than ``SEARCH_ROWS`` rows a page
(docs/review-page.md#pages-under-load).

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
import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from .headers import FIELD_CHARS, HEAD_BYTES, headers_of  # noqa: F401 - part of this module's face

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
# A search page looks at no more than this many rows (the user's, newest first, before
# the page's start). Sender and subject are in the index of a user's rows (an index
# range holds what the search matches, without a look-up of each row), so a search
# page's matching has a small fixed bound however long the history is
# (docs/design/review-page.md#searching-the-log).
# When they hold less than a page of matches, the page says how far back it looked and
# its "Older" goes on from there.
SEARCH_ROWS = 2000
# How long a writer (the recorder, or the page marking a row taught) waits for the other.
BUSY_MS = 1000

_SCHEMA = """
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


_COLUMNS = ("id, at, user, model, source, sender, subject, label, log_odds, p_spam, threshold, "
            "action, digest, size, clues, has_raw, taught, before, prior, queue_id")


def _row(values) -> Row:
    values = list(values)
    values[14] = json.loads(values[14]) if values[14] else []
    values[15] = bool(values[15])
    return Row(*values)


def in_review_band(label: str, log_odds: float, threshold: float,
                   band: float = REVIEW_BAND) -> bool:
    """Whether a verdict's raw message is kept for the review queue."""
    return label in ("spam", "unsure") or abs(log_odds - threshold) < band


class VerdictStore:
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
                db.executescript(_SCHEMA)
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

    # -- reading (the page) --------------------------------------------------------
    def _where(self, user: str | None, extra: str = "", args=()) -> tuple[str, list]:
        clauses, values = [], []
        if user is not None:
            clauses.append("user = ?")
            values.append(user)
        if extra:
            clauses.append(extra)
            values.extend(args)
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", values

    def history(self, user: str | None, search: str = "", before_id: int | None = None,
                limit: int = 50, queue: bool = False) -> list[Row]:
        """Recent verdicts, newest first (:meth:`page`'s rows)."""
        return self.page(user, search, before_id, limit, queue)[0]

    def page(self, user: str | None, search: str = "", before_id: int | None = None,
             limit: int = 50, queue: bool = False) -> tuple[list[Row], int | None]:
        """A page of verdicts, newest first: ``user``'s (None: everybody's), older than
        ``before_id``, those whose sender or subject contains ``search`` among the
        ``SEARCH_ROWS`` rows before ``before_id``; ``queue``: only the review queue (a
        raw message kept, not taught yet). RETURNS (rows, the ``before_id`` of the next
        page, or None when there is nothing older)."""
        extra, args = [], []
        if before_id is not None:
            extra.append("id < ?")
            args.append(before_id)
        if queue:
            extra.append("has_raw AND taught IS NULL")
        where, values = self._where(user, " AND ".join(extra), args)
        try:
            if not search:
                rows = self.db.execute(f"SELECT {_COLUMNS} FROM verdicts{where} "
                                       "ORDER BY id DESC LIMIT ?", (*values, limit + 1)).fetchall()
                more = len(rows) > limit
                rows = [_row(v) for v in rows[:limit]]
                return rows, (rows[-1].id if more else None)
            # the window: the SEARCH_ROWS rows the search looks at, ending (on the index)
            # before the first row past it
            past = self.db.execute(f"SELECT id FROM verdicts{where} ORDER BY id DESC "
                                   "LIMIT 1 OFFSET ?", (*values, SEARCH_ROWS)).fetchone()
            like = "%" + re.sub(r"([\\%_])", r"\\\1", search) + "%"
            where, values = self._where(user, " AND ".join(
                [*extra, "id > ?", "(sender LIKE ? ESCAPE '\\' OR subject LIKE ? ESCAPE '\\')"]),
                [*args, past[0] if past else -1, like, like])
            rows = self.db.execute(f"SELECT {_COLUMNS} FROM verdicts{where} "
                                   "ORDER BY id DESC LIMIT ?", (*values, limit + 1)).fetchall()
            if len(rows) > limit:
                rows = [_row(v) for v in rows[:limit]]
                return rows, rows[-1].id
            return [_row(v) for v in rows], (past[0] + 1 if past else None)
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None

    def queue(self, user: str | None, after: tuple[float, int] | None = None, limit: int = 50,
              sender: str = "", subject: str = "", label: str = "",
              since: float | None = None, until: float | None = None
              ) -> tuple[list[Row], tuple[float, int] | None]:
        """A page of the review queue (a message kept, not taught yet), the verdicts
        closest to their threshold first (the likeliest mistakes), then the newest:
        ``user``'s (None: everybody's), past the cursor ``after`` (the distance and id of
        the previous page's last row), filtered by sender and subject (contains), label,
        and time (``since`` <= at < ``until``). RETURNS (rows, the next page's cursor or
        None). An index range on the distance: the filters cost only the rows they pass
        over, and a user's queue is bounded by the messages kept for them."""
        close = "abs(log_odds - threshold)"
        extra, args = ["has_raw AND taught IS NULL"], []
        if after is not None:
            extra.append(f"({close} > ? OR ({close} = ? AND id < ?))")
            args += [after[0], after[0], after[1]]
        for column, text in (("sender", sender), ("subject", subject)):
            if text:
                extra.append(f"{column} LIKE ? ESCAPE '\\'")
                args.append("%" + re.sub(r"([\\%_])", r"\\\1", text) + "%")
        if label:
            extra.append("label = ?")
            args.append(label)
        if since is not None:
            extra.append("at >= ?")
            args.append(since)
        if until is not None:
            extra.append("at < ?")
            args.append(until)
        where, values = self._where(user, " AND ".join(extra), args)
        try:
            found = self.db.execute(f"SELECT {_COLUMNS} FROM verdicts{where} "
                                    f"ORDER BY {close}, id DESC LIMIT ?",
                                    (*values, limit + 1)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None
        rows = [_row(v) for v in found[:limit]]
        if len(found) <= limit:
            return rows, None
        last = rows[-1]
        return rows, (abs(last.log_odds - last.threshold), last.id)

    def recently_taught(self, user: str | None, limit: int = 20) -> list[Row]:
        """The verdicts the page taught last, newest first."""
        where, values = self._where(user, "taught IS NOT NULL")
        try:
            return [_row(v) for v in self.db.execute(
                f"SELECT {_COLUMNS} FROM verdicts{where} ORDER BY id DESC LIMIT ?",
                (*values, limit))]
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None

    def dropped(self) -> list[tuple[str, int, float]]:
        """(reason, verdicts, when the last was) the recorder could not record, for the
        reasons that dropped one within the retention days."""
        try:
            return self.db.execute("SELECT reason, n, last FROM dropped WHERE n > 0 AND "
                                   "last >= ? ORDER BY reason",
                                   (self._clock() - self.days * 86400,)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None

    def get(self, verdict_id: int, user: str | None) -> Row | None:
        """One verdict, if it is ``user``'s (None: anybody's)."""
        where, values = self._where(user, "id = ?", [verdict_id])
        try:
            found = self.db.execute(f"SELECT {_COLUMNS} FROM verdicts{where}", values).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None
        return _row(found) if found else None

    def raw(self, verdict_id: int) -> bytes | None:
        try:
            found = self.db.execute("SELECT raw FROM raws WHERE id = ?",
                                    (verdict_id,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None
        return bytes(found[0]) if found else None

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

    def events(self) -> list[tuple[float, str]]:
        """(when, what) of the events within the retention days, oldest first."""
        try:
            return self.db.execute("SELECT at, what FROM events WHERE at >= ? ORDER BY at",
                                   (self._clock() - self.days * 86400,)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None

    def counts(self, user: str | None, since: float, bucket: float) -> list[tuple[int, str, int]]:
        """(bucket number, label, verdicts) since ``since``, buckets of ``bucket`` seconds."""
        where, values = self._where(user, "at >= ?", [since])
        return self.db.execute(
            f"SELECT CAST((at - ?) / ? AS INTEGER), label, count(*) FROM verdicts{where} "
            "GROUP BY 1, 2", (since, bucket, *values)).fetchall()

    def scores(self, user: str | None, since: float, limit: int = 20000) -> list[tuple[float, float]]:
        """(log-odds, threshold) of the latest verdicts since ``since``."""
        where, values = self._where(user, "at >= ?", [since])
        return self.db.execute(f"SELECT log_odds, threshold FROM verdicts{where} "
                               "ORDER BY id DESC LIMIT ?", (*values, limit)).fetchall()

    def users(self) -> list[str]:
        return [u for (u,) in self.db.execute("SELECT DISTINCT user FROM verdicts ORDER BY user")]


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
