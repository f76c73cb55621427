"""Writes through the gateway: mcp-server-git on a throwaway repository, and the fault server.

Every write is confirmed by a person — through MCP elicitation where the client
offers it, else through the runtime the console shares — and a confirmation
approves one digest once. Writes are recorded in the SQLite ledger: a repeated
identical call replays, and a retry happens only where R10's matrix allows it.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import mcp_types as types
import pytest
from mcp import Client
from mcp_support import (
    MIRA,
    commits,
    envelope,
    fault_upstream,
    gateway,
    git_upstream,
    grant,
    run,
    write_config,
)

from toolbound import ConfirmationMismatch

if TYPE_CHECKING:
    from pathlib import Path

    from toolbound.mcp import GatewayConfig


class Person:
    """Answers elicitations like a person at the client would, and counts the questions."""

    def __init__(self, answer: str = "approve") -> None:
        self.answer = answer
        self.asked: list[str] = []

    async def __call__(self, _ctx: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        if self.answer == "approve":
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")


def git_config(tmp_path: Path, repo: Path, *, via_fault: Path | None = None) -> GatewayConfig:
    return write_config(
        tmp_path,
        git_upstream(repo, via_fault=via_fault)
        + grant("mira", "git:read", root=tmp_path)
        + grant("mira", "git:write", "modify", "create", confirm=True, root=tmp_path),
    )


def text_of(result: types.CallToolResult) -> dict[str, Any]:
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


def test_git_status_and_git_log_run_concurrently(tmp_path: Path, repo: Path) -> None:
    """Two reads at once through the gateway, each answered from the real repository."""
    config = git_config(tmp_path, repo)

    async def scenario() -> list[types.CallToolResult]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            return list(
                await asyncio.gather(
                    client.call_tool("git.git_status", {"repo_path": str(repo)}),
                    client.call_tool("git.git_log", {"repo_path": str(repo), "max_count": 5}),
                )
            )

    status, log = run(scenario())
    assert status.is_error is False
    assert "notes.txt" in text_of(status)["data"]
    assert "initial" in text_of(log)["data"]


def test_a_repository_outside_the_granted_path_is_refused(tmp_path: Path, repo: Path) -> None:
    """The grant's path scope reads repo_path (a resource): another directory is out of scope."""
    config = git_config(tmp_path / "repo", repo)  # the config file lives elsewhere: fine
    other = tmp_path.parent

    async def scenario() -> types.CallToolResult:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            return await client.call_tool("git.git_status", {"repo_path": str(other)})

    result = run(scenario())
    assert result.is_error is True
    assert envelope(result)["error"]["code"] == "resource_out_of_scope"  # type: ignore[index]


def test_writes_confirmed_through_elicitation_run_once_and_replay_after(
    tmp_path: Path, repo: Path
) -> None:
    """git_add, git_commit, git_create_branch: asked once each, done once; a repeat replays."""
    config = git_config(tmp_path, repo)
    person = Person()
    where = {"repo_path": str(repo)}

    async def scenario() -> list[types.CallToolResult]:
        async with (
            gateway(config).running() as gw,
            Client(gw.server.lowlevel(MIRA), elicitation_callback=person) as client,
        ):
            return [
                await client.call_tool("git.git_add", {**where, "files": ["notes.txt"]}),
                await client.call_tool("git.git_commit", {**where, "message": "add notes"}),
                await client.call_tool("git.git_commit", {**where, "message": "add notes"}),
                await client.call_tool("git.git_create_branch", {**where, "branch_name": "f"}),
            ]

    add, commit, again, branch = run(scenario())
    assert [r.is_error for r in (add, commit, again, branch)] == [False] * 4
    assert commits(repo) == ["add notes", "initial"]
    assert text_of(again)["data"] == text_of(commit)["data"]
    assert "Created branch 'f'" in text_of(branch)["data"]
    # Three questions for three writes; the repeated commit was not asked again.
    assert len(person.asked) == 3
    assert "git.git_commit" in person.asked[1]
    assert "add notes" in person.asked[1]
    assert "Digest: sha256:" in person.asked[1]


