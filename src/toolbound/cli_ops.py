"""The operator's commands on a store: ``backup``, ``restore`` and ``migrate``.

Registered by :mod:`toolbound.cli`; the work itself is :mod:`toolbound.maintenance`'s.
A SQLite store is copied and put back here; a PostgreSQL one through ``pg_dump`` and
``pg_restore``, whose command lines are printed (without the password) and run with
``--run`` when the program is on ``PATH``. A store or backup refused ends the command
with its reason and code, status 1 (the top group's rule); docs/cli.md gives the
``--json`` documents.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.markup import escape

from toolbound._output import command_console, emit_json, public_url
from toolbound.ledger.store import LedgerError
from toolbound.maintenance import (
    Manifest,
    PgCommand,
    Survey,
    backup_sqlite,
    dump_manifest,
    pg_dump_command,
    pg_restore_command,
    pg_sessions,
    read_manifest,
    restore_sqlite,
    survey,
    upgrade,
    write_manifest,
)

if TYPE_CHECKING:
    from toolbound.config import ServiceConfig

__all__ = ["backup", "migrate", "restore"]

DUMP = "toolbound.dump"
"""The name of ``pg_dump``'s file in a PostgreSQL backup's folder."""

_NOT_DONE = 2  # the command line, or a program it needs, is missing

_CONFIG = click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="The service's TOML configuration (its [store]).",
)
_JSON = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document (its shape: docs/cli.md)."
)
_RUN = click.option(
    "--run",
    is_flag=True,
    help="PostgreSQL: run the command (it must be on PATH) instead of only printing it.",
)


def _config(path: str) -> ServiceConfig:
    from toolbound.config import ConfigError, load_config  # noqa: PLC0415

    try:
        return load_config(path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _sqlite(url: str) -> bool:
    if url.startswith("sqlite:///"):
        return True
    if url.startswith(("postgresql://", "postgres://")):
        return False
    msg = f"the store {public_url(url)} is kept by no file or database to back up or migrate"
    raise click.UsageError(msg)


@click.command()
@_CONFIG
@click.argument("out", type=click.Path(file_okay=False))
@_RUN
@_JSON
def backup(config_path: str, out: str, *, run: bool, as_json: bool) -> None:
    """Back up the store into the new folder OUT, while the service runs.

    SQLite: a consistent copy of the ledger and the journal (SQLite's online backup)
    and manifest.json (versions, time, each file's sha256). PostgreSQL: the pg_dump
    command; with --run, its dump and the manifest.
    """
    url = _config(config_path).store_url
    folder = Path(out)
    if folder.exists() and any(folder.iterdir()):
        msg = f"{out} is not empty: back up into a new folder"
        raise click.UsageError(msg)
    if _sqlite(url):
        _report(backup_sqlite(url, folder), folder, "backed up", as_json=as_json)
        return
    command = pg_dump_command(url, folder / DUMP)
    if not run:
        _show(command, as_json=as_json)
        return
    found = survey(url)  # a store this toolbound reads, or refused before any dump
    folder.mkdir(parents=True, exist_ok=True)
    _run(command)
    manifest = dump_manifest(folder / DUMP, found)
    write_manifest(folder, manifest)
    _report(manifest, folder, "backed up", as_json=as_json)


@click.command()
@_CONFIG
@click.argument("backup_folder", metavar="BACKUP", type=click.Path(file_okay=False, exists=True))
@_RUN
@_JSON
def restore(config_path: str, backup_folder: str, *, run: bool, as_json: bool) -> None:
    """Put the backup in BACKUP in place of the store; the service must be stopped.

    Refused while the store is in use, for a backup whose files do not match their
    sha256, and for one a newer toolbound made. SQLite: each file replaced atomically.
    PostgreSQL: the pg_restore command (one transaction); with --run, run.
    """
    url = _config(config_path).store_url
    folder = Path(backup_folder)
    if _sqlite(url):
        _report(restore_sqlite(url, folder), folder, "restored", as_json=as_json)
        return
    manifest = read_manifest(folder)
    command = pg_restore_command(url, folder / DUMP)
    if not run:
        _show(command, as_json=as_json)
        return
    others = pg_sessions(url)
    if others:
        msg = (
            f"{others} other session(s) are connected to the store's database:"
            " stop the service, then restore"
        )
        raise LedgerError(msg, code="store_in_use")
    _run(command)
    _report(manifest, folder, "restored", as_json=as_json)


@click.command()
@_CONFIG
@click.option(
    "--check", is_flag=True, help="Only list what an upgrade would change (exit 1 if any)."
)
@_JSON
def migrate(config_path: str, *, check: bool, as_json: bool) -> None:
    """Bring the store's schema up to this toolbound's, or (--check) say what that changes.

    Each store (ledger, journal) is migrated in one transaction. A store written by a
    newer toolbound is refused, never downgraded.
    """
    url = _config(config_path).store_url
    _sqlite(url)
    found = survey(url) if check else upgrade(url)
    if as_json:
        emit_json({"store": public_url(url), "applied": not check, **found.as_json()})
    else:
        _print_survey(found, applied=not check)
    sys.exit(1 if check and not found.current else 0)


def _print_survey(found: Survey, *, applied: bool) -> None:
    out = command_console()
    verb = "applied" if applied else "would apply"
    out.print(f"ledger schema {found.ledger_version}", highlight=False)
    for step in found.ledger_steps:
        out.print(f"  {verb} {step.version}: {escape(step.description)}", highlight=False)
        for statement in step.statements(found.dialect):
            out.print(f"    {escape(' '.join(statement.split()))}", highlight=False)
    out.print(f"journal format {found.journal_format}", highlight=False)
    for text in found.journal_steps:
        out.print(f"  {verb}: {escape(' '.join(text.split()))}", highlight=False)
    if found.current:
        out.print("the store is current: nothing to apply")
    elif not applied:
        out.print("run `toolbound migrate` (without --check) to apply these")


def _report(manifest: Manifest, folder: Path, what: str, *, as_json: bool) -> None:
    if as_json:
        emit_json({"folder": str(folder), **manifest.as_json()})
        return
    out = command_console()
    out.print(
        f"{what} {escape(str(folder))}: ledger schema {manifest.ledger_schema},"
        f" journal format {manifest.journal_format}, toolbound {manifest.toolbound}",
        highlight=False,
    )
    for file in manifest.files:
        out.print(f"  {file.name}  {file.size} bytes  sha256 {file.sha256}", highlight=False)


def _show(command: PgCommand, *, as_json: bool) -> None:
    if as_json:
        emit_json({"command": list(command.argv), "ran": False})
        return
    out = command_console()
    out.print(escape(command.shown), highlight=False)
    out.print("(the password from PGPASSWORD or ~/.pgpass; add --run to run it)", highlight=False)


def _run(command: PgCommand) -> None:
    program = shutil.which(command.argv[0])
    if program is None:
        err = command_console(stderr=True)
        err.print(f"{command.argv[0]} is not on PATH: install PostgreSQL's client programs")
        sys.exit(_NOT_DONE)
    env = dict(os.environ)
    if command.password is not None:
        env["PGPASSWORD"] = command.password
    done = subprocess.run(  # noqa: S603 - PostgreSQL's own program, our arguments
        [program, *command.argv[1:]], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        msg = f"{command.argv[0]} failed ({done.returncode}): {done.stderr.strip()}"
        raise click.ClickException(msg)
