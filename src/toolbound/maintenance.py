"""Backing up, restoring and upgrading a service's store (``toolbound backup|restore|migrate``).

A store is the ledger and the journal a service keeps at one URL (see
:func:`toolbound.wiring.journal_for`)::

    sqlite:///PATH     two files: the ledger at PATH, the journal beside it
    postgresql://…     one database holding both

Each has its own schema history, and this module only reads it: the ledger's versions
in ``toolbound_schema_version`` (:mod:`toolbound.ledger.migrations`), the journal's
idempotent DDL, added columns and format marks (:mod:`toolbound.journal.schema`).
:func:`survey` says what opening the store with this toolbound would change, without
changing it; :func:`upgrade` opens the stores, which applies exactly that, each store
in one transaction. A store written by a newer toolbound is refused
(``unsupported_schema``) by both, and by :func:`restore_sqlite` for a backup of one.

A SQLite backup is a folder: a copy of each file taken through SQLite's online backup
API (a consistent snapshot while the service keeps writing) and ``manifest.json``
(toolbound's version, the schema versions, the time, each file's sha256). PostgreSQL's
are ``pg_dump``'s custom format and ``pg_restore``: :func:`pg_dump_command` and
:func:`pg_restore_command` build their command lines, the password left out of them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from toolbound.journal import schema as journal_schema
from toolbound.ledger.migrations import LEDGER_TABLE, SCHEMA_VERSION, VERSION_TABLE, pending
from toolbound.ledger.store import LedgerError
from toolbound.wiring import journal_for, journal_path, ledger_for

if TYPE_CHECKING:
    from collections.abc import Iterator

    from toolbound.journal.schema import Cursor
    from toolbound.ledger.migrations import Dialect, Migration

__all__ = [
    "MANIFEST",
    "BackupFile",
    "Manifest",
    "PgCommand",
    "Survey",
    "backup_sqlite",
    "dump_manifest",
    "in_use",
    "pg_dump_command",
    "pg_restore_command",
    "pg_sessions",
    "read_manifest",
    "restore_sqlite",
    "sqlite_files",
    "survey",
    "upgrade",
    "write_manifest",
]

MANIFEST = "manifest.json"
"""The name of the manifest in a backup's folder."""

