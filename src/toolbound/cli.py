"""The ``toolbound`` command."""

from __future__ import annotations

import sys

try:
    import click
    from rich.console import Console
    from rich.table import Table
except ImportError as exc:  # pragma: no cover - depends on the environment
    _MISSING: ImportError | None = exc
else:
    _MISSING = None

__all__ = ["main"]


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
