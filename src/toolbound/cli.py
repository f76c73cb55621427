"""The ``toolbound`` command.

The top of the surfaces: it may reach the service and the MCP commands (``serve``,
``mcp-*``); nothing in toolbound imports it. What it shares with them — stores from a
URL, registries by name, telemetry — comes from :mod:`toolbound.wiring`.

Each command needs one extra, and says which when it is missing (exit status 2)::

    reconcile, check-config, trace, unknown, demo,
    hash-key, revoke-sessions, backup, restore,
    migrate                                           toolbound[cli]
    pending, decide, edit                             toolbound[cli,http]
    serve                                             toolbound[service]
    mcp-serve, mcp-gateway                            toolbound[mcp]

A ``postgresql://`` store needs ``toolbound[postgres]`` as well. ``backup``, ``restore``
and ``migrate`` are :mod:`toolbound.cli_ops`'s.

The commands that read (``check-config``, ``trace``, ``unknown``, ``reconcile``,
``pending``, and the gateway's ``tools``, ``review`` and ``pending``) take ``--json``
for scripts, and so do the inbox's ``decide`` and ``edit`` (:mod:`toolbound.cli_inbox`);
docs/cli.md gives each document's shape and the exit statuses, the same for every
command.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import sys
from typing import TYPE_CHECKING, NoReturn, cast

from toolbound.logs import LEVELS
from toolbound.wiring import journal_for, load_registry, open_ledger

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolbound._clock import Clock
    from toolbound.config import ConfigError, ServiceConfig
    from toolbound.execution.reconcile import Reconciled
    from toolbound.journal import StoredCall
    from toolbound.ledger.store import LedgerRecord
    from toolbound.logs import Level

try:
    import click
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    from toolbound._output import command_console, emit_json, heading, public_url
except ImportError as exc:  # pragma: no cover - depends on the environment
    _MISSING: ImportError | None = exc
else:
    _MISSING = None

__all__ = ["EXTRAS", "main", "needs"]


EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("click", "rich", "pydantic"),
    "service": ("starlette", "uvicorn", "jinja2", "multipart", "itsdangerous", "opentelemetry"),
    "mcp": ("mcp", "httpx"),
    "http": ("httpx",),
    "postgres": ("psycopg", "psycopg_pool"),
}
"""The modules each extra brings, as the commands look for them."""


def main() -> None:
    """Entry point of the ``toolbound`` script."""
    if _MISSING is not None:
        _missing("toolbound's command line", "cli", _MISSING.name)
    _cli()


def needs(extra: str, command: str) -> None:
    """Exit with the install hint unless every module of ``extra`` imports."""
    for module in EXTRAS[extra]:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            _missing(command, extra, exc.name or module)


def _missing(what: str, extra: str, module: str | None) -> NoReturn:
    print(
        f"{what} needs the '{extra}' extra ({module} is missing): pip install 'toolbound[{extra}]'",
        file=sys.stderr,
    )
    sys.exit(2)


if _MISSING is None:

    class _Commands(click.Group):
        """The commands; a store that cannot be opened or used ends one with its reason."""

        def invoke(self, ctx: click.Context) -> object:
            from toolbound.journal import JournalError  # noqa: PLC0415 - keeps start-up light
            from toolbound.ledger.store import LedgerError  # noqa: PLC0415

            try:
                return super().invoke(ctx)
            except (LedgerError, JournalError) as exc:
                # A store written by a newer release, damaged, or out of reach: the
                # operator's to fix, so its message and code, not a traceback (exit 1).
                msg = f"{exc} [{exc.code}]"
                raise click.ClickException(msg) from exc

    _JSON = click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print one JSON document for a script (its shape: docs/cli.md).",
    )
    """The ``--json`` option of the commands that read."""

    @click.group(cls=_Commands)
    @click.version_option(package_name="toolbound")
    def _cli() -> None:
        """toolbound: the controlled execution layer for model tool calls."""

    @_cli.command()
    @click.option(
        "--config",
        "config_path",
        type=click.Path(dir_okay=False),
        help="A service configuration: its store and tools (instead of --ledger/--tools).",
    )
    @click.option(
        "--ledger",
        "ledger_url",
        help="sqlite:///PATH or a postgresql:// connection string.",
    )
    @click.option(
        "--tools",
        help="MODULE:FUNCTION returning the Registry whose tools own the calls.",
    )
    @click.option("--list", "list_only", is_flag=True, help="Only list unknown outcomes.")
    @click.option("--grace", default=30.0, show_default=True, help="Seconds past a deadline.")
    @_JSON
    def reconcile(
        config_path: str | None,
        ledger_url: str | None,
        tools: str | None,
        *,
        list_only: bool,
        grace: float,
        as_json: bool,
    ) -> None:
        """Resolve outcome-unknown calls through their tools' query hooks.

        With ``--config`` the service's journal is settled with the ledger, call by
        call, as the API and the console settle them. Exits 1 while any call is left
        unknown (``--list`` only lists, and exits 0).
        """
        from datetime import timedelta  # noqa: PLC0415

        from toolbound.execution.reconcile import Reconciler  # noqa: PLC0415
        from toolbound.service.records import settle_unknown  # noqa: PLC0415

        out = command_console()
        journal = None
        if config_path is not None:
            config = _config_or_exit(config_path, command_console(stderr=as_json))
            ledger_url, registry = config.store_url, config.build_registry()
            journal = journal_for(config.store_url)
        elif ledger_url and tools:
            registry = load_registry(tools)
        else:
            msg = "give --config FILE, or both --ledger and --tools"
            raise click.UsageError(msg)
        ledger = open_ledger(ledger_url)
        try:
            reconciler = Reconciler(
                ledger=ledger, registry=registry, grace=timedelta(seconds=grace)
            )
            if list_only:
                _print_unknown(out, reconciler.unresolved(), as_json=as_json)
                return
            # A spinner for a person at a terminal; nothing in a pipe or a JSON document.
            spin = out.is_terminal and not as_json
            busy = out.status("reconciling…") if spin else contextlib.nullcontext()
            with busy:
                results = [
                    settle_unknown(reconciler, journal, r.invocation_id)
                    for r in reconciler.unresolved()
                ]
            left = sum(done.status in {"unknown", "needs_person"} for done in results)
            _print_reconciled(out, results, left, as_json=as_json)
            sys.exit(1 if left else 0)
        finally:
            ledger.close()
            if journal is not None:
                journal.close()

    @_cli.command()
    @click.option(
        "--config",
        "config_path",
        required=True,
        type=click.Path(dir_okay=False),
        help="The service's TOML configuration.",
    )
    @click.option("--host", default=None, help="Listen address (default: from the file).")
    @click.option("--port", default=None, type=int, help="Port (default: from the file).")
    @click.option(
        "--cookie-secure",
        is_flag=True,
        default=False,
        help="Mark the console's session cookie Secure (HTTPS only); also [service] cookie_secure.",
    )
    @click.option(
        "--log-level",
        type=click.Choice(LEVELS),
        default=None,
        help="Log at this level and above (default: [logging].level; info logs each request).",
    )
    @click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=None,
        help="Processes serving on the one address, each a replica (default: [service] workers).",
    )
    def serve(
        config_path: str,
        host: str | None,
        port: int | None,
        log_level: str | None,
        workers: int | None,
        *,
        cookie_secure: bool,
    ) -> None:
        """Start the HTTP API and the console."""
        needs("service", "toolbound serve")
        from dataclasses import replace  # noqa: PLC0415

        console = Console(stderr=True)
        config = _config_or_exit(config_path, console)
        if cookie_secure:
            config = replace(config, cookie_secure=True)
        if workers is not None:
            config = replace(config, workers=workers)
        if config.workers > 1 and config.store_url == "memory":
            console.print("[red]--workers > 1 needs a shared store: `memory` is per process[/]")
            sys.exit(1)
        _serve(
            config_path,
            config,
            host=host or config.host,
            port=port,
            log_level=log_level,
            console=console,
        )

    @_cli.command("check-config")
    @click.argument("config_path", type=click.Path(dir_okay=False))
    @_JSON
    def check_config(config_path: str, *, as_json: bool) -> None:
        """Validate a configuration file and explain every problem (exit 1 if any)."""
        from toolbound.config import ConfigError  # noqa: PLC0415

        out = command_console()
        try:
            config = _load(config_path)
            registry = config.build_registry()
            config.build_policy(_clock())
        except ConfigError as exc:
            if as_json:
                emit_json({"file": config_path, "valid": False, "problems": _problems(exc)})
            else:
                _print_issues(out, exc)
            sys.exit(1)
        tools = sorted(t.spec.ref for t in registry)
        store = public_url(config.store_url)
        if as_json:
            emit_json(
                {
                    "file": config_path,
                    "valid": True,
                    "store": store,
                    "tools": tools,
                    "principals": [p.name for p in config.principals],
                    "grants": len(config.grants),
                    "listen": {"host": config.host, "port": config.port},
                    "warnings": config.warnings(),
                }
            )
            return
        table = Table("", "", show_header=False, box=None)
        table.add_row("store", Text(store))
        table.add_row("tools", ", ".join(tools) or "none")
        table.add_row("principals", Text(", ".join(p.name for p in config.principals)))
        table.add_row("grants", str(len(config.grants)))
        table.add_row("listen", f"{config.host}:{config.port}")
        out.print(table)
        for warning in config.warnings():
            out.print(Text(f"warning {warning}", style="yellow"))
        out.print(f"[green]{escape(config_path)}: valid[/]")

    @_cli.command()
    @click.argument("invocation_id")
    @click.option(
        "--config",
        "config_path",
        required=True,
        type=click.Path(dir_okay=False),
        help="The service's TOML configuration (the trace is read from its store).",
    )
    @_JSON
    def trace(invocation_id: str, config_path: str, *, as_json: bool) -> None:
        """Show one invocation's state path and its whole trace, every detail (R14)."""
        out = command_console()
        config = _config_or_exit(config_path, command_console(stderr=True) if as_json else out)
        journal = journal_for(config.store_url)
        try:
            call = journal.get_call(invocation_id)
            events = journal.events(invocation_id)
        finally:
            journal.close()
        if call is None:
            where = command_console(stderr=True) if as_json else out
            where.print(f"[red]no invocation {escape(invocation_id)}[/]")
            sys.exit(1)
        if as_json:
            emit_json({"invocation": _call_fields(call), "events": events})
            return
        _print_trace(out, call, events)

    @_cli.command()
    @click.option(
        "--config",
        "config_path",
        required=True,
        type=click.Path(dir_okay=False),
        help="The service's TOML configuration (the ledger is read from its store).",
    )
    @_JSON
    def unknown(config_path: str, *, as_json: bool) -> None:
        """List the calls whose outcome is unknown (exit 1 if any): reconcile's work."""
        out = command_console()
        config = _config_or_exit(config_path, command_console(stderr=True) if as_json else out)
        ledger = open_ledger(config.store_url)
        try:
            records = ledger.unresolved()
        finally:
            ledger.close()
        _print_unknown(out, records, as_json=as_json)
        sys.exit(1 if records else 0)

    @_cli.command("hash-key")
    def hash_key_command() -> None:
        """Read an API key on standard input; print the key_sha256 to put in the file."""
        from toolbound.config import hash_key  # noqa: PLC0415

        key = sys.stdin.readline().rstrip("\r\n")
        if not key.strip():
            print("no key on standard input: echo -n KEY | toolbound hash-key", file=sys.stderr)
            sys.exit(2)
        print(hash_key(key))

    @_cli.command("revoke-sessions")
    @click.argument("principal")
    @click.option(
        "--config",
        "config_path",
        required=True,
        type=click.Path(dir_okay=False),
        help="The service's TOML configuration (sessions live in its store).",
    )
    def revoke_sessions(principal: str, config_path: str) -> None:
        """End every console session of PRINCIPAL, in every process sharing the store."""
        console = command_console()
        config = _config_or_exit(config_path, console)
        journal = journal_for(config.store_url)
        try:
            ended = journal.end_sessions(principal)
        finally:
            journal.close()
        known = any(p.name == principal for p in config.principals)
        note = "" if known else " (no such principal in the file)"
        console.print(f"ended {ended} console session(s) of {escape(principal)}{note}")

    @_cli.command()
    def demo() -> None:
        """Run the seeds' scenarios end to end and show every call's path."""
        from toolbound.packs.demo import run_demo  # noqa: PLC0415 - keeps start-up light

        console = command_console()
        for n, scenario in enumerate(run_demo(), 1):
            o = scenario.outcome
            table = Table(show_header=False, box=None, pad_edge=False)
            table.add_column(style="bold", no_wrap=True)
            table.add_column(overflow="fold")
            table.add_row("path", " → ".join(s.name for s in o.path))
            table.add_row("outcome", o.kind)
            problem = getattr(o, "problem", None)
            if problem is not None:
                table.add_row("reason", f"{problem.code}: {problem.message}")
            table.add_row("to model", o.message.text)
            for key, value in scenario.facts.items():
                table.add_row(key, str(value))
            heading(console, f"[bold]{n}. {escape(scenario.title)}")
            console.print(table)


