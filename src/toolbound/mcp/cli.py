"""``toolbound mcp-gateway`` and ``toolbound mcp-serve`` (R18).

::

    toolbound mcp-gateway --config FILE                      # serve over stdio
    toolbound mcp-gateway --config FILE --http [--port N]    # serve over streamable HTTP
    toolbound mcp-gateway --config FILE tools                # every upstream tool, its state
    toolbound mcp-gateway --config FILE review [NAME] [--approve]  # quarantined: the diff
    toolbound mcp-gateway --config FILE approve-tool NAME --digest D --approver WHO
    toolbound mcp-gateway --config FILE pending [--url URL] [--token-env NAME]
    toolbound mcp-gateway --config FILE confirm INVOCATION_ID --digest D [--deny] [--url URL]
    toolbound mcp-serve --config FILE --tools MODULE:FUNC [--http]
    toolbound mcp-serve ... --http --local-as PRINCIPAL      # loopback, no token needed

``--local-as`` is local mode: an HTTP request without a bearer token runs as that
``[[principal]]`` (one with a token is authenticated as always). It binds a loopback
address only, and refuses any other.

``pending`` and ``confirm`` talk to a running gateway over HTTP (its confirmation
endpoints, :mod:`toolbound.mcp.confirmations`) as the approver whose token is in the
environment variable ``--token-env`` (default ``TOOLBOUND_TOKEN``) — never in argv,
where other users of the machine could read it.

This module imports only click at import time; the MCP SDK is loaded when a
command runs, and its absence is reported with the install hint.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import sys
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from toolbound.logs import LEVELS

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Coroutine

    from toolbound._model import Subject
    from toolbound.logs import Level
    from toolbound.mcp.config import GatewayConfig
    from toolbound.mcp.gateway import ToolStatus
    from toolbound.mcp.server import HttpEndpoint
    from toolbound.pipeline.runtime import Runtime
    from toolbound.tool_review import Review

__all__ = ["mcp_gateway", "mcp_serve"]

_HINT = "the MCP commands need the 'mcp' extra: pip install 'toolbound[mcp]'"
_TOKEN_ENV = "TOOLBOUND_TOKEN"  # noqa: S105 - the name of a variable, not a token
_REFUSED = 1  # the gateway refused (or could not be asked)
_DID_NOT_RUN = 3  # approved, but the call did not succeed
_UNREACHABLE = 4  # no answer from the gateway (docs/cli.md: one table of statuses)
_T = TypeVar("_T")


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


def _log_as(config: GatewayConfig, level: str | None) -> str:
    """Log as the file's ``[logging]`` says, at ``--log-level`` if given; that level."""
    from toolbound.logs import configure  # noqa: PLC0415

    chosen = cast("Level", level or config.service.logging.level)
    configure(chosen, config.service.logging.format)
    return chosen


def _run(work: Coroutine[Any, Any, _T]) -> _T:
    """Run ``work``; a refusal of toolbound's (a name collision, say) ends it in one line."""
    from toolbound._errors import ToolboundError  # noqa: PLC0415

    try:
        return asyncio.run(work)
    except ToolboundError as exc:
        raise click.ClickException(str(exc)) from None


def _serve_http(
    endpoint: HttpEndpoint,
    *lifespans: Any,  # noqa: ANN401
    host: str,
    port: int,
    path: str,
    log_level: str,
) -> None:
    import uvicorn  # noqa: PLC0415 - only for serving HTTP

    from toolbound._errors import ToolboundError  # noqa: PLC0415

    refused: list[ToolboundError] = []

    def guarded(enter: Any) -> Any:  # noqa: ANN401 - a lifespan factory
        """``enter``, whose refusal at start stops the server and is told in one line."""

        @contextlib.asynccontextmanager
        async def lifespan() -> AsyncIterator[None]:
            async with contextlib.AsyncExitStack() as stack:
                try:
                    await stack.enter_async_context(enter())
                except ToolboundError as exc:
                    refused.append(exc)
                    server.should_exit = True
                yield

        return lifespan

    app = endpoint.starlette(path, also=[guarded(enter) for enter in lifespans])
    # uvicorn's access lines carry query strings, where a client may put a secret.
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, log_level=log_level, access_log=False
    )
    server = uvicorn.Server(config)
    server.run()
    if refused:
        raise click.ClickException(str(refused[0]))


