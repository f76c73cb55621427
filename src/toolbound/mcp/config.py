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

    [upstream.tools.git_commit]
    effect = "irreversible_write"     # unset: irreversible_write, the most conservative
    capability = "git:write"          # unset: "<upstream>:<tool>"
    resource = { kind = "repository", pointer = "/repo_path", action = "modify" }
    idempotency = "none"              # or "native_key": the upstream dedupes by key
    max_attempts = 1

Every problem is reported at once, with the key path it is about
(``upstream[1].tools.git_commit.effect: …``), in one
:class:`~toolbound.config.ConfigError`. Loading opens nothing and starts nothing.
Annotations an upstream publishes are never read here: a tool's effect class
comes from this file only (R18: untrusted upstreams).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, cast, get_args
from urllib.parse import urlsplit

from toolbound import config as service_config
from toolbound._model import Action, EffectClass, IdempotencySupport, Subject
from toolbound.config import ConfigError, ConfigIssue, ServiceConfig
from toolbound.identity import TokenRefused

if TYPE_CHECKING:
    from collections.abc import Mapping

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

_EFFECTS: frozenset[str] = frozenset(get_args(EffectClass))
_ACTIONS: frozenset[str] = frozenset(get_args(Action))
_IDEMPOTENCY: frozenset[str] = frozenset(get_args(IdempotencySupport)) - {"query_by_key"}
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
_GATEWAY_KEYS = frozenset(
    {"name", "stdio_principal", "confirm", "approvals", "http_path", "protected_resource"}
) | {"max_content_bytes"}
_RESOURCE_KEYS = frozenset(
    {"resource", "authorization_servers", "scopes_supported", "resource_name"}
)
DEFAULT_MAX_CONTENT_BYTES: Final = 1024 * 1024
"""The default ``max_content_bytes``: one mebibyte of image, audio or resource per block."""
WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
"""Where RFC 9728 puts a protected resource's metadata (its path follows this)."""
_UPSTREAM_KEYS = frozenset(
    {
        "name", "prefix", "command", "env", "cwd", "url", "bearer_env", "timeout",
        "attempt_timeout", "new_tools", "strict_schemas", "refresh_seconds", "tools",
        "max_content_bytes", "resources_capability", "prompts_capability",
        "allow_sampling", "allow_elicitation",
    }
)  # fmt: skip
_TOOL_KEYS = frozenset(
    {"effect", "capability", "resource", "idempotency", "max_attempts", "timeout", "hidden"}
)


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
    """Validate TOML ``text``; relative paths resolve against ``source``'s folder."""
    name = str(source) if source else ""
    raw = service_config.toml_tables(text, source=source)
    gateway_raw = raw.pop("gateway", {})
    upstream_raw = raw.pop("upstream", [])
    # The service's own sections are checked by the service's checker, so that one
    # file means the same thing to both.
    service, shared_issues = service_config.check_tables(raw, source=source)
    mine = _Checker(source)
    settings = mine.gateway(gateway_raw)
    upstreams = mine.upstreams(upstream_raw)
    if settings.stdio_principal is not None:
        declared = raw.get("principal", [])
        names = {p.get("name") for p in declared if isinstance(p, dict)}
        if settings.stdio_principal not in names:
            mine.fail(
                "gateway.stdio_principal",
                f"no [[principal]] is named {settings.stdio_principal!r}",
            )
    issues = [*shared_issues, *mine.issues]
    if issues or service is None:
        raise ConfigError(issues, source=name, text=text)
    return GatewayConfig(service=service, gateway=settings, upstreams=upstreams)