Role = Literal["ledger", "journal", "dump"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Survey:
    """A store's schema, and what opening it with this toolbound would change.

    ``ledger_version`` is ``0`` and ``journal_format`` ``0`` where that store holds
    nothing yet.
    """

    ledger_version: int
    journal_format: int
    ledger_steps: tuple[Migration, ...]
    journal_steps: tuple[str, ...]
    dialect: Dialect

    @property
    def current(self) -> bool:
        """Nothing to apply: this toolbound opens the store as it is."""
        return not self.ledger_steps and not self.journal_steps

    def as_json(self) -> dict[str, object]:
        """The survey as ``migrate --json`` prints it."""
        return {
            "ledger": {
                "version": self.ledger_version,
                "target": SCHEMA_VERSION,
                "steps": [
                    {
                        "version": m.version,
                        "description": m.description,
                        "statements": [_one_line(s) for s in m.statements(self.dialect)],
                    }
                    for m in self.ledger_steps
                ],
            },
            "journal": {
                "format": self.journal_format,
                "target": journal_schema.FORMAT,
                "steps": [_one_line(s) for s in self.journal_steps],
            },
            "current": self.current,
        }


def sqlite_files(url: str) -> tuple[Path, Path]:
    """The ledger's and the journal's files of a ``sqlite:///PATH`` store."""
    ledger = Path(url.removeprefix("sqlite:///"))
    return ledger, journal_path(ledger)


def survey(url: str) -> Survey:
    """What :func:`upgrade` would apply to the store at ``url``; changes nothing.

    Raises ``LedgerError`` or ``JournalError`` (``unsupported_schema``) for a store a
    newer toolbound wrote, ``corrupt_store`` for one that is not toolbound's.
    """
    if url.startswith("sqlite:///"):
        return _survey_sqlite(*sqlite_files(url))
    with _pg_reader(url) as cur:
        names = _names(cur, _PG_NAMES)
        found = _ledger_version(cur, names, _PG)
        columns = _names(cur, _PG_COLUMNS)
        journal_steps = journal_schema.plan(cur, names, columns)
        journal_format = _journal_format(cur, names)
    return Survey(
        ledger_version=found,
        journal_format=journal_format,
        ledger_steps=pending(found, where=_PG),
        journal_steps=tuple(journal_steps),
        dialect="postgres",
    )


def _survey_sqlite(ledger: Path, journal: Path) -> Survey:
    with _sqlite_reader(ledger) as cur:
        found = _ledger_version(cur, _names(cur, _SQLITE_NAMES), str(ledger))
    with _sqlite_reader(journal) as cur:
        names = _names(cur, _SQLITE_NAMES)
        journal_steps = journal_schema.plan(cur, names, _names(cur, _SQLITE_COLUMNS))
        journal_format = _journal_format(cur, names)
    return Survey(
        ledger_version=found,
        journal_format=journal_format,
        ledger_steps=pending(found, where=str(ledger)),
        journal_steps=tuple(journal_steps),
        dialect="sqlite",
    )


_PG = "the PostgreSQL store"


def upgrade(url: str) -> Survey:
    """Apply what :func:`survey` lists (each store in one transaction); the survey before.

    Opening the ledger applies its pending migrations, opening the journal creates and
    brings forward its tables: what a service does as it starts, done ahead of it.
    """
    before = survey(url)
    ledger_for(url).close()
    journal_for(url).close()
    return before


# -- SQLite: backup, restore, in use ------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BackupFile:
    """One file of a backup: what it holds, its name in the folder, its sha256."""

    role: Role
    name: str
    sha256: str
    size: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """What a backup holds and which toolbound wrote it (``manifest.json``)."""

    toolbound: str
    created_at: str
    store: Dialect
    ledger_schema: int
    journal_format: int
    files: tuple[BackupFile, ...]

    def as_json(self) -> dict[str, object]:
        """The manifest as it is written, and as ``--json`` prints it."""
        return {
            "toolbound": self.toolbound,
            "created_at": self.created_at,
            "store": self.store,
            "ledger_schema": self.ledger_schema,
            "journal_format": self.journal_format,
            "files": [
                {"role": f.role, "name": f.name, "sha256": f.sha256, "bytes": f.size}
                for f in self.files
            ],
        }


def backup_sqlite(url: str, out: Path) -> Manifest:
    """Copy a SQLite store into the new folder ``out``, consistent while it is written.

    The journal is copied first and the ledger last, so every call the copied journal
    holds has its ledger record (a retry of one is answered from the ledger, never run
    again). Each copy is one snapshot (SQLite's backup API, in one step).
    """
    ledger, journal = sqlite_files(url)
    if not ledger.exists():
        msg = f"no ledger at {ledger}: nothing to back up"
        raise LedgerError(msg, code="storage_unavailable")
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for role, source in (("journal", journal), ("ledger", ledger)):
        if not source.exists():
            continue
        target = out / f"{role}.db"
        with (
            contextlib.closing(sqlite3.connect(source)) as src,
            contextlib.closing(sqlite3.connect(target)) as dst,
        ):
            src.backup(dst)
            # One self-contained file (no -wal beside it): the store switches it back to
            # WAL when it opens it.
            dst.execute("PRAGMA journal_mode=DELETE")
        files.append(
            BackupFile(
                role=cast("Role", role),
                name=target.name,
                sha256=_sha256(target),
                size=target.stat().st_size,
            )
        )
    before = _survey_sqlite(out / "ledger.db", out / "journal.db")
    manifest = Manifest(
        toolbound=version("toolbound"),
        created_at=datetime.now(UTC).isoformat(),
        store="sqlite",
        ledger_schema=before.ledger_version,
        journal_format=before.journal_format,
        files=tuple(reversed(files)),
    )
    write_manifest(out, manifest)
    return manifest


def dump_manifest(dump: Path, found: Survey) -> Manifest:
    """The manifest of a PostgreSQL backup: ``pg_dump``'s file, the schemas it was taken at."""
    return Manifest(
        toolbound=version("toolbound"),
        created_at=datetime.now(UTC).isoformat(),
        store="postgres",
        ledger_schema=found.ledger_version,
        journal_format=found.journal_format,
        files=(
            BackupFile(role="dump", name=dump.name, sha256=_sha256(dump), size=dump.stat().st_size),
        ),
    )


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """Write ``manifest.json`` into ``folder``."""
    text = json.dumps(manifest.as_json(), indent=2) + "\n"
    (folder / MANIFEST).write_text(text, encoding="utf-8")


def read_manifest(folder: Path) -> Manifest:
    """The backup's manifest, its files checked against their sha256.

    Raises ``LedgerError``: ``corrupt_store`` for a folder that is no backup or a file
    that does not match; ``unsupported_schema`` for a backup a newer toolbound made.
    """
    try:
        raw = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        manifest = Manifest(
            toolbound=str(raw["toolbound"]),
            created_at=str(raw["created_at"]),
            store=raw["store"],
            ledger_schema=int(raw["ledger_schema"]),
            journal_format=int(raw["journal_format"]),
            files=tuple(
                BackupFile(
                    role=f["role"], name=str(f["name"]), sha256=str(f["sha256"]), size=f["bytes"]
                )
                for f in raw["files"]
            ),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        msg = f"{folder} is not a toolbound backup (its {MANIFEST} cannot be read: {exc})"
        raise LedgerError(msg, code="corrupt_store") from exc
    if manifest.ledger_schema > SCHEMA_VERSION or manifest.journal_format > journal_schema.FORMAT:
        msg = (
            f"{folder} was made by toolbound {manifest.toolbound} (ledger schema"
            f" {manifest.ledger_schema}, journal format {manifest.journal_format}); this one"
            f" reads up to {SCHEMA_VERSION} and {journal_schema.FORMAT}: upgrade toolbound"
            " to restore it"
        )
        raise LedgerError(msg, code="unsupported_schema")
    for file in manifest.files:
        path = folder / Path(file.name).name
        found = _sha256(path) if path.exists() else "missing"
        if found != file.sha256:
            msg = f"{path} does not match the manifest's sha256 ({found}): a damaged backup"
            raise LedgerError(msg, code="corrupt_store")
    return manifest


def restore_sqlite(url: str, folder: Path) -> Manifest:
    """Put a backup's files in place of the store's, each replaced atomically.

    Refused (``store_in_use``) while any process has either file open, and for a
    backup :func:`read_manifest` refuses. Each file is copied beside its target,
    synced, then renamed over it; the journal first, the ledger last.
    """
    manifest = read_manifest(folder)
    if manifest.store != "sqlite":
        msg = f"{folder} is a backup of a {manifest.store} store, not of SQLite files"
        raise LedgerError(msg, code="corrupt_store")
    # The files themselves, not only the manifest, must be ones this toolbound reads.
    _survey_sqlite(folder / "ledger.db", folder / "journal.db")
    ledger, journal = sqlite_files(url)
    targets = {"ledger": ledger, "journal": journal}
    busy = [str(p) for p in targets.values() if in_use(p)]
    if busy:
        msg = f"{', '.join(busy)} in use by a running process: stop the service, then restore"
        raise LedgerError(msg, code="store_in_use")
    ledger.parent.mkdir(parents=True, exist_ok=True)
    for file in sorted(manifest.files, key=lambda f: f.role != "journal"):
        target = targets[file.role]
        _settle(target)
        beside = target.with_name(target.name + ".restoring")
        with (folder / file.name).open("rb") as src, beside.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
            dst.flush()
            os.fsync(dst.fileno())
        beside.replace(target)
        _sync_folder(target.parent)
    return manifest


def in_use(path: Path) -> bool:
    """Whether another process has the SQLite database at ``path`` open.

    Every connection to a WAL database holds a shared lock on the "DMS" byte of its
    ``-shm`` file while it is open (SQLite's WAL file format, section 2.3); an
    exclusive lock on it can be taken only when none does. It is taken and released
    at once. Call this before this process opens the file: closing the descriptor
    drops every lock this process holds on it.
    """
    try:
        fd = os.open(f"{path}-shm", os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _DMS, os.SEEK_SET)
        except OSError:
            return True
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, _DMS, os.SEEK_SET)
        return False
    finally:
        os.close(fd)


_DMS = 128  # the byte of the -shm file SQLite's unix VFS locks as its dead-man switch


def _settle(target: Path) -> None:
    """Fold a stopped store's WAL into its file, so no stale WAL meets the new file."""
    if not target.exists():
        return
    with contextlib.closing(sqlite3.connect(target)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")  # removes the -wal and -shm files
    for leftover in (Path(f"{target}-wal"), Path(f"{target}-shm")):
        leftover.unlink(missing_ok=True)


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# -- PostgreSQL: pg_dump and pg_restore -----------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class PgCommand:
    """A ``pg_dump`` or ``pg_restore`` command line, and the password it needs.

    ``argv`` names the database without its password, so it can be printed; running
    it, pass ``password`` as ``PGPASSWORD`` (or let ``~/.pgpass`` supply it).
    """

    argv: tuple[str, ...]
    password: str | None

    @property
    def shown(self) -> str:
        """The command as one shell line."""
        import shlex  # noqa: PLC0415 - only for printing

        return shlex.join(self.argv)


def pg_dump_command(url: str, file: Path) -> PgCommand:
    """``pg_dump`` of the store's database into ``file`` (custom format)."""
    dbname, password = _without_password(url)
    argv = ("pg_dump", "--format=custom", "--no-owner", f"--file={file}", f"--dbname={dbname}")
    return PgCommand(argv=argv, password=password)


def pg_restore_command(url: str, file: Path) -> PgCommand:
    """``pg_restore`` of ``file`` into the store's database, in one transaction.

    ``--clean --if-exists`` drops what the dump recreates; ``--single-transaction``
    makes the whole restore commit or leave the database as it was.
    """
    dbname, password = _without_password(url)
    argv = (
        "pg_restore",
        "--clean",
        "--if-exists",
        "--single-transaction",
        "--exit-on-error",
        "--no-owner",
        f"--dbname={dbname}",
        str(file),
    )
    return PgCommand(argv=argv, password=password)


def pg_sessions(url: str) -> int:
    """How many other sessions are connected to the store's database now."""
    with _pg_reader(url) as cur:
        cur.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        row = cur.fetchone()
    return int(str(row[0])) if row else 0


def _without_password(url: str) -> tuple[str, str | None]:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: PLC0415

    given = conninfo_to_dict(url)
    password = given.pop("password", None)
    return make_conninfo("", **given), None if password is None else str(password)


# -- reading schemas ---------------------------------------------------------------

_SQLITE_NAMES = "SELECT name FROM sqlite_master WHERE type IN ('table', 'index')"
_SQLITE_COLUMNS = "SELECT name FROM pragma_table_info('toolbound_service_calls')"
_PG_NAMES = (
    "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'i', 'p')"
)
_PG_COLUMNS = (
    "SELECT column_name FROM information_schema.columns"
    " WHERE table_schema = current_schema() AND table_name = 'toolbound_service_calls'"
)


def _names(cur: Cursor, sql: str) -> set[str]:
    cur.execute(sql)
    return {str(row[0]) for row in cur.fetchall()}


def _journal_format(cur: Cursor, names: set[str]) -> int:
    if "toolbound_journal_migrations" in names:
        return journal_schema.stored_format(cur)
    # Older journals kept no marks; their records are format 1.
    return 1 if "toolbound_service_calls" in names else 0


def _ledger_version(cur: Cursor, names: set[str], where: str) -> int:
    """The ledger's schema version (``0``: none), refused as its store would refuse it."""
    if VERSION_TABLE in names:
        cur.execute(f"SELECT coalesce(max(version), 0) FROM {VERSION_TABLE}")  # noqa: S608 - a constant
        row = cur.fetchone()
        return int(str(row[0])) if row else 0
    if LEDGER_TABLE in names:
        msg = f"{where} has a {LEDGER_TABLE} table but no {VERSION_TABLE}: not a toolbound ledger"
        raise LedgerError(msg, code="corrupt_store")
    return 0


@contextlib.contextmanager
def _sqlite_reader(path: Path) -> Iterator[Cursor]:
    """A cursor in a read transaction on ``path`` (over an empty database if it is absent)."""
    # Read-write, but only read: the last connection to a WAL file removes its -wal and
    # -shm as it closes, which a read-only one cannot.
    target = f"{path.resolve().as_uri()}?mode=rw" if path.exists() else "file::memory:"
    try:
        conn = sqlite3.connect(target, uri=True)
    except sqlite3.Error as exc:
        msg = f"{path} cannot be read: {exc}"
        raise LedgerError(msg, code="storage_unavailable") from exc
    try:
        conn.execute("BEGIN")
        yield cast("Cursor", conn.cursor())
    except sqlite3.DatabaseError as exc:
        msg = f"{path} is not a SQLite database toolbound can read: {exc}"
        raise LedgerError(msg, code="corrupt_store") from exc
    finally:
        conn.rollback()
        conn.close()


@contextlib.contextmanager
def _pg_reader(url: str) -> Iterator[Cursor]:
    """A cursor in a transaction that is rolled back: nothing it runs is kept."""
    import psycopg  # noqa: PLC0415 - the postgres extra

    try:
        with psycopg.connect(url) as conn, conn.cursor() as cur:
            yield cast("Cursor", cur)
            conn.rollback()
    except psycopg.OperationalError as exc:
        msg = f"{'the PostgreSQL store'} cannot be reached: {exc}"
        raise LedgerError(msg, code="storage_unavailable") from exc


def _one_line(statement: str) -> str:
    return " ".join(statement.split())