_TRANSPORT = [
    click.option("--http", "http", is_flag=True, help="Serve streamable HTTP instead of stdio."),
    click.option("--host", default=None, help="HTTP host (default: [service].host)."),
    click.option("--port", default=None, type=int, help="HTTP port (default: [service].port)."),
    click.option(
        "--local-as",
        "local_as",
        default=None,
        metavar="PRINCIPAL",
        help="Local mode: HTTP requests without a token run as this [[principal]] "
        "(loopback addresses only).",
    ),
    click.option(
        "--log-level",
        type=click.Choice(LEVELS),
        default=None,
        help="Log at this level and above, on standard error (default: [logging].level).",
    ),
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
    ctx: click.Context,
    config_path: str,
    *,
    http: bool,
    host: str | None,
    port: int | None,
    local_as: str | None,
    log_level: str | None,
) -> None:
    """Serve the upstream MCP servers of a configuration, guarded."""
    config = _config(config_path)
    ctx.obj = config
    if ctx.invoked_subcommand is not None:
        return
    from toolbound.mcp.gateway import Gateway  # noqa: PLC0415

    level = _log_as(config, log_level)
    chosen = host or config.service.host
    local = _local_subject(config, local_as, http=http, host=chosen)
    gateway = Gateway(config)
    if not http:
        _run(gateway.run_stdio())
        return
    endpoint = gateway.http(allowed_hosts=_hosts(chosen), local=local)
    _serve_http(
        endpoint,
        gateway.running,
        host=chosen,
        port=port if port is not None else config.service.port,
        path=config.gateway.http_path,
        log_level=level,
    )


_JSON = click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON document (its shape: docs/cli.md)."
)
"""The ``--json`` option of the commands that read."""


@mcp_gateway.command("tools")
@_JSON
@click.pass_obj
def tools_command(config: GatewayConfig, *, as_json: bool) -> None:
    """List every upstream tool: served, quarantined, broken or hidden, with its digest.

    Exits 1 when a tool waits for a person's approval (``review`` shows what changed),
    2 when an upstream is unreachable.
    """
    from toolbound.mcp.gateway import Gateway  # noqa: PLC0415

    gateway = Gateway(config)  # its stores open here, before the loop runs

    async def show() -> int:
        async with gateway.running():
            statuses = gateway.status()
        unreachable = sorted(gateway.unreachable)
        waiting = any(s.state == "quarantined" for s in statuses)
        code = 2 if unreachable else int(waiting)
        if as_json:
            _emit({"tools": [_status_fields(s) for s in statuses], "unreachable": unreachable})
            return code
        for name in unreachable:
            click.echo(f"upstream {name}\tunreachable", err=True)
        for s in () if unreachable else statuses:
            line = f"{s.name}\t{s.state}\t{s.digest or '-'}"
            if s.reason:
                line += f"\t{s.reason}"
            click.echo(line)
        return code

    sys.exit(_run(show()))


def _status_fields(status: ToolStatus) -> dict[str, object]:
    """One upstream tool as ``tools --json`` prints it."""
    return {
        "name": status.name,
        "upstream": status.upstream,
        "tool": status.tool,
        "state": status.state,
        "digest": status.digest,
        "approved_digest": status.approved_digest,
        "reason": status.reason,
    }


def _emit(document: dict[str, object]) -> None:
    """One JSON document on stdout (the ``cli`` extra's writer, loaded when needed)."""
    from toolbound._output import emit_json  # noqa: PLC0415

    emit_json(document)


_APPROVER = click.option(
    "--approver",
    default=lambda: os.environ.get("USER", "operator"),
    show_default="$USER",
    help="Who approves.",
)
"""The ``--approver`` option of the commands that approve a tool definition."""