def _config_or_exit(path: str, console: Console) -> ServiceConfig:
    from toolbound.config import ConfigError  # noqa: PLC0415

    try:
        return _load(path)
    except ConfigError as exc:
        _print_issues(console, exc)
        sys.exit(1)


def _print_issues(console: Console, exc: ConfigError) -> None:
    where = escape(exc.source or "configuration")
    console.print(f"[red]{where}: {len(exc.issues)} problem(s)[/]", soft_wrap=True)
    for issue in exc.issues:
        at = f"{exc.source}:{issue.line}:{issue.column}: " if issue.line is not None else ""
        differs = issue.where and issue.where != issue.path
        also = f" [dim]({escape(issue.path)})[/]" if differs else ""
        console.print(
            f"  {escape(at)}[bold]{escape(issue.where or issue.path or '(file)')}[/]: "
            f"{escape(issue.message)}{also}",
            highlight=False,
            soft_wrap=True,
        )


def _logging_to_stderr(config: ServiceConfig, level: str | None) -> str:
    """Log as ``[logging]`` says, at ``level`` if one was given; the level in force."""
    from toolbound.logs import configure  # noqa: PLC0415

    chosen = cast("Level", level or config.logging.level)
    configure(chosen, config.logging.format)
    return chosen


def _key_hints(config_path: str) -> list[str]:
    """The demo keys a configuration file names in its opening comment, to sign in with."""
    try:
        with open(config_path, encoding="utf-8") as file:  # noqa: PTH123 - a plain read
            head = [line.strip() for line in file.readlines()[:20]]
    except OSError:
        return []
    return [
        "demo key: " + line.lstrip("# ")
        for line in head
        if line.startswith("#") and "demo-" in line and "-key" in line
    ]


