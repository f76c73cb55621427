"""The baseline: a bare Starlette endpoint doing the same tool call without toolbound.

It keeps a record of every call as durably as the service keeps its journal: one
row (the Idempotency-Key, the request and the answer) inserted and committed per
request, before answering, in a SQLite file in WAL mode with ``synchronous=NORMAL``
(the journal's setting: durable across a crash of the process).
The file is ``$BARE_DB`` (``bare.db`` in the working folder by default); with
``BARE_RECORD=0`` nothing is recorded (the endpoint without durability).

With ``BARE_RECORD=trace`` it keeps the record the service's journal keeps of a read,
written by hand, in one transaction per request, with the same durability: the
Idempotency-Key's row with the answer, the call's head row with the request and the
answer, and one row per step of the call (ten for a read, each the JSON of what the
step found). It writes into the journal's own tables and indexes, with the journal's
settings: its WAL checkpointed by a thread, as the journal's is. What that costs is
the floor of any service that keeps this record, however it computes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

if TYPE_CHECKING:
    from starlette.requests import Request

RECORD = os.environ.get("BARE_RECORD", "1") != "0"
TRACE = os.environ.get("BARE_RECORD") == "trace"
_PATH = os.environ.get("BARE_DB", "bare.db")
_db = sqlite3.connect(_PATH, isolation_level=None, check_same_thread=False)
_db.execute("PRAGMA journal_mode = WAL")
_db.execute("PRAGMA synchronous = NORMAL")
if TRACE:
    # The journal's own tables, indexes and checkpoints, made as the service makes them.
    from toolbound._wal import WAL_BOUND, Checkpoints
    from toolbound.journal import SQLiteJournal

    SQLiteJournal(_PATH).close()
    _db.execute(f"PRAGMA wal_autocheckpoint = {WAL_BOUND}")
    _checkpoints = Checkpoints(_PATH, synchronous="NORMAL", owner="bare")
_db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, request TEXT, answer TEXT)")
_text = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def shout(arguments: dict) -> dict:
    """The same trivial read tool the service runs."""
    return {"text": arguments["text"].upper()}


async def call(request: Request) -> Response:
    """Parse the envelope and the arguments, call the function, record, answer JSON."""
    raw = await request.body()
    body = json.loads(raw)
    result = shout(json.loads(body["arguments"]))
    answer = json.dumps({"status": "observed", "data": result})
    # The same durability as the service's record: committed before the answer.
    if TRACE:
        _keep_trace(request.headers.get("idempotency-key", os.urandom(8).hex()), raw, body, result)
        return Response(answer, media_type="application/json")
    if RECORD:
        _db.execute(
            "INSERT INTO calls VALUES (?, ?, ?)",
            (request.headers.get("idempotency-key", os.urandom(8).hex()), raw.decode(), answer),
        )
    return Response(answer, media_type="application/json")


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _keep_trace(key: str, raw: bytes, body: dict, result: dict) -> None:
    """The journal's record of one read: key, head and ten steps, committed together."""
    invocation = os.urandom(16).hex()
    arguments = body["arguments"]
    parsed = json.loads(arguments)
    digest = "sha256:" + hashlib.sha256(_text(parsed).encode()).hexdigest()
    tool = body["tool"] + "@v1"
    message = _text({"type": "tool_result", "call_id": body["call_id"], "data": result})
    response = {"invocation_id": invocation, "tool": tool, "status": "observed", "digest": digest,
                "message": {"content": message, "is_error": False, "truncated": False}}  # fmt: skip
    answer = _text(response)
    steps = [
        ("proposal", "proposed", {"name": body["tool"], "arguments": {"utf8": arguments},
                                  "visible": [tool], "subject": {"id": "bench"}}),
        ("transition", "parsed", {"previous": "proposed", "parsed": parsed}),
        ("transition", "validated", {"previous": "parsed", "spec": tool,
                                     "normalized": parsed, "digest": digest}),
        ("transition", "authorized", {"previous": "validated", "decision": "allow",
                                      "capabilities": ["bench:read"], "evidence": []}),
        ("transition", "prepared", {"previous": "authorized", "deadline": _now()}),
        ("transition", "executing", {"previous": "prepared", "attempt": 1}),
        ("attempt", None, {"attempt": {"number": 1, "outcome": "committed",
                                       "started_at": _now(), "ended_at": _now()}}),
        ("transition", "committed", {"previous": "executing"}),
        ("transition", "observed", {"previous": "committed", "result": result}),
        ("tool_message", None, {"content": {"utf8": message}, "is_error": False}),
    ]  # fmt: skip
    rows = []
    for seq, (kind, state, data) in enumerate(steps):
        at = _now()
        event = {"seq": seq, "at": at, "kind": kind, "state": state, "data": data}
        rows.append((invocation, seq, at, kind, _text(event)))
    head = _text({"request": body, "response": response})
    stamp = _now()
    _db.execute("BEGIN IMMEDIATE")
    try:
        _db.execute(
            "INSERT INTO toolbound_service_requests"
            " (tenant, key, fingerprint, status_code, response, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            ("bench", key, hashlib.sha256(raw).hexdigest(), 200, answer, stamp),
        )
        _db.execute(
            "INSERT INTO toolbound_service_calls (invocation_id, tenant, subject, principal,"
            " tool, status, state, digest, created_at, updated_at, body, request_key, surface)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (invocation, "bench", "bench", "bench", tool, "observed", "observed", digest,
             stamp, stamp, head, key, "api"),
        )  # fmt: skip
        _db.executemany(
            "INSERT INTO toolbound_call_events (invocation_id, seq, at, kind, event)"
            " VALUES (?, ?, ?, ?, ?)",
            rows,
        )
        _db.execute("COMMIT")
    except BaseException:
        _db.execute("ROLLBACK")
        raise


app = Starlette(routes=[Route("/call", call, methods=["POST"])])
