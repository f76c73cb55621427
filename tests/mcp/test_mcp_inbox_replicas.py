"""One inbox on any replica (R7, R18): two MCP processes on one store, a decision between.

Two real ``toolbound mcp-serve --http`` processes (and two ``mcp-gateway --http``
before a real mcp-server-git) share one store — an SQLite file, and PostgreSQL. The
official SDK client (no elicitation: it gets the documented pending result) calls a
tool that needs a person on replica A; a person decides it in the service's API on
the same store; the client asks the same call again on replica B and gets the decided
call's outcome. The call runs once, on the replica that holds it (or, its holder
gone, the one that takes it over), never parked a second time, never run twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import pytest
from mcp_support import PRINCIPALS, TOKENS, as_, commits, envelope, git_upstream, grant, run
from node_support import wait_for_port
from starlette.testclient import TestClient

from toolbound.mcp import load_gateway_config
from toolbound.service.api import create_app
from toolbound.service.core import Service
from toolbound.wiring import journal_for

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pgcluster import PgCluster
    from toolbound.mcp import GatewayConfig

HERE = Path(__file__).parent
LEASE = 2.0
"""Seconds a replica holds its parked calls unrenewed (``[service] lease``)."""
ADD = {"title": "buy milk"}
CONFIG = "replicas.toml"


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The one store both replicas and the service share."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    cluster: PgCluster = request.getfixturevalue("pg_cluster")
    conninfo: str = request.getfixturevalue("pg_conninfo")
    schema = conninfo.split("search_path=")[1].rstrip("'")
    return (
        f"postgresql://{cluster.user}@{cluster.host}:{cluster.port}/toolbound_tests"
        f"?options={quote(f'-c search_path={schema}')}"
    )


def write_config(folder: Path, store: str, body: str, *, ttl: float = 900) -> GatewayConfig:
    path = folder / CONFIG
    path.write_text(
        f"""
[store]
url = "{store}"

[service]
lease = {LEASE}
confirmation_ttl = {ttl}

[gateway]
confirm = "console"
{PRINCIPALS}
{body}
"""
    )
    return load_gateway_config(path)


def notes_config(folder: Path, store: str, *, ttl: float = 900) -> GatewayConfig:
    return write_config(
        folder,
        store,
        grant("mira", "notes:write", "create", confirm=True)
        + grant("mira", "notes:read", confirm=True),
        ttl=ttl,
    )


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Replica:
    """One ``toolbound mcp-serve`` or ``mcp-gateway`` process over HTTP on loopback."""

    def __init__(self, config: Path, *command: str, env: dict[str, str]) -> None:
        self.port = free_port()
        environment = {
            **os.environ,
            **env,
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        self.process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            [
                sys.executable,
                "-c",
                "from toolbound.cli import main; main()",
                *command,
                "--config",
                str(config),
                "--http",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_for_port(self.port, self.process)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)

    def stop(self, *, kill: bool = False) -> None:
        """SIGTERM (or SIGKILL) and wait until it has exited."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()


@contextlib.contextmanager
def replicas(config: Path, *command: str, env: dict[str, str]) -> Iterator[list[Replica]]:
    started: list[Replica] = []
    try:
        started.extend(Replica(config, *command, env=env) for _ in range(2))
        yield started
    finally:
        for replica in started:
            replica.stop()


