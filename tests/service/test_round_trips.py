"""What each kind of request asks of the stores, pinned so it can only shrink.

Counted against the real stores (SQLite files; a PostgreSQL cluster the suite starts),
through the real HTTP app: statements (``BEGIN`` and ``COMMIT`` included) and
transactions per request, the fewest over a few requests of each kind. A change that
adds a statement or a transaction to a request fails here; one that removes some
lowers the figures below (and docs/performance.md's table, which they match).
"""

from __future__ import annotations

from urllib.parse import quote

from round_trips import KINDS, Count, PostgresLog, SQLiteTrace, measure
from service_config import DATABASE, config_text
from starlette.testclient import TestClient

from toolbound.config import parse_config
from toolbound.service.api import create_app
from toolbound.service.core import Service

# kind of request: Count(statements, transactions) on SQLite, then on PostgreSQL.
# A PostgreSQL figure would count a pool's check of a connection (an empty statement):
# requests one after another get connections back moments ago, which need none.
PINNED: dict[str, tuple[Count, Count]] = {
    "read": (Count(7, 2), Count(7, 2)),
    "write": (Count(13, 5), Count(13, 5)),
    "write, parked": (Count(11, 3), Count(11, 3)),
    "decision (approve)": (Count(13, 5), Count(13, 5)),
    "GET invocation": (Count(1, 1), Count(1, 1)),
    "confirmations list": (Count(2, 2), Count(2, 2)),
    "console pending page": (Count(3, 3), Count(3, 3)),
}


def _counted(tmp_path, url: str, source: SQLiteTrace | PostgresLog) -> dict[str, Count]:
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text(url, confirm_writes=False))
    service = Service(parse_config(path.read_text(), source=path))
    try:
        app = create_app(service)
        with (
            TestClient(app) as client,
            TestClient(app, follow_redirects=False) as console,
        ):
            return measure(client, console, source)
    finally:
        service.close()


def _within(found: dict[str, Count], which: int) -> list[str]:
    over = []
    for kind in KINDS:
        pinned, got = PINNED[kind][which], found[kind]
        if got.statements > pinned.statements or got.transactions > pinned.transactions:
            over.append(f"{kind}: {got} > pinned {pinned}")
    return over


def test_sqlite_requests_run_no_more_statements_or_transactions_than_pinned(
    tmp_path, effects_path, monkeypatch
):
    found = _counted(tmp_path, "sqlite:///toolbound.db", SQLiteTrace(monkeypatch))
    assert _within(found, 0) == [], found


def test_postgres_requests_run_no_more_statements_or_transactions_than_pinned(
    tmp_path, effects_path, pg_cluster, pg_conninfo
):
    schema = pg_conninfo.split("search_path=")[1].rstrip("'")
    options = f"-c search_path={schema} -c log_statement=all"
    url = (
        f"postgresql://{pg_cluster.user}@{pg_cluster.host}:{pg_cluster.port}/{DATABASE}"
        f"?options={quote(options)}"
    )
    found = _counted(tmp_path, url, PostgresLog(pg_cluster.datadir.parent / "server.log"))
    assert _within(found, 1) == [], found
