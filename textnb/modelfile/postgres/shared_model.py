"""``SharedModel``: a model of the shared store held in memory, following its log.

Scoring reads only memory: the filter here is a SpamFilter like a model file's, and no
verdict waits for the database. Learning goes to the database (``SharedStore.change``),
and the model then applies the log's records past the number it holds, its own change
among them (``catch_up``), so an acknowledged learn is in this host's next verdict. The
other hosts apply the same record when ``pg_notify`` wakes their listener (``follow``),
or at their next poll if a notification was lost (a listener reconnecting).

A new host starts from the newest snapshot (a model file's bytes) and the log's tail.
Every ``FOLD_EVERY`` records a host folds the log into a new snapshot (``fold``).

The database away: scoring goes on from memory. With an outbox (``Outbox``), every learn
is first written there, fsync'd, then sent; when sending fails it waits there, the
client is told what the ledger in memory predicts (as the file store tells it), and the
entries are sent in order, each exactly once, when the database is back (``Sender``:
the host's one outbox, which users' models served beside this one share).
Without an outbox (the batch commands), the command fails, naming the store.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import islice

from ...config import config_from_dict
from ...labels import LABELS
from ...models.ledger import normalise, tokens_hash
from ...spamfilter import SpamFilter
from .database import CHANNEL, Item, RefusedChange, SharedStore
from .outbox import Outbox
from .sender import Sender
from .records import REFUSALS, Record, apply, apply_tuning, decode_record, message_counts, refusal
from .schema import StoreError, StoreUnavailableError, connect

__all__ = ["FOLD_EVERY", "POLL_SECONDS", "SharedModel", "new_filter_config"]

log = logging.getLogger("textnb.store")

# Records between snapshots. A joining host applies at most this many on top of the
# newest snapshot; each fold writes the whole model (a few MB for SpamAssassin's).
FOLD_EVERY = 1000
# How often a follower asks for records when no notification came (a lost one).
POLL_SECONDS = 1.0
# Messages per transaction for the batch commands (train, retrain, forget): large enough
# that commits are few, small enough that hosts learning at once wait little for a row.
BATCH = 256
# Tokenised once at start, so that spaCy is built before the first request.
WARM_UP = b"Subject: warm-up\nFrom: textnb <textnb@localhost>\n\nwarm up http://example.com/\n"


def new_filter_config(config) -> dict:
    """A FilterConfig as a stored model keeps it; StoreError for what the log cannot
    carry (numeric features beside the tokens are learned from the mail, which the
    ledger does not keep). Its ``training.regime`` is ``all``: the store's hosts learn
    every message they are given (a thick pass scores each by the model of the ones
    before it, one at a time, in one process)."""
    if getattr(config.model, "numeric_model", "none") not in (None, "none"):
        raise StoreError("a shared store keeps token counts only; train with "
                         "--set model.numeric_model=none")
    return config.learning_every_message().to_dict()


def _apply_record(spam_filter: SpamFilter, record: Record, source: str) -> None:
    """A record's changes, then its tuning, applied to a filter (its reset is the
    caller's: a new filter). source (str): how messages name the model."""
    apply(spam_filter, record.changes)
    if record.tuning is not None:
        apply_tuning(spam_filter, record.tuning, source)


