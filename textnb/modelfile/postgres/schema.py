"""The shared store's tables, their version, and connecting to the database.

Tables (one database holds any number of models, e.g. one per user):

- ``textnb_schema``: the one row saying which version of these tables the database has;
- ``textnb_models``: a model's name, its configuration (``FilterConfig.to_dict``) and
  ``head``, the number of its last log record. Every change takes the next number with
  ``UPDATE ... SET head = head + 1``, which holds the model's row until the change
  commits, so records become visible in the order of their numbers, without gaps: a
  host that has applied record n never meets n + 2 before n + 1 (a ``bigserial`` would
  hand out numbers in the order transactions start, not the order they commit);
- ``textnb_ledger``: one row per learned message, keyed by (model, digest of its
  normalised bytes), with its label, its tokens hash and its token counts
  (``records.encode_counts``): the key is what makes a message count once whichever
  hosts learn it at once. A row that came with a model file (``SharedStore.load_model``)
  has no counts (NULL): a file's ledger keeps each message's tokens hash, not its counts,
  so a relabel or forget of it takes the counts of the message the host has in hand,
  checked against the hash (``database``), and keeps them;
- ``textnb_log``: the numbered records: count changes, resets and tunings
  (``records``);
- ``textnb_snapshots``: a whole model (a model file's bytes, ``store.dumps``) at a log
  number; the log's records up to it are folded into it and dropped;
- ``textnb_outboxes``: for each host's outbox (``outbox``), the last entry applied, set
  in the same transaction as the entry's change, so a replay after any crash skips
  exactly the entries the database has.
"""

from __future__ import annotations

import re

from ...errors import TextnbError

__all__ = ["SCHEMA_VERSION", "StoreError", "StoreUnavailableError", "allow_absent_counts",
           "connect", "ensure_schema", "mark_imported", "mark_tuned", "shown_url"]

# Version 2 has version 1's tables; its log may also hold tuning records
# (``records.encode_tuning``), which a textnb that reads version 1 would not apply.
TUNED_VERSION = 2
# Version 3 has version 2's tables; its ledger may also hold rows without counts (a
# model file's ledger, imported), which a textnb that reads version 2 could not relabel
# or forget.
IMPORTED_VERSION = 3
SCHEMA_VERSION = IMPORTED_VERSION
# The versions this textnb reads. A store stays at 1 until the first tuning record is
# written (``mark_tuned``, in that record's transaction), and below 3 until a model file
# is imported (``mark_imported``): hosts can be upgraded one at a time, and an older
# host keeps working until the feature it cannot read is used.
READS = (1, 2, 3)
UNTUNED_VERSION = 1
INSTALL = "pip install 'textnb[postgresql]'"
# Seconds a connection attempt waits for the server: long enough for a database on
# another host of the site, short enough that a learn falls back to the outbox soon.
CONNECT_TIMEOUT = 5

_TABLES = """
CREATE TABLE IF NOT EXISTS textnb_schema (version integer NOT NULL);
CREATE TABLE IF NOT EXISTS textnb_models (
    id bigserial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    config jsonb NOT NULL,
    head bigint NOT NULL DEFAULT 0,
    created timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS textnb_ledger (
    model_id bigint NOT NULL REFERENCES textnb_models (id) ON DELETE CASCADE,
    digest bytea NOT NULL,
    label smallint NOT NULL CHECK (label IN (0, 1)),
    tokens_hash numeric NOT NULL,
    counts bytea,
    PRIMARY KEY (model_id, digest)
);
CREATE TABLE IF NOT EXISTS textnb_log (
    model_id bigint NOT NULL REFERENCES textnb_models (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    record bytea NOT NULL,
    PRIMARY KEY (model_id, seq)
);
CREATE TABLE IF NOT EXISTS textnb_snapshots (
    model_id bigint NOT NULL REFERENCES textnb_models (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    model bytea NOT NULL,
    PRIMARY KEY (model_id, seq)
);
CREATE TABLE IF NOT EXISTS textnb_outboxes (
    outbox text PRIMARY KEY,
    position bigint NOT NULL
);
"""


class StoreError(TextnbError):
    """The shared store cannot be used as asked: a bad URL, a wrong schema, no model."""


class StoreUnavailableError(StoreError):
    """The database cannot be reached (now): learns wait in a host's outbox."""


