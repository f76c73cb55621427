"""The gateway's TOML configuration: the service file plus ``[gateway]`` and ``[[upstream]]``.

One file configures both the service and the MCP gateway. The service's sections
(``[store]``, ``[[principal]]``, ``[[grant]]``, ``[budgets]``, ``[retention]``,
``[service]``, ``[telemetry]``) are read and checked by :mod:`toolbound.config`
exactly as the service reads them; this module adds two::

    [gateway]
    name = "toolbound-gateway"        # the server name downstream clients see
    stdio_principal = "local"         # who a stdio client is (a [[principal]] name)
    confirm = "elicitation"           # or "console": never ask through the client
    approvals = "gateway.approvals.json"   # approved tool versions (default: [service]
                                           # tool_approvals, else beside this file)
    http_path = "/mcp"
    max_content_bytes = 1048576       # mcp-serve: a larger block of a tool's Content, or
                                      # item of a resource read, is cut

    [gateway.protected_resource]      # RFC 9728 metadata, named in every 401 (optional)
    resource = "https://tools.example.com/mcp"    # the MCP URL as clients reach it
    authorization_servers = ["https://auth.example.com"]
    scopes_supported = ["tools"]

    [[upstream]]
    name = "git"                      # also the default prefix: tools become git.<tool>
    # prefix = ""                     # keep the upstream's own names (no two may meet)
    command = ["python", "-m", "mcp_server_git", "--repository", "/srv/repo"]
    # url = "http://127.0.0.1:9000/mcp"; bearer_env = "GIT_UPSTREAM_TOKEN"
    timeout = 30                      # seconds per call (the deadline)
    attempt_timeout = 10              # seconds per attempt (a slower answer is lost)
    new_tools = "trust"               # pin a tool's first definition, or "quarantine"
    strict_schemas = true             # close object schemas against invented fields
    max_content_bytes = 1048576       # a larger image, audio or resource block is cut
    resources_capability = "git:resources"   # who may list and read its resources
    prompts_capability = "git:prompts"       # who may list and get its prompts
    allow_sampling = false            # relay its sampling/createMessage to the caller
    allow_elicitation = false         # relay its elicitation/create to the caller
    relay_input_requests = false      # a 2026-07-28 caller's calls may ask it for input

    [upstream.tools.git_commit]
    effect = "irreversible_write"     # unset: irreversible_write, the most conservative
    capability = "git:write"          # unset: "<upstream>:<tool>"
    resource = { kind = "repository", pointer = "/repo_path", action = "modify" }
    idempotency = "none"              # or "native_key": the upstream dedupes by key
    max_attempts = 1

Both tables are typed in :mod:`toolbound.config_tables` beside the service's, so the
service's loader (and ``check-config``) checks them too. Every problem is reported at
once, with the line and column of its key and its key path
(``upstream[1].tools.git_commit.effect: …``), in one
:class:`~toolbound.config.ConfigError`. Loading starts nothing.
Annotations an upstream publishes are never read here: a tool's effect class
comes from this file only (R18: untrusted upstreams).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal
from urllib.parse import urlsplit

from toolbound import config as service_config
from toolbound._model import Subject
from toolbound.config import ConfigError, ServiceConfig
from toolbound.identity import TokenRefused

if TYPE_CHECKING:
    from collections.abc import Mapping

    from toolbound import config_tables as tables
    from toolbound._model import Action, EffectClass, IdempotencySupport, TaskSupport
    from toolbound.config import Principal

__all__ = [
    "GatewayConfig",
    "GatewaySettings",
    "GrantHolder",
    "ProtectedResource",
    "ResourceRule",
    "ToolRule",
    "UpstreamConfig",
    "load_gateway_config",
    "parse_gateway_config",
]

ConfirmVia = Literal["elicitation", "console"]
NewTools = Literal["trust", "quarantine"]

CONSERVATIVE_EFFECT: EffectClass = "irreversible_write"
"""The effect class of a tool the configuration says nothing about (R18)."""

DEFAULT_MAX_CONTENT_BYTES: Final = 1024 * 1024
"""The default ``max_content_bytes``: one mebibyte of image, audio or resource per block."""
WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
"""Where RFC 9728 puts a protected resource's metadata (its path follows this)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceRule:
    """Which resource a call of one tool touches: the argument at ``pointer``."""

    kind: str
    pointer: str
    action: Action


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRule:
    """What the gateway decides about one upstream tool (nothing comes from the upstream)."""

    effect: EffectClass = CONSERVATIVE_EFFECT
    capability: str | None = None
    resource: ResourceRule | None = None
    idempotency: IdempotencySupport = "none"
    max_attempts: int | None = None
    timeout: float | None = None
    hidden: bool = False
    task_support: TaskSupport = "forbidden"
    """Whether a call may run as a task of the gateway (the upstream call itself is
    an ordinary one: an upstream's own tasks are not relayed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UpstreamConfig:
    """One upstream MCP server: a command run over stdio, or a streamable HTTP URL."""

    name: str
    prefix: str
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    bearer_env: str | None = None
    timeout: float = 30.0
    attempt_timeout: float | None = None
    new_tools: NewTools = "trust"
    strict_schemas: bool = True
    refresh_seconds: float = 60.0
    tools: Mapping[str, ToolRule] = field(default_factory=dict)
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES
    """The largest image, audio or embedded resource passed through whole (decoded bytes)."""
    resources_capability: str | None = None
    prompts_capability: str | None = None
    allow_sampling: bool = False
    """Whether its ``sampling/createMessage`` requests reach the client whose call caused them."""
    allow_elicitation: bool = False
    """Whether its ``elicitation/create`` requests reach the client whose call caused them."""
    relay_input_requests: bool = False
    """Whether a 2026-07-28 caller's calls go over a 2026-07-28 connection, whose
    ``InputRequiredResult`` (SEP-2322) reaches the caller, and the caller's retry the
    upstream (:mod:`toolbound.mcp.rounds`)."""

    @property
    def resources_grant(self) -> str:
        """The capability that lets a caller list and read this upstream's resources."""
        return self.resources_capability or f"{self.name}:resources"

    @property
    def prompts_grant(self) -> str:
        """The capability that lets a caller list and get this upstream's prompts."""
        return self.prompts_capability or f"{self.name}:prompts"

    def served_name(self, tool: str) -> str:
        """The name ``tool`` is served under: ``<prefix>.<tool>``, or ``tool`` if no prefix."""
        return f"{self.prefix}.{tool}" if self.prefix else tool

    def rule(self, tool: str) -> ToolRule:
        """The configured rule for ``tool``, or the conservative default."""
        return self.tools.get(tool, ToolRule())

    def capability(self, tool: str) -> str:
        """The capability a call of ``tool`` needs: configured, or ``<upstream>:<tool>``."""
        return self.rule(tool).capability or f"{self.name}:{tool}"


