"""No blocking I/O on the event loop: the stores refuse it, the service hops to its pool."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import time

import httpx
import pytest
from service_config import KEYS, config_text

from toolbound._loopguard import LoopBlockedError, set_loop_guard
from toolbound.config import parse_config
from toolbound.execution.offload import Offload
from toolbound.journal import SQLiteJournal
from toolbound.ledger.sqlite import SQLiteLedger
from toolbound.service.api import create_app
from toolbound.service.core import Service


@pytest.fixture
def service(tmp_path, effects_path):
    path = tmp_path / "toolbound.toml"
    path.write_text(config_text("sqlite:///toolbound.db"))
    svc = Service(parse_config(path.read_text(), source=path))
    yield svc
    svc.close()


def test_a_store_call_on_a_running_loop_raises(tmp_path):
    """With the guard on, the journal and the ledger refuse to block a loop's thread."""
    journal = SQLiteJournal(tmp_path / "journal.db")
    ledger = SQLiteLedger(tmp_path / "ledger.db")

    async def on_the_loop() -> None:
        with pytest.raises(LoopBlockedError, match="journal"):
            journal.get_call("x")
        with pytest.raises(LoopBlockedError, match="ledger"):
            ledger.find("x")

    try:
        asyncio.run(on_the_loop())
    finally:
        journal.close()
        ledger.close()


def test_the_same_calls_pass_on_the_pool_and_with_the_guard_off(tmp_path):
    """The pool's threads run no loop; a library program with the guard off is untouched."""
    journal = SQLiteJournal(tmp_path / "journal.db")
    pool = Offload(2)

    async def hop() -> object:
        return await pool(journal.get_call, "x")

    async def inline() -> object:
        return journal.get_call("x")

    try:
        assert asyncio.run(hop()) is None
        set_loop_guard(False)
        assert asyncio.run(inline()) is None
    finally:
        set_loop_guard(True)
        pool.close()
        journal.close()


def test_the_pool_needs_a_thread():
    """An I/O pool of no threads is a configuration error, not a service that hangs."""
    with pytest.raises(ValueError, match="at least one"):
        Offload(0)


class _HeldJournal:
    """The service's journal, whose listing waits until the test lets it go."""

    def __init__(self, journal: object) -> None:
        self._journal = journal
        self.entered = threading.Event()
        self.release = threading.Event()

    def list_calls(self, *args: object, **kwargs: object) -> object:
        self.entered.set()
        self.release.wait(10.0)
        return self._journal.list_calls(*args, **kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._journal, name)


def test_a_stalled_store_call_holds_up_no_other_request(service):
    """While one request waits on the journal, /healthz and an API-key read still answer."""
    held = _HeldJournal(service.journal)
    service.journal = held  # type: ignore[assignment]
    app = create_app(service, console=False)
    headers = {"Authorization": f"Bearer {KEYS['ops']}"}

    async def run() -> tuple[int, int, bool]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            slow = asyncio.create_task(client.get("/v1/invocations", headers=headers))
            assert await asyncio.to_thread(held.entered.wait, 10.0)
            health = await client.get("/healthz")
            metrics = await client.get("/openapi.json")
            still_waiting = not slow.done()
            held.release.set()
            listed = await slow
            assert listed.status_code == 200
            return health.status_code, metrics.status_code, still_waiting

    assert asyncio.run(run()) == (200, 200, True)


def test_closing_the_pool_waits_for_what_runs_and_cancels_what_waits() -> None:
    """The service closes its stores after its pool: no pipeline is left running on them."""
    pool = Offload(1)
    started, ended = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        time.sleep(0.2)
        ended.set()
        return "done"

    async def both() -> tuple[object, object]:
        running = asyncio.ensure_future(pool(slow))
        waiting = asyncio.ensure_future(pool(lambda: "never"))
        await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
        close = functools.partial(pool.close, wait=True)
        await asyncio.get_running_loop().run_in_executor(None, close)
        assert ended.is_set()  # close returned only once the running call had ended
        return await asyncio.gather(running, waiting, return_exceptions=True)

    done, refused = asyncio.run(both())
    assert done == "done"
    assert isinstance(refused, concurrent.futures.CancelledError)