def test_a_declined_write_does_nothing(tmp_path: Path, repo: Path) -> None:
    """The person declines: the call is refused and nothing is staged."""
    config = git_config(tmp_path, repo)

    async def scenario() -> types.CallToolResult:
        async with (
            gateway(config).running() as gw,
            Client(gw.server.lowlevel(MIRA), elicitation_callback=Person("decline")) as client,
        ):
            return await client.call_tool(
                "git.git_add", {"repo_path": str(repo), "files": ["notes.txt"]}
            )

    result = run(scenario())
    assert result.is_error is True
    assert envelope(result)["error"]["code"] == "denied_by_person"  # type: ignore[index]
    assert commits(repo) == ["initial"]


def test_the_configured_flow_rules_apply_to_the_gateways_writes(tmp_path: Path, repo: Path) -> None:
    """[provenance] in the gateway's file: a write it cannot trace asks a person, who says no."""
    config = write_config(
        tmp_path,
        git_upstream(repo)
        + grant("mira", "git:read", root=tmp_path)
        + grant("mira", "git:write", "modify", "create", root=tmp_path)
        + '\n[provenance]\npreset = "guard_writes"\n',
    )
    person = Person("decline")

    async def scenario() -> types.CallToolResult:
        async with (
            gateway(config).running() as gw,
            Client(gw.server.lowlevel(MIRA), elicitation_callback=person) as client,
        ):
            return await client.call_tool(
                "git.git_add", {"repo_path": str(repo), "files": ["notes.txt"]}
            )

    result = run(scenario())
    # No grant asks for confirmation: the flow rules did, for want of any provenance.
    (asked,) = person.asked
    assert "provenance: /: no provenance was tracked for this call" in asked
    assert envelope(result)["error"]["code"] == "denied_by_person"  # type: ignore[index]
    assert commits(repo) == ["initial"]


def test_a_2025_client_is_asked_through_an_elicitation_request(tmp_path: Path, repo: Path) -> None:
    """On a handshake-era connection the question travels as elicitation/create."""
    config = git_config(tmp_path, repo)
    person = Person()

    async def scenario() -> tuple[str, types.CallToolResult]:
        async with (
            gateway(config).running() as gw,
            Client(gw.server.lowlevel(MIRA), mode="legacy", elicitation_callback=person) as client,
        ):
            result = await client.call_tool(
                "git.git_add", {"repo_path": str(repo), "files": ["notes.txt"]}
            )
            return client.protocol_version, result

    version, result = run(scenario())
    assert version == "2025-11-25"
    assert result.is_error is False
    assert len(person.asked) == 1


def test_without_elicitation_the_call_is_parked_once_approved_in_the_console_and_replayed(
    tmp_path: Path, repo: Path
) -> None:
    """Without elicitation: one pending call, a person approves it, it runs once, a repeat replays.

    The pending result names invocation and digest; the same call again parks nothing new.
    """
    config = git_config(tmp_path, repo)
    add = {"repo_path": str(repo), "files": ["notes.txt"]}

    async def scenario() -> dict[str, Any]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            first = await client.call_tool("git.git_add", add)
            second = await client.call_tool("git.git_add", add)
            parked = gw.runtime.pending()
            pending = envelope(first)
            # The console shares the gateway's runtime; a person decides on its thread.
            approved = await asyncio.to_thread(
                gw.runtime.approve,
                pending["invocation_id"],  # type: ignore[index]
                digest=pending["digest"],  # type: ignore[index]
                approver="ops",
            )
            staged_after_approval = await client.call_tool(
                "git.git_diff_staged", {"repo_path": str(repo)}
            )
            replay = await client.call_tool("git.git_add", add)
            return {
                "first": first,
                "second": second,
                "parked": parked,
                "approved": approved,
                "staged": staged_after_approval,
                "replay": replay,
                "left": gw.runtime.pending(),
            }

    seen = run(scenario())
    first, second = seen["first"], seen["second"]
    assert first.is_error is True
    assert envelope(first)["status"] == "awaiting_confirmation"
    assert envelope(first)["error"]["code"] == "awaiting_confirmation"
    assert envelope(first)["digest"].startswith("sha256:")
    assert envelope(second)["invocation_id"] == envelope(first)["invocation_id"]
    assert len(seen["parked"]) == 1
    assert seen["approved"].kind == "observed"
    assert "notes.txt" in text_of(seen["staged"])["data"]
    assert seen["replay"].is_error is False
    assert text_of(seen["replay"])["data"] == "Files staged successfully"
    assert seen["left"] == []