@dataclass(frozen=True, slots=True)
class GrantHolder:
    """The parts of a configured grant that decide which tools a subject sees."""

    subject: str
    tenant: str
    session: str | None
    capability: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtectedResource:
    """RFC 9728 metadata for the MCP endpoint: where a client learns how to get a token.

    ``resource`` is the endpoint's URL as clients reach it (behind a proxy, the
    public one). The metadata is served at :attr:`metadata_paths` and named by
    :attr:`metadata_url` in the ``WWW-Authenticate`` header of every 401.
    """

    resource: str
    authorization_servers: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] = ()
    resource_name: str | None = None

    @property
    def metadata_url(self) -> str:
        """RFC 9728 §3.1: the well-known path, then the resource's own path."""
        parts = urlsplit(self.resource)
        return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path.rstrip('/')}"

    @property
    def metadata_paths(self) -> tuple[str, ...]:
        """The paths the document is served at: with the resource's path, and without it."""
        path = urlsplit(self.resource).path.rstrip("/")
        return (f"{WELL_KNOWN}{path}", WELL_KNOWN) if path else (WELL_KNOWN,)

    def metadata(self) -> dict[str, object]:
        """The metadata document (RFC 9728 §2); bearer tokens go in the header only."""
        doc: dict[str, object] = {"resource": self.resource, "bearer_methods_supported": ["header"]}
        if self.authorization_servers:
            doc["authorization_servers"] = list(self.authorization_servers)
        if self.scopes_supported:
            doc["scopes_supported"] = list(self.scopes_supported)
        if self.resource_name:
            doc["resource_name"] = self.resource_name
        return doc


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewaySettings:
    """The ``[gateway]`` table."""

    name: str = "toolbound-gateway"
    stdio_principal: str | None = None
    confirm: ConfirmVia = "elicitation"
    approvals: Path | None = None
    http_path: str = "/mcp"
    protected_resource: ProtectedResource | None = None
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES
    """``mcp-serve``: the most bytes one block of a tool's content, or one item of a
    resource read, may carry."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GatewayConfig:
    """A validated gateway configuration: the service's sections and the gateway's own."""

    service: ServiceConfig
    gateway: GatewaySettings
    upstreams: tuple[UpstreamConfig, ...]

    @property
    def approvals_path(self) -> Path:
        """Where approved tool versions are kept (a JSON file beside the configuration)."""
        if self.gateway.approvals is not None:
            return self.gateway.approvals
        if self.service.tool_approvals is not None:  # the file the console reviews
            return self.service.tool_approvals
        source = self.service.source
        if source is None:
            return Path("toolbound-gateway.approvals.json").resolve()
        return source.resolve().with_suffix(".approvals.json")

    def subject_for(self, token: str) -> Subject | None:
        """The subject a bearer token (an API key or a trusted JWT) stands for.

        Only principals with the ``agent`` role call; any other token is ``None``.
        """
        try:
            principal = self.service.authenticate(token)
        except TokenRefused:
            return None
        if "agent" not in principal.roles:
            return None
        return Subject(id=principal.subject, tenant=principal.tenant)

    def grant_holders(self) -> list[GrantHolder]:
        """Who holds which capability, from ``[[grant]]``: what decides visibility."""
        return [
            GrantHolder(
                subject=str(g["subject"]),
                tenant=str(g["tenant"]),
                session=None if g.get("session") is None else str(g.get("session")),
                capability=str(g["capability"]),
            )
            for g in self.service.grants
        ]

    def stdio_principal(self) -> Principal | None:
        """The principal a stdio client stands for, if one is configured."""
        return self.principal(self.gateway.stdio_principal)

    def principal(self, name: str | None) -> Principal | None:
        """The ``[[principal]]`` called ``name``, if there is one."""
        return next((p for p in self.service.principals if p.name == name), None)


def load_gateway_config(path: str | Path) -> GatewayConfig:
    """Read and validate the TOML file at ``path``."""
    return parse_gateway_config(service_config.read_config_text(path), source=Path(path))


def parse_gateway_config(text: str, *, source: Path | None = None) -> GatewayConfig:
    """Validate TOML ``text``; relative paths resolve against ``source``'s folder.

    The whole file is checked as the service checks it (one file means the same thing
    to both); the gateway's settings are then made of its ``[gateway]`` and
    ``[[upstream]]`` tables.
    """
    name = str(source) if source else ""
    raw = service_config.toml_tables(text, source=source)
    made, issues = service_config.validate_tables(raw, source=source)
    if made is None:
        raise ConfigError(issues, source=name, text=text)
    folder = source.resolve().parent if source is not None else Path.cwd()
    return GatewayConfig(
        service=service_config.service_config(made, raw, source),
        gateway=_settings(made.gateway, folder),
        upstreams=tuple(_upstream(u, folder) for u in made.upstream),
    )


def _settings(table: tables.Gateway, folder: Path) -> GatewaySettings:
    resource = table.protected_resource
    return GatewaySettings(
        name=table.name,
        stdio_principal=table.stdio_principal,
        confirm=table.confirm,
        approvals=None if table.approvals is None else folder / table.approvals,
        http_path=table.http_path,
        protected_resource=None
        if resource is None
        else ProtectedResource(
            resource=resource.resource,
            authorization_servers=tuple(resource.authorization_servers),
            scopes_supported=tuple(resource.scopes_supported),
            resource_name=resource.resource_name,
        ),
        max_content_bytes=table.max_content_bytes,
    )


def _upstream(table: tables.Upstream, folder: Path) -> UpstreamConfig:
    values = table.model_dump(exclude={"tools", "command", "prefix", "cwd"})
    return UpstreamConfig(
        **values,
        prefix=table.name if table.prefix is None else table.prefix,
        command=tuple(table.command),
        cwd=None if table.cwd is None else str(folder / table.cwd),
        tools={name: _rule(rule) for name, rule in table.tools.items()},
    )


def _rule(table: tables.ToolRule) -> ToolRule:
    resource = table.resource
    if resource is not None:
        read = table.effect in {"pure", "read"}
        action: Action = resource.action or ("read" if read else "modify")
        rule = ResourceRule(kind=resource.kind, pointer=resource.pointer, action=action)
    return ToolRule(
        effect=table.effect,
        capability=table.capability,
        resource=None if resource is None else rule,
        idempotency=table.idempotency,
        max_attempts=table.max_attempts,
        timeout=table.timeout,
        hidden=table.hidden,
        task_support=table.task_support,
    )
