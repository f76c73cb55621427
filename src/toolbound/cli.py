"""The ``toolbound`` command.

The top of the surfaces: it may reach the service and the MCP commands (``serve``,
``mcp-*``); nothing in toolbound imports it. What it shares with them — stores from a
URL, registries by name, telemetry — comes from :mod:`toolbound.wiring`.

Each command needs one extra, and says which when it is missing (exit status 2)::

    reconcile, check-config, trace, demo, hash-key,
    revoke-sessions                                   toolbound[cli]
    serve                                             toolbound[service]
    mcp-serve, mcp-gateway                            toolbound[mcp]

A ``postgresql://`` store needs ``toolbound[postgres]`` as well.
"""

from __future__ import annotations

import functools
import importlib
import json
import sys
from typing import TYPE_CHECKING, NoReturn

from toolbound.wiring import journal_for, load_registry, open_ledger, telemetry_sinks

if TYPE_CHECKING:
    from collections.abc import Callable

    from toolbound._clock import Clock
    from toolbound.config import ConfigError, ServiceConfig

try:
    import click
    from rich.console import Console
    from rich.table import Table
except ImportError as exc:  # pragma: no cover - depends on the environment
    _MISSING: ImportError | None = exc
else:
    _MISSING = None

__all__ = ["EXTRAS", "main", "needs"]


EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("click", "rich"),
    "service": ("starlette", "uvicorn", "jinja2", "multipart", "itsdangerous", "opentelemetry"),
    "mcp": ("mcp", "httpx"),
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
    def reconcile(
        config_path: str | None,
        ledger_url: str | None,
        tools: str | None,
        *,
        list_only: bool,
        grace: float,
    ) -> None:
        """Resolve outcome-unknown calls through their tools' query hooks.

        With ``--config`` the service's journal is settled with the ledger, call by
        call, as the API and the console settle them.
        """
        from datetime import timedelta  # noqa: PLC0415

        from toolbound.execution.reconcile import Reconciler  # noqa: PLC0415
        from toolbound.service.records import settle_unknown  # noqa: PLC0415

        console = Console()
        journal = None
        if config_path is not None:
            config = _config_or_exit(config_path, console)
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
                records = reconciler.unresolved()
                table = Table("invocation", "tool", "key", "since")
                for r in records:
                    table.add_row(r.invocation_id, r.tool, r.key.key, r.updated_at.isoformat())
                console.print(table)
                console.print(f"{len(records)} unknown outcome(s)")
                return
            with console.status("reconciling…"):
                results = [
                    settle_unknown(reconciler, journal, r.invocation_id)
                    for r in reconciler.unresolved()
                ]
            table = Table("invocation", "tool", "status", "evidence")
            for done in results:
                table.add_row(done.invocation_id, done.tool, done.status, str(dict(done.evidence)))
            console.print(table)
            left = sum(done.status in {"unknown", "needs_person"} for done in results)
            console.print(f"{len(results) - left} resolved, {left} still unknown")
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
    def serve(config_path: str, host: str | None, port: int | None, *, cookie_secure: bool) -> None:
        """Start the HTTP API and the console."""
        needs("service", "toolbound serve")
        from dataclasses import replace  # noqa: PLC0415

        from toolbound.service.api import create_app  # noqa: PLC0415
        from toolbound.service.core import Service  # noqa: PLC0415
        from toolbound.service.server import serve as run_server  # noqa: PLC0415

        console = Console(stderr=True)
        config = _config_or_exit(config_path, console)
        if cookie_secure:
            config = replace(config, cookie_secure=True)
        host = host or config.host
        port = config.port if port is None else port
        with console.status("opening the store and loading the tools…"):
            registry = config.build_registry()
            service = Service(config, registry=registry, sinks=telemetry_sinks(config, registry))
        if service.recovered:
            console.print(f"{service.recovered} call(s) interrupted by the last stop, recorded")
        base = f"http://{host}:{port}"
        console.print(f"[bold]toolbound[/] serving on [link]{base}/[/link]")
        console.print(f"  console  [link]{base}/console[/link]  (sign in with an API key)")
        console.print(f"  API      {base}/v1  ·  {base}/openapi.json")
        for line in _key_hints(config_path):
            console.print(f"  {line}", highlight=False)
        run_server(create_app(service), config, host=host, port=port)

    @_cli.command("check-config")
    @click.argument("config_path", type=click.Path(dir_okay=False))
    def check_config(config_path: str) -> None:
        """Validate a configuration file and explain every problem."""
        from rich.text import Text  # noqa: PLC0415

        from toolbound.config import ConfigError  # noqa: PLC0415

        console = Console()
        config = _config_or_exit(config_path, console)
        try:
            registry = config.build_registry()
            config.build_policy(_clock())
        except ConfigError as exc:
            _print_issues(console, exc)
            sys.exit(1)
        table = Table("", "", show_header=False, box=None)
        table.add_row("store", config.store_url)
        table.add_row("tools", ", ".join(sorted(t.spec.ref for t in registry)) or "none")
        table.add_row("principals", ", ".join(p.name for p in config.principals))
        table.add_row("grants", str(len(config.grants)))
        table.add_row("listen", f"{config.host}:{config.port}")
        console.print(table)
        for warning in config.warnings():
            console.print(Text(f"warning {warning}", style="yellow"))
        console.print(f"[green]{config_path}: valid[/]")

    @_cli.command()
    @click.argument("invocation_id")
    @click.option(
        "--config",
        "config_path",
        required=True,
        type=click.Path(dir_okay=False),
        help="The service's TOML configuration (the trace is read from its store).",
    )
    def trace(invocation_id: str, config_path: str) -> None:
        """Show one invocation's state path and trace timeline."""
        from rich.markup import escape  # noqa: PLC0415
        from rich.text import Text  # noqa: PLC0415

        console = Console()
        config = _config_or_exit(config_path, console)
        journal = journal_for(config.store_url)
        try:
            call = journal.get_call(invocation_id)
            events = journal.events(invocation_id)
        finally:
            journal.close()
        if call is None:
            console.print(f"[red]no invocation {escape(invocation_id)}[/]")
            sys.exit(1)
        console.rule(f"[bold]{escape(call.tool)}[/] {call.invocation_id}")
        # Subjects, arguments and results are data, never console markup.
        console.print(
            Text(
                f"subject {call.subject} ({call.tenant}) · status {call.status}"
                f" · surface {call.surface}"
            ),
        )
        if call.digest:
            console.print(f"digest {call.digest}")
        table = Table("#", "at", "event", "state", "detail")
        for event in events:
            data = event.get("data")
            data = data if isinstance(data, dict) else {}
            detail = ", ".join(f"{k}={_short(v)}" for k, v in data.items())
            table.add_row(
                str(event.get("seq")),
                str(event.get("at", ""))[11:23],
                str(event.get("kind")),
                str(event.get("state") or ""),
                Text(detail),
            )
        console.print(table)

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
        from rich.markup import escape  # noqa: PLC0415

        console = Console()
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

        console = Console()
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
            console.rule(f"[bold]{n}. {scenario.title}")
            console.print(table)