class _Checker:
    """Collects every problem in the gateway's sections, each with its key path."""

    def __init__(self, source: Path | None) -> None:
        self.issues: list[ConfigIssue] = []
        self.folder = source.resolve().parent if source is not None else Path.cwd()

    def fail(self, path: str, message: str) -> None:
        self.issues.append(ConfigIssue(path, message))

    def known(self, raw: Mapping[str, object], path: str, allowed: frozenset[str]) -> None:
        for key in raw:
            if key not in allowed:
                self.fail(
                    f"{path}.{key}", f"unknown key (expected one of {', '.join(sorted(allowed))})"
                )

    def text(
        self, raw: Mapping[str, object], path: str, key: str, default: str | None = None
    ) -> str | None:
        value = raw.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            self.fail(f"{path}.{key}", f"must be a non-empty string, got {value!r}")
            return default
        return value

    def seconds(
        self, raw: Mapping[str, object], path: str, key: str, default: float | None
    ) -> float | None:
        value = raw.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            self.fail(f"{path}.{key}", f"must be a positive number of seconds, got {value!r}")
            return default
        return float(value)

    def size(self, raw: Mapping[str, object], path: str, key: str) -> int:
        value = raw.get(key, DEFAULT_MAX_CONTENT_BYTES)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(f"{path}.{key}", f"must be a number of bytes (0 or more), got {value!r}")
            return DEFAULT_MAX_CONTENT_BYTES
        return value

    def choice(
        self, raw: Mapping[str, object], path: str, key: str, allowed: frozenset[str], default: str
    ) -> str:
        value = raw.get(key, default)
        if value not in allowed:
            self.fail(
                f"{path}.{key}", f"must be one of {', '.join(sorted(allowed))}, got {value!r}"
            )
            return default
        return value

    def flag(self, raw: Mapping[str, object], path: str, key: str, *, default: bool) -> bool:
        value = raw.get(key, default)
        if not isinstance(value, bool):
            self.fail(f"{path}.{key}", f"must be true or false, got {value!r}")
            return default
        return value

    def gateway(self, raw: object) -> GatewaySettings:
        if not isinstance(raw, dict):
            self.fail("gateway", "must be a table ([gateway])")
            return GatewaySettings()
        table = cast("dict[str, object]", raw)
        self.known(table, "gateway", _GATEWAY_KEYS)
        approvals = self.text(table, "gateway", "approvals")
        http_path = self.text(table, "gateway", "http_path", "/mcp") or "/mcp"
        if not http_path.startswith("/"):
            self.fail("gateway.http_path", f"must start with '/', got {http_path!r}")
        return GatewaySettings(
            protected_resource=self.protected_resource(table.get("protected_resource")),
            name=self.text(table, "gateway", "name", "toolbound-gateway") or "toolbound-gateway",
            stdio_principal=self.text(table, "gateway", "stdio_principal"),
            confirm=cast(
                "ConfirmVia",
                self.choice(
                    table,
                    "gateway",
                    "confirm",
                    frozenset({"elicitation", "console"}),
                    "elicitation",
                ),
            ),
            approvals=None if approvals is None else self.folder / approvals,
            http_path=http_path,
            max_content_bytes=self.size(table, "gateway", "max_content_bytes"),
        )

    def protected_resource(self, raw: object) -> ProtectedResource | None:
        if raw is None:
            return None
        path = "gateway.protected_resource"
        if not isinstance(raw, dict):
            self.fail(path, "must be a table ([gateway.protected_resource])")
            return None
        table = cast("dict[str, object]", raw)
        self.known(table, path, _RESOURCE_KEYS)
        resource = self.text(table, path, "resource")
        if resource is None:
            self.fail(f"{path}.resource", "is required: the MCP URL as clients reach it")
        elif not _is_url(resource) or "#" in resource:
            self.fail(
                f"{path}.resource", f"must be an http(s) URL without a fragment, got {resource!r}"
            )
        servers = self.strings(table, path, "authorization_servers")
        for server in servers:
            if not _is_url(server):
                self.fail(f"{path}.authorization_servers", f"must be http(s) URLs, got {server!r}")
        return ProtectedResource(
            resource=resource or "",
            authorization_servers=servers,
            scopes_supported=self.strings(table, path, "scopes_supported"),
            resource_name=self.text(table, path, "resource_name"),
        )

    def strings(self, raw: Mapping[str, object], path: str, key: str) -> tuple[str, ...]:
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(f"{path}.{key}", f"must be an array of non-empty strings, got {value!r}")
            return ()
        return tuple(cast("list[str]", value))

    def upstreams(self, raw: object) -> tuple[UpstreamConfig, ...]:
        if not isinstance(raw, list) or not all(isinstance(u, dict) for u in raw):
            self.fail("upstream", "must be an array of tables ([[upstream]])")
            return ()
        out = [
            self.upstream(cast("dict[str, object]", u), f"upstream[{i}]") for i, u in enumerate(raw)
        ]
        for what in ("name", "prefix"):
            seen: dict[str, int] = {}
            for i, upstream in enumerate(out):
                value = getattr(upstream, what)
                if not value:
                    continue  # kept names: collisions are found when the tools are listed
                if value in seen:
                    self.fail(
                        f"upstream[{i}].{what}",
                        f"{value!r} is already used by upstream[{seen[value]}]",
                    )
                seen.setdefault(value, i)
        return tuple(out)

    def upstream(self, raw: Mapping[str, object], path: str) -> UpstreamConfig:
        self.known(raw, path, _UPSTREAM_KEYS)
        name = self.text(raw, path, "name") or ""
        if name and not _NAME.match(name):
            self.fail(f"{path}.name", f"must match {_NAME.pattern}, got {name!r}")
        # prefix = "" keeps the upstream's own tool names.
        prefix = raw.get("prefix", name)
        if not isinstance(prefix, str):
            self.fail(f"{path}.prefix", f"must be a string, got {prefix!r}")
            prefix = name
        if prefix and not _NAME.match(prefix):
            self.fail(f"{path}.prefix", f"must match {_NAME.pattern}, got {prefix!r}")
        command = raw.get("command", [])
        if not isinstance(command, list) or not all(isinstance(c, str) and c for c in command):
            self.fail(f"{path}.command", f"must be an array of non-empty strings, got {command!r}")
            command = []
        url = self.text(raw, path, "url")
        if url is not None and not url.startswith(("http://", "https://")):
            self.fail(f"{path}.url", f"must be an http(s) URL, got {url!r}")
        if bool(command) == (url is not None):
            self.fail(path, "give exactly one of command (a stdio server) or url (streamable HTTP)")
        env = raw.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            self.fail(f"{path}.env", f"must be a table of strings, got {env!r}")
            env = {}
        cwd = self.text(raw, path, "cwd")
        tools_raw = raw.get("tools", {})
        tools: dict[str, ToolRule] = {}
        if not isinstance(tools_raw, dict):
            self.fail(f"{path}.tools", "must be a table of tables ([upstream.tools.NAME])")
        else:
            for tool, rule in cast("dict[str, object]", tools_raw).items():
                tools[tool] = self.tool(rule, f"{path}.tools.{tool}")
        return UpstreamConfig(
            name=name,
            prefix=prefix,
            command=tuple(cast("list[str]", command)),
            env=cast("dict[str, str]", env),
            cwd=None if cwd is None else str(self.folder / cwd),
            url=url,
            bearer_env=self.text(raw, path, "bearer_env"),
            timeout=self.seconds(raw, path, "timeout", 30.0) or 30.0,
            attempt_timeout=self.seconds(raw, path, "attempt_timeout", None),
            new_tools=cast(
                "NewTools",
                self.choice(raw, path, "new_tools", frozenset({"trust", "quarantine"}), "trust"),
            ),
            strict_schemas=self.flag(raw, path, "strict_schemas", default=True),
            refresh_seconds=self.seconds(raw, path, "refresh_seconds", 60.0) or 60.0,
            tools=tools,
            max_content_bytes=self.size(raw, path, "max_content_bytes"),
            resources_capability=self.text(raw, path, "resources_capability"),
            prompts_capability=self.text(raw, path, "prompts_capability"),
            allow_sampling=self.flag(raw, path, "allow_sampling", default=False),
            allow_elicitation=self.flag(raw, path, "allow_elicitation", default=False),
        )

    def tool(self, raw: object, path: str) -> ToolRule:
        if not isinstance(raw, dict):
            self.fail(path, "must be a table")
            return ToolRule()
        table = cast("dict[str, object]", raw)
        self.known(table, path, _TOOL_KEYS)
        effect = self.choice(table, path, "effect", _EFFECTS, CONSERVATIVE_EFFECT)
        idempotency = self.choice(table, path, "idempotency", _IDEMPOTENCY, "none")
        if idempotency != "none" and effect in {"pure", "read"}:
            self.fail(f"{path}.idempotency", "only a write has an idempotency key")
        attempts = table.get("max_attempts")
        if attempts is not None and (
            isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1
        ):
            self.fail(f"{path}.max_attempts", f"must be a positive integer, got {attempts!r}")
            attempts = None
        return ToolRule(
            effect=cast("EffectClass", effect),
            capability=self.text(table, path, "capability"),
            resource=self.resource(table.get("resource"), f"{path}.resource", effect),
            idempotency=cast("IdempotencySupport", idempotency),
            max_attempts=attempts,
            timeout=self.seconds(table, path, "timeout", None),
            hidden=self.flag(table, path, "hidden", default=False),
        )

    def resource(self, raw: object, path: str, effect: str) -> ResourceRule | None:
        if raw is None:
            return None
        if not isinstance(raw, dict):
            self.fail(path, "must be a table: { kind, pointer, action }")
            return None
        table = cast("dict[str, object]", raw)
        self.known(table, path, frozenset({"kind", "pointer", "action"}))
        pointer = self.text(table, path, "pointer") or ""
        if pointer and not pointer.startswith("/"):
            self.fail(
                f"{path}.pointer", f"must be a JSON pointer starting with '/', got {pointer!r}"
            )
        default_action = "read" if effect in {"pure", "read"} else "modify"
        return ResourceRule(
            kind=self.text(table, path, "kind") or "",
            pointer=pointer,
            action=cast("Action", self.choice(table, path, "action", _ACTIONS, default_action)),
        )


def _is_url(text: str) -> bool:
    parts = urlsplit(text)
    return parts.scheme in {"http", "https"} and bool(parts.netloc)
