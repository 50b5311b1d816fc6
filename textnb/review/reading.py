"""The verdict log as the review page reads it: history, search, the review queue, one
verdict and its message, and the statistics' counts.

Reading costs the page a bounded amount whatever the log's size: every list is an
index range read newest first and cut at a page (``id < before``, never OFFSET, never a
count of the table), and a search looks at no more than ``SEARCH_ROWS`` rows a page
(docs/review-page.md#pages-under-load). :class:`LogReading` holds the queries;
:class:`textnb.review.store.VerdictStore`, which opens, writes and prunes the log, is
one.
"""

from __future__ import annotations

import re
import sqlite3

from .rows import COLUMNS, HELD, Row, StoreError, describe, row_from

__all__ = ["LogReading", "SEARCH_ROWS"]

# A search page looks at no more than this many rows (the user's, newest first, before
# the page's start). Sender and subject are in the index of a user's rows (an index
# range holds what the search matches, without a look-up of each row), so a search
# page's matching has a small fixed bound however long the history is
# (docs/design/review-page.md#searching-the-log).
# When they hold less than a page of matches, the page says how far back it looked and
# its "Older" goes on from there.
SEARCH_ROWS = 2000


class LogReading:
    """The page's queries on an open log: ``db`` (sqlite3.Connection), ``path``, ``days``
    (the retention) and ``_clock`` are the store's (textnb.review.store.VerdictStore)."""

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
                rows = self.db.execute(f"SELECT {COLUMNS} FROM verdicts{where} "
                                       "ORDER BY id DESC LIMIT ?", (*values, limit + 1)).fetchall()
                more = len(rows) > limit
                rows = [row_from(v) for v in rows[:limit]]
                return rows, (rows[-1].id if more else None)
            # the window: the SEARCH_ROWS rows the search looks at, ending (on the index)
            # before the first row past it
            past = self.db.execute(f"SELECT id FROM verdicts{where} ORDER BY id DESC "
                                   "LIMIT 1 OFFSET ?", (*values, SEARCH_ROWS)).fetchone()
            like = "%" + re.sub(r"([\\%_])", r"\\\1", search) + "%"
            where, values = self._where(user, " AND ".join(
                [*extra, "id > ?", "(sender LIKE ? ESCAPE '\\' OR subject LIKE ? ESCAPE '\\')"]),
                [*args, past[0] if past else -1, like, like])
            rows = self.db.execute(f"SELECT {COLUMNS} FROM verdicts{where} "
                                   "ORDER BY id DESC LIMIT ?", (*values, limit + 1)).fetchall()
            if len(rows) > limit:
                rows = [row_from(v) for v in rows[:limit]]
                return rows, rows[-1].id
            return [row_from(v) for v in rows], (past[0] + 1 if past else None)
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None

    def queue(self, user: str | None, after: tuple[float, int] | None = None, limit: int = 50,
              sender: str = "", subject: str = "", label: str = "",
              since: float | None = None, until: float | None = None, held: bool = False
              ) -> tuple[list[Row], tuple[float, int] | None]:
        """A page of the review queue (a message kept, not taught yet), the verdicts
        closest to their threshold first (the likeliest mistakes), then the newest:
        ``user``'s (None: everybody's), past the cursor ``after`` (the distance and id of
        the previous page's last row), filtered by sender and subject (contains), label,
        time (``since`` <= at < ``until``), and with ``held`` only mail the milter holds
        (``quarantined``, textnb.review.release). RETURNS (rows, the next page's cursor or
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
        if held:
            extra.append("action = ?")
            args.append(HELD)
        where, values = self._where(user, " AND ".join(extra), args)
        try:
            found = self.db.execute(f"SELECT {COLUMNS} FROM verdicts{where} "
                                    f"ORDER BY {close}, id DESC LIMIT ?",
                                    (*values, limit + 1)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None
        rows = [row_from(v) for v in found[:limit]]
        if len(found) <= limit:
            return rows, None
        last = rows[-1]
        return rows, (abs(last.log_odds - last.threshold), last.id)

    def recently_taught(self, user: str | None, limit: int = 20) -> list[Row]:
        """The verdicts the page taught last, newest first."""
        where, values = self._where(user, "taught IS NOT NULL")
        try:
            return [row_from(v) for v in self.db.execute(
                f"SELECT {COLUMNS} FROM verdicts{where} ORDER BY id DESC LIMIT ?",
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
            found = self.db.execute(f"SELECT {COLUMNS} FROM verdicts{where}", values).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None
        return row_from(found) if found else None

    def raw(self, verdict_id: int) -> bytes | None:
        try:
            found = self.db.execute("SELECT raw FROM raws WHERE id = ?",
                                    (verdict_id,)).fetchone()
        except sqlite3.Error as exc:
            raise StoreError(describe(exc, self.path)) from None
        return bytes(found[0]) if found else None

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
