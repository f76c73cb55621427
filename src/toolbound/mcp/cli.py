"""``toolbound mcp-gateway`` and ``toolbound mcp-serve`` (R18).

::

    toolbound mcp-gateway --config FILE                      # serve over stdio
    toolbound mcp-gateway --config FILE --http [--port N]    # serve over streamable HTTP
    toolbound mcp-gateway --config FILE tools                # every upstream tool, its state
    toolbound mcp-gateway --config FILE approve-tool NAME --digest D --approver WHO
    toolbound mcp-serve --config FILE --tools MODULE:FUNC [--http]

This module imports only click at import time; the MCP SDK is loaded when a
command runs, and its absence is reported with the install hint.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from toolbound.mcp.config import GatewayConfig
    from toolbound.mcp.server import HttpEndpoint

__all__ = ["mcp_gateway", "mcp_serve"]

_HINT = "the MCP commands need the 'mcp' extra: pip install 'toolbound[mcp]'"


def _config(path: str) -> GatewayConfig:
    try:
        from toolbound.config import ConfigError  # noqa: PLC0415
        from toolbound.mcp.config import load_gateway_config  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = f"{_HINT} ({exc.name} is missing)"
        raise click.ClickException(msg) from exc
    try:
        return load_gateway_config(path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _serve_http(endpoint: HttpEndpoint, *lifespans: Any, host: str, port: int, path: str) -> None:  # noqa: ANN401
    import uvicorn  # noqa: PLC0415 - only for serving HTTP

    app = endpoint.starlette(path, also=lifespans)
    uvicorn.run(app, host=host, port=port, log_level="warning")


_TRANSPORT = [
    click.option("--http", "http", is_flag=True, help="Serve streamable HTTP instead of stdio."),
    click.option("--host", default=None, help="HTTP host (default: [service].host)."),
    click.option("--port", default=None, type=int, help="HTTP port (default: [service].port)."),
]


def _transport_options(func: Any) -> Any:  # noqa: ANN401 - a click decorator chain
    for option in reversed(_TRANSPORT):
        func = option(func)
    return func


@click.group(invoke_without_command=True)
@click.option(
    "--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False)
)
@_transport_options
@click.pass_context
def mcp_gateway(
    ctx: click.Context, config_path: str, *, http: bool, host: str | None, port: int | None
) -> None:
    """Serve the upstream MCP servers of a configuration, guarded."""
    config = _config(config_path)
    ctx.obj = config
    if ctx.invoked_subcommand is not None:
        return
    from toolbound.mcp.gateway import Gateway  # noqa: PLC0415

    gateway = Gateway(config)
    if not http:
        asyncio.run(gateway.run_stdio())
        return
    endpoint = gateway.http(allowed_hosts=_hosts(host or config.service.host))
    _serve_http(
        endpoint,
        gateway.running,
        host=host or config.service.host,
        port=port if port is not None else config.service.port,
        path=config.gateway.http_path,
    )


@mcp_gateway.command("tools")
@click.pass_obj
def tools_command(config: GatewayConfig) -> None:
    """List every upstream tool: served, quarantined, broken or hidden, with its digest.

    Exits 1 when a tool waits for a person's approval, 2 when an upstream is unreachable.
    """
    from toolbound.mcp.gateway import Gateway  # noqa: PLC0415

    async def show() -> int:
        gateway = Gateway(config)
        async with gateway.running():
            statuses = gateway.status()
        for name in sorted(gateway.unreachable):
            click.echo(f"upstream {name}\tunreachable", err=True)
        if gateway.unreachable:
            return 2
        for s in statuses:
            line = f"{s.name}\t{s.state}\t{s.digest or '-'}"
            if s.reason:
                line += f"\t{s.reason}"
            click.echo(line)
        return 1 if any(s.state == "quarantined" for s in statuses) else 0

    sys.exit(asyncio.run(show()))


@mcp_gateway.command("approve-tool")
@click.argument("name")
@click.option("--digest", required=True, help="The digest of the definition you reviewed.")
@click.option(
    "--approver",
    default=lambda: os.environ.get("USER", "operator"),
    show_default="$USER",
    help="Who approves.",
)
@click.pass_obj
def approve_tool(config: GatewayConfig, name: str, digest: str, approver: str) -> None:
    """Approve the current definition of a quarantined tool, by the digest you reviewed."""
    from toolbound.mcp.gateway import Gateway, ToolVersionMismatch  # noqa: PLC0415

    async def approve() -> None:
        gateway = Gateway(config)
        async with gateway.running():
            status = await gateway.approve_tool(name, digest=digest, approver=approver)
        click.echo(f"{status.name}\t{status.state}\t{status.digest}")

    try:
        asyncio.run(approve())
    except ToolVersionMismatch as exc:
        raise click.ClickException(str(exc)) from None


@click.command("mcp-serve")
@click.option(
    "--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False)
)
@click.option("--tools", required=True, help="MODULE:FUNCTION returning the Registry to serve.")
@_transport_options
def mcp_serve(
    config_path: str, tools: str, *, http: bool, host: str | None, port: int | None
) -> None:
    """Serve a tool set over MCP, every call through the pipeline."""
    config = _config(config_path)
    from toolbound._clock import SystemClock  # noqa: PLC0415
    from toolbound._model import Subject  # noqa: PLC0415
    from toolbound.cli import load_registry  # noqa: PLC0415
    from toolbound.mcp.server import (  # noqa: PLC0415
        GuardedServer,
        HttpEndpoint,
        StaticCatalog,
        holds_capabilities,
    )
    from toolbound.runtime import Runtime  # noqa: PLC0415
    from toolbound.service.core import ledger_for, telemetry_sinks  # noqa: PLC0415

    clock = SystemClock()
    runtime = Runtime(
        policy=config.service.build_policy(clock),
        ledger=ledger_for(config.service.store_url),
        clock=clock,
        sinks=telemetry_sinks(config.service),
    )
    server = GuardedServer(
        runtime=runtime,
        catalog=StaticCatalog(load_registry(tools), holds_capabilities(config.grant_holders())),
        name=config.gateway.name,
        confirm="console" if config.service.four_eyes else config.gateway.confirm,
        timeout=config.service.timeout,
        result_budget=config.service.result_budget,
    )
    if not http:
        principal = config.stdio_principal()
        if principal is None:
            msg = "serving over stdio needs [gateway].stdio_principal naming a [[principal]]"
            raise click.ClickException(msg)
        asyncio.run(server.run_stdio(Subject(id=principal.subject, tenant=principal.tenant)))
        return

    chosen = host or config.service.host
    _serve_http(
        HttpEndpoint(server, config.subject_for, allowed_hosts=_hosts(chosen)),
        host=chosen,
        port=port if port is not None else config.service.port,
        path=config.gateway.http_path,
    )


def _hosts(host: str) -> list[str] | None:
    """DNS-rebinding protection for loopback hosts; other hosts are a proxy's to check."""
    if host in {"127.0.0.1", "localhost", "::1"}:
        return ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    return None
