"""PostgreSQL as the shared store: several mail hosts, one model per user, each message once.

The single-host store is a model file and its journal (``textnb.modelfile.store``,
``textnb.modelfile.journal``). This package is the other store behind the same acts
(learn, relabel, forget), for sites where more than one host scores and learns:

- ``schema``: the tables, their version, and connecting (errors that name the URL and
  the fix);
- ``records``: a message's token counts as the ledger keeps them, and a log record (what
  one transaction changed), applied to a filter in memory;
- ``database``: ``SharedStore``, the transactions: one decides through the ledger,
  counts and appends the numbered log record, then notifies; snapshots fold the log;
- ``outbox``: learns a host keeps, fsync'd, while the database is away, and ``sender``,
  which sends them in order, each once;
- ``shared_model``: ``SharedModel``, a model in memory that follows the log (LISTEN/NOTIFY,
  and a poll for lost notifications) and learns through the store or the outbox.

Users' models served beside a shared one are ``textnb.delivery.shared_users``.

The adapter is psycopg 3 (``pip install 'textnb[postgresql]'``), imported only here and
only when a store is used. docs/shared-store.md describes the design and a two-host set-up.
"""

__all__ = ["is_store_url"]


def is_store_url(value: str | None) -> bool:
    """Whether ``value`` names a PostgreSQL store (``postgresql://`` or ``postgres://``)."""
    return bool(value) and value.split("://", 1)[0] in ("postgresql", "postgres")
