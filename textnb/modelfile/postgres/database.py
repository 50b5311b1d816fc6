"""``SharedStore``: the transactions on a shared model (tables: ``schema``).

One transaction makes one change set, wherever it comes from (``textnb train`` or
``retrain``, a scorer's LEARN or FORGET, an outbox replayed):

1. **decide** through the ledger, message by message, in digest order (so two change sets
   that share messages lock their rows in one order and never deadlock): a message new to
   the model is inserted (``ON CONFLICT DO NOTHING``: of two hosts learning it at once,
   one inserts, the other waits for it and then finds it known or to be relabelled); a
   known one under another label is relabelled under its row lock (``FOR UPDATE``); a
   forgotten one is deleted under it. The counts that move or leave are the row's; a row
   that came with a model file has none, and the counts of the message the host has in
   hand are used once they give the row's tokens hash (and kept in the row): otherwise
   that message is refused (``records.REFUSALS``), and nothing of it changes;
2. **count**: the changes, with the counts each message carries, become one log record;
3. **apply**: the model's ``head`` moves on by one (its row lock orders the records),
   the record is inserted under that number, an outbox's position is set, and
   ``pg_notify`` tells the listening hosts, all at the commit.

A change set that changes nothing (every message known) writes no record.

``replace`` is ``textnb tune --write``'s: in one transaction the model is reset, learns
the tuning mail a batch per record as above, and takes a tuning record (its decision
settings and calibration), so hosts go from the old model to the tuned one at one commit.

``load_model`` is ``textnb import --store``'s: a model file's model and ledger become a
stored model in one transaction, as a snapshot (the hosts load it as they load a fold)
and ledger rows without counts.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from ...labels import LABELS
from .records import (REFUSALS, Change, Tuning, encode_counts, encode_record,
                      encode_tuning, refusal, row_counts)
from .schema import (StoreError, StoreUnavailableError, allow_absent_counts, connect,
                     ensure_schema, mark_imported, mark_tuned, shown_url)

__all__ = ["CHANNEL", "Item", "RefusedChange", "SharedStore", "StoredModel"]

# The NOTIFY channel; the payload is "<model id> <record number>".
CHANNEL = "textnb_log"
# Attempts at a transaction that the server aborted to break a deadlock or a
# serialization conflict (it is then safe to run again from the start).
RETRIES = 5


class RefusedChange(StoreError):
    """An item of a change set the store refused (``records.REFUSALS``): nothing of the
    set was made. index (int): the item's place in the set; outcome (str): why."""

    def __init__(self, index: int, outcome: str):
        super().__init__(refusal(outcome, f"item {index}"))
        self.index, self.outcome = index, outcome


@dataclass
class Item:
    """One message to learn (``kind`` 'LEARN', with ``label``) or forget ('FORGET').

    tokens, tf, tokens_hash: the message's counts (``records.message_counts``) and tokens
    hash. A relabel or a forget uses those its ledger row holds; a row imported with a
    model file holds none, and a FORGET without them (None) is refused for it."""

    kind: str
    digest: bytes
    label: str | None = None
    tokens: list[str] | None = None
    tf: list[int] | None = None
    tokens_hash: int | None = None


@dataclass
class StoredModel:
    id: int
    name: str
    config: dict
    head: int


