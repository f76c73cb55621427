"""Dependencies fail fast and visibly: a sick store is a 503 with Retry-After, never a 500.

An identity provider that never answers costs a forged token a bounded wait, once per
refresh interval, and nobody else anything.
"""

from __future__ import annotations

import errno
import json
import threading
import time
import uuid
from typing import Any

import httpx
import pytest
from faults import FailingJournal, SilentServer
from servers import Server
from service_config import KEYS, config_text
from service_pack import effects
from starlette.testclient import TestClient

from identity_support import AUDIENCE, ISSUER, SigningKey, identity_table, jwks
from toolbound import _pgcheck
from toolbound.config import StoreTimeouts, parse_config
from toolbound.identity import Identity, JwtIssuer, TokenRefused
from toolbound.journal import JournalError, PostgresJournal, SQLiteJournal, StoredCall
from toolbound.service.api import create_app
from toolbound.service.core import Service
from toolbound.wiring import bounded_conninfo


def _service(tmp_path, extra: str = "", **kw) -> Service:
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db", **kw) + extra)
    return Service(parse_config(path.read_text(), source=path))


@pytest.fixture
def service(tmp_path, effects_path):
    svc = _service(tmp_path, confirm_writes=False)
    yield svc
    svc.close()


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def add(client, text: str, key: str):
    body = {"tool": "notes.add", "arguments": f'{{"text": "{text}"}}', "call_id": key}
    return client.post(
        "/v1/proposals", json=body, headers={**auth("agent"), "Idempotency-Key": key}
    )


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        JournalError("database or disk is full", code="storage_full"),
    ],
    ids=["oserror", "disk-full"],
)
def test_a_write_that_cannot_be_recorded_is_503_and_outcome_unknown(service, error):
    """A failed record after the effect ran: 503 + Retry-After, the call outcome_unknown (R9)."""
    service.journal = FailingJournal(service.journal, error)  # type: ignore[assignment]
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        r = add(client, "milk", "k-full")
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "1"
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["code"] in {"storage_unavailable", "storage_full"}
        calls = client.get("/v1/invocations", headers=auth("ops")).json()["invocations"]
    assert effects() == ["milk"]
    assert [c["status"] for c in calls] == ["outcome_unknown"]


class _DownJournal:
    """A journal whose database does not answer."""

    def close(self) -> None:
        pass

    def __getattr__(self, _name: str) -> object:
        def down(*_args: object, **_kwargs: object) -> object:
            msg = "connection refused"
            raise JournalError(msg, code="storage_unavailable")

        return down


def test_a_store_that_does_not_answer_is_503_on_every_route_never_500(service):
    """Reads, writes and the console: 503 problem+json with Retry-After; /healthz still 200."""
    real, service.journal = service.journal, _DownJournal()  # type: ignore[assignment]
    try:
        with TestClient(create_app(service), raise_server_exceptions=False) as client:
            answers = [
                client.get("/v1/invocations", headers=auth("ops")),
                client.get("/v1/confirmations", headers=auth("ana")),
                add(client, "tea", "k-down"),
            ]
            health = client.get("/healthz")
            ready = client.get("/readyz")
    finally:
        service.journal = real  # type: ignore[assignment]
    assert [r.status_code for r in answers] == [503, 503, 503]
    assert all(r.headers["retry-after"] == "1" for r in answers)
    assert health.status_code == 200
    assert ready.status_code == 503
    assert ready.json()["store"]["status"] == "unavailable"


def test_a_full_sqlite_journal_is_storage_full(tmp_path):
    """SQLite's "database or disk is full" is the journal's storage_full, not sqlite3's error."""
    journal = SQLiteJournal(tmp_path / "journal.db")
    try:
        pages = journal._connection().execute("PRAGMA page_count").fetchone()[0]
        journal._connection().execute(f"PRAGMA max_page_count = {pages}")
        call = StoredCall(
            invocation_id="full",
            tenant="acme",
            subject="s",
            principal="p",
            tool="notes.add",
            status="observed",
            state="observed",
            digest=None,
            decision=None,
            approver=None,
            created_at=_now(),
            updated_at=_now(),
            body={"padding": "x" * 200_000},
        )
        with pytest.raises(JournalError) as raised:
            journal.put_call(call, events=[])
        assert raised.value.code == "storage_full"
    finally:
        journal.close()


