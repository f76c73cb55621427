"""A throwaway PostgreSQL cluster on loopback, for the ledger tests and its benchmark.

The suite starts a real server itself (R19). PostgreSQL refuses to run as
root, so when we are root the binaries run as the ``postgres`` system user, in a
temporary directory that user owns. The server listens only on 127.0.0.1, on a free
port, with ``fsync=on`` so durability figures are real.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["ClusterError", "PgCluster", "find_bindir", "throwaway_cluster"]

_CANDIDATES = ("/usr/lib/postgresql/15/bin",)


class ClusterError(RuntimeError):
    """The binaries exist but the cluster would not start: a real failure, not a skip."""


def find_bindir() -> Path | None:
    """Where ``initdb`` and ``pg_ctl`` live, or ``None`` when PostgreSQL is not installed.

    ``TOOLBOUND_PG_BINDIR``, when set, is the only place looked at.
    """
    chosen = os.environ.get("TOOLBOUND_PG_BINDIR")
    if chosen is not None:
        return Path(chosen) if (Path(chosen) / "initdb").exists() else None
    for candidate in _CANDIDATES:
        if (Path(candidate) / "initdb").exists():
            return Path(candidate)
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        out = subprocess.run(  # noqa: S603 - a fixed binary found on PATH
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        )
        bindir = Path(out.stdout.strip())
        if out.returncode == 0 and (bindir / "initdb").exists():
            return bindir
    return None


@dataclass(frozen=True, slots=True)
class PgCluster:
    """A running cluster: where it listens and how to reach a database in it."""

    host: str
    port: int
    user: str
    datadir: Path
    bindir: Path | None = None
    settings: str = ""

    def stop(self) -> None:
        """Stop the server at once (``-m immediate``: a crash, as far as clients see)."""
        assert self.bindir is not None
        pg_ctl = [str(self.bindir / "pg_ctl"), "-D", str(self.datadir)]
        _run([*pg_ctl, "-m", "immediate", "-w", "stop"], "pg_ctl stop")

    def start(self) -> None:
        """Start it again, on the same port with the same settings."""
        assert self.bindir is not None
        log = self.datadir.parent / "server.log"
        pg_ctl = [str(self.bindir / "pg_ctl"), "-D", str(self.datadir)]
        _run(
            [*pg_ctl, "-l", str(log), "-o", self.settings, "-w", "-t", "30", "start"],
            "pg_ctl start",
            log,
        )

    def conninfo(self, dbname: str = "postgres", **options: str) -> str:
        """A libpq connection string for ``dbname``."""
        parts = [f"host={self.host}", f"port={self.port}", f"user={self.user}", f"dbname={dbname}"]
        parts += [f"{k}='{v}'" for k, v in options.items()]
        return " ".join(parts)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(argv: list[str]) -> list[str]:
    # PostgreSQL will not run as root; everything here runs as root.
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


def _run(argv: list[str], what: str, log: Path | None = None) -> None:
    done = subprocess.run(  # noqa: S603 - fixed PostgreSQL binaries, our own arguments
        _as_postgres(argv), capture_output=True, text=True, check=False, timeout=60
    )
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:] if log and log.exists() else ""
        msg = f"{what} failed ({done.returncode}): {done.stderr.strip()}\n{tail}"
        raise ClusterError(msg)


@contextlib.contextmanager
def throwaway_cluster(bindir: Path, *, databases: tuple[str, ...] = ()) -> Iterator[PgCluster]:
    """Init, start, yield and finally stop and delete a cluster (raises ClusterError)."""
    root = Path(tempfile.mkdtemp(prefix="toolbound-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    datadir, log = root / "data", root / "server.log"
    port = _free_port()
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(datadir)]
    started = False
    try:
        _run(
            [
                str(bindir / "initdb"),
                "-D",
                str(datadir),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",  # initdb's own files only; the server below runs with fsync=on
            ],
            "initdb",
        )
        settings = (
            f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={root}"
            " -c fsync=on -c synchronous_commit=on -c max_connections=100"
        )
        _run(
            [*pg_ctl, "-l", str(log), "-o", settings, "-w", "-t", "30", "start"],
            "pg_ctl start",
            log,
        )
        started = True
        cluster = PgCluster(
            host="127.0.0.1",
            port=port,
            user="postgres",
            datadir=datadir,
            bindir=bindir,
            settings=settings,
        )
        if databases:
            import psycopg

            with psycopg.connect(cluster.conninfo(), autocommit=True) as conn:
                for name in databases:
                    conn.execute(f'CREATE DATABASE "{name}"'.encode())
        yield cluster
    finally:
        if started:
            with contextlib.suppress(ClusterError, subprocess.TimeoutExpired):
                _run([*pg_ctl, "-m", "immediate", "-w", "stop"], "pg_ctl stop")
        shutil.rmtree(root, ignore_errors=True)
