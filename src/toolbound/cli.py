"""The ``toolbound`` command."""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from toolbound.registry import Registry

if TYPE_CHECKING:
    from toolbound.ledger.store import Ledger

try:
    import click
    from rich.console import Console
    from rich.table import Table
except ImportError as exc:  # pragma: no cover - depends on the environment
    _MISSING: ImportError | None = exc
else:
    _MISSING = None

__all__ = ["load_registry", "main", "open_ledger"]


def open_ledger(url: str) -> Ledger:
    """A ledger from a URL: ``sqlite:///PATH`` or ``postgresql://…``."""
    if url.startswith("sqlite:///"):
        from toolbound.ledger.sqlite import SQLiteLedger  # noqa: PLC0415

        return SQLiteLedger(url.removeprefix("sqlite:///"))
    if url.startswith(("postgresql://", "postgres://")):
        from toolbound.ledger.postgres import PostgresLedger  # noqa: PLC0415

        return PostgresLedger(url)
    msg = f"unsupported ledger URL {url!r}: use sqlite:///PATH or postgresql://…"
    raise SystemExit(msg)


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


def main() -> None:
    """Entry point of the ``toolbound`` script."""
    if _MISSING is not None:
        print(
            f"toolbound's command line needs the 'cli' extra ({_MISSING.name} is missing): "
            "pip install 'toolbound[cli]'",
            file=sys.stderr,
        )
        sys.exit(2)
    _cli()


if _MISSING is None:

    @click.group()
    @click.version_option(package_name="toolbound")
    def _cli() -> None:
        """toolbound: the controlled execution layer for model tool calls."""

    @_cli.command()
    @click.option(
        "--ledger",
        "ledger_url",
        required=True,
        help="sqlite:///PATH or a postgresql:// connection string.",
    )
    @click.option(
        "--tools",
        required=True,
        help="MODULE:FUNCTION returning the Registry whose tools own the calls.",
    )
    @click.option("--list", "list_only", is_flag=True, help="Only list unknown outcomes.")
    @click.option("--grace", default=30.0, show_default=True, help="Seconds past a deadline.")
    def reconcile(ledger_url: str, tools: str, *, list_only: bool, grace: float) -> None:
        """Resolve outcome-unknown calls through their tools' query hooks."""
        from datetime import timedelta  # noqa: PLC0415

        from toolbound.execution.reconcile import Reconciler  # noqa: PLC0415

        console = Console()
        ledger = open_ledger(ledger_url)
        try:
            reconciler = Reconciler(
                ledger=ledger, registry=load_registry(tools), grace=timedelta(seconds=grace)
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
                results = reconciler.reconcile()
            table = Table("invocation", "tool", "status", "evidence")
            for done in results:
                table.add_row(done.invocation_id, done.tool, done.status, str(dict(done.evidence)))
            console.print(table)
            left = sum(done.status in {"unknown", "needs_person"} for done in results)
            console.print(f"{len(results) - left} resolved, {left} still unknown")
            sys.exit(1 if left else 0)
        finally:
            ledger.close()

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
