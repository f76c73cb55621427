"""The baseline: a bare Starlette endpoint doing the same tool call without toolbound."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

if TYPE_CHECKING:
    from starlette.requests import Request


def shout(arguments: dict) -> dict:
    """The same trivial read tool the service runs."""
    return {"text": arguments["text"].upper()}


async def call(request: Request) -> Response:
    """Parse the envelope and the arguments, call the function, answer JSON."""
    body = json.loads(await request.body())
    result = shout(json.loads(body["arguments"]))
    return Response(
        json.dumps({"status": "observed", "data": result}), media_type="application/json"
    )


app = Starlette(routes=[Route("/call", call, methods=["POST"])])
