"""The OpenAPI 3.1 description of the HTTP API, served at ``/openapi.json``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["OPENAPI"]


def _ref(name: str) -> dict[str, object]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: Mapping[str, object], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": _ref("Problem")}},
    }


_ID = {"name": "invocation_id", "in": "path", "required": True, "schema": {"type": "string"}}
_AUTH_ERRORS: dict[str, Any] = {
    "401": _problem("No or unknown API key"),
    "403": _problem("The key's principal lacks the role"),
}

OPENAPI: Final[dict[str, Any]] = {
    "openapi": "3.1.0",
    "info": {
        "title": "toolbound",
        "version": "1",
        "description": "Submit the tool calls a model proposes; confirm, trace and reconcile them.",
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
                    "tool": {"type": "string", "description": "the tool name the model chose"},
                    "arguments": {
                        "type": "string",
                        "description": "the model's argument text, byte for byte",
                    },
                    "call_id": {"type": "string", "description": "the provider's call id"},
                    "model_call_id": {"type": "string"},
                    "version": {"type": "string"},
                    "tools": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "the tools the model was shown (default: all)",
                    },
                    "timezone": {"type": "string", "default": "UTC"},
                    "locale": {"type": "string", "default": "en"},
                },
            },
            "Outcome": {
                "type": "object",
                "required": ["invocation_id", "status", "state", "path", "message"],
                "properties": {
                    "invocation_id": {"type": "string"},
                    "call_id": {"type": "string"},
                    "tool": {"type": "string"},
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
                "properties": {
                    "digest": {"type": "string", "description": "the digest the person reviewed"},
                    "decision": {"enum": ["approve", "deny"]},
                },
            },
            "Problem": {
                "type": "object",
                "required": ["status", "code", "detail"],
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
        "/v1/proposals": {
            "post": {
                "summary": "Run a proposal through every gate and, if admitted, execute it",
                "parameters": [
                    {
                        "name": "Idempotency-Key",
                        "in": "header",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    {"name": "traceparent", "in": "header", "schema": {"type": "string"}},
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("Submission")}},
                },
                "responses": {
                    "200": _json(_ref("Outcome"), "The call ended (any typed outcome)"),
                    "202": _json(_ref("Outcome"), "The call waits for a person"),
                    "400": _problem("Missing Idempotency-Key or a malformed body"),
                    "409": _problem("A request with this key is still running"),
                    "422": _problem("The key was used with another body"),
                    **_AUTH_ERRORS,
                },
            }
        },
        "/v1/invocations": {
            "get": {
                "summary": "The tenant's invocations, newest first",
                "parameters": [
                    {"name": n, "in": "query", "schema": {"type": "string"}}
                    for n in ("status", "tool", "subject", "limit")
                ],
                "responses": {"200": _json({"type": "object"}, "Invocations"), **_AUTH_ERRORS},
            }
        },
        "/v1/invocations/{invocation_id}": {
            "get": {
                "summary": "One invocation: request, answer, human evidence, state",
                "parameters": [_ID],
                "responses": {
                    "200": _json({"type": "object"}, "The invocation"),
                    "404": _problem("No such invocation in this tenant"),
                    **_AUTH_ERRORS,
                },
            }
        },
        "/v1/invocations/{invocation_id}/trace": {
            "get": {
                "summary": "The invocation's append-only trace",
                "parameters": [_ID],
                "responses": {
                    "200": _json({"type": "object"}, "Trace events"),
                    "404": _problem("No such invocation in this tenant"),
                    **_AUTH_ERRORS,
                },
            }
        },
        "/v1/invocations/{invocation_id}/decision": {
            "post": {
                "summary": "Approve or deny a parked call, bound to the digest reviewed",
                "parameters": [_ID],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("Decision")}},
                },
                "responses": {
                    "200": _json(_ref("Outcome"), "The call's outcome after the decision"),
                    "404": _problem("No such invocation in this tenant"),
                    "409": _problem("Not pending, already decided, or another digest"),
                    **_AUTH_ERRORS,
                },
            }
        },
        "/v1/confirmations": {
            "get": {
                "summary": "Calls waiting for a person",
                "responses": {"200": _json({"type": "object"}, "Pending calls"), **_AUTH_ERRORS},
            }
        },
        "/v1/unknown": {
            "get": {
                "summary": "Calls whose outcome is unknown",
                "responses": {"200": _json({"type": "object"}, "Unknown calls"), **_AUTH_ERRORS},
            }
        },
        "/v1/unknown/{invocation_id}/reconcile": {
            "post": {
                "summary": "Ask the tool, or record a person's finding with evidence",
                "parameters": [_ID],
                "responses": {
                    "200": _json({"type": "object"}, "What reconciliation found"),
                    "404": _problem("No such invocation in this tenant"),
                    "409": _problem("The outcome is not unknown"),
                    **_AUTH_ERRORS,
                },
            }
        },
    },
}
