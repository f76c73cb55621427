"""The OpenAPI 3.1 description of the HTTP API, served at ``/openapi.json``.

``tests/service/test_openapi.py`` holds it to the app: every route and method is here
and nothing else, every status written here is one the API answers, and a
schemathesis run finds no answer that contradicts it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from toolbound.adapters.http import MAX_IDEMPOTENCY_KEY, PROBLEM_JSON, REASON_INPUT_CHARS
from toolbound.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from toolbound.service.waiting import MAX_STREAM, MAX_WAIT

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["OPENAPI"]


METRICS_TYPE: Final = METRICS_CONTENT_TYPE
"""The media type of ``/metrics`` (Prometheus' text format)."""


def _ref(name: str) -> dict[str, object]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: Mapping[str, object], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {PROBLEM_JSON: {"schema": _ref("Problem")}},
    }


_ID = {"name": "invocation_id", "in": "path", "required": True, "schema": {"type": "string"}}
_PUBLIC: list[dict[str, list[str]]] = []  # no API key needed


def _answers(*statuses: int, **ok: dict[str, Any]) -> dict[str, Any]:
    """An operation's responses: its successes, then the problems it can answer with."""
    return {**{code.removeprefix("s"): body for code, body in ok.items()}, **{
        str(status): _problem(_PROBLEMS[status]) for status in statuses
    }}  # fmt: skip


_PROBLEMS: Final[dict[int, str]] = {
    400: "A malformed body, query or header (bad_request_body, bad_query, bad_cursor,"
    " evidence_missing, idempotency_key_missing, idempotency_key_invalid)",
    401: "No API key, or an unknown one (unauthenticated)",
    403: "The key's principal lacks the role, or the four-eyes rule (forbidden, four_eyes)",
    404: "No such invocation in this tenant (not_found)",
    409: "Not in a state this request can act on",
    413: "The body is larger than [service] max_body_bytes (request_too_large)",
    422: "The Idempotency-Key was used with another body (idempotency_key_reused), or an"
    " edit's arguments do not parse (the parse gate's code: invalid_json, duplicate_key, …;"
    " nothing is decided)",
}
_SUMMARY: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["invocation_id", "tool", "subject", "status", "state", "created_at"],
    "properties": {
        "invocation_id": {"type": "string"},
        "tool": {"type": "string"},
        "subject": {"type": "string"},
        "status": {"type": "string"},
        "state": {"type": "string"},
        "digest": {"type": ["string", "null"]},
        "decision": {"type": ["string", "null"]},
        "approver": {"type": ["string", "null"]},
        "owner": {
            "type": ["string", "null"],
            "description": (
                "the process that worked on it last: a service instance (its /healthz"
                " instance), or the holder of another surface's call"
            ),
        },
        "surface": {
            "enum": ["service", "mcp-gateway", "mcp-serve", "library"],
            "description": "which of toolbound's surfaces ran the call",
        },
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
    },
}
_WAITING: Final[dict[str, Any]] = {
    **_SUMMARY,
    "required": [*_SUMMARY["required"], "surface", "decidable"],
    "properties": {
        **_SUMMARY["properties"],
        "decidable": {
            "type": "boolean",
            "description": "whether a decision can land: false once the holder is gone",
        },
        "why": {"type": "string", "description": "why it is not decidable"},
        "confirmation": {"type": "object"},
    },
}
_HANDED_OVER: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["invocation_id", "surface", "decision", "approver", "handed_over"],
    "properties": {
        "invocation_id": {"type": "string"},
        "tool": {"type": "string"},
        "surface": {"type": "string"},
        "status": {"type": "string"},
        "state": {"type": "string"},
        "digest": {"type": "string"},
        "decision": {"enum": ["approved", "denied", "edited"]},
        "approver": {"type": "string"},
        "reason": {"type": ["string", "null"]},
        "arguments": {"type": "string", "description": "an edit's corrected JSON text"},
        "handed_over": {"const": True},
    },
}


