"""`toolbound reconcile`: list unknown outcomes, then resolve them with evidence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from test_kill import KEY, crash

from toolbound.ledger.sqlite import SQLiteLedger

HERE = Path(__file__).parent


def cli(*args: str, effects: Path, columns: str | None = "200") -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if k != "COLUMNS"},
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "TOOLBOUND_TEST_EFFECTS": str(effects),
    }
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run(  # noqa: S603 - our own command line
        [sys.executable, "-c", "from toolbound.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_reconcile_command_lists_then_resolves(tmp_path):
    """A process killed after its effect leaves an unknown; the CLI lists and resolves it."""
    ledger_db, effects_db, done = crash(tmp_path, "after_effect")
    assert done.returncode < 0
    time.sleep(1.1)  # past the dead call's deadline, so the sweep may settle it
    url = f"sqlite:///{ledger_db}"
    listed = cli(
        "reconcile",
        "--ledger",
        url,
        "--tools",
        "cli_tools:tools",
        "--list",
        "--grace",
        "0",
        effects=effects_db,
    )
    assert listed.returncode == 0, listed.stderr
    assert "1 unknown outcome(s)" in listed.stdout
    resolved = cli(
        "reconcile",
        "--ledger",
        url,
        "--tools",
        "cli_tools:tools",
        "--grace",
        "0",
        effects=effects_db,
    )
    assert resolved.returncode == 0, resolved.stderr
    assert "1 resolved, 0 still unknown" in resolved.stdout
    ledger = SQLiteLedger(ledger_db)
    try:
        assert ledger.get(KEY).phase == "committed"
    finally:
        ledger.close()


def test_reconcile_command_fails_while_unknowns_remain(tmp_path):
    """Without a way to ask, the command exits non-zero and leaves the call unknown."""
    ledger_db, effects_db, _ = crash(tmp_path, "after_effect")
    time.sleep(1.1)
    url = f"sqlite:///{ledger_db}"
    out = cli(
        "reconcile",
        "--ledger",
        url,
        "--tools",
        "cli_tools:tools_that_cannot_ask",
        "--grace",
        "0",
        effects=effects_db,
    )
    assert out.returncode == 1
    assert "0 resolved, 1 still unknown" in out.stdout


def test_bad_ledger_url_is_a_clear_error(tmp_path):
    """An unsupported ledger URL is refused with a message, not a traceback."""
    out = cli(
        "reconcile",
        "--ledger",
        "mysql://x",
        "--tools",
        "cli_tools:tools",
        effects=tmp_path / "e.db",
    )
    assert out.returncode != 0
    assert "unsupported ledger URL" in out.stderr


def test_reconcile_json_lists_then_resolves_for_a_script(tmp_path):
    """`--json`: the unknown outcomes as `unknown --json` prints them, then what each became."""
    ledger_db, effects_db, _ = crash(tmp_path, "after_effect")
    time.sleep(1.1)
    args = ("reconcile", "--ledger", f"sqlite:///{ledger_db}", "--tools", "cli_tools:tools")
    listed = cli(*args, "--list", "--grace", "0", "--json", effects=effects_db)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["unknown"]
    assert row["key"] == KEY.key
    resolved = cli(*args, "--grace", "0", "--json", effects=effects_db)
    assert resolved.returncode == 0, resolved.stderr
    document = json.loads(resolved.stdout)
    assert (document["resolved"], document["left"]) == (1, 0)
    (done,) = document["reconciled"]
    assert done["invocation_id"] == row["invocation_id"]
    assert done["status"] == "committed"
    assert isinstance(done["evidence"], dict)


def test_reconcile_piped_keeps_each_call_on_one_line(tmp_path):
    """No terminal and no COLUMNS: a row is one line, whatever its width."""
    ledger_db, effects_db, _ = crash(tmp_path, "after_effect")
    time.sleep(1.1)
    args = ("reconcile", "--ledger", f"sqlite:///{ledger_db}", "--tools", "cli_tools:tools")
    listed = cli(*args, "--list", "--grace", "0", effects=effects_db, columns=None)
    invocation = json.loads(
        cli(*args, "--list", "--grace", "0", "--json", effects=effects_db).stdout
    )["unknown"][0]
    row = next(line for line in listed.stdout.splitlines() if invocation["invocation_id"] in line)
    assert invocation["key"] in row
    assert invocation["deadline"] in row
