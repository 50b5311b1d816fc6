"""The private PostgreSQL of the shared store's tests (bench/postgres.py starts it): a
cluster per test module, a database per test; the tests skip, naming the install
lines, without PostgreSQL or psycopg."""

from __future__ import annotations

import os
import time

import pytest

from bench.postgres import Cluster, skip_reason


@pytest.fixture(scope="module")
def pg_cluster():
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    cluster = Cluster()
    cluster.start()
    time.sleep(0.1)
    try:
        yield cluster
    finally:
        cluster.remove()


_counter = iter(range(10**6))


@pytest.fixture
def store_url(pg_cluster):
    """A new, empty database in the module's cluster."""
    return pg_cluster.create_database(f"t{os.getpid()}_{next(_counter)}")
