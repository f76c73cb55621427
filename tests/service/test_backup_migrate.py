"""Backup, restore and migrate: the operator's commands on a real store.

SQLite through its online backup while a ``toolbound serve`` process writes;
PostgreSQL through ``pg_dump``/``pg_restore`` where the client programs exist. A
backup that does not match its manifest, or that a newer toolbound made, is refused;
so is a store a newer toolbound wrote, by ``migrate`` as by ``restore``.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import threading
import time

import httpx
import pytest
from click.testing import CliRunner
from servers import Server
from service_config import KEYS, config_text
from service_pack import EFFECTS_ENV

from toolbound.cli import _cli
from toolbound.journal import schema as journal_schema
from toolbound.ledger.migrations import MIGRATIONS, SCHEMA_VERSION

HEADERS = {"Authorization": f"Bearer {KEYS['agent']}"}


def _cli_json(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(_cli, [*args, "--json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def _write(http: httpx.Client, text: str) -> dict:
    body = {"tool": "notes.add", "arguments": json.dumps({"text": text}), "call_id": text}
    answer = http.post("/v1/proposals", json=body, headers={"Idempotency-Key": text})
    assert answer.status_code == 200, answer.text
    return answer.json()


class Writer:
    """A client thread sending unique writes until stopped; what was acknowledged, in order."""

    def __init__(self, url: str) -> None:
        self.acknowledged: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(url,))
        self._thread.start()

    def _run(self, url: str) -> None:
        with httpx.Client(base_url=url, headers=HEADERS, timeout=10) as http:
            for n in itertools.count():
                if self._stop.is_set():
                    return
                self.acknowledged.append(_write(http, f"w{n}")["invocation_id"])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///data/toolbound.db", confirm_writes=False))
    return path


@pytest.fixture
def server(config, effects_path):
    s = Server(config, {EFFECTS_ENV: str(effects_path)})
    yield s
    s.stop()


def test_a_backup_taken_while_the_service_writes_restores_every_acknowledged_call(
    server, config, tmp_path
):
    """Every call acknowledged before the backup began is in the restored journal."""
    server.start()
    writer = Writer(server.url)
    while len(writer.acknowledged) < 30:
        time.sleep(0.02)
    before = list(writer.acknowledged)
    code, manifest = _cli_json("backup", "--config", str(config), str(tmp_path / "bk"))
    during = len(writer.acknowledged)
    time.sleep(0.3)
    writer.stop()
    assert code == 0, manifest
    assert len(writer.acknowledged) > during, "the service kept writing after the backup"
    assert manifest["ledger_schema"] == SCHEMA_VERSION
    assert {f["role"] for f in manifest["files"]} == {"ledger", "journal"}

    # Restoring under a running service is refused, and changes nothing.
    busy = CliRunner().invoke(_cli, ["restore", "--config", str(config), str(tmp_path / "bk")])
    assert busy.exit_code == 1
    assert "[store_in_use]" in busy.output
    server.stop()

    code, restored = _cli_json("restore", "--config", str(config), str(tmp_path / "bk"))
    assert code == 0, restored
    server.start()
    with httpx.Client(base_url=server.url, headers=HEADERS, timeout=10) as http:
        for invocation_id in before:
            stored = http.get(f"/v1/invocations/{invocation_id}")
            assert stored.status_code == 200, invocation_id
            assert stored.json()["status"] == "observed"
        later = writer.acknowledged[-1]
        assert http.get(f"/v1/invocations/{later}").status_code == 404
        # A write the restored ledger holds is answered from it, not run again.
        replay = _write(http, "w0")
        assert replay["invocation_id"] == before[0]


def test_a_backup_that_does_not_match_its_manifest_is_refused(server, config, tmp_path):
    """A changed byte in a copied file: restore refuses it and the store is untouched."""
    server.start()
    with httpx.Client(base_url=server.url, headers=HEADERS, timeout=10) as http:
        kept = _write(http, "kept")["invocation_id"]
    server.stop()
    folder = tmp_path / "bk"
    assert _cli_json("backup", "--config", str(config), str(folder))[0] == 0
    ledger = folder / "ledger.db"
    data = bytearray(ledger.read_bytes())
    data[-1] ^= 0xFF
    ledger.write_bytes(bytes(data))
    store = tmp_path / "data" / "toolbound.db"
    original = store.read_bytes()

    result = CliRunner().invoke(_cli, ["restore", "--config", str(config), str(folder)])

    assert result.exit_code == 1
    assert "does not match the manifest's sha256" in result.output
    assert "[corrupt_store]" in result.output
    assert store.read_bytes() == original
    server.start()
    assert httpx.get(f"{server.url}/v1/invocations/{kept}", headers=HEADERS).status_code == 200


def test_a_backup_a_newer_toolbound_made_is_refused(config, tmp_path):
    """A manifest naming a newer ledger schema: refused before any file is touched."""
    folder = tmp_path / "bk"
    assert CliRunner().invoke(_cli, ["migrate", "--config", str(config)]).exit_code == 0
    assert _cli_json("backup", "--config", str(config), str(folder))[0] == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["ledger_schema"] = SCHEMA_VERSION + 1
    (folder / "manifest.json").write_text(json.dumps(manifest))

    result = CliRunner().invoke(_cli, ["restore", "--config", str(config), str(folder)])

    assert result.exit_code == 1
    assert "[unsupported_schema]" in result.output
    assert f"ledger schema {SCHEMA_VERSION + 1}" in result.output


@pytest.mark.parametrize("store", ["ledger", "journal"])
def test_migrate_refuses_a_store_a_newer_toolbound_wrote(config, tmp_path, store):
    """No downgrade: --check and the migration itself stop with unsupported_schema, status 1."""
    assert CliRunner().invoke(_cli, ["migrate", "--config", str(config)]).exit_code == 0
    data = tmp_path / "data"
    if store == "ledger":
        with sqlite3.connect(data / "toolbound.db") as db:
            db.execute(
                "INSERT INTO toolbound_schema_version VALUES (?, 'newer', 'now')",
                (SCHEMA_VERSION + 1,),
            )
    else:
        with sqlite3.connect(data / "toolbound.service.db") as db:
            db.execute(
                "INSERT INTO toolbound_journal_migrations VALUES (?)",
                (f"format-{journal_schema.FORMAT + 1}",),
            )
    before = {p.name: p.read_bytes() for p in data.glob("*.db")}

    for args in (["--check"], []):
        result = CliRunner().invoke(_cli, ["migrate", "--config", str(config), *args])
        assert result.exit_code == 1
        assert "upgrade toolbound to open it" in result.output
        assert "[unsupported_schema]" in result.output
    assert {p.name: p.read_bytes() for p in data.glob("*.db")} == before


def _older_store(data) -> None:
    """A store as the first releases left it: ledger schema 1, the journal's first table."""
    data.mkdir()
    with sqlite3.connect(data / "toolbound.db") as db:
        db.execute(
            "CREATE TABLE toolbound_schema_version"
            " (version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        for statement in MIGRATIONS[0].statements("sqlite"):
            db.execute(statement)
        db.execute("INSERT INTO toolbound_schema_version VALUES (1, 'first', 'then')")
        db.execute("PRAGMA journal_mode=WAL")
    with sqlite3.connect(data / "toolbound.service.db") as db:
        db.execute(journal_schema.SCHEMA[0])
        db.execute(journal_schema.SCHEMA[1])


def test_migrate_check_lists_an_older_store_s_steps_then_migrate_applies_them(
    server, config, tmp_path
):
    """--check changes nothing and lists each step; migrate applies them; the service starts."""
    data = tmp_path / "data"
    _older_store(data)
    before = {p.name: p.read_bytes() for p in data.glob("*.db")}

    code, plan = _cli_json("migrate", "--config", str(config), "--check")

    assert code == 1  # an upgrade waits
    assert {p.name: p.read_bytes() for p in data.glob("*.db")} == before
    assert plan["current"] is False
    assert plan["applied"] is False
    assert (plan["ledger"]["version"], plan["ledger"]["target"]) == (1, SCHEMA_VERSION)
    assert [s["version"] for s in plan["ledger"]["steps"]] == list(range(2, SCHEMA_VERSION + 1))
    assert "ADD COLUMN epoch" in plan["ledger"]["steps"][0]["statements"][0]
    steps = plan["journal"]["steps"]
    assert plan["journal"]["format"] == 1
    for column, kind in journal_schema.COLUMN_MIGRATIONS:
        assert f"ALTER TABLE toolbound_service_calls ADD COLUMN {column} {kind}" in steps
    assert not any("CREATE TABLE IF NOT EXISTS toolbound_service_calls " in s for s in steps)
    assert any("toolbound_call_events (" in s for s in steps)
    assert any(s.startswith("move the traces") for s in steps)

    code, applied = _cli_json("migrate", "--config", str(config))
    assert code == 0
    assert applied["applied"] is True
    assert applied["ledger"]["steps"] == plan["ledger"]["steps"]
    code, after = _cli_json("migrate", "--config", str(config), "--check")
    assert code == 0
    assert after["current"] is True
    assert (after["ledger"]["version"], after["journal"]["steps"]) == (SCHEMA_VERSION, [])

    server.start()
    with httpx.Client(base_url=server.url, headers=HEADERS, timeout=10) as http:
        assert _write(http, "after-upgrade")["status"] == "observed"


# -- PostgreSQL -------------------------------------------------------------------

_databases = itertools.count()
PASSWORD = "s3cret-pw"  # noqa: S105 - a test's, for a server that does not ask for it


@pytest.fixture
def pg_config(pg_cluster, pg_admin, tmp_path, monkeypatch):
    """A configuration whose store is a database of its own, pg_dump and pg_restore on PATH."""
    name = f"ops_{os.getpid()}_{next(_databases)}"
    pg_admin.execute(f'CREATE DATABASE "{name}"'.encode())
    monkeypatch.setenv("PATH", f"{pg_cluster.bindir}{os.pathsep}{os.environ['PATH']}")
    # The cluster trusts loopback: the password is there to be kept out of every output.
    url = f"postgresql://{pg_cluster.user}:{PASSWORD}@{pg_cluster.host}:{pg_cluster.port}/{name}"
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text(url, confirm_writes=False))
    yield path
    pg_admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)'.encode())


