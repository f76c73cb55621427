"""A tool's reports relayed to its MCP client: only a call that reports pays for the relay."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from mcp_support import run

from toolbound.execution.tool import REPORTER
from toolbound.mcp.reporting import LogLevels, Reports, relaying


class Connection:
    """A client connection: what a log level is kept against."""


def request() -> SimpleNamespace:
    """The SDK's request context, as far as the relay reads it (a 2025-era connection)."""
    return SimpleNamespace(session=Connection(), request_id=1, protocol_version="2025-11-25")


def test_a_silent_call_starts_nothing_and_a_report_after_it_ended_goes_nowhere() -> None:
    """No sender task for a call that reports nothing; a late report neither sends nor lingers."""

    async def scenario() -> tuple[list[float], Reports, bool, bool]:
        sent: list[float] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            del total, message
            sent.append(value)

        ctx = request()
        before = asyncio.all_tasks()
        async with relaying(ctx, progress, LogLevels()) as reports:  # type: ignore[arg-type]
            reporter = REPORTER.get()
            quiet = asyncio.all_tasks() == before
        assert reporter is not None
        reporter.progress(1.0, None, None)
        await asyncio.sleep(0.01)
        return sent, reports, quiet, asyncio.all_tasks() == before

    sent, reports, quiet, after = run(scenario())
    assert (sent, reports, quiet, after) == ([], Reports(), True, True)


def test_reports_made_during_a_call_are_sent_in_order_before_it_ends() -> None:
    """Progress from a worker thread reaches the client in order, and is counted."""

    async def scenario() -> tuple[list[float], Reports]:
        sent: list[float] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            del total, message
            await asyncio.sleep(0)
            sent.append(value)

        def tool() -> None:
            reporter = REPORTER.get()
            assert reporter is not None
            for step in range(5):
                reporter.progress(float(step), 5.0, None)

        ctx = request()
        async with relaying(ctx, progress, LogLevels()) as reports:  # type: ignore[arg-type]
            await asyncio.to_thread(tool)
        return sent, reports

    sent, reports = run(scenario())
    assert sent == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert reports == Reports(progress=5)