@mcp_gateway.command("approve-tool")
@click.argument("name")
@click.option("--digest", required=True, help="The digest of the definition you reviewed.")
@_APPROVER
@click.pass_obj
def approve_tool(config: GatewayConfig, name: str, digest: str, approver: str) -> None:
    """Approve the current definition of a quarantined tool, by the digest you reviewed."""
    from toolbound.mcp.gateway import Gateway, ToolVersionMismatch  # noqa: PLC0415

    gateway = Gateway(config)  # its stores open here, before the loop runs

    async def approve() -> None:
        async with gateway.running():
            status = await gateway.approve_tool(name, digest=digest, approver=approver)
        click.echo(f"{status.name}\t{status.state}\t{status.digest}")

    try:
        asyncio.run(approve())
    except ToolVersionMismatch as exc:
        raise click.ClickException(str(exc)) from None


@mcp_gateway.command("review")
@click.argument("name", required=False)
@click.option(
    "--approve", is_flag=True, help="After each diff, ask whether to approve that definition."
)
@_APPROVER
@_JSON
@click.pass_obj
def review_command(
    config: GatewayConfig, name: str | None, approver: str, *, approve: bool, as_json: bool
) -> None:
    """Show each quarantined tool's definition against the approved one, as a diff.

    With --approve, each definition shown may be approved by its digest: one that the
    upstream changed again meanwhile is refused. Exits 0 when no tool waits for a
    person (any more), 1 when one does, 2 when an upstream is unreachable.
    """
    from toolbound._output import command_console  # noqa: PLC0415 - the cli extra
    from toolbound.mcp.gateway import Gateway, ToolVersionMismatch  # noqa: PLC0415
    from toolbound.tool_review import review  # noqa: PLC0415

    if as_json and approve:
        msg = "--json prints the reviews for a script; --approve asks a person: choose one"
        raise click.UsageError(msg)
    console = command_console()

    gateway = Gateway(config)  # its stores open here, before the loop runs

    async def show() -> int:
        async with gateway.running():
            unreachable = sorted(gateway.unreachable)
            for upstream in () if as_json else unreachable:
                click.echo(f"upstream {upstream}\tunreachable", err=True)
            waiting = {s.name for s in gateway.status() if s.state == "quarantined"}
            if name is not None and name not in waiting:
                click.echo(f"Error: {name} is not quarantined", err=True)
                return 1
            chosen = {n for n in waiting if name in {None, n}}
            held = {n: q for n, q in gateway.approvals.quarantined().items() if n in chosen}
            items = review(held, gateway.approvals.all())
            if as_json:
                reviews = [_review_fields(item) for item in items]
                _emit({"tools": reviews, "unreachable": unreachable, "waiting": len(held)})
                return 2 if unreachable else int(bool(held))
            left = len(held)
            for item in items:
                _print_review(console, item)
                if not approve or not click.confirm(
                    f"Approve {item.name} at {item.held.digest}?", default=False
                ):
                    continue
                try:
                    status = await gateway.approve_tool(
                        item.name, digest=item.held.digest, approver=approver
                    )
                except ToolVersionMismatch as exc:
                    click.echo(f"Error: {exc} (run review again)", err=True)
                    continue
                click.echo(f"{status.name}\t{status.state}\t{status.digest}")
                if status.state != "quarantined":
                    left -= 1
            console.print(f"{left} tool(s) waiting for a person's approval")
            return 2 if gateway.unreachable else int(left > 0)

    sys.exit(_run(show()))


def _review_fields(item: Review) -> dict[str, object]:
    """One quarantined tool as ``review --json`` prints it: both digests and the diff."""
    approved = item.approved
    return {
        "name": item.name,
        "upstream": item.held.upstream,
        "digest": item.held.digest,
        "seen_at": item.held.seen_at.isoformat(),
        "reason": item.held.reason,
        "approved": None
        if approved is None
        else {"digest": approved.digest, "approved_by": approved.approved_by},
        "diff": [{"kind": line.kind, "text": line.text} for line in item.diff],
    }


