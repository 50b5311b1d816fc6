"""Recording verdicts without ever holding up the mail: ``textnb serve|milter --record DB``.

The scorer's worker (or the milter's) calls :meth:`VerdictRecorder.submit` once it has
the verdict, outside the model's lock: an append to a bounded in-memory queue, which
never blocks and never raises. One writer thread takes what is queued (up to ``BATCH``
at a time, when the scorer pauses or a batch is full), reads From and Subject, and inserts
the batch in one transaction (:class:`textnb.review.store.VerdictStore`). When the queue
is full the verdict is dropped; when the store cannot be written (locked past its wait,
a full disk, a damaged file) the batch is dropped, the store is closed and opened again
after ``RETRY_SECONDS``; either way the mail path never waits, and ``counts`` (which
``textnb serve --metrics`` exports as ``textnb_recorded_verdicts_total{outcome}``) says
how many were recorded and how many dropped, and why. The dropped are also written to
the store with the next batch that gets in (``dropped``), for the page to show.

A log moved aside or deleted while the writer runs (the fix for a damaged one) is
noticed before the next batch (the file at the path is not the one open): the writer
lets go of it and begins a new log at the path, once no other process (``textnb
web``) has the old one open, since SQLite names a log's write-ahead files by its path
(:func:`textnb.review.logfile.held_elsewhere`); the verdicts wait in the queue meanwhile,
and the new log records that it was begun anew.

Clues: a verdict in the review band gets the ``CLUES`` strongest of
``SpamFilter.explain``, computed by the writer after its row is in, with the model's lock
held (the tokenizer is not meant for threads), only while the scorer is idle (no
verdict for ``IDLE_SECONDS``, the lock free within ``CLUE_WAIT``), and for at most
``EXPLAIN_SHARE`` of the time: an explanation costs about two scores, and a verdict that
comes while one runs waits for it (docs/review-page.md#the-cost-of-recording). Verdicts
that get no clues in time (a busy scorer, more kept verdicts than the share explains)
are recorded without them, and the page says so. Other verdicts get none (their raw
message is not kept either, so the page has nothing to explain).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from pathlib import Path

from ..delivery.hold_queue import valid_queue_id
from ..delivery.request_reader import Throttle
from .headers import HEAD_BYTES, headers_of
from .logfile import held_elsewhere
from .rows import describe, reason
from .store import PRUNE_TO, REVIEW_BAND, USER_SHARE, VerdictStore, in_review_band

__all__ = ["BATCH", "CLUES", "QUEUE", "VerdictRecorder"]

log = logging.getLogger("textnb.review")

# Verdicts waiting for the writer. At 1,000 a second (beyond what one scorer answers on
# two cores) the writer would have to stall for 10 s before any is dropped; each entry
# holds its message (up to --max-bytes), so the bound is also a memory bound.
QUEUE = 10_000
# Bytes of messages waiting for the writer: a verdict in the review band queues its
# message (up to max_raw), any other only its head (HEAD_BYTES).
QUEUE_BYTES = 64 * 2**20
# Verdicts inserted per transaction (one commit per batch instead of per verdict), and
# at most a twentieth of the size cap in messages, so a batch never carries the store
# far past a prune.
BATCH = 256
CLUES = 8
CLUE_WAIT = 0.005
# After a failed write the store is opened again this much later (and then retried).
RETRY_SECONDS = 2.0
# While the old log's last readers let go of its write-ahead files, the writer looks
# again this often.
WAIT_SECONDS = 0.1
# Pruned (retention and size caps) every this many verdicts, or a tenth of the cap
# recorded (less when a user's cap is smaller), and at least this often.
PRUNE_EVERY = 500
PRUNE_SECONDS = 60.0
OUTCOMES = ("recorded", "queue_full", "locked", "full", "damaged", "error", "explained")
DROPPED = ("queue_full", "locked", "full", "damaged", "error")
# Clues are computed only once no verdict has come for this long, and then one message
# at a time: explaining costs about what scoring does (it tokenises the message again,
# under the model's lock), so computed between verdicts it would add to their latency.
IDLE_SECONDS = 0.05
# Explaining holds the model's lock, so a verdict asked for meanwhile waits for it, and
# a pause in the mail says nothing of when the next message comes: clues take at most
# this share of the time (by the wall clock, so a busy machine, where each takes
# longer, gets fewer). A verdict then meets an explanation in progress about as often
# as this share, which keeps it out of the 95th percentile; explaining in every pause
# did not, under a steady stream of mail with the page loaded on both cores
# (docs/review-page.md#the-cost-of-recording).
EXPLAIN_SHARE = 0.02
# Verdicts waiting for their clues (and at most queue_bytes of their messages); past
# it the oldest is recorded without them.
MAX_PENDING = 1000


class VerdictRecorder:
    """The queue and the writer thread in front of a :class:`VerdictStore`.

    path (Path): the SQLite file.
    days (float), max_bytes (int): the store's retention and size cap.
    review_band (float): see :func:`textnb.review.store.in_review_band`.
    queue_size (int): verdicts waiting at most; more are dropped (``queue_full``).
    max_raw (int | None): the longest raw message kept; None: a twentieth of max_bytes.
    default_user (str): the user of verdicts given without one.
    max_user_bytes (int | None): one user's kept messages at most; None: ``USER_SHARE``
        of max_bytes.
    """

    def __init__(self, path, days: float = 30.0, max_bytes: int = 200 * 2**20, *,
                 review_band: float | None = None, queue_size: int = QUEUE,
                 queue_bytes: int = QUEUE_BYTES,
                 max_raw: int | None = None, default_user: str = "", clock=time.time,
                 open_store=None, max_user_bytes: int | None = None):
        self.path, self.days, self.max_bytes = path, days, max_bytes
        self.max_user_bytes = (int(max_bytes * USER_SHARE) if max_user_bytes is None
                               else max_user_bytes)
        self.review_band = REVIEW_BAND if review_band is None else review_band
        self.max_raw = max_bytes // 20 if max_raw is None else max_raw
        self.default_user = default_user
        self.queue_size, self.queue_bytes = queue_size, queue_bytes
        self.queued_bytes = 0  # approximate: workers add, the writer subtracts
        self._clock = clock
        self._open_store = open_store or (lambda: VerdictStore(
            path, days, max_bytes, clock=clock, max_user_bytes=self.max_user_bytes))
        self._queue: collections.deque = collections.deque()
        self._wake = threading.Condition(threading.Lock())
        self._stop = False
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self._dropped_written = dict.fromkeys(DROPPED, 0)  # what the store has been told
        self.problem: str | None = None  # what is wrong with the store now, for the log
        self._throttle = Throttle()
        self._store = None
        self._retry_at = 0.0
        self._last_reason = "error"  # why the store failed last (a metrics label)
        self._since_prune, self._pruned_at, self._bytes_since_prune = 0, 0.0, 0
        self._pending: collections.deque = collections.deque()  # (id, raw, explainer) without clues
        self._pending_bytes = 0
        self._last_submit = 0.0
        self._explain_after = 0.0  # no explaining before this (EXPLAIN_SHARE)
        self._waiting = False  # a new log waits for the old one's readers to let go
        self._begun_anew = False  # the log was moved or deleted under the writer
        self._thread = threading.Thread(target=self._run, name="textnb-record", daemon=True)

    def start(self) -> "VerdictRecorder":
        """Open the store (a store that cannot be opened is retried later: the scorer
        serves regardless) and start the writer."""
        self._reopen()
        self._thread.start()
        return self

    # -- the mail path's side: never blocks, never raises ---------------------------
    def submit(self, raw: bytes, verdict, *, user: str | None, model: str,
               source: str = "serve", action: str = "scored", explainer=None,
               queue_id: str | None = None) -> bool:
        """Queue one verdict; False (counted) when the queue is full.

        verdict: has label, log_odds, p_spam, threshold (textnb.delivery.verdict_headers.Verdict).
        explainer ((ResidentModel-like) | None): has ``spam_filter`` and ``lock``; the
            writer asks it for the clues of a verdict in the review band.
        queue_id (str | None): the MTA's queue id (the milter's), kept only when it is a
            Postfix queue id (textnb.delivery.hold_queue.valid_queue_id).
        """
        try:
            keep = in_review_band(verdict.label, verdict.log_odds, verdict.threshold,
                                  self.review_band) and len(raw) <= self.max_raw
            size = len(raw)
            if not keep:
                raw = raw[:HEAD_BYTES]  # From and Subject are all the row needs
            if (len(self._queue) >= self.queue_size
                    or self.queued_bytes + len(raw) > self.queue_bytes):
                self.counts["queue_full"] += 1
                return False
            self.queued_bytes += len(raw)
            self._last_submit = time.monotonic()
            self._queue.append((self._clock(), raw, size, keep, verdict, user, model, source,
                                action, explainer, queue_id))
            if len(self._queue) == BATCH:  # else the writer waits for a pause
                with self._wake:
                    self._wake.notify()
            return True
        except Exception:  # noqa: BLE001 - recording must never fail a verdict
            self.counts["error"] += 1
            return False

    # -- the writer thread -------------------------------------------------------------
    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (within ``timeout``), then stop and close the store."""
        with self._wake:
            self._stop = True
            self._wake.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._store is not None:
            try:
                self._store.close()
            except Exception:  # noqa: BLE001 - closing at shutdown; nothing left to lose
                pass

    def _run(self) -> None:
        while True:
            with self._wake:
                if len(self._queue) < BATCH and not self._stop:
                    self._wake.wait(IDLE_SECONDS if self._queue or self._pending else 1.0)
                stopping = self._stop
            idle = time.monotonic() - self._last_submit >= IDLE_SECONDS
            batch, size = [], 0
            while (self._queue and len(batch) < BATCH and size < self.max_bytes // 20
                   and (idle or stopping or len(self._queue) >= BATCH)):
                batch.append(self._queue.popleft())
                size += len(batch[-1][1])
                self.queued_bytes -= len(batch[-1][1])
            if batch:
                self._write(batch)
            elif stopping:
                return
            self._maybe_prune()
            self._explain_while_idle()

    def _explain_while_idle(self) -> None:
        """Give the verdicts waiting for clues theirs, one at a time, while no verdict
        has come for ``IDLE_SECONDS`` (the scorer is idle) and none is queued, and at
        most ``EXPLAIN_SHARE`` of the time: after an explanation that took t seconds,
        the next waits t / EXPLAIN_SHARE from its start."""
        while (self._pending and not self._queue and not self._stop
               and time.monotonic() - self._last_submit >= IDLE_SECONDS
               and time.monotonic() >= self._explain_after):
            verdict_id, raw, explainer = self._pending[0]
            if not explainer.lock.acquire(timeout=CLUE_WAIT):
                return  # a verdict is being scored after all: try in the next pause
            started = time.monotonic()
            try:
                clues = self._clues(raw, explainer)
            finally:
                explainer.lock.release()
            took = time.monotonic() - started
            self._explain_after = started + took / EXPLAIN_SHARE
            self._pending.popleft()
            self._pending_bytes -= len(raw)
            if clues is None:
                continue
            try:
                self._store.set_clues(verdict_id, *clues)
            except Exception as exc:  # noqa: BLE001 - the verdict is recorded; clues are extra
                self._failed(exc, 0)
                return
            self.counts["explained"] += 1

    def _write(self, batch: list) -> None:
        if self._store is not None and self._store.replaced():
            self._let_go()
        if self._store is None and not self._reopen():
            if self._waiting and not self._stop:  # the old log's readers are letting go
                self._queue.extendleft(reversed(batch))
                self.queued_bytes += sum(len(entry[1]) for entry in batch)
                return
            self._drop(len(batch), self._last_reason)
            return
        rows = []
        for entry in batch:
            try:
                rows.append(self._row(*entry))
            except Exception:  # noqa: BLE001 - a message the row cannot be made of
                self._throttle.log(logging.ERROR, "a verdict cannot be recorded", exc_info=True)
                self.counts["error"] += 1
            time.sleep(0)  # hand the GIL to a scoring thread that waits for it
        counted = {why: self.counts[why] for why in DROPPED}
        try:
            ids = self._store.add_many(rows, {why: counted[why] - self._dropped_written[why]
                                              for why in DROPPED})
        except Exception as exc:  # noqa: BLE001 - locked, full, damaged: drop and count
            self._failed(exc, len(rows))
            return
        self._dropped_written = counted
        for verdict_id, row in zip(ids, rows):
            explainer = row.pop("explainer")
            if row["raw"] is not None and explainer is not None:
                self._pending.append((verdict_id, row["raw"], explainer))
                self._pending_bytes += len(row["raw"])
                while len(self._pending) > MAX_PENDING or self._pending_bytes > self.queue_bytes:
                    self._pending_bytes -= len(self._pending.popleft()[1])  # the oldest: no clues
        self.counts["recorded"] += len(rows)
        self._since_prune += len(rows)
        self._bytes_since_prune += sum(len(row["raw"] or b"") + 300 for row in rows)
        if self.problem is not None:
            log.info("the verdict log %s is written again", self.path)
            self.problem = None

    def _row(self, at, raw, size, keep, verdict, user, model, source, action, explainer,
             queue_id) -> dict:
        from ..models.ledger import message_digest

        sender, subject = headers_of(raw)
        return {"at": at, "user": user or self.default_user, "model": model, "source": source,
                "sender": sender, "subject": subject, "label": verdict.label,
                "log_odds": float(verdict.log_odds), "p_spam": float(verdict.p_spam),
                "threshold": float(verdict.threshold), "action": action,
                "digest": message_digest(raw).hex() if keep else "", "size": size,
                "clues": None, "raw": bytes(raw) if keep else None, "explainer": explainer,
                "queue_id": queue_id if valid_queue_id(queue_id) else None}

    def _clues(self, raw: bytes, explainer) -> tuple[list, float] | None:
        """(the CLUES strongest [token, contribution], the prior log-odds), as ``textnb
        explain`` gives them, so the page can show what its score is made of."""
        from ..mail.sources import RawMessage

        try:  # the caller holds the model's lock
            found = explainer.spam_filter.explain(RawMessage("-", bytes(raw), None), k=CLUES)
        except Exception:  # noqa: BLE001 - a message explain cannot take is still recorded
            return None
        return ([[token, round(contribution, 3)] for token, contribution, *_ in found.clues],
                round(found.prior_log_odds, 3))

    def _maybe_prune(self) -> None:
        if self._store is None:
            return
        now = time.monotonic()
        # a prune leaves the file at PRUNE_TO of the cap and each user at PRUNE_TO of
        # theirs: the next comes before either could be filled up
        room = min(self.max_bytes // 10, int(self.max_user_bytes * (1 - PRUNE_TO)))
        if (self._since_prune < PRUNE_EVERY and self._bytes_since_prune < room
                and now - self._pruned_at < PRUNE_SECONDS):
            return
        self._since_prune, self._pruned_at, self._bytes_since_prune = 0, now, 0
        try:
            self._store.prune()
        except Exception as exc:  # noqa: BLE001 - the next round tries again
            self._failed(exc, 0)

    def _failed(self, exc: BaseException, dropped: int) -> None:
        self._last_reason = reason(exc)
        self._drop(dropped, self._last_reason)
        self.problem = describe(exc, self.path)
        self._throttle.log(logging.ERROR, "%s; %d verdicts not recorded (mail flows)",
                           self.problem, dropped)
        try:
            self._store.close()
        except Exception:  # noqa: BLE001 - it is being replaced anyway
            pass
        self._store = None
        self._retry_at = time.monotonic() + RETRY_SECONDS

    def _drop(self, n: int, why: str) -> None:
        self.counts[why] = self.counts.get(why, 0) + n

    def _let_go(self) -> None:
        """The file at the log's path is not the one open (moved aside, deleted): close
        it, so that a new log begins at the path (:meth:`_reopen`)."""
        log.warning("the verdict log %s was moved or deleted; a new one begins there",
                    self.path)
        try:
            self._store.close()
        except Exception:  # noqa: BLE001 - it is being replaced anyway
            pass
        self._store, self._begun_anew = None, True

    def _reopen(self) -> bool:
        if time.monotonic() < self._retry_at:
            return False
        self._waiting = False
        if not Path(self.path).exists() and held_elsewhere(self.path):
            # SQLite names a log's write-ahead files by its path: a new log there would
            # share them with the old one's last readers (textnb web) and corrupt both.
            # They let go within a second (textnb.review.web); the verdicts wait.
            self._waiting = True
            self._retry_at = time.monotonic() + WAIT_SECONDS
            return False
        try:
            self._store = self._open_store()
        except Exception as exc:  # noqa: BLE001 - damaged, locked, no space: retried later
            self._store = None
            self._failed(exc, 0)
            return False
        if self._begun_anew and self._store.created:
            try:
                self._store.note("begun anew: the log before was moved aside or deleted "
                                 "while the scorer recorded")
            except Exception as exc:  # noqa: BLE001 - a note the next start gives again
                self._failed(exc, 0)
                return False
        self._begun_anew = False
        return True