def _now():
    from datetime import UTC, datetime

    return datetime.now(UTC)


def _issuer(url: str) -> JwtIssuer:
    return JwtIssuer(
        issuer=ISSUER, audience=AUDIENCE, jwks_url=url, tenant="acme", jwks_refresh_interval=30.0
    )


def test_a_silent_identity_provider_costs_one_connection_and_a_bounded_wait():
    """Six forged tokens at once: one fetch in flight, each refused 503 within the wait.

    Then, with no keys held, the failure is remembered: the next token is refused at
    once, without another connection (a negative cache and a rate limit).
    """
    forged = SigningKey("forged").token(sub="mallory")
    with SilentServer().running() as idp:
        identity = Identity([_issuer(idp.url)])
        codes: list[tuple[str, float]] = []

        def verify() -> None:
            start = time.monotonic()
            try:
                identity.verify(forged)
            except TokenRefused as refused:
                codes.append((refused.code, time.monotonic() - start))

        threads = [threading.Thread(target=verify) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert [c for c, _ in codes] == ["identity_unavailable"] * 6
        assert max(s for _, s in codes) < 3.0
        assert idp.accepted == 1
        start = time.monotonic()
        with pytest.raises(TokenRefused, match="cannot be had"):
            identity.verify(forged)
        assert time.monotonic() - start < 0.5
        assert idp.accepted == 1
        assert identity.status()[0]["status"] in {"fetching", "unavailable"}


def test_a_silent_identity_provider_never_stalls_the_server(tmp_path, effects_path):
    """A real server: forged tokens for a hanging issuer; /healthz and API keys stay fast."""
    forged = SigningKey("forged").token(sub="mallory", tid="acme")
    with SilentServer().running() as idp:
        config = tmp_path / "toolbound.toml"
        config.write_text(
            config_text("sqlite:///toolbound.db") + identity_table(f'jwks_url = "{idp.url}"')
        )
        server = Server(config, env={}).start()
        try:
            results: dict[str, list[float]] = {"forged": [], "health": [], "key": []}
            statuses: list[int] = []

            def timed(kind: str, url: str, headers: dict[str, str]) -> None:
                start = time.monotonic()
                r = httpx.get(url, headers=headers, timeout=30)
                results[kind].append(time.monotonic() - start)
                statuses.append(r.status_code)

            listing = f"{server.url}/v1/invocations"
            threads = [
                threading.Thread(
                    target=timed, args=("forged", listing, {"Authorization": f"Bearer {forged}"})
                )
                for _ in range(6)
            ]
            for t in threads:
                t.start()
            time.sleep(0.1)
            for _ in range(5):
                timed("health", f"{server.url}/healthz", {})
                timed("key", listing, auth("ops"))
            for t in threads:
                t.join(30)
        finally:
            server.stop()
    assert max(results["health"]) < 0.5
    assert max(results["key"]) < 1.0
    assert len(results["forged"]) == 6
    assert max(results["forged"]) < 3.0
    assert sorted(set(statuses)) == [200, 503]


def test_readiness_reports_each_identity_provider(tmp_path, effects_path):
    """/readyz names each issuer's keys; a provider without keys makes it degraded, not down."""
    with SilentServer().running() as idp:
        svc = _service(tmp_path, extra=identity_table(f'jwks_url = "{idp.url}"'))
        try:
            with TestClient(create_app(svc)) as client:
                before = client.get("/readyz").json()
                forged = SigningKey("forged").token(sub="m", tid="acme")
                client.get("/v1/invocations", headers={"Authorization": f"Bearer {forged}"})
                after = client.get("/readyz")
        finally:
            svc.close()
    assert before["status"] == "ready"
    assert before["identity"] == [{"issuer": ISSUER, "status": "not_fetched"}]
    assert after.status_code == 200
    assert after.json()["status"] == "degraded"
    assert after.json()["identity"][0]["status"] == "unavailable"


def test_an_unknown_key_id_is_fetched_once_per_interval_even_with_no_keys(tmp_path):
    """Made-up key ids against an issuer whose fetch fails: one fetch per interval."""
    fetches: list[float] = []

    def fetch() -> bytes:
        fetches.append(time.monotonic())
        raise OSError(errno.ECONNREFUSED, "refused")

    identity = Identity([_issuer("http://127.0.0.1:9/")], fetch=lambda _issuer: fetch)
    for i in range(20):
        token = SigningKey(f"k{i}", kind="EC").token(sub="m")
        with pytest.raises(TokenRefused) as refused:
            identity.verify(token)
        assert refused.value.status == 503
    assert len(fetches) == 1


def test_the_key_of_a_request_refused_for_a_sick_store_is_free_again(service):
    """A 503 keeps nothing under the Idempotency-Key: the same request later runs."""
    real = service.journal
    service.journal = FailingJournal(real, OSError(errno.EIO, "I/O error"))  # type: ignore[assignment]
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        key = uuid.uuid4().hex
        assert add(client, "bread", key).status_code == 503
        service.journal = real
        again = add(client, "bread", key)
    assert again.status_code == 200, again.text
    assert "idempotent-replayed" not in again.headers


def test_the_postgres_journal_replaces_a_connection_the_server_dropped(pg_conninfo, pg_admin):
    """After a restart drops its idle connections, the journal's next call still answers.

    Whether the connection was back moments ago (its socket says the server closed
    it) or idle a while (the pool's empty query finds it dead).
    """
    for fresh in (True, False):
        _dropped_and_replaced(pg_conninfo, pg_admin, fresh=fresh)


def _dropped_and_replaced(pg_conninfo: str, pg_admin: Any, *, fresh: bool) -> None:
    journal = PostgresJournal(pg_conninfo, timeout=2.0)
    try:
        assert journal.get_call("x") is None
        if not fresh:
            time.sleep(_pgcheck.FRESH + 0.1)
        pg_admin.execute(
            # Waits (up to 5 s) until each backend has ended and closed its socket.
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
            " WHERE application_name = '' AND pid <> pg_backend_pid()"
            " AND datname = current_database()"
        )
        assert journal.get_call("x") is None
    finally:
        journal.close()


def test_a_postgres_statement_past_its_timeout_is_storage_unavailable(pg_conninfo):
    """statement_timeout cancels a statement; the journal says storage_unavailable, fast."""
    bounded = bounded_conninfo(pg_conninfo, StoreTimeouts(statement=0.2))
    journal = PostgresJournal(bounded, timeout=2.0)
    try:
        start = time.monotonic()
        with pytest.raises(JournalError) as raised, journal.transaction() as cur:
            cur.execute("SELECT pg_sleep(5)")
        assert raised.value.code == "storage_unavailable"
        assert time.monotonic() - start < 2.0
    finally:
        journal.close()


def test_a_fetch_that_fails_oddly_ends_its_flight_and_the_next_one_runs():
    """Whatever a fetch raises, it ends: the next interval fetches again, and keys arrive."""
    key = SigningKey("k1")
    answers: list[object] = [RuntimeError("a proxy said something odd"), jwks(key)]

    def fetch() -> bytes:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return json.dumps(answer).encode()

    issuer = JwtIssuer(
        issuer=ISSUER,
        audience=AUDIENCE,
        jwks_url="http://127.0.0.1:9/",
        tenant="acme",
        jwks_refresh_interval=0.0,
    )
    identity = Identity([issuer], fetch=lambda _issuer: fetch)
    token = key.token(sub="agent-1")
    with pytest.raises(TokenRefused, match="odd"):
        identity.verify(token)
    assert identity.verify(token).subject == "agent-1"