def _serve(
    config_path: str,
    config: ServiceConfig,
    *,
    host: str,
    port: int | None,
    log_level: str | None,
    console: Console,
) -> None:
    """Serve ``config`` on ``host``: in this process, or in ``config.workers`` of them."""
    from toolbound.service.api import create_app  # noqa: PLC0415
    from toolbound.service.server import serve as run_server  # noqa: PLC0415
    from toolbound.service.workers import build_service, serve_workers  # noqa: PLC0415

    port = config.port if port is None else port
    service = None
    if config.workers == 1:
        with console.status("opening the store and loading the tools…"):
            service = build_service(config)
        if service.recovered:
            console.print(f"{service.recovered} call(s) interrupted by the last stop, recorded")
    else:
        config.build_registry()  # a tool that cannot load is said once, here, not per worker
    base = f"http://{host}:{port}"
    processes = "" if service is not None else f" ({config.workers} processes)"
    console.print(f"[bold]toolbound[/] serving on [link]{base}/[/link]{processes}")
    console.print(f"  console  [link]{base}/console[/link]  (sign in with an API key)")
    console.print(f"  API      {base}/v1  ·  {base}/openapi.json")
    for line in _key_hints(config_path):
        console.print(f"  {line}", highlight=False)
    level = _logging_to_stderr(config, log_level)
    # uvicorn's own access lines carry query strings: the service logs each request
    # itself (toolbound.access_log), without them.
    if service is None:
        serve_workers(
            config_path, config, host=host, port=port, log_level=level, workers=config.workers
        )
    else:
        run_server(create_app(service), config, host=host, port=port, log_level=level)


