"""``Sender``: a host's outbox and the one thread at a time that sends it.

Every model a scorer holds (the shared one, users' own) writes its learns to the one
outbox of the host (``outbox``), each entry naming its model, and they are sent in the
file's order by whichever thread drains it: each transaction applies a run of entries of
one model and records the position of the last (``SharedStore.change``), so an entry is
applied exactly once however the sending is interrupted. An entry the store refuses
(``records.REFUSALS``: a relabel or forget it cannot make exactly) is applied as nothing,
and its learn is told why, or, when it was answered already (the database was away),
the refusal is logged.
"""

from __future__ import annotations

import logging
import threading
import time
from itertools import islice

from .database import Item, SharedStore
from .outbox import Outbox
from .records import REFUSALS, refusal
from .schema import StoreUnavailableError

__all__ = ["DRAIN_BATCH", "Sender"]

# Outbox entries sent per transaction when it drains.
DRAIN_BATCH = 256
# After the database was found away, learns go to the outbox without trying it for this
# long (the watcher's next look sends them), so a client never waits out a connection
# timeout per learn.
AWAY_SECONDS = 1.0

log = logging.getLogger("textnb.store")


class Sender:
    """The outbox at ``path`` (``Outbox``), sent through ``store``."""

    def __init__(self, store: SharedStore, path):
        self.store = store
        self.outbox = Outbox(path)
        self._lock = threading.Lock()
        self._done: int | None = None  # the outbox position the database has
        # Outcomes of entries sent by whichever thread drained them, for the learn
        # waiting on each (by position).
        self._waiting: set[int] = set()
        self._outcomes: dict[int, str] = {}
        self._ids: dict[str, int] = {}
        self.away_until = 0.0

    def send(self, model: str, item: Item) -> str | None:
        """Write ``item`` for the model named ``model`` (fsync'd) and send what waits.
        RETURNS its outcome (``SharedStore.change``), or None: it waits in the outbox."""
        with self._lock:
            position = self.outbox.append(model, item)
            self._waiting.add(position)
        if time.monotonic() >= self.away_until:
            try:
                self.drain()
            except StoreUnavailableError:
                self.away_until = time.monotonic() + AWAY_SECONDS
        with self._lock:
            self._waiting.discard(position)
            return self._outcomes.pop(position, None)

    def waiting(self) -> bool:
        """Whether entries wait that the database may lack."""
        return bool(self.waiting_count())

    def waiting_count(self) -> int:
        """How many entries wait that the database may lack."""
        return len(self.outbox.pending(self._done or 0))

    def drain(self, quiet: bool = False) -> dict[int, str]:
        """Send the entries the database lacks, in order, each exactly once. RETURNS
        {position: outcome} of those sent; StoreUnavailableError when the database is
        away (``quiet``: then {} is returned)."""
        sent: dict[int, str] = {}
        with self._lock:
            try:
                if self._done is None:
                    self._done = self.store.outbox_position(self.outbox.id)
                    self.outbox.settle(self._done)
                pending = self.outbox.pending(self._done)
                while pending:
                    name = pending[0][1]
                    run = list(islice(pending, DRAIN_BATCH))
                    run = run[:next((i for i, e in enumerate(run) if e[1] != name), len(run))]
                    if name not in self._ids:
                        self._ids[name] = self.store.require(name).id
                    outcomes, _ = self.store.change(self._ids[name], [e[2] for e in run],
                                                    outbox=(self.outbox.id, run[-1][0]))
                    sent.update(zip((e[0] for e in run), outcomes))
                    for (position, _, item), outcome in zip(run, outcomes):
                        if outcome in REFUSALS and position not in self._waiting:
                            log.warning("model '%s': an outbox entry (%s) was not applied: %s",
                                        name, item.kind.lower(),
                                        refusal(outcome, f"message {item.digest.hex()[:16]}"))
                    self._outcomes.update((p, sent[p]) for p in self._waiting if p in sent)
                    self._done = run[-1][0]
                    pending = pending[len(run):]
                self.outbox.settle(self._done)
            except StoreUnavailableError:
                self._done = None  # ask the database again: a commit may have been lost
                if not quiet:
                    raise
        return sent

    def close(self) -> None:
        self.outbox.close()