class Desk:
    """The service on the replicas' store, as an approver (ops) uses its API."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.service = Service(config.service)
        self.http = TestClient(create_app(self.service))
        self.http.__enter__()
        self.headers = {"Authorization": f"Bearer {TOKENS['ops']}"}

    def waiting(self) -> list[dict[str, Any]]:
        r = self.http.get("/v1/confirmations", headers=self.headers)
        assert r.status_code == 200, r.text
        return list(r.json()["confirmations"])

    def listed(self, invocation_id: str, timeout: float = 10.0) -> dict[str, Any]:
        """The parked call once the replica's recorder has written it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [c for c in self.waiting() if c["invocation_id"] == invocation_id]
            if found:
                return found[0]
            time.sleep(0.05)
        msg = f"{invocation_id} was not listed within {timeout}s"
        raise AssertionError(msg)

    def decide(self, item: dict[str, Any], decision: str, **extra: object) -> Any:
        return self.http.post(
            f"/v1/invocations/{item['invocation_id']}/decision",
            json={"digest": item["digest"], "decision": decision, **extra},
            headers=self.headers,
        )

    def calls(self, tool: str) -> list[Any]:
        journal = journal_for(self.config.service.store_url)
        try:
            return [c for c in journal.list_calls("acme") if c.tool.startswith(tool)]
        finally:
            journal.close()

    def events(self, invocation_id: str) -> list[dict[str, object]]:
        journal = journal_for(self.config.service.store_url)
        try:
            return journal.events(invocation_id)
        finally:
            journal.close()

    def ended(self, invocation_id: str, timeout: float = 15.0) -> Any:
        """The call's head once it no longer waits nor runs."""
        journal = journal_for(self.config.service.store_url)
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                call = journal.get_call(invocation_id)
                if call is not None and call.status not in {"awaiting_confirmation", "running"}:
                    return call
                time.sleep(0.05)
            msg = f"{invocation_id} did not end within {timeout}s"
            raise AssertionError(msg)
        finally:
            journal.close()

    def close(self) -> None:
        self.http.__exit__(None, None, None)
        self.service.close()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


TTL = 900.0
"""``[service] confirmation_ttl`` of the replicas (a test marked ``ttl`` sets its own)."""


@pytest.fixture
def served(
    request: pytest.FixtureRequest, tmp_path: Path, store: str, notes: Path
) -> Iterator[tuple[Desk, list[Replica]]]:
    """Two ``mcp-serve`` replicas of the notes on ``store``, and the service's desk."""
    ttl = getattr(request, "param", TTL)
    config = notes_config(tmp_path, store, ttl=ttl)
    env = {"TOOLBOUND_TEST_NOTES": str(notes)}
    desk = Desk(config)
    try:
        with replicas(
            tmp_path / CONFIG, "mcp-serve", "--tools", "local_tools:tools", env=env
        ) as both:
            yield desk, both
    finally:
        desk.close()


async def call(url: str, tool: str, arguments: dict[str, Any]) -> Any:
    """One ``tools/call`` as mira, on a connection of its own (as a client reconnecting)."""
    async with as_(TOKENS["mira"], url) as client:
        return await client.call_tool(tool, arguments)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_write_parked_on_a_and_approved_in_the_service_is_answered_on_b(
    served: tuple[Desk, list[Replica]], notes: Path
) -> None:
    """Asked again on B while it waits: the same pending call; approved: its result, once."""
    desk, (a, b) = served
    pending = envelope(run(call(a.url, "notes.add", ADD)))
    assert pending["status"] == "awaiting_confirmation"
    listed = desk.listed(pending["invocation_id"])
    assert listed["decidable"] is True
    # The same call on B while A holds it: the one pending call, not a second one.
    waiting = envelope(run(call(b.url, "notes.add", ADD)))
    assert waiting["status"] == "awaiting_confirmation"
    assert waiting["invocation_id"] == pending["invocation_id"]
    assert [c["invocation_id"] for c in desk.waiting()] == [pending["invocation_id"]]
    r = desk.decide(listed, "approve")
    assert r.status_code == 202, r.text
    assert r.json()["handed_over"] is True
    ended = desk.ended(pending["invocation_id"])
    assert (ended.status, ended.decision, ended.approver) == ("observed", "approved", "ops")
    again = run(call(b.url, "notes.add", ADD))
    assert again.is_error is False, again
    assert "buy milk" in str(again.content)
    assert lines(notes) == ["buy milk"]  # exactly once
    assert desk.waiting() == []
    kinds = [e["kind"] for e in desk.events(pending["invocation_id"])]
    assert kinds.count("attempt") == 1


