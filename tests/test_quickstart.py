"""docs/quickstart.md works as written: its files, its commands, a person's approval, the trace.

The page's titled code blocks are written out as the files they name; the commands it
gives run against them (`hash-key`, `check-config`, a real `toolbound serve`, the
agent as its own process, `trace`). The person's step is the console's own sign-in
and decision forms, as a browser sends them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
from click.testing import CliRunner

from service.servers import Server
from toolbound.cli import _cli

PAGE = Path(__file__).resolve().parents[1] / "docs" / "quickstart.md"
TITLED = re.compile(r'```\w+ title="([^"]+)"\n(.*?)```', re.DOTALL)
KEYS = {"agent": "qs-agent-key-change-me", "ana": "qs-approver-key-change-me"}


def _files() -> dict[str, str]:
    return dict(TITLED.findall(PAGE.read_text(encoding="utf-8")))


def _shell(command: str) -> bool:
    """Whether the page gives ``command`` in one of its shell blocks."""
    blocks = re.findall(r"```sh\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)
    return any(command in block for block in blocks)


def test_the_page_gives_each_file_and_command_this_test_runs():
    """The three files, and the commands: install, hash-key, check-config, serve, trace."""
    assert set(_files()) == {"mytools.py", "toolbound.toml", "agent.py"}
    for command in (
        "pip install 'toolbound[service]'",
        "echo -n qs-agent-key-change-me | toolbound hash-key",
        "export PYTHONPATH=$PWD",
        "toolbound check-config toolbound.toml",
        "toolbound serve --config toolbound.toml",
        "python agent.py",
        "toolbound trace INVOCATION_ID --config toolbound.toml",
    ):
        assert _shell(command), command


def test_the_keys_hashes_in_the_file_are_what_hash_key_prints():
    """Each key_sha256 of toolbound.toml is `toolbound hash-key` of the page's key."""
    toml = _files()["toolbound.toml"]
    for key in KEYS.values():
        printed = CliRunner().invoke(_cli, ["hash-key"], input=key + "\n").output.strip()
        assert f'key_sha256 = "{printed}"' in toml


def _console_approves(url: str, agent: subprocess.Popen[str]) -> str:
    """Ana signs in to the console and approves the one pending call; its invocation id."""
    with httpx.Client(base_url=url, follow_redirects=False) as browser:
        csrf = _csrf(browser.get("/console/login").text)
        signed_in = browser.post("/console/login", data={"key": KEYS["ana"], "csrf": csrf})
        assert signed_in.status_code == 303, signed_in.text
        deadline = time.monotonic() + 60
        waiting: list[dict[str, object]] = []
        while not waiting and time.monotonic() < deadline:
            assert agent.poll() is None, agent.communicate()
            time.sleep(0.2)
            waiting = httpx.get(
                f"{url}/v1/confirmations", headers={"Authorization": f"Bearer {KEYS['ana']}"}
            ).json()["confirmations"]
        (call,) = waiting
        page = browser.get("/console/pending").text
        assert str(call["invocation_id"]) in page
        decided = browser.post(
            f"/console/invocations/{call['invocation_id']}/decision",
            data={"csrf": _csrf(page), "digest": call["digest"], "decision": "approve"},
        )
        assert decided.status_code < 400, decided.text
        return str(call["invocation_id"])


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "the page has no CSRF token"
    return found.group(1)


def test_the_quickstart_runs_end_to_end(tmp_path, monkeypatch):
    """Served, the agent's read answers at once; its refund runs once Ana approves it."""
    for name, text in _files().items():
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))  # export PYTHONPATH=$PWD
    config = str(tmp_path / "toolbound.toml")
    checked = CliRunner().invoke(_cli, ["check-config", config])
    assert checked.exit_code == 0, checked.output
    assert "issue_refund@v1, order_status@v1" in checked.output

    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    server = Server(tmp_path / "toolbound.toml", env={"PYTHONPATH": path}).start()
    agent_py = (
        (tmp_path / "agent.py").read_text().replace("127.0.0.1:8780", f"127.0.0.1:{server.port}")
    )
    (tmp_path / "agent.py").write_text(agent_py)
    agent = subprocess.Popen(
        [sys.executable, "agent.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        approved = _console_approves(server.url, agent)
        out, err = agent.communicate(timeout=60)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.communicate()
        server.stop()
    assert agent.returncode == 0, err
    assert "order_status: observed" in out
    assert '"data":"delivered"' in out
    assert f"issue_refund: waiting for a person to approve {approved}" in out
    assert f"issue_refund: observed, invocation {approved}" in out
    assert "refunded 1299 cents on A-1001" in out

    trace = CliRunner().invoke(_cli, ["trace", approved, "--config", config])
    assert trace.exit_code == 0, trace.output
    for step in ("issue_refund@v1", "awaiting_confirmation", "decision", "observed"):
        assert step in trace.output