_READINESS: Final[dict[str, Any]] = {
    "type": "object",
    "required": ["status", "instance", "store", "identity"],
    "properties": {
        "status": {"enum": ["ready", "degraded", "unavailable"]},
        "instance": {"type": "string"},
        "store": {
            "type": "object",
            "required": ["status"],
            "properties": {
                "status": {"enum": ["ok", "unavailable"]},
                "error": {"type": "string"},
            },
        },
        "identity": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["issuer", "status"],
                "properties": {
                    "issuer": {"type": "string"},
                    "status": {"enum": ["ready", "fetching", "not_fetched", "unavailable"]},
                    "keys": {"type": "integer"},
                    "error": {"type": ["string", "null"]},
                },
            },
        },
    },
}


def _listing(key: str, items: Mapping[str, object]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": [key],
        "properties": {key: {"type": "array", "items": items}},
    }


OPENAPI: Final[dict[str, Any]] = {
    "openapi": "3.1.0",
    "info": {
        "title": "toolbound",
        "version": "1",
        "description": (
            "Submit the tool calls a model proposes; confirm, trace and reconcile them."
            " Every error is application/problem+json with toolbound's `code`; a path or"
            " method no route serves is a 404 or 405 problem, and a body over the"
            " configured limit a 413."
        ),
    },
    "components": {
        "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"},
            "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        },
        "schemas": {
            "Submission": {
                "type": "object",
                "required": ["tool", "arguments", "call_id"],
                "additionalProperties": False,
                "properties": {
                    "tool": {
                        "type": "string",
                        "minLength": 1,
                        "description": "the tool name the model chose",
                    },
                    "arguments": {
                        "type": "string",
                        "description": "the model's argument text, byte for byte",
                    },
                    "call_id": {
                        "type": "string",
                        "minLength": 1,
                        "description": "the provider's call id",
                    },
                    # The optional members take null for "not given".
                    "model_call_id": {"type": ["string", "null"]},
                    "version": {"type": ["string", "null"]},
                    "tools": {
                        "type": ["array", "null"],
                        "items": {"type": "string"},
                        "description": "the tools the model was shown (default: all)",
                    },
                    "timezone": {"type": ["string", "null"], "default": "UTC"},
                    "locale": {"type": ["string", "null"], "default": "en"},
                    "context": {
                        "oneOf": [{"type": "null"}, _ref("Context")],
                        "description": (
                            "what the model has seen, for the flow rules ([provenance])"
                        ),
                    },
                },
            },
            "Context": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "session": {
                        "type": ["string", "null"],
                        "minLength": 1,
                        "maxLength": 200,
                        "description": (
                            "the session the call belongs to: its user messages and results "
                            "are kept (per tenant), and later calls are examined against them"
                        ),
                    },
                    "user": {
                        "type": "array",
                        "description": "the user's messages (trusted: the caller vouches)",
                    },
                    "results": {
                        "type": "array",
                        "description": "earlier tool results the model saw (untrusted)",
                        "items": {
                            "type": "object",
                            "required": ["tool", "content"],
                            "additionalProperties": False,
                            "properties": {
                                "tool": {"type": "string", "minLength": 1},
                                "content": {},
                            },
                        },
                    },
                },
            },
            "Outcome": {
                "type": "object",
                "required": ["invocation_id", "status", "state", "path", "message"],
                "properties": {
                    "invocation_id": {"type": "string"},
                    "call_id": {"type": "string"},
                    "tool": {"type": ["string", "null"]},
                    "status": {
                        "enum": [
                            "observed",
                            "rejected",
                            "awaiting_confirmation",
                            "failed",
                            "outcome_unknown",
                            "cancelled",
                        ]
                    },
                    "state": {"type": "string"},
                    "path": {"type": "array", "items": {"type": "string"}},
                    "digest": {"type": ["string", "null"]},
                    "trace_id": {"type": "string"},
                    "message": {
                        "type": "object",
                        "description": "what goes back to the model, as untrusted data",
                        "required": ["content", "is_error", "truncated"],
                        "properties": {
                            "content": {"type": "string"},
                            "is_error": {"type": "boolean"},
                            "truncated": {"type": "boolean"},
                        },
                    },
                    "problem": {"type": "object"},
                    "confirmation": {"type": "object"},
                },
            },
            "Decision": {
                "type": "object",
                "required": ["digest", "decision"],
                "if": {"properties": {"decision": {"const": "edit"}}},
                "then": {"required": ["arguments"]},
                "else": {"not": {"required": ["arguments"]}},
                "additionalProperties": False,
                "properties": {
                    "digest": {"type": "string", "description": "the digest the person reviewed"},
                    "decision": {"enum": ["approve", "deny", "edit"]},
                    "arguments": {
                        "type": "string",
                        "description": (
                            "an edit's corrected arguments, as JSON text: a new call in the"
                            " shown one's place, through every gate again"
                        ),
                    },
                    "reason": {
                        "type": ["string", "null"],
                        "maxLength": REASON_INPUT_CHARS,
                        "description": (
                            "a denial's reason, in the person's words: the model is told it, "
                            "attributed to the approver (the first 500 characters); an "
                            "approval's is ignored"
                        ),
                    },
                },
            },
            "Finding": {
                "type": "object",
                "description": (
                    "empty: ask the tool; with committed, a person's finding, which needs evidence"
                ),
                "additionalProperties": False,
                "properties": {
                    "committed": {"type": "boolean"},
                    "evidence": {"type": "object", "minProperties": 1},
                },
                "dependentRequired": {"committed": ["evidence"]},
            },
            "Problem": {
                "type": "object",
                "required": ["type", "title", "status", "code", "detail"],
                "properties": {
                    "type": {"type": "string"},
                    "title": {"type": "string"},
                    "status": {"type": "integer"},
                    "code": {"type": "string", "description": "toolbound's machine-readable code"},
                    "detail": {"type": "string"},
                    "hint": {"type": "string"},
                },
            },
        },
    },
    "security": [{"bearer": []}, {"apiKey": []}],
    "paths": {
        "/healthz": {
            "get": {
                "summary": "Whether the process answers",
                "security": _PUBLIC,
                "responses": _answers(
                    s200=_json(
                        {
                            "type": "object",
                            "properties": {
                                "status": {"const": "ok"},
                                "instance": {
                                    "type": "string",
                                    "description": "this process as the owner of its calls",
                                },
                            },
                        },
                        "Alive",
                    )
                ),
            }
        },
        "/readyz": {
            "get": {
                "summary": "Whether this replica can serve: its store, its identity providers",
                "security": _PUBLIC,
                "responses": {
                    "200": _json(
                        _READINESS, "Ready (or degraded: an identity provider has no keys)"
                    ),
                    "503": _json(
                        _READINESS, "The store does not answer; Retry-After says when to ask again"
                    ),
                },
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "security": _PUBLIC,
                "responses": _answers(s200=_json({"type": "object"}, "OpenAPI 3.1")),
            }
        },
        "/v1/proposals": {
            "post": {
                "summary": "Run a proposal through every gate and, if admitted, execute it",
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": True,
                        "description": (
                            "1 to 255 printable ASCII characters, bare or as an RFC 8941 sf-string"
                        ),
                        "schema": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": MAX_IDEMPOTENCY_KEY,
                            "pattern": "^[!#-~][ -~]*$",
                        },
                    },
                    {"name": "traceparent", "in": "header", "schema": {"type": "string"}},
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("Submission")}},
                },
                "responses": _answers(
                    400,
                    401,
                    403,
                    409,
                    413,
                    422,
                    s200=_json(_ref("Outcome"), "The call ended (any typed outcome)"),
                    s202=_json(_ref("Outcome"), "The call waits for a person"),
                ),
            }
        },
        "/v1/invocations": {
            "get": {
                "summary": "The tenant's invocations, newest first",
                "parameters": [
                    *(
                        {"name": n, "in": "query", "schema": {"type": "string"}}
                        for n in ("status", "tool", "subject")
                    ),
                    {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                ],
                "responses": _answers(
                    400, 401, s200=_json(_listing("invocations", _SUMMARY), "Invocations")
                ),
            }
        },
        "/v1/invocations/{invocation_id}": {
            "get": {
                "summary": "One invocation: request, answer, human evidence, state",
                "description": (
                    "With wait, the answer comes as soon as the call is settled (no longer"
                    " waiting for a person nor running), or after that many seconds: the"
                    " call as it stands then, either way."
                ),
                "parameters": [
                    _ID,
                    {
                        "name": "wait",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_WAIT},
                    },
                ],
                "responses": _answers(400, 401, 404, s200=_json(_SUMMARY, "The invocation")),
            }
        },
        "/v1/invocations/{invocation_id}/trace": {
            "get": {
                "summary": "The invocation's append-only trace",
                "parameters": [_ID],
                "responses": _answers(
                    401,
                    404,
                    s200=_json(
                        {
                            "type": "object",
                            "required": ["invocation_id", "events"],
                            "properties": {
                                "invocation_id": {"type": "string"},
                                "events": {"type": "array", "items": {"type": "object"}},
                            },
                        },
                        "Trace events",
                    ),
                ),
            }
        },
        "/v1/invocations/{invocation_id}/decision": {
            "post": {
                "summary": "Approve, deny or edit a parked call, bound to the digest reviewed",
                "parameters": [_ID],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("Decision")}},
                },
                "responses": _answers(
                    400,
                    401,
                    403,
                    404,
                    409,
                    413,
                    422,
                    s200=_json(_ref("Outcome"), "The call's outcome after the decision"),
                    s202=_json(
                        _HANDED_OVER,
                        "Recorded and handed over to the surface holding the call, which"
                        " runs or denies it, or runs an edit's corrected call through every"
                        " gate there (another surface's call; holder_gone 409 once its"
                        " holder has stopped)",
                    ),
                ),
            }
        },
        "/v1/confirmations": {
            "get": {
                "summary": "Calls waiting for a person",
                "responses": _answers(
                    401,
                    s200=_json(
                        _listing("confirmations", _WAITING),
                        "Pending calls of every surface: the service's, the MCP gateway's,"
                        " mcp-serve's and library programs' with a journal",
                    ),
                ),
            }
        },
        "/v1/events": {
            "get": {
                "summary": "The tenant's call events as server-sent events, resumable",
                "description": (
                    "Events parked, decided, finished, outcome_unknown and reconciled; each"
                    " event's id is its cursor. Reconnect with Last-Event-ID (or after) to go"
                    " on where the stream ended; it ends after timeout seconds."
                ),
                "parameters": [
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "after",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "timeout",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_STREAM},
                    },
                ],
                "responses": _answers(
                    400,
                    401,
                    s200={
                        "description": "A stream of events (text/event-stream)",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                ),
            }
        },
        "/v1/webhooks/deliveries": {
            "get": {
                "summary": "The tenant's webhook deliveries, with every try of each (operator)",
                "responses": _answers(
                    401,
                    403,
                    s200=_json(
                        _listing("deliveries", {"type": "object"}), "Deliveries and their tries"
                    ),
                ),
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics: calls by tool and outcome, durations, pending",
                "description": "An operator's key: Prometheus sends it as a bearer token.",
                "responses": _answers(
                    401,
                    403,
                    s200={
                        "description": "The Prometheus text format",
                        "content": {METRICS_TYPE: {"schema": {"type": "string"}}},
                    },
                ),
            }
        },
        "/v1/unknown": {
            "get": {
                "summary": "Calls whose outcome is unknown",
                "responses": _answers(
                    401, s200=_json(_listing("unknown", {"type": "object"}), "Unknown calls")
                ),
            }
        },
        "/v1/unknown/{invocation_id}/reconcile": {
            "post": {
                "summary": "Ask the tool, or record a person's finding with evidence",
                "parameters": [_ID],
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": _ref("Finding")}},
                },
                "responses": _answers(
                    400,
                    401,
                    403,
                    404,
                    409,
                    413,
                    s200=_json(
                        {
                            "type": "object",
                            "required": ["invocation_id", "status", "evidence"],
                            "properties": {
                                "invocation_id": {"type": "string"},
                                "status": {"type": "string"},
                                "evidence": {"type": "object"},
                            },
                        },
                        "What reconciliation found",
                    ),
                ),
            }
        },
    },
}