def test_a_read_denied_in_the_service_is_told_on_b_with_the_reason(
    served: tuple[Desk, list[Replica]], notes: Path
) -> None:
    """Denied with a reason: B answers the same call with the person's words, not a new park."""
    desk, (a, b) = served
    pending = envelope(run(call(a.url, "notes.read", {})))
    listed = desk.listed(pending["invocation_id"])
    r = desk.decide(listed, "deny", reason="not today")
    assert r.status_code == 202, r.text
    desk.ended(pending["invocation_id"])
    again = envelope(run(call(b.url, "notes.read", {})))
    assert again["error"]["code"] == "denied_by_person"
    assert "not today" in again["error"]["message"]
    time.sleep(LEASE / 2)  # what B wrote behind the answer is in the journal
    assert desk.waiting() == []
    # Once: the same call asked again after that is a new question for a person.
    fresh = envelope(run(call(b.url, "notes.read", {})))
    assert fresh["status"] == "awaiting_confirmation"
    assert fresh["invocation_id"] != pending["invocation_id"]
    assert not lines(notes)


def test_a_replica_stopped_ends_what_it_holds_and_the_same_call_waits_anew_on_b(
    served: tuple[Desk, list[Replica]], notes: Path
) -> None:
    """SIGTERM: A's parked call ends cancelled (nothing ran); asked on B it is parked there."""
    desk, (a, b) = served
    pending = envelope(run(call(a.url, "notes.add", ADD)))
    listed = desk.listed(pending["invocation_id"])
    a.stop()
    gone = desk.ended(pending["invocation_id"])
    assert (gone.status, gone.decision) == ("cancelled", None)
    assert desk.waiting() == []
    late = desk.decide(listed, "approve")
    assert (late.status_code, late.json()["code"]) == (409, "not_pending")
    anew = envelope(run(call(b.url, "notes.add", ADD)))
    assert anew["status"] == "awaiting_confirmation"
    assert anew["invocation_id"] != pending["invocation_id"]
    item = desk.listed(anew["invocation_id"])
    assert desk.decide(item, "approve").status_code == 202
    desk.ended(anew["invocation_id"])
    again = run(call(b.url, "notes.add", ADD))
    assert again.is_error is False, again
    assert lines(notes) == ["buy milk"]


def test_a_call_decided_while_its_replica_froze_runs_once_on_b_after_the_lease(
    served: tuple[Desk, list[Replica]], notes: Path
) -> None:
    """Approved in time, A killed before applying it: B takes the call over when asked."""
    desk, (a, b) = served
    pending = envelope(run(call(a.url, "notes.add", ADD)))
    listed = desk.listed(pending["invocation_id"])
    a.signal(signal.SIGSTOP)  # no renewal, no round: the decision is not applied there
    r = desk.decide(listed, "approve")
    assert r.status_code == 202, r.text
    a.stop(kill=True)
    time.sleep(LEASE + 0.5)  # A's lease has passed
    again = run(call(b.url, "notes.add", ADD))
    assert again.is_error is False, again
    assert lines(notes) == ["buy milk"]  # once, on B
    ended = desk.ended(pending["invocation_id"])
    assert (ended.status, ended.decision, ended.approver) == ("observed", "approved", "ops")
    assert ended.owner != listed["owner"]  # B's now
    kinds = [e["kind"] for e in desk.events(pending["invocation_id"])]
    assert kinds.count("attempt") == 1
    # Asked once more: the write's committed result, replayed, never a second effect.
    replayed = run(call(b.url, "notes.add", ADD))
    assert replayed.is_error is False, replayed
    assert lines(notes) == ["buy milk"]
    assert desk.waiting() == []


def test_a_call_whose_replica_was_killed_undecided_cannot_be_decided_and_waits_anew_on_b(
    served: tuple[Desk, list[Replica]], notes: Path
) -> None:
    """SIGKILL: after the lease, 409 holder_gone; asked on B: a new pending call, decidable."""
    desk, (a, b) = served
    pending = envelope(run(call(a.url, "notes.add", ADD)))
    listed = desk.listed(pending["invocation_id"])
    a.stop(kill=True)
    time.sleep(LEASE + 0.5)
    [orphan] = [c for c in desk.waiting() if c["invocation_id"] == pending["invocation_id"]]
    assert orphan["decidable"] is False
    assert orphan["why"]
    late = desk.decide(listed, "approve")
    assert (late.status_code, late.json()["code"]) == (409, "holder_gone")
    anew = envelope(run(call(b.url, "notes.add", ADD)))
    assert anew["status"] == "awaiting_confirmation"
    assert anew["invocation_id"] != pending["invocation_id"]
    assert desk.listed(anew["invocation_id"])["decidable"] is True
    assert not lines(notes)