def shown_url(url: str) -> str:
    """The URL with any password replaced by ``***``, fit for messages and logs."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise StoreError("a PostgreSQL store needs psycopg 3: " + INSTALL) from None
    return psycopg


def connect(url: str, autocommit: bool = False):
    """A psycopg connection to ``url``; StoreError for a URL that is not PostgreSQL's,
    StoreUnavailableError (naming the URL, password hidden) when the server refuses or
    cannot be reached."""
    if url.split("://", 1)[0] not in ("postgresql", "postgres"):
        raise StoreError(f"'{shown_url(url)}' is not a PostgreSQL URL; give "
                         "postgresql://USER@HOST/DATABASE (or postgresql:///DATABASE?host=/run/"
                         "postgresql for a local socket)")
    psycopg = _psycopg()
    try:
        return psycopg.connect(url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT)
    except psycopg.ProgrammingError as exc:  # a malformed conninfo
        raise StoreError(f"'{shown_url(url)}' is not a usable PostgreSQL URL ({exc}); give "
                         "postgresql://USER@HOST/DATABASE") from None
    except psycopg.OperationalError as exc:
        reason = " ".join(str(exc).split())
        raise StoreUnavailableError(
            f"cannot connect to the store '{shown_url(url)}' ({reason}); check that the "
            "server runs, the database exists and this user may log in "
            "(createdb; pg_hba.conf)") from None


def ensure_schema(conn, url: str) -> None:
    """Create the tables if the database has none (at ``UNTUNED_VERSION``: nothing in
    them yet that an older textnb cannot read); StoreError naming the fix when they are
    of a version this textnb does not read (a newer or older textnb made them)."""
    with conn.transaction():
        # One creator at a time: two hosts starting on an empty database at once.
        conn.execute("SELECT pg_advisory_xact_lock(7478210)")
        conn.execute(_TABLES)
        rows = [r[0] for r in conn.execute("SELECT version FROM textnb_schema").fetchall()]
        if not rows:
            conn.execute("INSERT INTO textnb_schema (version) VALUES (%s)", (UNTUNED_VERSION,))
            return
    if not (len(rows) == 1 and rows[0] in READS):
        found = ", ".join(str(r) for r in rows)
        fix = ("upgrade textnb on this host to the release the other hosts run"
               if len(rows) == 1 and rows[0] > SCHEMA_VERSION else
               "use the textnb that made them, or a new database (createdb) and train "
               "into it")
        raise StoreError(f"the store '{shown_url(url)}' has textnb tables of schema version "
                         f"{found}; this textnb reads versions {READS[0]} to {READS[-1]}: "
                         f"{fix}")


def mark_tuned(conn) -> None:
    """Raise the tables' version to ``TUNED_VERSION`` (inside the transaction that writes
    the first tuning record): from its commit, a textnb that reads only version 1 refuses
    the store on connect, naming the upgrade, rather than follow a log it cannot apply."""
    _raise_version(conn, TUNED_VERSION)


def mark_imported(conn) -> None:
    """Raise the tables' version to ``IMPORTED_VERSION`` (inside the transaction that
    writes the first ledger rows without counts): from its commit, a textnb that reads
    only versions up to 2 refuses the store on connect, naming the upgrade, rather than
    fail on such a row when it relabels or forgets the message."""
    _raise_version(conn, IMPORTED_VERSION)


def _raise_version(conn, version: int) -> None:
    conn.execute("UPDATE textnb_schema SET version = %s WHERE version < %s",
                 (version, version))


def allow_absent_counts(conn) -> None:
    """Let ledger rows have no counts, in tables an earlier textnb made with ``counts``
    required (new tables allow it from the start). Run it in a transaction of its own,
    before the import's: an ``ALTER TABLE`` holds the whole ledger, every model's, until
    its commit. A textnb that reads version 2 is untroubled by it: it writes counts in
    every row."""
    required = conn.execute(
        "SELECT is_nullable = 'NO' FROM information_schema.columns WHERE table_schema = "
        "current_schema() AND table_name = 'textnb_ledger' AND column_name = 'counts'"
    ).fetchone()
    if required and required[0]:
        conn.execute("ALTER TABLE textnb_ledger ALTER COLUMN counts DROP NOT NULL")