def _print_review(console: Any, item: Any) -> None:  # noqa: ANN401 - rich and review load lazily
    """One quarantined tool: what it is, why it waits, and the diff — text, never markup."""
    from rich.text import Text  # noqa: PLC0415

    styles = {"header": "bold", "hunk": "cyan", "added": "green", "removed": "red"}
    approved = item.approved
    console.print(Text(f"{item.name}  (upstream {item.held.upstream})", style="bold"))
    for key, value in (
        ("digest now", item.held.digest),
        ("seen", item.held.seen_at.isoformat()),
        ("approved", "never" if approved is None else approved.digest),
        ("approved by", "-" if approved is None else approved.approved_by),
        ("reason", item.held.reason),
    ):
        console.print(Text(f"  {key}: {value}"))
    for line in item.diff:
        console.print(Text(line.text, style=styles.get(line.kind, "")))
    console.print()


_REMOTE = [
    click.option(
        "--url",
        default=None,
        help="The running gateway: its base URL or its MCP URL "
        "(default: http://[service].host:[service].port).",
    ),
    click.option(
        "--token-env",
        default=_TOKEN_ENV,
        show_default=True,
        help="The environment variable holding your approver token.",
    ),
    click.option("--json", "as_json", is_flag=True, help="Print the gateway's JSON answer."),
]


def _remote_options(func: Any) -> Any:  # noqa: ANN401 - a click decorator chain
    for option in reversed(_REMOTE):
        func = option(func)
    return func


@mcp_gateway.command("pending")
@_remote_options
@click.pass_obj
def pending_command(
    config: GatewayConfig, url: str | None, token_env: str, *, as_json: bool
) -> None:
    """List the calls of your tenant waiting for a person, as a running gateway holds them.

    Exits 1 when the gateway refuses (no approver role, unknown token), 4 when it does
    not answer.
    """
    answer = _ask_gateway(config, "GET", "/confirmations", url=url, token_env=token_env)
    if as_json:
        _emit(answer)
        return
    from rich.table import Table  # noqa: PLC0415 - the cli extra, as the other commands
    from rich.text import Text  # noqa: PLC0415 - arguments are shown as text, never as markup

    from toolbound._output import command_console  # noqa: PLC0415

    console = command_console()
    calls = cast("list[dict[str, Any]]", answer.get("confirmations", []))
    for call in calls:
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        subject = call.get("subject") or {}
        for key, value in (
            ("invocation", call.get("invocation_id")),
            ("tool", call.get("tool")),
            ("subject", f"{subject.get('id')}@{subject.get('tenant')}"),
            ("reason", call.get("reason")),
            ("arguments", json.dumps(call.get("arguments"), ensure_ascii=False, sort_keys=True)),
            ("digest", call.get("digest")),
            ("requested", call.get("requested_at")),
            ("expires", call.get("expires_at")),
        ):
            table.add_row(key, Text(str(value)))
        console.print(table, highlight=False)
        console.print()
    console.print(f"{len(calls)} call(s) waiting for a person", highlight=False)


@mcp_gateway.command("confirm")
@click.argument("invocation_id")
@click.option("--digest", required=True, help="The digest of the call you reviewed.")
@click.option("--deny", is_flag=True, help="Refuse the call instead of approving it.")
@_remote_options
@click.pass_obj
def confirm_command(
    config: GatewayConfig,
    invocation_id: str,
    digest: str,
    url: str | None,
    token_env: str,
    *,
    deny: bool,
    as_json: bool,
) -> None:
    """Approve (it runs now, once) or --deny one parked call, by the digest you reviewed.

    Exits 1 when the gateway refuses the decision (another digest, not waiting, not an
    approver, your own call under four-eyes), 3 when an approved call did not succeed,
    4 when the gateway does not answer (``pending`` shows whether the call still waits).
    """
    decision = "deny" if deny else "approve"
    outcome = _ask_gateway(
        config,
        "POST",
        f"/confirmations/{invocation_id}",
        url=url,
        token_env=token_env,
        body={"digest": digest, "decision": decision},
    )
    if as_json:
        click.echo(json.dumps(outcome, indent=2, ensure_ascii=False))
    else:
        message = cast("dict[str, object]", outcome.get("message") or {})
        click.echo(
            f"{'denied' if deny else 'approved'} {invocation_id}: "
            f"{outcome.get('status')} ({outcome.get('state')})"
        )
        click.echo(str(message.get("content", "")))
    if not deny and outcome.get("status") != "observed":
        sys.exit(_DID_NOT_RUN)