def test_postgres_backup_and_restore_through_pg_dump(pg_config, effects_path, tmp_path):
    """pg_dump under --run, then pg_restore: the store is back as it was at the backup."""
    server = Server(pg_config, {EFFECTS_ENV: str(effects_path)}).start()
    try:
        with httpx.Client(base_url=server.url, headers=HEADERS, timeout=10) as http:
            kept = [_write(http, f"k{n}")["invocation_id"] for n in range(5)]
        folder = tmp_path / "bk"
        shown = CliRunner().invoke(_cli, ["backup", "--config", str(pg_config), str(folder)])
        assert shown.exit_code == 0
        assert "pg_dump --format=custom" in shown.output
        assert PASSWORD not in shown.output
        assert not folder.exists()  # only printed
        code, manifest = _cli_json("backup", "--config", str(pg_config), str(folder), "--run")
        assert code == 0, manifest
        assert PASSWORD not in json.dumps(manifest)
        assert manifest["store"] == "postgres"
        assert manifest["ledger_schema"] == SCHEMA_VERSION
        assert (folder / "toolbound.dump").stat().st_size == manifest["files"][0]["bytes"]
        with httpx.Client(base_url=server.url, headers=HEADERS, timeout=10) as http:
            later = _write(http, "later")["invocation_id"]
        busy = CliRunner().invoke(
            _cli, ["restore", "--config", str(pg_config), str(folder), "--run"]
        )
        assert busy.exit_code == 1
        assert "[store_in_use]" in busy.output
    finally:
        server.stop()

    code, restored = _cli_json("restore", "--config", str(pg_config), str(folder), "--run")
    assert code == 0, restored
    server = Server(pg_config, {EFFECTS_ENV: str(effects_path)}).start()
    try:
        with httpx.Client(base_url=server.url, headers=HEADERS, timeout=10) as http:
            for invocation_id in kept:
                assert http.get(f"/v1/invocations/{invocation_id}").status_code == 200
            assert http.get(f"/v1/invocations/{later}").status_code == 404
    finally:
        server.stop()
    assert _cli_json("migrate", "--config", str(pg_config), "--check")[1]["current"] is True


def test_postgres_migrate_refuses_a_newer_ledger(pg_config, pg_cluster):
    """A version a newer toolbound recorded: --check and migrate refuse, nothing applied."""
    import psycopg

    assert CliRunner().invoke(_cli, ["migrate", "--config", str(pg_config)]).exit_code == 0
    name = pg_config.read_text().split("/")[3].split('"')[0]  # the URL's database
    with psycopg.connect(pg_cluster.conninfo(name), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO toolbound_schema_version VALUES (%s, 'newer', now())",
            (SCHEMA_VERSION + 1,),
        )
    for args in (["--check"], []):
        result = CliRunner().invoke(_cli, ["migrate", "--config", str(pg_config), *args])
        assert result.exit_code == 1
        assert "[unsupported_schema]" in result.output