def test_a_confirmation_approves_one_digest_once(tmp_path: Path, repo: Path) -> None:
    """Two commits wait: the other's digest is refused, the right one runs that commit once only."""
    config = git_config(tmp_path, repo)
    where = {"repo_path": str(repo)}

    async def scenario() -> tuple[list[str], list[str]]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            added = await client.call_tool("git.git_add", {**where, "files": ["notes.txt"]})
            await gw.runtime.aapprove(
                envelope(added)["invocation_id"],
                digest=gw.runtime.pending()[0].digest,
                approver="ops",
            )
            one = await client.call_tool("git.git_commit", {**where, "message": "one"})
            two = await client.call_tool("git.git_commit", {**where, "message": "two"})
            a, b = envelope(one), envelope(two)
            assert a["digest"] != b["digest"]  # type: ignore[index]
            with pytest.raises(ConfirmationMismatch):
                await gw.runtime.aapprove(a["invocation_id"], digest=b["digest"], approver="ops")  # type: ignore[index]
            done = await gw.runtime.aapprove(a["invocation_id"], digest=a["digest"], approver="ops")  # type: ignore[index]
            assert done.kind == "observed"
            with pytest.raises(ConfirmationMismatch):
                await gw.runtime.aapprove(a["invocation_id"], digest=a["digest"], approver="ops")  # type: ignore[index]
            return commits(repo), [p.invocation_id for p in gw.runtime.pending()]

    history, waiting = run(scenario())
    assert history == ["one", "initial"]
    assert len(waiting) == 1  # "two" still waits for its own person


def test_a_keyed_write_whose_response_is_lost_is_retried_with_its_key_and_lands_once(
    tmp_path: Path, state: Path
) -> None:
    """A keyed write whose answer is lost is retried with the same key and lands once (R10).

    append commits and the upstream dies before answering; the gateway reconnects, retries
    with the same idempotency key, and the upstream answers from its record.
    """
    config = write_config(tmp_path, fault_upstream(state) + grant("mira", "fault:write", "modify"))
    (state / "drop-append").write_text("1")

    async def scenario() -> tuple[types.CallToolResult, int]:
        gw = gateway(config)
        async with gw.running(), Client(gw.server.lowlevel(MIRA)) as client:
            result = await client.call_tool("fault.append", {"line": "once"})
            return result, gw.upstreams["fault"].connects

    result, connects = run(scenario())
    assert result.is_error is False
    assert text_of(result)["data"] == "appended line 1"
    assert (state / "log.txt").read_text() == "once\n"
    received = [json.loads(line) for line in (state / "calls.txt").read_text().splitlines()]
    assert [c["tool"] for c in received] == ["append", "append"]
    assert received[0]["key"] == received[1]["key"]
    assert str(received[0]["key"]).startswith("tb:sha256:")
    assert connects == 2


def test_a_git_commit_whose_response_is_lost_commits_once_and_is_never_repeated(
    tmp_path: Path, repo: Path, state: Path
) -> None:
    """A git_commit whose answer is lost is unknown, never retried nor repeated: one commit (R10).

    git_commit has no key, so R10 forbids a retry, and asking again does not run it again.
    """
    config = git_config(tmp_path, repo, via_fault=state)
    (state / "drop-git_commit").write_text("1")
    where = {"repo_path": str(repo)}

    async def scenario() -> tuple[types.CallToolResult, types.CallToolResult]:
        async with (
            gateway(config).running() as gw,
            Client(gw.server.lowlevel(MIRA), elicitation_callback=Person()) as client,
        ):
            await client.call_tool("git.git_add", {**where, "files": ["notes.txt"]})
            lost = await client.call_tool("git.git_commit", {**where, "message": "add notes"})
            again = await client.call_tool("git.git_commit", {**where, "message": "add notes"})
            return lost, again

    lost, again = run(scenario())
    assert lost.is_error is True
    assert envelope(lost)["commit_status"] == "unknown"  # type: ignore[index]
    assert envelope(lost)["error"]["code"] == "commit_unknown"  # type: ignore[index]
    assert again.is_error is True
    assert envelope(again)["error"]["code"] == "outcome_unknown"  # type: ignore[index]
    assert commits(repo) == ["add notes", "initial"]
    received = [json.loads(line)["tool"] for line in (state / "calls.txt").read_text().splitlines()]
    assert received.count("git_commit") == 1