def _ask_gateway(
    config: GatewayConfig,
    method: str,
    path: str,
    *,
    url: str | None,
    token_env: str,
    body: dict[str, object] | None = None,
) -> dict[str, Any]:
    """One request to a running gateway's confirmation endpoints; a refusal exits 1, no answer 4."""
    try:
        import httpx  # noqa: PLC0415 - only these commands talk HTTP
    except ImportError as exc:  # pragma: no cover - depends on the environment
        msg = "pending and confirm need httpx: pip install 'toolbound[http]'"
        raise click.ClickException(msg) from exc
    token = os.environ.get(token_env, "").strip()
    if not token:
        msg = f"set ${token_env} to your approver token (it is never taken from the command line)"
        raise click.ClickException(msg)
    base = _base_url(config, url)
    # An approved call runs before the answer comes: wait as long as the call may take.
    timeout = httpx.Timeout(10.0, read=(config.service.timeout or 120.0) + 30.0)
    try:
        response = httpx.request(
            method,
            base + path,
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout,
        )
    except httpx.HTTPError as exc:
        click.echo(f"Error: cannot reach the gateway at {base}: {exc}", err=True)
        sys.exit(_UNREACHABLE)
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        msg = f"the gateway at {base} answered {response.status_code} without a JSON object"
        raise click.ClickException(msg)
    if response.is_error:
        line = f"{answer.get('code', response.status_code)}: {answer.get('detail', '')}"
        if answer.get("hint"):
            line += f" ({answer['hint']})"
        click.echo(f"Error: {line}", err=True)
        sys.exit(_REFUSED)
    return cast("dict[str, Any]", answer)


def _base_url(config: GatewayConfig, url: str | None) -> str:
    """Where the confirmation endpoints are: beside the MCP endpoint."""
    if url is None:
        host = config.service.host
        host = "127.0.0.1" if host in {"0.0.0.0", "::", ""} else host  # noqa: S104 - a bind-all address
        return f"http://{host}:{config.service.port}"
    base = url.rstrip("/")
    mcp_path = config.gateway.http_path.rstrip("/")
    if mcp_path and base.endswith(mcp_path):
        base = base[: -len(mcp_path)]
    return base


@click.command("mcp-serve")
@click.option(
    "--config", "config_path", required=True, type=click.Path(exists=True, dir_okay=False)
)
@click.option("--tools", required=True, help="MODULE:FUNCTION returning the Registry to serve.")
@_transport_options
def mcp_serve(
    config_path: str,
    tools: str,
    *,
    http: bool,
    host: str | None,
    port: int | None,
    local_as: str | None,
    log_level: str | None,
) -> None:
    """Serve a tool set over MCP, every call through the pipeline."""
    config = _config(config_path)
    level = _log_as(config, log_level)
    chosen = host or config.service.host
    local = _local_subject(config, local_as, http=http, host=chosen)
    from toolbound._clock import SystemClock  # noqa: PLC0415
    from toolbound.pipeline.runtime import Runtime  # noqa: PLC0415
    from toolbound.wiring import (  # noqa: PLC0415
        journal_recorder,
        ledger_for,
        policy_for,
        telemetry_sinks,
    )

    clock = SystemClock()
    # Every call is kept in the journal of a durable [store], as the service keeps its own.
    durable = config.service.store_url != "memory"
    recorder = journal_recorder(config.service, "mcp-serve") if durable else None
    runtime = Runtime(
        policy=policy_for(config.service, clock),
        ledger=ledger_for(config.service.store_url),
        clock=clock,
        sinks=(*telemetry_sinks(config.service), *(() if recorder is None else (recorder,))),
        io_threads=config.service.io_threads,
        confirmation_ttl=config.service.confirmation_ttl,
    )
    try:
        _serve(
            config, runtime, tools, http=http, local=local, chosen=chosen, port=port, level=level
        )
    finally:
        if recorder is not None:
            recorder.close()
            recorder.journal.close()


