"""``toolbound serve --workers N``: several processes on one address act as one server.

Each worker is a replica over the shared store; what a person sees must not depend on
which worker took the request: a console session signed in on one is good on all,
``/metrics`` counts every worker's calls, and stopping the server stops them all.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from servers import Server
from service_config import KEYS, config_text

from toolbound.cli import _cli

SERVE = [sys.executable, "-c", "from toolbound.cli import main; main()", "serve"]


def checked_line(config: Path, key: str) -> int:
    """The line of ``config`` that sets ``key``."""
    lines = config.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if line.startswith(f"{key} ="))


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _workers(server: Server, count: int) -> set[int]:
    """The server's worker processes, once ``count`` of them have started."""
    assert server.process is not None
    deadline = time.monotonic() + 20
    while True:
        # The supervisor also starts multiprocessing's resource tracker: not a worker.
        workers = {
            pid
            for pid in _children(server.process.pid)
            if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        }
        if len(workers) >= count or time.monotonic() > deadline:
            return workers
        time.sleep(0.1)


@pytest.fixture
def server(tmp_path, effects_path):
    config = tmp_path / "toolbound.toml"
    config.write_text(config_text(f"sqlite:///{tmp_path / 'store.db'}"))
    running = Server(config, {}, args=("--workers", "2")).start()
    yield running
    running.stop()


def _fresh(server: Server) -> httpx.Client:
    """A client of its own connection: which worker accepts it is the kernel's choice."""
    return httpx.Client(base_url=server.url, timeout=30)


def _read(server: Server, key: str) -> dict[str, object]:
    """One read-only proposal on a connection of its own; its answer, checked 200."""
    with _fresh(server) as client:
        r = client.post(
            "/v1/proposals",
            json={"tool": "notes.shout", "arguments": '{"text": "hi"}', "call_id": key},
            headers={"Authorization": f"Bearer {KEYS['agent']}", "Idempotency-Key": key},
        )
    assert r.status_code == 200, r.text
    answer: dict[str, object] = r.json()
    return answer


def test_two_workers_serve_on_one_address_and_stop_together(server):
    workers = _workers(server, 2)
    assert len(workers) == 2
    for n in range(20):
        assert _read(server, f"k{n}")["status"] == "observed"
    server.stop()
    assert server.process is not None
    assert server.process.returncode == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)


def test_metrics_count_every_workers_calls_whichever_answers(server):
    _workers(server, 2)
    for n in range(12):
        _read(server, f"m{n}")
    for _ in range(6):
        with _fresh(server) as client:
            text = client.get("/metrics", headers={"Authorization": f"Bearer {KEYS['ops']}"}).text
        assert 'toolbound_tool_calls_total{outcome="observed",tool="notes.shout@v1"} 12.0' in text


def test_a_console_session_signed_in_on_one_worker_is_good_on_every_one(server):
    _workers(server, 2)
    with _fresh(server) as browser:
        page = browser.get("/console/login").text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        assert csrf, page
        signed_in = browser.post("/console/login", data={"key": KEYS["ana"], "csrf": csrf[1]})
        assert signed_in.status_code == 303, signed_in.text
        cookies = browser.cookies
    for _ in range(16):
        with httpx.Client(base_url=server.url, cookies=cookies, timeout=30) as other:
            page = other.get("/console/pending")
            # A session another worker cannot read would be sent back to sign in.
            assert page.status_code == 200, page.headers.get("location")


def test_several_workers_refuse_a_store_of_each_process_own(tmp_path):
    config = tmp_path / "toolbound.toml"
    config.write_text(config_text("memory", extra="workers = 2\n"))
    checked = CliRunner().invoke(_cli, ["check-config", str(config), "--json"])
    assert checked.exit_code == 1
    assert json.loads(checked.output)["problems"] == [
        {
            "path": "service.workers",
            "where": "service.workers",
            "line": checked_line(config, "workers"),
            "column": 1,
            "message": "more than one worker needs a shared store, not `memory`",
        }
    ]
    config.write_text(config_text("memory"))
    served = subprocess.run(  # noqa: S603 - our own interpreter and arguments
        [*SERVE, "--config", str(config), "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert served.returncode == 1
    assert "shared store" in served.stderr