@pytest.fixture
def gateways(tmp_path: Path, store: str, repo: Path) -> Iterator[tuple[Desk, list[Replica]]]:
    """Two ``mcp-gateway`` replicas before mcp-server-git on ``store``, and the desk."""
    config = write_config(
        tmp_path,
        store,
        git_upstream(repo)
        + grant("mira", "git:read", root=tmp_path)
        + grant("mira", "git:write", "modify", "create", confirm=True, root=tmp_path),
    )
    desk = Desk(config)
    try:
        with replicas(tmp_path / CONFIG, "mcp-gateway", env={}) as both:
            yield desk, both
    finally:
        desk.close()


def test_a_gateway_commit_parked_on_a_and_approved_in_the_service_is_answered_on_b(
    gateways: tuple[Desk, list[Replica]], repo: Path
) -> None:
    """The gateway: the same pending call on B, then the commit's result there, made once."""
    desk, (a, b) = gateways
    subprocess.run(["git", "add", "notes.txt"], cwd=repo, check=True)  # noqa: S607
    commit = {"repo_path": str(repo), "message": "add notes"}
    pending = envelope(run(call(a.url, "git.git_commit", commit)))
    listed = desk.listed(pending["invocation_id"])
    assert listed["surface"] == "mcp-gateway"
    waiting = envelope(run(call(b.url, "git.git_commit", commit)))
    assert waiting["invocation_id"] == pending["invocation_id"]
    assert desk.decide(listed, "approve").status_code == 202
    ended = desk.ended(pending["invocation_id"])
    assert (ended.status, ended.decision) == ("observed", "approved")
    again = run(call(b.url, "git.git_commit", commit))
    assert again.is_error is False, again
    assert commits(repo) == ["add notes", "initial"]  # exactly once
    assert desk.waiting() == []


def test_a_gateway_write_denied_in_the_service_is_told_on_b(
    gateways: tuple[Desk, list[Replica]], repo: Path
) -> None:
    """Denied with a reason on A's call: B tells the same call the person's words."""
    desk, (a, b) = gateways
    add = {"repo_path": str(repo), "files": ["notes.txt"]}
    pending = envelope(run(call(a.url, "git.git_add", add)))
    listed = desk.listed(pending["invocation_id"])
    assert desk.decide(listed, "deny", reason="not on main").status_code == 202
    desk.ended(pending["invocation_id"])
    again = envelope(run(call(b.url, "git.git_add", add)))
    assert again["error"]["code"] == "denied_by_person"
    assert "not on main" in again["error"]["message"]
    assert desk.waiting() == []


def test_a_write_edited_in_the_service_is_answered_on_b_with_the_corrected_call(
    served: tuple[Desk, list[Replica]], notes: Path
) -> None:
    """Edited in the API: A runs the corrected note once; B answers the shown call with it."""
    desk, (a, b) = served
    pending = envelope(run(call(a.url, "notes.add", ADD)))
    listed = desk.listed(pending["invocation_id"])
    r = desk.decide(listed, "edit", arguments='{"title": "buy oat milk"}')
    assert r.status_code == 202, r.text
    shown = desk.ended(pending["invocation_id"])
    assert (shown.status, shown.decision) == ("cancelled", "edited")
    again = run(call(b.url, "notes.add", ADD))
    assert again.is_error is False, again
    assert "buy oat milk" in str(again.content)
    assert lines(notes) == ["buy oat milk"]  # the corrected call, once; the shown one never
    assert desk.waiting() == []


