"""Set-up shared by the surfaces: stores from a URL, registries by name, telemetry sinks.

The CLI, the HTTP service and MCP each start from the same few inputs — a store URL, a
``MODULE:FUNCTION`` naming a registry, a configuration's ``[telemetry]`` — and this
module turns them into objects, one way for all of them::

    open_ledger(url)          an existing ledger: sqlite:///PATH or postgresql://…
    ledger_for(url, timeouts) a service's ledger: ``memory`` too, the SQLite directory made
    journal_for(url, timeouts) the journal beside that ledger (:mod:`toolbound.journal`)
    journal_path(ledger)      where that journal's SQLite file is, for a ledger's file
    journal_recorder(config, surface)  a trace sink keeping each call in that journal
    load_registry(spec)       the Registry that ``MODULE:FUNCTION`` builds
    policy_for(config, clock, tools)  the grants, and the ``[provenance]`` flow rules beside them
    telemetry_sinks(config)   the trace sinks ``[telemetry]`` asks for

The rule: surfaces (``toolbound.cli``, ``toolbound.service``, ``toolbound.mcp``) import
the core and this module, never each other — only the top CLI reaches the surfaces'
commands and servers. This module imports the core only; store drivers and exporters
are imported when asked for, so importing it costs no optional dependency.
"""

from __future__ import annotations

import importlib
import math
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from toolbound.gates.authorize import AllOf
from toolbound.journal import PostgresJournal, open_journal
from toolbound.ledger.memory import MemoryLedger
from toolbound.recording import JournalRecorder
from toolbound.registry import Registry

if TYPE_CHECKING:
    from toolbound._clock import Clock
    from toolbound.config import ServiceConfig, StoreTimeouts
    from toolbound.gates.authorize import Policy
    from toolbound.journal import Journal, Surface
    from toolbound.ledger.store import Ledger
    from toolbound.trace import TraceSink

__all__ = [
    "journal_for",
    "journal_path",
    "journal_recorder",
    "ledger_for",
    "load_registry",
    "open_ledger",
    "policy_for",
    "telemetry_sinks",
]


def open_ledger(url: str, timeouts: StoreTimeouts | None = None) -> Ledger:
    """A ledger from a URL: ``sqlite:///PATH`` or ``postgresql://…``.

    With ``timeouts`` (``[store]``'s), every call is bounded by them: SQLite's busy
    timeout; PostgreSQL's connect, statement and pool-wait timeouts.
    """
    if url.startswith("sqlite:///"):
        from toolbound.ledger.sqlite import SQLiteLedger  # noqa: PLC0415

        if timeouts is None:
            return SQLiteLedger(url.removeprefix("sqlite:///"))
        return SQLiteLedger(url.removeprefix("sqlite:///"), busy_timeout=timeouts.statement)
    if url.startswith(("postgresql://", "postgres://")):
        from toolbound.ledger.postgres import PostgresLedger  # noqa: PLC0415

        if timeouts is None:
            return PostgresLedger(url)
        return PostgresLedger(bounded_conninfo(url, timeouts), timeout=timeouts.pool)
    msg = f"unsupported ledger URL {url!r}: use sqlite:///PATH or postgresql://…"
    raise SystemExit(msg)


def ledger_for(url: str, timeouts: StoreTimeouts | None = None) -> Ledger:
    """The ledger for a store URL (``memory`` too)."""
    if url == "memory":
        return MemoryLedger()
    _make_folder(url)
    return open_ledger(url, timeouts)


def _make_folder(url: str) -> None:
    """Create the folder of a SQLite store's file, as a first run finds it missing."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)


def journal_for(url: str, timeouts: StoreTimeouts | None = None) -> Journal:
    """The journal for a store URL: SQLite beside the ledger's file, or the same database."""
    bounds = {} if timeouts is None else {"busy_timeout": timeouts.statement}
    if url == "memory":
        # The journal is SQL; "memory" keeps it in a file that lives as long as the process.
        fd, path = tempfile.mkstemp(prefix="toolbound-journal-", suffix=".db")
        os.close(fd)
        return open_journal(f"sqlite:///{path}", **bounds)
    if url.startswith("sqlite:///"):
        _make_folder(url)
        name = journal_path(Path(url.removeprefix("sqlite:///")))
        return open_journal(f"sqlite:///{name}", **bounds)
    if timeouts is None or not url.startswith(("postgresql://", "postgres://")):
        return open_journal(url)
    return PostgresJournal(bounded_conninfo(url, timeouts), timeout=timeouts.pool)