class SharedModel:
    """The model ``name`` of the store at ``url``, loaded and kept up to date.

    outbox (path | Sender | None): the host's outbox file (a scorer's), or the Sender of
        one that other models of the host share; None: learns fail when the database is
        away (StoreUnavailableError).
    """

    def __init__(self, url: str, name: str, outbox=None, fold_every: int = FOLD_EVERY):
        self.url, self.name = url, name
        self.store = SharedStore(url)
        stored = self.store.require(name)
        self.model_id = stored.id
        self.path = f"{self.store.shown} model '{name}'"
        self.fold_every = fold_every
        self.lock = threading.RLock()  # scoring and applying records
        self.loads = self.learned = self.queued = 0
        self._owns_sender = outbox is not None and not isinstance(outbox, Sender)
        self.sender = Sender(self.store, outbox) if self._owns_sender else outbox
        self.spam_filter, self.seq = self._start(stored.config)
        self._folded = self.store.snapshot_seq(self.model_id)
        self.catch_up()
        if self.sender is not None:
            self.sender.drain(quiet=True)

    @property
    def outbox(self) -> Outbox | None:
        return None if self.sender is None else self.sender.outbox

    def store_gauges(self) -> tuple[int, int]:
        """(the log record held, the learns waiting in the outbox that the database may
        lack): what ``serve --store --metrics`` exports beside the scorer's counters."""
        return int(self.seq), 0 if self.sender is None else self.sender.waiting_count()

    # -- following the log -------------------------------------------------------------
    def _start(self, config: dict) -> tuple[SpamFilter, int]:
        """A filter from the newest snapshot (and its number), else an empty one."""
        from ..store import loads

        snapshot = self.store.snapshot(self.model_id)
        self.loads += 1
        if snapshot is None:
            return self._fresh(config), 0
        return self._keep_tokenizer(loads(snapshot[1], self.path)), snapshot[0]

    def _fresh(self, config: dict) -> SpamFilter:
        return self._keep_tokenizer(SpamFilter(config_from_dict(config)))

    def _keep_tokenizer(self, spam_filter: SpamFilter) -> SpamFilter:
        old = getattr(self, "spam_filter", None)
        if old is not None and old._tokenizer is not None \
                and old.config.tokenizer == spam_filter.config.tokenizer:
            spam_filter._tokenizer = old._tokenizer  # spaCy built once per process
        return spam_filter

    def catch_up(self) -> int:
        """Apply the log's records past the one the model holds; RETURNS how many.
        StoreUnavailableError when the database is away (the model stays as it is)."""
        applied = 0
        while True:
            raw, head = self.store.records_after(self.model_id, self.seq)
            if head <= self.seq:
                return applied
            records = [(seq, decode_record(data)) for seq, data in raw]
            if records and records[0][1].reset is not None:
                applied += self._rebuild(records, head)
                continue
            with self.lock:
                first = records[0][0] if records else head + 1
                if first > self.seq + 1:
                    self._reload(first)  # folded into a snapshot past this model
                    continue
                applied += self._apply_records(records)

    def _apply_records(self, records: list[tuple[int, Record]]) -> int:
        """Apply decoded records that follow on from the model's (call holding the lock)."""
        applied = 0
        for seq, record in records:
            if seq <= self.seq:
                continue  # another thread applied it meanwhile
            if record.reset is not None:
                self.spam_filter = self._fresh(record.reset)
            _apply_record(self.spam_filter, record, self.path)
            self.seq = seq
            applied += 1
        return applied

    def _rebuild(self, records: list[tuple[int, Record]], head: int) -> int:
        """A model started afresh (the first record is a reset: ``train`` or ``tune
        --write`` into the store), built from the records up to ``head`` beside the one
        that scores, then swapped in: verdicts meanwhile come from the old model, whole,
        never from a half-built one, and do not wait for the building.
        RETURNS how many records it applied (0: another thread got as far first)."""
        spam_filter, seq, applied = None, self.seq, 0
        while True:
            for number, record in records:
                if record.reset is not None:
                    spam_filter = self._fresh(record.reset)
                _apply_record(spam_filter, record, self.path)
                seq, applied = number, applied + 1
            if seq >= head:
                break
            raw, head = self.store.records_after(self.model_id, seq)
            if not raw or raw[0][0] != seq + 1:
                break  # folded meanwhile: what is built is swapped in, then the snapshot
            records = [(number, decode_record(data)) for number, data in raw]
        with self.lock:
            if self.seq >= seq:
                return 0
            self.spam_filter, self.seq = spam_filter, seq
        return applied

    def snapshot_at(self, head: int, read) -> bytes:
        """The model file's bytes of this model at record ``head``, its records up to it
        read with ``read(after)`` (``SharedStore.copy_model``'s callback)."""
        from ..store import dumps

        with self.lock:
            records = [(seq, decode_record(data)) for seq, data in read(self.seq)
                       if seq <= head] if self.seq < head else []
            if records and records[0][0] != self.seq + 1 and records[0][1].reset is None:
                raise StoreError(f"{self.path} is behind a snapshot; try again after its "
                                 "next poll")
            self._apply_records(records)
            if self.seq != head:
                raise StoreError(f"{self.path} holds record {self.seq}, not {head}")
            if not hasattr(self.spam_filter.model, "class_count_"):
                return None  # nothing learned: the copy starts empty
            return dumps(self.spam_filter, self.seq)

    def _reload(self, first: int) -> None:
        """Start again from the newest snapshot (call holding the lock), which must reach
        the record before ``first``."""
        from ..store import loads

        snapshot = self.store.snapshot(self.model_id)
        if snapshot is None or snapshot[0] < first - 1:
            raise StoreError(f"{self.path}: the log starts at record {first} and no snapshot "
                             f"reaches it (this model holds {self.seq}); the store was "
                             "changed outside textnb")
        self.spam_filter = self._keep_tokenizer(loads(snapshot[1], self.path))
        self.seq = snapshot[0]
        self.loads += 1

    def follow(self, stop: threading.Event, poll: float = POLL_SECONDS) -> threading.Thread:
        """A thread that applies new records as notifications announce them (and every
        ``poll`` seconds regardless), and sends the outbox when the database is back,
        until ``stop`` is set."""
        thread = threading.Thread(target=self._follow, args=(stop, poll),
                                  name="textnb-store-follow", daemon=True)
        thread.start()
        return thread

    def _follow(self, stop: threading.Event, poll: float) -> None:
        import psycopg

        mine = f"{self.model_id} "
        while not stop.is_set():
            conn = None
            try:
                conn = connect(self.url, autocommit=True)
                conn.execute(f"LISTEN {CHANNEL}")
                last = 0.0
                while not stop.is_set():
                    woken = any(n.payload.startswith(mine)
                                for n in conn.notifies(timeout=min(poll, 0.25), stop_after=1))
                    if woken or time.monotonic() - last >= poll:
                        last = time.monotonic()
                        self.check()
            except (StoreUnavailableError, psycopg.OperationalError) as exc:
                log.warning("%s: the store is away (%s); scoring from memory",
                            self.path, " ".join(str(exc).split()))
                stop.wait(poll)
            except Exception:  # noqa: BLE001 - a stopped follower would follow no more
                log.exception("%s: following the log failed", self.path)
                stop.wait(poll)
            finally:
                if conn is not None:
                    conn.close()

    # -- learning ----------------------------------------------------------------------
    def _item(self, kind: str, raw: bytes, label: str | None) -> Item:
        """The update as an item, with the message's counts: a FORGET carries them too,
        for a message whose ledger row came with a model file and holds none."""
        if not (kind == "FORGET" or (kind == "LEARN" and label in LABELS)):
            raise ValueError(f"unknown update {kind} {label!r}; use LEARN spam|ham or FORGET")
        norm = normalise(raw)
        with self.lock:  # the tokenizer's caches are not for threads
            tokens = self.spam_filter.tokens(norm)
        tokens_list, tf = message_counts(tokens)
        return Item(kind, hashlib.sha256(norm).digest(), label if kind == "LEARN" else None,
                    tokens_list, tf, tokens_hash(tokens))

    def update(self, kind: str, raw: bytes, label: str | None = None,
               apply_by: float | None = None) -> str:
        """Learn (kind 'LEARN', label 'spam'/'ham') or forget ('FORGET') one message, as
        the scorer's clients ask. RETURNS as ``Lifecycle.update``: 'new', 'moved' or
        'known'; the label forgotten or 'not-found'. With the database away and an outbox,
        the outcome the ledger in memory predicts; the change is made when it is back."""
        item = self._item(kind, raw, label)
        if apply_by is not None and time.monotonic() > apply_by:
            raise TimeoutError("it waited too long for the model (--timeout); send it again")
        if self.sender is None:
            (outcome,), _ = self.store.change(self.model_id, [item])
        else:
            outcome = self.sender.send(self.name, item)
            if outcome is None:  # waiting in the outbox
                self.queued += 1
                outcome = self._predicted(item)
        if outcome in REFUSALS:
            raise StoreError(refusal(outcome, "the message"))
        self.learned += 1
        if self.sender is None or time.monotonic() >= self.sender.away_until:
            try:
                self.catch_up()
            except StoreUnavailableError:  # learned (or queued); applied at the next poll
                pass
        return outcome

    def _predicted(self, item: Item) -> str:
        with self.lock:
            now = self.spam_filter.ledger.label(item.digest)
        if item.kind == "FORGET":
            return now or "not-found"
        return "new" if now is None else "known" if now == item.label else "moved"

    def drain(self, quiet: bool = False) -> dict[int, str]:
        """Send what waits in the host's outbox (``Sender.drain``); {} without one."""
        return {} if self.sender is None else self.sender.drain(quiet)

    def learn_messages(self, messages: Iterable, kind: str = "LEARN",
                       progress: Callable[[int], None] | None = None) -> dict:
        """Learn (or forget) many labelled messages (RawMessage), ``BATCH`` per
        transaction (``textnb train``/``retrain``/``forget`` into a store). RETURNS
        counts of each outcome per label: {'new': {...}, 'moved': {...}, 'known': n,
        'forgotten': {...}, 'not_found': n, 'read': n}."""
        report = {"read": 0, "new": dict.fromkeys(LABELS, 0), "moved": dict.fromkeys(LABELS, 0),
                  "known": 0, "forgotten": dict.fromkeys(LABELS, 0), "not_found": 0}
        for batch, items in self._batches(messages, kind, self.spam_filter):
            try:
                outcomes, _ = self.store.change(self.model_id, items, all_or_none=True)
            except RefusedChange as refused:
                raise StoreError(refusal(refused.outcome,
                                         f"message {batch[refused.index].source!r}")) from None
            for item, outcome in zip(items, outcomes):
                report["read"] += 1
                if outcome in ("new", "moved"):
                    report[outcome][item.label] += 1
                elif outcome in LABELS:
                    report["forgotten"][outcome] += 1
                elif outcome == "not-found":
                    report["not_found"] += 1
                else:
                    report["known"] += 1
            if progress:
                progress(len(items))
        return report

    @staticmethod
    def _batches(messages: Iterable, kind: str, spam_filter: SpamFilter
                 ) -> Iterator[tuple[list, list[Item]]]:
        """The messages, ``BATCH`` at a time (a transaction's worth), and their items to
        learn (kind 'LEARN') or forget, with their counts (tokenised by ``spam_filter``:
        a forget of a message whose ledger row came with a model file needs them)."""
        iterator = iter(messages)
        while batch := list(islice(iterator, BATCH)):
            norms = [normalise(m.raw) for m in batch]
            items = []
            for m, norm, tokens in zip(batch, norms, spam_filter.tokens_many(norms)):
                if kind == "LEARN" and m.label not in LABELS:
                    raise StoreError(f"message {m.source!r} has no label; give it as "
                                     "--spam or --ham, or through an index file")
                items.append(Item(kind, hashlib.sha256(norm).digest(),
                                  m.label if kind == "LEARN" else None,
                                  *message_counts(tokens), tokens_hash(tokens)))
            yield batch, items

    def replace(self, config: dict, messages: Iterable, calibration: dict | None,
                progress: Callable[[int], None] | None = None) -> int:
        """Replace the stored model, in one transaction, by one with ``config`` that
        learned ``messages`` (labelled RawMessage) and carries ``calibration``
        (``textnb tune --write``; ``SharedStore.replace``), then apply it here.
        RETURNS the number of the record that set the calibration."""
        tokenizing = self._fresh(config)  # the new settings' tokenizer (spaCy kept)
        # Every message is tokenised before the transaction, which then holds the model's
        # row (and so every other host's learn) only while it writes.
        batches = []
        for _, items in self._batches(messages, "LEARN", tokenizing):
            batches.append(items)
            if progress:
                progress(len(items))
        head = self.store.replace(self.model_id, config, batches, calibration)
        self.catch_up()
        return head

    # -- snapshots, and the interface the scorer uses ----------------------------------
    def fold(self, force: bool = False) -> bool:
        """Fold the log into a snapshot of the model as this host holds it, when
        ``fold_every`` records have come since the last (or any, with ``force``)."""
        from ..store import dumps

        if not force and self.seq - self._folded >= self.fold_every:
            # Another host may have folded already: a query, not a whole model's dump.
            self._folded = max(self._folded, self.store.snapshot_seq(self.model_id))
        with self.lock:
            if self.seq <= self._folded or not (force or self.seq - self._folded
                                                 >= self.fold_every):
                return False
            if not hasattr(self.spam_filter.model, "class_count_"):
                return False  # nothing learned yet: nothing to snapshot
            data, seq = dumps(self.spam_filter, self.seq), self.seq
        done = self.store.fold(self.model_id, seq, data)
        self._folded = max(self._folded, seq)
        return done

    def check(self) -> bool:
        """The scorer's watcher: send what waits in the outbox, apply new records (the
        poll behind the notifications) and fold when due. RETURNS False (no reload)."""
        try:
            if self.sender is not None and self.sender.waiting():
                self.sender.drain()
            self.catch_up()
            self.fold()
        except StoreUnavailableError:
            pass  # scoring goes on from memory; the next look tries again
        return False

    def warmed(self) -> "SharedModel":
        """This model, its tokenizer built (spaCy's load, most of a first verdict's time)
        before the first request rather than during it, as the file scorer warms up."""
        with self.lock:
            self.spam_filter.tokens(WARM_UP)
        return self

    def strings(self) -> int:
        return len(self.spam_filter.tokenizer.spacy.vocab.strings)

    @property
    def unwritten(self) -> bool:
        return False  # the database has every acknowledged learn, or the outbox does

    def flush(self, force: bool = False) -> bool:
        try:
            return self.fold(force=force)
        except StoreUnavailableError:
            return False

    def for_scoring(self, user: str | None):
        if user is not None:
            raise StoreError("this scorer serves one shared model; give each user's model "
                             "its own --store-model and scorer")
        return self, "model"

    def for_learning(self, user: str | None):
        return self.for_scoring(user)[0]

    def loaded(self) -> list["SharedModel"]:
        return [self]

    def close(self) -> None:
        self.store.close()
        if self._owns_sender:
            self.sender.close()