def _requiring(
    extra: str, name: str, callback: Callable[..., object] | None
) -> Callable[..., object] | None:
    """``callback``, after the check that ``extra`` is there."""
    if callback is None:
        return None

    @functools.wraps(callback)
    def checked(*args: object, **kwargs: object) -> object:
        needs(extra, f"toolbound {name}")
        return callback(*args, **kwargs)

    return checked


def _clock() -> Clock:
    from toolbound._clock import SystemClock  # noqa: PLC0415

    return SystemClock()


def _load(path: str) -> ServiceConfig:
    from toolbound.config import load_config  # noqa: PLC0415

    return load_config(path)


def _problems(exc: ConfigError) -> list[dict[str, str | int | None]]:
    """Each problem: its key path (empty for the file itself), as the file reads, where, what."""
    return [
        {
            "path": issue.path,
            "where": issue.where or issue.path,
            "line": issue.line,
            "column": issue.column,
            "message": issue.message,
        }
        for issue in exc.issues
    ]


def _call_fields(call: StoredCall) -> dict[str, object]:
    """The head of one invocation as ``trace --json`` prints it (not its stored body)."""
    return {
        "invocation_id": call.invocation_id,
        "tool": call.tool,
        "tenant": call.tenant,
        "subject": call.subject,
        "principal": call.principal,
        "surface": call.surface,
        "status": call.status,
        "state": call.state,
        "digest": call.digest,
        "decision": call.decision,
        "approver": call.approver,
        "created_at": call.created_at.isoformat(),
        "updated_at": call.updated_at.isoformat(),
    }