class SharedStore:
    """A connection to the shared store at ``url`` (tables created on first use).

    Its methods may be called from several threads: they take turns on the connection.
    StoreUnavailableError when the database cannot be reached.
    """

    def __init__(self, url: str):
        self.url = url
        self.shown = shown_url(url)
        self._lock = threading.RLock()
        self._conn = None
        self._connection()

    def _connection(self):
        if self._conn is None or self._conn.closed:
            conn = connect(self.url)
            try:
                ensure_schema(conn, self.url)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _run(self, work):
        """``work(conn)`` in one transaction, again after a deadlock or serialization
        failure; StoreUnavailableError when the connection is lost (the transaction then
        committed or not: a caller that must know replays it through an outbox)."""
        import psycopg
        from psycopg import errors

        with self._lock:
            for attempt in range(RETRIES):
                try:
                    conn = self._connection()
                    with conn.transaction():
                        return work(conn)
                except (errors.DeadlockDetected, errors.SerializationFailure):
                    if attempt == RETRIES - 1:
                        raise
                except psycopg.OperationalError as exc:
                    self._drop()
                    raise StoreUnavailableError(
                        f"lost the store '{self.shown}' ({' '.join(str(exc).split())})"
                    ) from None

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - it is broken already
                pass
            self._conn = None

    # -- models ------------------------------------------------------------------------
    def model(self, name: str) -> StoredModel | None:
        row = self._run(lambda c: c.execute(
            "SELECT id, name, config, head FROM textnb_models WHERE name = %s",
            (name,)).fetchone())
        return None if row is None else StoredModel(*row)

    def require(self, name: str) -> StoredModel:
        """The model named ``name``; StoreError naming how to make one when there is none."""
        found = self.model(name)
        if found is None:
            raise StoreError(f"the store '{self.shown}' has no model '{name}'; train one with "
                             f"'textnb train --store URL --store-model {name} --spam SRC "
                             "--ham SRC'")
        return found

    def create(self, name: str, config: dict, reset: bool = False) -> StoredModel:
        """The model ``name`` with ``config``: created, or, with ``reset``, an existing one
        emptied (its ledger, log and snapshots gone; a record tells the hosts to start
        afresh with ``config``). StoreError when it exists and not ``reset``."""
        from psycopg.types.json import Jsonb

        def work(conn):
            row = conn.execute(
                "INSERT INTO textnb_models (name, config) VALUES (%s, %s) "
                "ON CONFLICT (name) DO NOTHING RETURNING id, name, config, head",
                (name, Jsonb(config))).fetchone()
            if row is not None:
                return StoredModel(*row)
            if not reset:
                raise StoreError(f"the store '{self.shown}' has a model '{name}' already")
            model_id = conn.execute("SELECT id FROM textnb_models WHERE name = %s FOR UPDATE",
                                    (name,)).fetchone()[0]
            head = self._reset(conn, model_id, config)
            return StoredModel(model_id, name, config, head)

        return self._run(work)

    def _reset(self, conn, model_id: int, config: dict) -> int:
        """Empty the model (ledger, log, snapshots) and append the record that tells the
        hosts to start afresh with ``config`` (call holding the model's row lock).
        RETURNS the record's number."""
        from psycopg.types.json import Jsonb

        for table in ("textnb_ledger", "textnb_log", "textnb_snapshots"):
            conn.execute(f"DELETE FROM {table} WHERE model_id = %s", (model_id,))
        head = conn.execute("UPDATE textnb_models SET head = head + 1, config = %s "
                            "WHERE id = %s RETURNING head",
                            (Jsonb(config), model_id)).fetchone()[0]
        self._append(conn, model_id, head, encode_record([], reset=config))
        return head

    def replace(self, model_id: int, config: dict, batches: Sequence[Sequence[Item]],
                calibration: dict | None) -> int:
        """The model replaced, in one transaction, by one with ``config`` that learned
        ``batches`` (LEARN items) and carries ``calibration`` (``textnb tune --write``): a
        reset record, a record per batch, decided and counted as ``change`` does, and a
        tuning record (``config``'s decision settings and the calibration). Hosts see the
        old model until the commit, then the new one. RETURNS the tuning record's number
        (the model's head)."""
        tuning = Tuning(config["decision"], calibration)

        def work(conn):
            if conn.execute("SELECT id FROM textnb_models WHERE id = %s FOR UPDATE",
                            (model_id,)).fetchone() is None:
                raise StoreError(f"the model (id {model_id}) is gone from the store "
                                 f"'{self.shown}'")
            self._reset(conn, model_id, config)
            for items in batches:
                changes: list[Change] = []
                for item in sorted(items, key=lambda item: item.digest):
                    self._decide(conn, model_id, item, changes)
                if changes:
                    self._append(conn, model_id, self._next(conn, model_id),
                                 encode_record(changes))
            head = self._next(conn, model_id)
            mark_tuned(conn)
            self._append(conn, model_id, head, encode_tuning(tuning))
            return head

        return self._run(work)

    @staticmethod
    def _next(conn, model_id: int) -> int:
        """The next record's number, the model's row held until the commit (the schema
        module says why that orders the records)."""
        return conn.execute("UPDATE textnb_models SET head = head + 1 WHERE id = %s "
                            "RETURNING head", (model_id,)).fetchone()[0]

    def copy_model(self, source_id: int, name: str, snapshot_at) -> StoredModel:
        """A new model ``name``, a copy of model ``source_id`` as it is now: its ledger rows
        and a snapshot of its counts, in one transaction while the source's changes wait
        (``FOR SHARE`` on its row, whose lock numbers every change's record). An existing
        model of that name is returned as it is (another host made it first).

        snapshot_at (callable): ``snapshot_at(head, read)`` returns the model file's bytes
            of the source at record ``head`` (None: it has learned nothing); ``read(after)``
            gives the source's records past ``after`` as this transaction sees them.
        The copy starts at record 0, its snapshot numbered 0.
        """
        from psycopg.types.json import Jsonb

        def work(conn):
            source = conn.execute("SELECT head, config FROM textnb_models WHERE id = %s "
                                  "FOR SHARE", (source_id,)).fetchone()
            row = conn.execute(
                "INSERT INTO textnb_models (name, config, head) VALUES (%s, %s, 0) "
                "ON CONFLICT (name) DO NOTHING RETURNING id, name, config, head",
                (name, Jsonb(source[1]))).fetchone()
            if row is None:
                return StoredModel(*conn.execute(
                    "SELECT id, name, config, head FROM textnb_models WHERE name = %s",
                    (name,)).fetchone())

            def read(after: int) -> list[tuple[int, bytes]]:
                return [(int(s), bytes(r)) for s, r in conn.execute(
                    "SELECT seq, record FROM textnb_log WHERE model_id = %s AND seq > %s "
                    "ORDER BY seq", (source_id, after)).fetchall()]

            data = snapshot_at(int(source[0]), read)
            conn.execute("INSERT INTO textnb_ledger (model_id, digest, label, tokens_hash, "
                         "counts) SELECT %s, digest, label, tokens_hash, counts FROM "
                         "textnb_ledger WHERE model_id = %s", (row[0], source_id))
            if data is not None:
                conn.execute("INSERT INTO textnb_snapshots (model_id, seq, model) VALUES "
                             "(%s, 0, %s)", (row[0], data))
            return StoredModel(*row)

        return self._run(work)

    def load_model(self, name: str, config: dict, ledger: Sequence[tuple[bytes, int, int]],
                   snapshot_at, replace: bool = False) -> StoredModel:
        """The model ``name`` made, in one transaction, from a model file's model
        (``textnb import --store``): its configuration, its ledger as rows without counts
        and a snapshot of it at the model's new head, past every record a host holds, with
        no log record before it, so each following host loads it as it loads a fold, and
        a joining host starts from it. Hosts score with the old model (or none) until the
        commit.

        ledger: (digest, label code, tokens hash) per learned message.
        snapshot_at (callable): ``snapshot_at(head)`` returns the model file's bytes that
            the snapshot at record ``head`` holds.
        replace (bool): empty a model of that name first (its ledger, log and snapshots);
            without it, StoreError naming the flag when the store has one.
        """
        from psycopg.types.json import Jsonb

        if ledger:
            self._run(allow_absent_counts)

        def work(conn):
            row = conn.execute(
                "INSERT INTO textnb_models (name, config) VALUES (%s, %s) "
                "ON CONFLICT (name) DO NOTHING RETURNING id", (name, Jsonb(config))).fetchone()
            if row is None:
                if not replace:
                    raise StoreError(f"the store '{self.shown}' has a model '{name}' already; "
                                     "give --replace to replace it by the imported one "
                                     "(what it learned is then gone), or another "
                                     "--store-model")
                row = conn.execute("SELECT id FROM textnb_models WHERE name = %s FOR UPDATE",
                                   (name,)).fetchone()
                for table in ("textnb_ledger", "textnb_log", "textnb_snapshots"):
                    conn.execute(f"DELETE FROM {table} WHERE model_id = %s", (row[0],))
            model_id = row[0]
            head = conn.execute("UPDATE textnb_models SET head = head + 1, config = %s "
                                "WHERE id = %s RETURNING head",
                                (Jsonb(config), model_id)).fetchone()[0]
            if ledger:
                mark_imported(conn)
                with conn.cursor().copy("COPY textnb_ledger (model_id, digest, label, "
                                        "tokens_hash) FROM STDIN") as copy:
                    for digest, label, tokens_hash in ledger:
                        copy.write_row((model_id, digest, label, tokens_hash))
            conn.execute("INSERT INTO textnb_snapshots (model_id, seq, model) VALUES "
                         "(%s, %s, %s)", (model_id, head, snapshot_at(head)))
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{model_id} {head}"))
            return StoredModel(model_id, name, config, head)

        return self._run(work)

    def names(self) -> list[str]:
        return [r[0] for r in self._run(lambda c: c.execute(
            "SELECT name FROM textnb_models ORDER BY name").fetchall())]

    # -- changes -----------------------------------------------------------------------
    def change(self, model_id: int, items: Sequence[Item],
               outbox: tuple[str, int] | None = None, all_or_none: bool = False
               ) -> tuple[list[str], int | None]:
        """Decide, count and apply ``items`` in one transaction (the module docstring).

        outbox (tuple | None): (outbox id, position of the last item): recorded with the
            change, so that replaying the outbox skips these items.
        all_or_none (bool): an item refused (``records.REFUSALS``) makes nothing of the set
            (RefusedChange, naming the first); else it is that item's outcome alone.
        RETURNS (list[str], int | None): each item's outcome (LEARN: 'new', 'moved',
            'known'; FORGET: the label it had, or 'not-found'; either: a key of
            ``records.REFUSALS``), in the items' order, and the number of the log record
            written (None: nothing changed).
        """
        order = sorted(range(len(items)), key=lambda i: items[i].digest)

        def work(conn):
            outcomes: list[str] = [""] * len(items)
            changes: list[Change] = []
            for i in order:
                outcomes[i] = self._decide(conn, model_id, items[i], changes)
                if all_or_none and outcomes[i] in REFUSALS:
                    raise RefusedChange(i, outcomes[i])  # rolls the transaction back
            seq = None
            if changes:
                seq = self._next(conn, model_id)
                self._append(conn, model_id, seq, encode_record(changes))
            if outbox is not None:
                conn.execute("INSERT INTO textnb_outboxes (outbox, position) VALUES (%s, %s) "
                             "ON CONFLICT (outbox) DO UPDATE SET position = EXCLUDED.position",
                             outbox)
            return outcomes, seq

        return self._run(work)

    @staticmethod
    def _append(conn, model_id: int, seq: int, record: bytes) -> None:
        conn.execute("INSERT INTO textnb_log (model_id, seq, record) VALUES (%s, %s, %s)",
                     (model_id, seq, record))
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"{model_id} {seq}"))

    @staticmethod
    def _decide(conn, model_id: int, item: Item, changes: list[Change]) -> str:
        key = (model_id, item.digest)
        if item.kind == "FORGET":
            row = conn.execute("SELECT label, tokens_hash, counts FROM textnb_ledger "
                               "WHERE model_id = %s AND digest = %s FOR UPDATE", key).fetchone()
            if row is None:
                return "not-found"
            counts = row_counts(row[2], int(row[1]), item.tokens, item.tf)
            if isinstance(counts, str):
                return counts
            conn.execute("DELETE FROM textnb_ledger WHERE model_id = %s AND digest = %s", key)
            changes.append(Change(item.digest, None, LABELS[row[0]], int(row[1]), *counts))
            return LABELS[row[0]]
        if item.kind != "LEARN" or item.label not in LABELS:
            raise ValueError(f"unknown change {item.kind} {item.label!r}")
        code = LABELS.index(item.label)
        while True:
            inserted = conn.execute(
                "INSERT INTO textnb_ledger (model_id, digest, label, tokens_hash, counts) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (model_id, digest) DO NOTHING "
                "RETURNING 1",
                (*key, code, item.tokens_hash, encode_counts(item.tokens, item.tf))).fetchone()
            if inserted:
                changes.append(Change(item.digest, item.label, None, item.tokens_hash,
                                      item.tokens, item.tf))
                return "new"
            row = conn.execute("SELECT label, tokens_hash, counts FROM textnb_ledger "
                               "WHERE model_id = %s AND digest = %s FOR UPDATE", key).fetchone()
            if row is None:
                continue  # forgotten between the two statements: insert it after all
            if row[0] == code:
                return "known"
            counts = row_counts(row[2], int(row[1]), item.tokens, item.tf)
            if isinstance(counts, str):
                return counts
            # A row without counts keeps the ones just checked: its next move needs no mail.
            conn.execute("UPDATE textnb_ledger SET label = %s, counts = coalesce(counts, %s) "
                         "WHERE model_id = %s AND digest = %s",
                         (code, None if row[2] is not None else encode_counts(*counts), *key))
            changes.append(Change(item.digest, item.label, LABELS[row[0]], int(row[1]),
                                  *counts))
            return "moved"

    def outbox_position(self, outbox: str) -> int:
        """The last entry of ``outbox`` the database has applied (0: none)."""
        row = self._run(lambda c: c.execute(
            "SELECT position FROM textnb_outboxes WHERE outbox = %s", (outbox,)).fetchone())
        return 0 if row is None else int(row[0])

    def label(self, model_id: int, digest: bytes) -> str | None:
        row = self._run(lambda c: c.execute(
            "SELECT label FROM textnb_ledger WHERE model_id = %s AND digest = %s",
            (model_id, digest)).fetchone())
        return None if row is None else LABELS[row[0]]

    # -- reading the log ---------------------------------------------------------------
    def records_after(self, model_id: int, seq: int, limit: int = 1000
                      ) -> tuple[list[tuple[int, bytes]], int]:
        """Up to ``limit`` log records numbered past ``seq``, in order, and the number of
        the model's last record (past the records when a snapshot folded them)."""
        def work(conn):
            head = conn.execute("SELECT head FROM textnb_models WHERE id = %s",
                                (model_id,)).fetchone()
            if head is None:
                raise StoreError(f"the model (id {model_id}) is gone from the store "
                                 f"'{self.shown}'")
            rows = conn.execute("SELECT seq, record FROM textnb_log WHERE model_id = %s AND "
                                "seq > %s ORDER BY seq LIMIT %s", (model_id, seq, limit))
            return [(int(s), bytes(r)) for s, r in rows.fetchall()], int(head[0])

        return self._run(work)

    def snapshot(self, model_id: int) -> tuple[int, bytes] | None:
        """The newest snapshot: (its record number, the model file's bytes), or None."""
        row = self._run(lambda c: c.execute(
            "SELECT seq, model FROM textnb_snapshots WHERE model_id = %s "
            "ORDER BY seq DESC LIMIT 1", (model_id,)).fetchone())
        return None if row is None else (int(row[0]), bytes(row[1]))

    def snapshot_seq(self, model_id: int) -> int:
        row = self._run(lambda c: c.execute(
            "SELECT max(seq) FROM textnb_snapshots WHERE model_id = %s",
            (model_id,)).fetchone())
        return 0 if row[0] is None else int(row[0])

    def fold(self, model_id: int, seq: int, model_bytes: bytes) -> bool:
        """Store a snapshot of the model at record ``seq`` and drop the records and
        snapshots it makes unneeded. One host folds at a time (an advisory lock; another
        host that tries meanwhile skips); RETURNS whether this one did."""
        def work(conn):
            if not conn.execute("SELECT pg_try_advisory_xact_lock(7478211, %s::int)",
                                (model_id % 2**31,)).fetchone()[0]:
                return False
            if seq <= (conn.execute("SELECT coalesce(max(seq), 0) FROM textnb_snapshots "
                                    "WHERE model_id = %s", (model_id,)).fetchone()[0]):
                return False
            conn.execute("INSERT INTO textnb_snapshots (model_id, seq, model) "
                         "VALUES (%s, %s, %s)", (model_id, seq, model_bytes))
            conn.execute("DELETE FROM textnb_snapshots WHERE model_id = %s AND seq < %s",
                         (model_id, seq))
            conn.execute("DELETE FROM textnb_log WHERE model_id = %s AND seq <= %s",
                         (model_id, seq))
            return True

        return self._run(work)

    def unavailable(self, exc: Exception) -> StoreUnavailableError:
        return StoreUnavailableError(f"the store '{self.shown}' is away ({exc})")
