"""`toolbound pending`, `decide` and `edit` against a real `toolbound serve` (R7, R14).

The commands run as a person's or a script's would: their own processes, stdout a
pipe, the service's URL and the API key in the environment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from servers import Server, free_port
from service_config import KEYS, config_text
from service_pack import EFFECTS_ENV

from toolbound._output import command_console
from toolbound.cli_inbox import (
    DID_NOT_SUCCEED,
    REFUSED,
    UNREACHABLE,
    _pending_fields,
    _print_pending,
    decision_status,
)
from toolbound.client import CallAnswer, Client, Invocation

LONG = "a note longer than any terminal, " * 5 + "the end"  # 172 characters, under 200
PENDING_FIELDS = {
    "invocation_id",
    "tool",
    "digest",
    "subject",
    "tenant",
    "reason",
    "arguments",
    "requested_at",
    "expires_at",
    "surface",
    "decidable",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("inbox")
    config = root / "toolbound.toml"
    config.write_text(config_text("sqlite:///toolbound.db"))
    effects = root / "effects.txt"
    running = Server(config, {EFFECTS_ENV: str(effects)}).start()
    running.effects = effects  # type: ignore[attr-defined]
    yield running
    running.stop()


def effects(server) -> list[str]:
    path = server.effects
    return path.read_text().splitlines() if path.exists() else []


def toolbound(
    *args: str,
    url: str,
    who: str | None = "ana",
    stdin: str | None = None,
    key_env: str = "TOOLBOUND_API_KEY",
) -> subprocess.CompletedProcess[str]:
    """``toolbound ARGS`` in its own process, stdout and stderr pipes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLBOUND_")}
    env["TOOLBOUND_URL"] = url
    if who is not None:
        env[key_env] = KEYS[who]
    return subprocess.run(  # noqa: S603 - our own interpreter and arguments
        [sys.executable, "-c", "from toolbound.cli import main; main()", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def park(server, text: str) -> CallAnswer:
    with Client(server.url, api_key=KEYS["agent"]) as agent:
        parked = agent.submit("notes.add", {"text": text}, call_id=f"c-{text[:20]}")
    assert parked.status == "awaiting_confirmation"
    return parked


def status_of(server, invocation_id: str) -> str:
    with Client(server.url, api_key=KEYS["ana"]) as ana:
        return ana.invocation(invocation_id).status


def test_pending_piped_lists_a_parked_call_with_its_digest_whole(server):
    """Not a terminal: one field a line, the digest and a long argument never cut or wrapped."""
    parked = park(server, LONG)
    done = toolbound("pending", url=server.url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index(next(line for line in lines if parked.invocation_id in line))
    block = dict(line.split(None, 1) for line in lines[at : lines.index("", at)])
    assert block["invocation"] == parked.invocation_id
    assert block["digest"] == parked.digest
    assert block["tool"] == "notes.add@v1"
    assert block["subject"] == "agent-1 (acme)"
    assert json.loads(block["arguments"]) == {"text": LONG}
    assert "…" not in done.stdout
    assert lines[-1].endswith("call(s) waiting for a person")
    assert KEYS["ana"] not in done.stdout + done.stderr


def test_pending_json_is_one_document_of_flat_rows(server):
    """`pending --json`: {"confirmations": [...]}, each row with the documented fields."""
    parked = park(server, "json row")
    done = toolbound("pending", "--json", url=server.url)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["confirmations"]
    (row,) = [r for r in rows if r["invocation_id"] == parked.invocation_id]
    assert set(row) == PENDING_FIELDS
    assert row["digest"] == parked.digest
    assert (row["tool"], row["subject"], row["tenant"]) == ("notes.add@v1", "agent-1", "acme")
    assert row["arguments"] == {"text": "json row"}
    assert row["reason"]
    assert row["requested_at"] < row["expires_at"]


def test_decide_approves_and_the_call_completes(server):
    """`decide --approve` with the reviewed digest: the call runs once, exit 0."""
    parked = park(server, "approve me")
    done = toolbound(
        "decide", parked.invocation_id, "--approve", "--digest", str(parked.digest), url=server.url
    )
    assert done.returncode == 0, done.stderr
    assert f"approved {parked.invocation_id}: observed" in done.stdout
    assert status_of(server, parked.invocation_id) == "observed"
    assert effects(server).count("approve me") == 1


def test_decide_with_another_digest_is_refused_with_the_problem_code(server):
    """A digest the person did not review: exit 1, digest_mismatch; nothing runs, it still waits."""
    parked = park(server, "not this one")
    wrong = "sha256:" + "0" * 64
    done = toolbound("decide", parked.invocation_id, "--approve", "--digest", wrong, url=server.url)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "digest_mismatch" in done.stderr
    as_json = toolbound(
        "decide", parked.invocation_id, "--approve", "--digest", wrong, "--json", url=server.url
    )
    assert as_json.returncode == 1
    problem = json.loads(as_json.stdout)
    assert (problem["code"], problem["status"]) == ("digest_mismatch", 409)
    assert problem["detail"]
    assert status_of(server, parked.invocation_id) == "awaiting_confirmation"
    assert "not this one" not in effects(server)


def test_decide_deny_json_is_the_service_s_answer_with_the_reason(server):
    """`decide --deny --reason --json`: the answer as the service sent it; the model is told why."""
    parked = park(server, "deny me")
    done = toolbound(
        "decide",
        parked.invocation_id,
        "--deny",
        "--digest",
        str(parked.digest),
        "--reason",
        "not today",
        "--json",
        url=server.url,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["invocation_id"] == parked.invocation_id
    assert answer["status"] == "rejected"
    assert answer["problem"]["code"] == "denied_by_person"
    assert "not today" in answer["message"]["content"]
    assert "deny me" not in effects(server)


def test_an_agent_may_not_decide(server):
    """The agent's own key has no approver role: exit 1, forbidden, the key never printed."""
    parked = park(server, "self approval")
    digest = str(parked.digest)
    done = toolbound(
        "decide", parked.invocation_id, "--approve", "--digest", digest, url=server.url, who="agent"
    )
    assert done.returncode == 1
    assert "forbidden" in done.stderr
    assert KEYS["agent"] not in done.stdout + done.stderr


def test_edit_then_approve_runs_the_corrected_arguments(server):
    """`edit --approve`: the corrected call runs in the shown one's place; the shown one never."""
    parked = park(server, "buy milk")
    done = toolbound(
        "edit",
        parked.invocation_id,
        "--digest",
        str(parked.digest),
        "--arguments",
        '{"text": "buy oat milk"}',
        "--approve",
        url=server.url,
    )
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"edited {parked.invocation_id} → ")
    assert first.endswith(": observed (observed)")
    assert effects(server).count("buy oat milk") == 1
    assert "buy milk" not in effects(server)
    assert status_of(server, parked.invocation_id) == "cancelled"


def test_edit_json_from_a_file_names_the_new_call_and_its_digest(tmp_path, server):
    """`--arguments @FILE --json`: the new call's answer, its own id and digest."""
    parked = park(server, "from a file")
    corrected = tmp_path / "corrected.json"
    corrected.write_text('{"text": "from a file, corrected"}\n')
    done = toolbound(
        "edit",
        parked.invocation_id,
        "--digest",
        str(parked.digest),
        "--arguments",
        f"@{corrected}",
        "--approve",
        "--json",
        url=server.url,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["status"] == "observed"
    assert answer["invocation_id"] != parked.invocation_id
    assert answer["digest"] != parked.digest
    assert effects(server).count("from a file, corrected") == 1


def test_edit_reads_the_arguments_on_stdin_with_a_key_from_another_variable(server):
    """`--arguments @-` and `--api-key-env NAME`: the text from stdin, the key from $NAME."""
    parked = park(server, "from stdin")
    done = toolbound(
        "edit",
        parked.invocation_id,
        "--digest",
        str(parked.digest),
        "--arguments",
        "@-",
        "--approve",
        "--api-key-env",
        "APPROVER_KEY",
        url=server.url,
        stdin='{"text": "from stdin, corrected"}',
        key_env="APPROVER_KEY",
    )
    assert done.returncode == 0, done.stderr
    assert effects(server).count("from stdin, corrected") == 1
    assert KEYS["ana"] not in done.stdout + done.stderr


def test_an_edit_the_schema_refuses_is_not_a_success(server):
    """Corrected arguments the schema refuses: the answer is rejected and the status is 3."""
    parked = park(server, "keep shape")
    done = toolbound(
        "edit",
        parked.invocation_id,
        "--digest",
        str(parked.digest),
        "--arguments",
        '{"text": ""}',
        "--approve",
        url=server.url,
    )
    assert done.returncode == DID_NOT_SUCCEED, done.stdout + done.stderr
    assert ": rejected" in done.stdout.splitlines()[0]
    problems = [line for line in done.stdout.splitlines() if line.startswith("problem ")]
    assert len(problems) == 1
    assert re.fullmatch(r"problem [a-z_]+: \S.*", problems[0]), problems


def test_edit_without_approve_is_a_usage_error_and_changes_nothing(server):
    """An edit approves the corrected call: without --approve, exit 2 and the call still waits."""
    parked = park(server, "unchanged")
    done = toolbound(
        "edit",
        parked.invocation_id,
        "--digest",
        str(parked.digest),
        "--arguments",
        '{"text": "changed"}',
        url=server.url,
    )
    assert done.returncode == 2
    assert "--approve" in done.stderr
    assert status_of(server, parked.invocation_id) == "awaiting_confirmation"


@pytest.mark.parametrize(
    ("arguments", "code"),
    [('{"text": "buy oat milk"', "truncated"), ('{"text": "a", "text": "b"}', "duplicate_key")],
)
def test_corrected_arguments_the_parser_refuses_are_never_sent(server, arguments, code):
    """A typo in --arguments: exit 2 with the parse gate's code; the parked call still waits."""
    parked = park(server, f"typo {code}")
    done = toolbound(
        "edit",
        parked.invocation_id,
        "--digest",
        str(parked.digest),
        "--arguments",
        arguments,
        "--approve",
        url=server.url,
    )
    assert done.returncode == 2
    assert code in done.stderr
    assert "the call still waits" in done.stderr
    assert status_of(server, parked.invocation_id) == "awaiting_confirmation"


def test_usage_errors_exit_2(server):
    """Neither --approve nor --deny, a reason with an approval, or no key: exit 2."""
    neither = toolbound("decide", "inv", "--digest", "d", url=server.url)
    reason = toolbound(
        "decide", "inv", "--approve", "--digest", "d", "--reason", "r", url=server.url
    )
    no_key = toolbound("pending", url=server.url, who=None)
    no_scheme = toolbound("pending", url=server.url.removeprefix("http://"))
    codes = (neither.returncode, reason.returncode, no_key.returncode, no_scheme.returncode)
    assert codes == (2, 2, 2, 2)
    assert "--approve or --deny" in neither.stderr
    assert "$TOOLBOUND_API_KEY" in no_key.stderr


def test_a_service_that_is_not_there_exits_4():
    """Nothing listens: after the client's retries, exit 4 and where it looked, on stderr."""
    url = f"http://127.0.0.1:{free_port()}"
    for args in (("pending", "--json"), ("decide", "inv", "--approve", "--digest", "d")):
        done = toolbound(*args, url=url)
        assert done.returncode == 4, done.stderr
        assert done.stdout == ""
        assert f"cannot reach the service at {url}" in done.stderr


def test_an_answer_handed_over_to_another_surface_is_done():
    """202 with "handed_over": the surface that parked the call runs it: exit 0, not 3."""
    handed = {"invocation_id": "inv", "status": "awaiting_confirmation", "handed_over": True}
    assert decision_status(handed, approved=True) == 0
    assert decision_status({"status": "observed"}, approved=True) == 0
    assert decision_status({"status": "failed"}, approved=True) == DID_NOT_SUCCEED
    assert decision_status({"status": "rejected"}, approved=False) == 0


def test_a_call_parked_elsewhere_shows_its_surface_and_where_to_decide_it(capsys):
    """The service's `surface` and `decidable`, when it sends them, are shown and kept."""
    sent = {
        "invocation_id": "inv-gw",
        "tool": "git.git_commit",
        "subject": "agent-1",
        "status": "awaiting_confirmation",
        "digest": "sha256:" + "a" * 64,
        "surface": "mcp-gateway",
        "decidable": False,
        "confirmation": {
            "subject": {"id": "agent-1", "tenant": "acme"},
            "arguments": {"message": "fix"},
            "reason": "a person confirms commits",
            "requested_at": "2026-12-05T08:00:00+00:00",
            "expires_at": "2026-12-05T08:15:00+00:00",
        },
    }
    row = _pending_fields(Invocation.of(sent))
    assert set(row) == PENDING_FIELDS
    assert (row["surface"], row["decidable"], row["tenant"]) == ("mcp-gateway", False, "acme")
    _print_pending(command_console(), row)  # stdout is not a terminal here: a pipe's console
    printed = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines() if line)
    assert printed["surface"] == "mcp-gateway"
    assert printed["decidable"].startswith("no: decide it where it was parked (mcp-gateway)")
    assert printed["digest"] == "sha256:" + "a" * 64


def test_the_exit_statuses_are_one_table_in_the_docs():
    """docs/cli.md has one row per status, 0 to 4, and the inbox's statuses are those rows."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = {int(m[1]): m[2] for m in re.finditer(r"^\| (\d) \| (.*)$", page, re.MULTILINE)}
    assert sorted(rows) == [0, 1, 2, 3, 4]
    assert (REFUSED, DID_NOT_SUCCEED, UNREACHABLE) == (1, 3, 4)
    for status in (REFUSED, DID_NOT_SUCCEED, UNREACHABLE):
        assert "`decide`" in rows[status], status
    assert "did not answer" in rows[UNREACHABLE]