def journal_path(ledger: Path) -> Path:
    """The journal's SQLite file for a ledger kept in ``ledger``: beside it, not in it.

    The ledger syncs every write (FULL); the journal only needs to survive the process.
    """
    return ledger.with_name(ledger.stem + ".service.db")


def bounded_conninfo(url: str, timeouts: StoreTimeouts) -> str:
    """A PostgreSQL connection string with ``[store]``'s bounds, where it sets none of its own.

    ``connect_timeout`` (libpq's, whole seconds, at least 2); ``statement_timeout``
    (the server cancels a longer statement); ``tcp_user_timeout`` (the client gives up
    on a connection whose sent data goes unacknowledged that long: a server gone
    without a word, which no server-side timeout can catch).
    """
    from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: PLC0415

    given = conninfo_to_dict(url)
    ms = int(timeouts.statement * 1000)
    bounds: dict[str, str | int] = {
        "connect_timeout": max(2, math.ceil(timeouts.connect)),
        "tcp_user_timeout": ms,
    }
    options = str(given.get("options") or "")
    if "statement_timeout" not in options:
        bounds["options"] = f"{options} -c statement_timeout={ms}".strip()
    return make_conninfo(
        url, **{k: v for k, v in bounds.items() if k not in given or k == "options"}
    )


def journal_recorder(config: ServiceConfig, surface: Surface) -> JournalRecorder:
    """A trace sink keeping each call ``surface`` runs in the journal of ``[store]``.

    Its subjects are named by the configuration's principals; it holds its parked
    calls for ``[service] lease`` seconds (renewed every third while it runs). The
    recorder's owner closes it, then its journal (``recorder.journal``).
    """
    names = {(p.subject, p.tenant): p.name for p in config.principals}
    return JournalRecorder(
        journal_for(config.store_url),
        surface=surface,
        principal_of=lambda subject, tenant: names.get((subject, tenant), subject),
        lease=config.lease.total_seconds(),
    )


def load_registry(spec: str) -> Registry:
    """Call ``MODULE:FUNCTION`` and return the Registry it builds."""
    module_name, _, func_name = spec.partition(":")
    if not func_name:
        msg = f"--tools must be MODULE:FUNCTION, not {spec!r}"
        raise SystemExit(msg)
    registry = getattr(importlib.import_module(module_name), func_name)()
    if not isinstance(registry, Registry):
        msg = f"{spec} returned {type(registry).__name__}, not a Registry"
        raise SystemExit(msg)
    return registry


def policy_for(config: ServiceConfig, clock: Clock, tools: Registry | None = None) -> Policy:
    """The policy a surface runs under: the grants and, beside them, the flow rules (R6).

    With ``[provenance]`` configured every call must satisfy both
    (:class:`~toolbound.AllOf`): the grants say what a subject may do, the flow rules
    where the values steering a write may come from. ``tools`` are planned now, so
    a bad role declaration fails at start-up.
    """
    grants = config.build_policy(clock)
    flows = config.provenance.build(tools)
    return grants if flows is None else AllOf(grants, flows)


def telemetry_sinks(config: ServiceConfig, tools: Registry | None = None) -> list[TraceSink]:
    """The trace sinks the configuration's ``[telemetry]`` asks for (none by default).

    ``tools`` (the registry the surface serves) lets the spans describe each tool.
    """
    telemetry = config.telemetry
    if telemetry.exporter == "none":
        return []
    from toolbound.otel import exporting_sink  # noqa: PLC0415 - the otel extra

    return [
        exporting_sink(
            telemetry.exporter,
            endpoint=telemetry.endpoint,
            service_name=telemetry.service_name,
            metrics=telemetry.metrics,
            tools=tools,
        )
    ]
