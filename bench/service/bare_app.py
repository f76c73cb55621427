"""The baseline: a bare Starlette endpoint doing the same tool call without toolbound.

It keeps a record of every call as durably as the service keeps its journal: one
row (the Idempotency-Key, the request and the answer) inserted and committed per
request, before answering, in a SQLite file in WAL mode with ``synchronous=NORMAL``
(the journal's setting: durable across a crash of the process).
The file is ``$BARE_DB`` (``bare.db`` in the working folder by default); with
``BARE_RECORD=0`` nothing is recorded (the endpoint without durability).
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

if TYPE_CHECKING:
    from starlette.requests import Request

RECORD = os.environ.get("BARE_RECORD", "1") != "0"
_db = sqlite3.connect(os.environ.get("BARE_DB", "bare.db"), isolation_level=None)
_db.execute("PRAGMA journal_mode = WAL")
_db.execute("PRAGMA synchronous = NORMAL")
_db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, request TEXT, answer TEXT)")


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
    if RECORD:
        _db.execute(
            "INSERT INTO calls VALUES (?, ?, ?)",
            (request.headers.get("idempotency-key", os.urandom(8).hex()), raw.decode(), answer),
        )
    return Response(answer, media_type="application/json")


app = Starlette(routes=[Route("/call", call, methods=["POST"])])