def _config_or_exit(path: str, console: Console) -> ServiceConfig:
    from toolbound.config import ConfigError, load_config  # noqa: PLC0415

    try:
        return load_config(path)
    except ConfigError as exc:
        _print_issues(console, exc)
        sys.exit(1)


def _print_issues(console: Console, exc: ConfigError) -> None:
    from rich.markup import escape  # noqa: PLC0415

    where = escape(exc.source or "configuration")
    console.print(f"[red]{where}: {len(exc.issues)} problem(s)[/]", soft_wrap=True)
    for issue in exc.issues:
        console.print(
            f"  [bold]{escape(issue.path or '(file)')}[/]: {escape(issue.message)}",
            highlight=False,
            soft_wrap=True,
        )


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


def _requiring_mcp(
    name: str, callback: Callable[..., object] | None
) -> Callable[..., object] | None:
    """``callback``, after the check that the MCP extra is there."""
    if callback is None:
        return None

    @functools.wraps(callback)
    def checked(*args: object, **kwargs: object) -> object:
        needs("mcp", f"toolbound {name}")
        return callback(*args, **kwargs)

    return checked


def _clock() -> Clock:
    from toolbound._clock import SystemClock  # noqa: PLC0415

    return SystemClock()


def _short(value: object, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


if _MISSING is None:
    from toolbound.mcp.cli import mcp_gateway, mcp_serve

    for _command in (mcp_gateway, mcp_serve):
        _command.callback = _requiring_mcp(_command.name or "mcp", _command.callback)

    _cli.add_command(mcp_gateway)
    _cli.add_command(mcp_serve)
