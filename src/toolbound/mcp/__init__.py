"""MCP surfaces (R18): toolbound tools as a guarded MCP server, and a guarding gateway.

* :class:`GuardedServer` serves any toolbound tool set over MCP (stdio and streamable
  HTTP) on the official ``mcp`` SDK, every call through the whole pipeline.
* :class:`Gateway` fronts upstream MCP servers: it imports their tools, pins their
  definitions, and serves them downstream with the pipeline in between; their
  content blocks, resources, prompts and progress pass through under the same guard.

Needs the ``mcp`` extra: ``pip install 'toolbound[mcp]'``. The names below are
loaded on first use, so that ``toolbound.mcp.cli`` (and the ``toolbound`` command)
works without the SDK and says how to install it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolbound.approvals import Approval, ApprovalStore
    from toolbound.mcp.config import GatewayConfig, load_gateway_config, parse_gateway_config
    from toolbound.mcp.confirmations import ConfirmationEndpoint
    from toolbound.mcp.gateway import Gateway, ToolStatus, ToolVersionMismatch
    from toolbound.mcp.server import (
        ENVELOPE_META_KEY,
        ConfirmOnce,
        GuardedServer,
        HttpEndpoint,
        StaticCatalog,
        holds_capabilities,
    )
    from toolbound.mcp.upstream import IDEMPOTENCY_META_KEY, Upstream, definition_digest

__all__ = [
    "ENVELOPE_META_KEY",
    "IDEMPOTENCY_META_KEY",
    "Approval",
    "ApprovalStore",
    "ConfirmOnce",
    "ConfirmationEndpoint",
    "Gateway",
    "GatewayConfig",
    "GuardedServer",
    "HttpEndpoint",
    "StaticCatalog",
    "ToolStatus",
    "ToolVersionMismatch",
    "Upstream",
    "definition_digest",
    "holds_capabilities",
    "load_gateway_config",
    "parse_gateway_config",
]

_WHERE = {
    "Approval": "toolbound.approvals",
    "ApprovalStore": "toolbound.approvals",
    "ConfirmationEndpoint": "confirmations",
    "GatewayConfig": "config",
    "load_gateway_config": "config",
    "parse_gateway_config": "config",
    "Gateway": "gateway",
    "ToolStatus": "gateway",
    "ToolVersionMismatch": "gateway",
    "ENVELOPE_META_KEY": "server",
    "ConfirmOnce": "server",
    "GuardedServer": "server",
    "HttpEndpoint": "server",
    "StaticCatalog": "server",
    "holds_capabilities": "server",
    "IDEMPOTENCY_META_KEY": "upstream",
    "Upstream": "upstream",
    "definition_digest": "upstream",
}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        msg = f"module 'toolbound.mcp' has no attribute {name!r}"
        raise AttributeError(msg)
    where = module if "." in module else f"toolbound.mcp.{module}"
    return getattr(importlib.import_module(where), name)