def _print_trace(out: Console, call: StoredCall, events: list[dict[str, object]]) -> None:
    """The call's head, then one row per event with every detail, none cut short."""
    heading(out, f"[bold]{escape(call.tool)}[/] {call.invocation_id}")
    # Subjects, arguments and results are data, never console markup.
    out.print(
        Text(
            f"subject {call.subject} ({call.tenant}) · status {call.status}"
            f" · surface {call.surface}"
        ),
    )
    if call.digest:
        out.print(f"digest {call.digest}")
    table = Table("#", "at", "event", "state", "detail")
    table.columns[-1].overflow = "fold"
    for event in events:
        data = event.get("data")
        data = data if isinstance(data, dict) else {}
        detail = ", ".join(f"{k}={_json_text(v)}" for k, v in data.items())
        table.add_row(
            str(event.get("seq")),
            str(event.get("at", ""))[11:23],
            str(event.get("kind")),
            str(event.get("state") or ""),
            Text(detail),
        )
    out.print(table)


_UNKNOWN_COLUMNS = ("invocation_id", "tool", "key", "tenant", "since", "deadline")


def _print_unknown(out: Console, records: list[LedgerRecord], *, as_json: bool) -> None:
    """``reconcile --list``: the unknown outcomes, as ``unknown`` prints them."""
    rows = [_unknown_fields(r) for r in records]
    if as_json:
        emit_json({"unknown": rows})
        return
    table = Table("invocation", "tool", "key", "tenant", "since", "deadline")
    for row in rows:
        table.add_row(*(Text(str(row[k])) for k in _UNKNOWN_COLUMNS))
    out.print(table)
    out.print(f"{len(rows)} unknown outcome(s)")


def _print_reconciled(out: Console, results: list[Reconciled], left: int, *, as_json: bool) -> None:
    """What one reconcile pass found, call by call, and how many are left unknown."""
    rows = [
        {
            "invocation_id": done.invocation_id,
            "tool": done.tool,
            "status": done.status,
            "evidence": dict(done.evidence),
        }
        for done in results
    ]
    if as_json:
        emit_json({"reconciled": rows, "resolved": len(rows) - left, "left": left})
        return
    table = Table("invocation", "tool", "status", "evidence")
    table.columns[-1].overflow = "fold"
    for row in rows:
        table.add_row(
            *(Text(str(row[k])) for k in ("invocation_id", "tool", "status")),
            Text(_json_text(row["evidence"])),
        )
    out.print(table)
    out.print(f"{len(rows) - left} resolved, {left} still unknown")


def _unknown_fields(record: LedgerRecord) -> dict[str, object]:
    """One outcome-unknown call as ``unknown --json`` prints it."""
    return {
        "invocation_id": record.invocation_id,
        "tool": record.tool,
        "key": record.key.key,
        "tenant": record.subject.get("tenant"),
        "scope": record.key.scope,
        "digest": record.digest,
        "subject": dict(record.subject),
        "since": record.updated_at.isoformat(),
        "deadline": record.deadline.isoformat(),
    }


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


if _MISSING is None:
    from toolbound.cli_inbox import decide, edit, pending
    from toolbound.cli_ops import backup, migrate, restore
    from toolbound.mcp.cli import mcp_gateway, mcp_serve

    for _extra, _commands in (("mcp", (mcp_gateway, mcp_serve)), ("http", (pending, decide, edit))):
        for _command in _commands:
            _command.callback = _requiring(_extra, _command.name or _extra, _command.callback)
            _cli.add_command(_command)
    for _command in (backup, restore, migrate):
        _cli.add_command(_command)