def _serve(
    config: GatewayConfig,
    runtime: Runtime,
    tools: str,
    *,
    http: bool,
    local: Subject | None,
    chosen: str,
    port: int | None,
    level: str,
) -> None:
    from toolbound._model import Subject  # noqa: PLC0415
    from toolbound.mcp.confirmations import ConfirmationEndpoint  # noqa: PLC0415
    from toolbound.mcp.server import (  # noqa: PLC0415
        GuardedServer,
        HttpEndpoint,
        StaticCatalog,
        holds_capabilities,
        holds_capability,
    )
    from toolbound.mcp.serving_resources import LocalResources  # noqa: PLC0415
    from toolbound.mcp.telemetry import instrument  # noqa: PLC0415
    from toolbound.wiring import load_registry  # noqa: PLC0415

    registry = load_registry(tools)
    instrument(runtime, registry)  # R14: the spans describe the served tools
    grants = config.grant_holders()
    library = None
    if registry.library:
        library = LocalResources(
            registry.library,
            runtime=runtime,
            holds=holds_capability(grants),
            limit=config.gateway.max_content_bytes,
        )
    server = GuardedServer(
        runtime=runtime,
        catalog=StaticCatalog(registry, holds_capabilities(grants)),
        name=config.gateway.name,
        confirm="console" if config.service.four_eyes else config.gateway.confirm,
        timeout=config.service.timeout,
        result_budget=config.service.result_budget,
        # A tool answering with Content: its image, audio and resource blocks as blocks.
        content=lambda _name: ("", config.gateway.max_content_bytes),
        federation=library,
    )
    if not http:
        principal = config.stdio_principal()
        if principal is None:
            msg = "serving over stdio needs [gateway].stdio_principal naming a [[principal]]"
            raise click.ClickException(msg)
        asyncio.run(server.run_stdio(Subject(id=principal.subject, tenant=principal.tenant)))
        return

    desk = ConfirmationEndpoint.for_service(runtime, config.service)
    _serve_http(
        HttpEndpoint(
            server,
            config.subject_for,
            allowed_hosts=_hosts(chosen),
            routes=desk.routes(),
            local=local,
            protected_resource=config.gateway.protected_resource,
        ),
        host=chosen,
        port=port if port is not None else config.service.port,
        path=config.gateway.http_path,
        log_level=level,
    )


def _hosts(host: str) -> list[str] | None:
    """DNS-rebinding protection for loopback hosts; other hosts are a proxy's to check."""
    if _loopback(host):
        return ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    return None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _local_subject(
    config: GatewayConfig, name: str | None, *, http: bool, host: str
) -> Subject | None:
    """The subject of local mode (``--local-as``), after refusing what would expose it."""
    if name is None:
        return None
    from toolbound._model import Subject  # noqa: PLC0415

    if not http:
        msg = "--local-as is for --http; over stdio the caller is [gateway].stdio_principal"
        raise click.ClickException(msg)
    if not _loopback(host):
        msg = (
            f"--local-as serves callers without a token, so only on a loopback address "
            f"(127.0.0.1, ::1, localhost), not {host!r}"
        )
        raise click.ClickException(msg)
    principal = config.principal(name)
    if principal is None:
        msg = f"--local-as {name}: no [[principal]] is named {name!r}"
        raise click.ClickException(msg)
    return Subject(id=principal.subject, tenant=principal.tenant)
