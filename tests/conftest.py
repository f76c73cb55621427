"""Shared fixtures: a fixed clock, a runtime harness, a throwaway PostgreSQL cluster.

The cluster is started once per session by the tests themselves. No PostgreSQL
binaries → tests that need it are skipped with a loud reason; binaries present but
the cluster will not start → an error, never a skip. At the end of the run the
``not_run`` plugin names each group of tests that could not run here, and why.
"""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from harness import Harness
from pgcluster import PgCluster, find_bindir, throwaway_cluster
from toolbound import FixedClock

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(datetime(2026, 7, 19, 6, 0, tzinfo=UTC))


@pytest.fixture
def harness(clock: FixedClock) -> Iterator[Harness]:
    h = Harness(clock)
    yield h
    h.close()


# CI explores the same examples every run (a failure there is reproducible); a
# developer's run explores new ones. Under pytest-xdist the workers share the cores, so
# an example's time says as much about its neighbours as about the code: the deadline
# that flags slow code is 2 s there instead of Hypothesis' 200 ms (a test's own
# @settings still win).
_PROFILE: dict[str, object] = {}
if os.environ.get("CI"):
    _PROFILE |= {"derandomize": True, "print_blob": True}
if os.environ.get("PYTEST_XDIST_WORKER"):
    _PROFILE["deadline"] = timedelta(seconds=2)
settings.register_profile("toolbound", **_PROFILE)
settings.load_profile("toolbound")

pytest_plugins = ["not_run"]

DATABASE = "toolbound_tests"
_schemas = itertools.count()


def _skip_without_postgres() -> Path:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(
            "NO POSTGRESQL BINARIES FOUND (looked in $TOOLBOUND_PG_BINDIR, else "
            "/usr/lib/postgresql/15/bin and `pg_config --bindir`): the PostgreSQL ledger "
            "tests did NOT run. "
            "Install postgresql-15 to run them."
        )
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        pytest.skip(
            "psycopg / psycopg_pool NOT INSTALLED: the PostgreSQL ledger tests did NOT run. "
            "pip install -e '.[dev]' (it pulls in the postgres extra)."
        )
    return bindir


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """One PostgreSQL cluster for the session, with fsync on, on a free loopback port."""
    bindir = _skip_without_postgres()
    # A ClusterError raised here is a test ERROR: the binaries exist, so this must work.
    with throwaway_cluster(bindir, databases=(DATABASE,)) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def pg_admin(pg_cluster: PgCluster):
    """An autocommit superuser connection to the test database, for set-up and faults."""
    import psycopg

    with psycopg.connect(pg_cluster.conninfo(DATABASE), autocommit=True) as conn:
        yield conn


@pytest.fixture
def pg_conninfo(pg_cluster: PgCluster, pg_admin) -> Iterator[str]:
    """A connection string whose search_path is a schema made fresh for this test."""
    schema = f"t{os.getpid()}_{next(_schemas)}"
    pg_admin.execute(f"CREATE SCHEMA {schema}".encode())
    yield pg_cluster.conninfo(DATABASE, options=f"-c search_path={schema}")
    pg_admin.execute(f"DROP SCHEMA {schema} CASCADE".encode())