def test_a_read_approved_in_the_service_is_answered_on_b_once_with_its_structured_value(
    served: tuple[Desk, list[Replica]],
) -> None:
    """A read has no ledger record: B answers from the journal, once, value and all."""
    desk, (a, b) = served
    pending = envelope(run(call(a.url, "notes.read", {})))
    listed = desk.listed(pending["invocation_id"])
    assert desk.decide(listed, "approve").status_code == 202
    desk.ended(pending["invocation_id"])
    again = run(call(b.url, "notes.read", {}))
    assert again.is_error is False, again
    assert again.structured_content == {"titles": [], "count": 0}
    kinds = [e["kind"] for e in desk.events(pending["invocation_id"])]
    assert kinds.count("attempt") == 1  # ran on A, answered on B
    fresh = envelope(run(call(a.url, "notes.read", {})))  # once, on any replica
    assert fresh["status"] == "awaiting_confirmation"
    assert fresh["invocation_id"] != pending["invocation_id"]


def test_a_call_decided_at_its_own_replica_is_not_answered_again_on_b(
    served: tuple[Desk, list[Replica]],
) -> None:
    """Approved through A's own /confirmations: A answered it; B asks a person anew."""
    desk, (a, b) = served
    pending = envelope(run(call(a.url, "notes.read", {})))
    decided = httpx.post(  # not the service's: A's own confirmation endpoint
        a.url.removesuffix("/mcp") + f"/confirmations/{pending['invocation_id']}",
        json={"digest": pending["digest"], "decision": "approve"},
        headers=desk.headers,
    )
    assert decided.status_code == 200, decided.text
    desk.ended(pending["invocation_id"])
    fresh = envelope(run(call(b.url, "notes.read", {})))
    assert fresh["status"] == "awaiting_confirmation"
    assert fresh["invocation_id"] != pending["invocation_id"]


def test_a_gateway_commit_decided_while_its_replica_froze_is_made_once_by_b(
    gateways: tuple[Desk, list[Replica]], repo: Path
) -> None:
    """A killed before applying the approval: B takes the commit over, through its upstream."""
    desk, (a, b) = gateways
    subprocess.run(["git", "add", "notes.txt"], cwd=repo, check=True)  # noqa: S607
    commit = {"repo_path": str(repo), "message": "add notes"}
    pending = envelope(run(call(a.url, "git.git_commit", commit)))
    listed = desk.listed(pending["invocation_id"])
    a.signal(signal.SIGSTOP)
    assert desk.decide(listed, "approve").status_code == 202
    a.stop(kill=True)
    time.sleep(LEASE + 0.5)
    again = run(call(b.url, "git.git_commit", commit))
    assert again.is_error is False, again
    assert commits(repo) == ["add notes", "initial"]
    ended = desk.ended(pending["invocation_id"])
    assert (ended.status, ended.approver) == ("observed", "ops")
    assert [e["kind"] for e in desk.events(pending["invocation_id"])].count("attempt") == 1
    replayed = run(call(b.url, "git.git_commit", commit))  # the ledger's replay
    assert replayed.is_error is False, replayed
    assert commits(repo) == ["add notes", "initial"]


@pytest.mark.parametrize("served", [3.0], indirect=True)
def test_a_decision_answers_the_same_call_only_as_long_as_the_person_had_to_decide(
    served: tuple[Desk, list[Replica]],
) -> None:
    """confirmation_ttl = 3: the same read asked again 3 s after the approval is asked anew."""
    desk, (a, b) = served
    pending = envelope(run(call(a.url, "notes.read", {})))
    expires = datetime.fromisoformat(pending["expires_at"])
    assert desk.decide(desk.listed(pending["invocation_id"]), "approve").status_code == 202
    desk.ended(pending["invocation_id"])
    # The replicas keep [service] confirmation_ttl (not a fixed 15 minutes).
    assert datetime.now(UTC) < expires < datetime.now(UTC) + timedelta(seconds=3)
    time.sleep(3.5)
    late = envelope(run(call(b.url, "notes.read", {})))
    assert late["status"] == "awaiting_confirmation"
    assert late["invocation_id"] != pending["invocation_id"]
