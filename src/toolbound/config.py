"""One TOML file configures a toolbound service (R18).

It declares the store, the tool packs, who may call (hashed API keys, or the
bearer JWTs of trusted issuers → subject, tenant, roles), the grants the policy
decides from, budgets, retention, telemetry and logging::

    [store]
    url = "sqlite:///toolbound.db"      # relative paths are taken from this file's folder

    [tools]
    packs = ["toolbound.packs.example:register"]   # MODULE:FUNC, called with the Registry

    [[tools.http]]                       # an HTTP endpoint as a tool
    name = "crm.create_contact"
    effect = "irreversible_write"
    method = "POST"
    url = "https://crm.example/contacts"  # scheme, host and port: fixed here, never arguments
    input_schema = { type = "object", properties = { email = { type = "string" } },
                     required = ["email"], additionalProperties = false }
    # allow_destinations = ["10.20.0.0/16", "crm.internal"]   # internal addresses it may reach
    reads_untrusted = false              # its results are the service's own data, not web text
    roles = { "/email" = "destination" } # what each parameter does (else read from the schema)

    [[principal]]
    name = "agent"
    key_sha256 = "…"                     # hex SHA-256 of the API key; never the key itself
    subject = "agent-1"
    tenant = "acme"
    roles = ["agent"]                    # agent, approver, operator

    [[identity.jwt]]                     # bearer JWTs of an identity provider (see identity.py)
    issuer = "https://login.example.com/"
    audience = "toolbound"
    jwks_url = "https://login.example.com/.well-known/jwks.json"
    tenant_claim = "tid"
    role_map = { "Tools.Call" = "agent", "Tools.Approve" = "approver" }

    [[grant]]
    subject = "agent-1"
    tenant = "acme"
    capability = "orders:write"
    actions = ["create"]
    confirm = true
    scope = { kind = "owner" }
    limits = [{ kind = "number", pointer = "/amount", maximum = 100 }]

    [provenance]                         # flow rules: untrusted data cannot steer a write
    preset = "guard_writes"              # rules for every write, from its parameters' roles
    trust = ["crm.lookup"]               # tools whose results count as trusted

    [[provenance.rule]]                  # a rule by hand, beside the preset
    tool = "crm.create_contact"
    parameter = "/email"
    kind = "trusted_source"              # or "no_private_data"
    otherwise = "refuse"                 # or "confirm" (the default)

    [service]
    host = "127.0.0.1"
    port = 8780
    four_eyes = true
    console_secret_env = "TOOLBOUND_CONSOLE_SECRET"   # replicas share the console's sessions
    max_body_bytes = 4194304             # larger request bodies are refused with 413
    confirmation_ttl = 900               # seconds a parked call waits for a person
    tool_approvals = "gateway.approvals.json"   # the console reviews the gateway's quarantine
    lease = 30                           # seconds a replica holds its calls unrenewed

    [logging]
    level = "info"                       # debug, info, warning, error (--log-level wins)
    format = "json"                      # one JSON object a line; "text" for people

:func:`load_config` reads and validates the whole file and raises one
:class:`ConfigError` listing every problem, each with the key path it is about
(``grant[2].actions: …``). Nothing is imported or opened while loading; building the
registry, policy and store is :meth:`ServiceConfig.build_registry` and friends.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import tomllib
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from toolbound._errors import ConfigurationError, SchemaError, SpecError, ToolboundError
from toolbound._model import Action, EffectClass, ToolSpec
from toolbound.execution.egress import EgressPolicy, HostResource, destination_problem
from toolbound.gates.authorize import (
    DomainScope,
    Grant,
    GrantPolicy,
    IdScope,
    Limit,
    NumberLimit,
    OwnerScope,
    PathScope,
    RateLimit,
    Scope,
)
from toolbound.identity import (
    ASYMMETRIC_ALGORITHMS,
    DEFAULT_ALGORITHMS,
    HMAC_ALGORITHMS,
    ROLES,
    Identity,
    JwtIssuer,
    Principal,
    TokenRefused,
    hash_key,
)
from toolbound.provenance import FlowPolicy, NoPrivateData, TrustedSource, guard_writes
from toolbound.provenance.classes import NAMES as DATA_CLASS_NAMES
from toolbound.provenance.roles import ROLES as PARAMETER_ROLES
from toolbound.provenance.roles import plan
from toolbound.registry import Registry, check_spec

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from toolbound._clock import Clock
    from toolbound.provenance import FlowRule
    from toolbound.provenance.classes import DataClassName
    from toolbound.provenance.roles import RoleName

__all__ = [
    "ROLES",
    "TABLES",
    "WEBHOOK_EVENTS",
    "ConfigError",
    "ConfigIssue",
    "ConfigKey",
    "ConfigTable",
    "HttpToolConfig",
    "LoggingConfig",
    "Principal",
    "ProvenanceConfig",
    "ServiceConfig",
    "StoreTimeouts",
    "TelemetryConfig",
    "WebhookConfig",
    "check_tables",
    "hash_key",
    "load_config",
    "parse_config",
    "read_config_text",
    "toml_tables",
]

Role = Literal["agent", "approver", "operator"]
WEBHOOK_EVENTS: Final = ("parked", "decided", "finished", "outcome_unknown", "reconciled")
"""What a ``[[webhook]]`` may be told of: the journal's notices (``Journal.notices``)."""
_EFFECTS: frozenset[str] = frozenset(
    {"pure", "read", "reversible_write", "irreversible_write", "open_world"}
)
_ACTIONS: frozenset[str] = frozenset({"read", "create", "modify", "delete"})
_SHA256_HEX = re.compile("[0-9a-f]{64}")
_MAX_BODY_BYTES = 4 << 20  # as large as the proposal envelope the service parses
_CONFIRMATION_TTL = timedelta(minutes=15)
_LEASE = timedelta(seconds=30)
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
_METHOD_ACTIONS: dict[str, Action] = {"POST": "create", "DELETE": "delete"}
_EXPORTERS: frozenset[str] = frozenset({"none", "console", "otlp"})
_LOG_LEVELS: frozenset[str] = frozenset({"debug", "info", "warning", "error"})
_LOG_FORMATS: frozenset[str] = frozenset({"text", "json"})
_PRESETS: frozenset[str] = frozenset({"none", "guard_writes"})
_RULE_KINDS: frozenset[str] = frozenset({"trusted_source", "no_private_data"})
_OTHERWISE: frozenset[str] = frozenset({"confirm", "refuse"})


# ---------------------------------------------------------------------------
# The file's tables and keys. The checker accepts exactly these keys, and the
# configuration reference (docs/configuration.md) is generated from this table by
# toolbound.config_reference, which adds what each key means and an example.


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One key a table accepts: its type, and its default (TOML text) or that it is required.

    A key with neither is unset when absent.
    """

    name: str
    type: str
    default: str | None = None
    required: bool = False
    choices: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigTable:
    """A table: ``[path]``, ``[[path]]`` if ``array``, or the inline table of one ``kind``."""

    path: str
    keys: tuple[ConfigKey, ...]
    array: bool = False
    kind: str | None = None  # the `kind` value that selects this variant (scopes, limits)

    def allowed(self) -> frozenset[str]:
        """The keys the checker accepts here (a variant's ``kind`` included)."""
        names = frozenset(key.name for key in self.keys)
        return names | {"kind"} if self.kind is not None else names


_SECONDS = "number > 0 (seconds)"
_IO_THREADS = 32
_MAX_CONNECTIONS = 1000
_KEEP_ALIVE = 5.0
_BODY_TIMEOUT = 30.0
_HEADER_TIMEOUT = 10.0
_CONNECT_TIMEOUT = 5.0
_STATEMENT_TIMEOUT = 10.0
_POOL_TIMEOUT = 1.0


def _num(value: float) -> str:
    """A default number as TOML writes it."""
    return str(int(value)) if value == int(value) else str(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreTimeouts:
    """``[store]``'s bounds on every store call, so a sick store fails fast (503).

    ``connect``: seconds to open a PostgreSQL connection. ``statement``: seconds one
    statement may run (PostgreSQL's ``statement_timeout`` and ``tcp_user_timeout``;
    SQLite's busy timeout, the wait for a writer's lock). ``pool``: seconds to wait
    for a pooled PostgreSQL connection, which is how long a request waits while the
    server is down before it is answered 503.
    """

    connect: float = _CONNECT_TIMEOUT
    statement: float = _STATEMENT_TIMEOUT
    pool: float = _POOL_TIMEOUT


_COUNT = "integer ≥ 1"
_STRINGS = "array of strings"

TABLES: tuple[ConfigTable, ...] = (
    ConfigTable(
        path="store",
        keys=(
            ConfigKey("url", "string", '"sqlite:///toolbound.db"'),
            ConfigKey("connect_timeout", _SECONDS, _num(_CONNECT_TIMEOUT)),
            ConfigKey("statement_timeout", _SECONDS, _num(_STATEMENT_TIMEOUT)),
            ConfigKey("pool_timeout", _SECONDS, _num(_POOL_TIMEOUT)),
        ),
    ),
    ConfigTable(
        path="tools",
        keys=(ConfigKey("packs", _STRINGS, "[]"), ConfigKey("http", "array of tables", "[]")),
    ),
    ConfigTable(
        path="tools.http",
        array=True,
        keys=(
            ConfigKey("name", "string", required=True),
            ConfigKey("version", "string", '"1"'),
            ConfigKey("description", "string", required=True),  # check_spec refuses ""
            # Unset, an endpoint is taken for the most conservative class.
            ConfigKey("effect", "string", '"irreversible_write"', choices=_EFFECTS),
            ConfigKey("method", "string", '"POST"', choices=_METHODS),
            ConfigKey("url", "http(s) URL", required=True),
            ConfigKey("input_schema", "table (JSON Schema)", required=True),
            ConfigKey("output_schema", "table (JSON Schema)"),
            ConfigKey("capabilities", _STRINGS, "[]"),
            ConfigKey("timeout", _SECONDS, "10.0"),
            ConfigKey("max_attempts", _COUNT, "1"),
            ConfigKey("bearer_secret", "secret name"),
            ConfigKey("host_argument", "argument name"),
            ConfigKey("allow_destinations", _STRINGS, "[]"),
            ConfigKey("reads_untrusted", "boolean", "true"),
            ConfigKey("reads_private", "boolean", "true"),
            ConfigKey(
                "roles", "table of JSON pointer → role", "{}", choices=frozenset(PARAMETER_ROLES)
            ),
            ConfigKey("intents", _STRINGS, "[]"),
            ConfigKey(
                "data_classes",
                "table of JSON pointer → data class",
                "{}",
                choices=frozenset(DATA_CLASS_NAMES),
            ),
        ),
    ),
    ConfigTable(
        path="webhook",
        array=True,
        keys=(
            ConfigKey("name", "string", required=True),
            ConfigKey("url", "http(s) URL", required=True),
            ConfigKey("secret_env", "environment variable name", required=True),
            ConfigKey(
                "events",
                _STRINGS,
                '["parked", "decided", "outcome_unknown", "reconciled"]',
                choices=frozenset(WEBHOOK_EVENTS),
            ),
            ConfigKey("tenant", "string"),
            ConfigKey("allow_destinations", _STRINGS, "[]"),
            ConfigKey("timeout", _SECONDS, "10.0"),
        ),
    ),
    ConfigTable(
        path="principal",
        array=True,
        keys=(
            ConfigKey("name", "string", required=True),
            ConfigKey("key_sha256", "64 lowercase hex digits", required=True),
            ConfigKey("subject", "string", required=True),
            ConfigKey("tenant", "string", required=True),
            ConfigKey("roles", _STRINGS, "[]", choices=ROLES),
        ),
    ),
    ConfigTable(path="identity", keys=(ConfigKey("jwt", "array of tables", "[]"),)),
    ConfigTable(
        path="identity.jwt",
        array=True,
        keys=(
            ConfigKey("issuer", "string", required=True),
            ConfigKey("audience", "string", required=True),
            ConfigKey("jwks_url", "http(s) URL"),
            ConfigKey("jwks_file", "path"),
            ConfigKey("secret_env", "environment variable name"),
            ConfigKey(
                "algorithms",
                _STRINGS,
                "[" + ", ".join(f'"{a}"' for a in DEFAULT_ALGORITHMS) + "]",
                choices=ASYMMETRIC_ALGORITHMS | HMAC_ALGORITHMS,
            ),
            ConfigKey("clock_skew", "number ≥ 0 (seconds)", "60"),
            ConfigKey("required_claims", _STRINGS, "[]"),
            ConfigKey("subject_claim", "string", '"sub"'),
            ConfigKey("tenant_claim", "string"),
            ConfigKey("tenant", "string"),
            ConfigKey("roles_claim", "string", '"roles"'),
            ConfigKey("role_map", "table of role names", "{}"),
            ConfigKey("jwks_ttl", _SECONDS, "300"),
            ConfigKey("jwks_refresh_interval", "number ≥ 0 (seconds)", "30"),
        ),
    ),
    ConfigTable(
        path="grant",
        array=True,
        keys=(
            ConfigKey("subject", "string", required=True),
            ConfigKey("tenant", "string", required=True),
            ConfigKey("session", "string"),
            ConfigKey("capability", "string", required=True),
            ConfigKey("actions", _STRINGS, required=True, choices=_ACTIONS),
            ConfigKey("confirm", "boolean", "false"),
            ConfigKey("scope", "inline table"),
            ConfigKey("limits", "array of inline tables", "[]"),
        ),
    ),
    ConfigTable(path="grant.scope", kind="owner", keys=()),
    ConfigTable(
        path="grant.scope", kind="path", keys=(ConfigKey("root", "absolute path", required=True),)
    ),
    ConfigTable(
        path="grant.scope",
        kind="domain",
        keys=(
            ConfigKey("domains", _STRINGS, required=True),
            ConfigKey("allow_subdomains", "boolean", "false"),
        ),
    ),
    ConfigTable(path="grant.scope", kind="id", keys=(ConfigKey("ids", _STRINGS, required=True),)),
    ConfigTable(
        path="grant.limits",
        kind="number",
        keys=(
            ConfigKey("pointer", "JSON pointer", required=True),
            ConfigKey("minimum", "number"),
            ConfigKey("maximum", "number"),
        ),
    ),
    ConfigTable(
        path="grant.limits",
        kind="rate",
        keys=(
            ConfigKey("max_calls", _COUNT, "1"),
            ConfigKey("per_seconds", _SECONDS, required=True),
        ),
    ),
    ConfigTable(
        path="service",
        keys=(
            ConfigKey("host", "string", '"127.0.0.1"'),
            ConfigKey("port", "integer, 0 to 65535", "8780"),
            ConfigKey("four_eyes", "boolean", "false"),
            ConfigKey("console_secret_env", "environment variable name"),
            ConfigKey("console_trace_url", "http(s) URL with {trace_id}"),
            ConfigKey("tool_approvals", "path (relative to this file)"),
            ConfigKey("max_body_bytes", _COUNT, str(_MAX_BODY_BYTES)),
            ConfigKey("confirmation_ttl", _SECONDS, str(int(_CONFIRMATION_TTL.total_seconds()))),
            ConfigKey("lease", _SECONDS, str(int(_LEASE.total_seconds()))),
            ConfigKey("io_threads", _COUNT, str(_IO_THREADS)),
            ConfigKey("cookie_secure", "boolean", "false"),
            ConfigKey("max_connections", _COUNT, str(_MAX_CONNECTIONS)),
            ConfigKey("keep_alive", _SECONDS, _num(_KEEP_ALIVE)),
            ConfigKey("header_timeout", _SECONDS, _num(_HEADER_TIMEOUT)),
            ConfigKey("body_timeout", _SECONDS, _num(_BODY_TIMEOUT)),
        ),
    ),
    ConfigTable(
        path="budgets", keys=(ConfigKey("timeout", _SECONDS), ConfigKey("result_budget", _COUNT))
    ),
    ConfigTable(path="retention", keys=(ConfigKey("days", _COUNT, "30"),)),
    ConfigTable(
        path="provenance",
        keys=(
            ConfigKey("preset", "string", '"none"', choices=_PRESETS),
            ConfigKey("trust", _STRINGS, "[]"),
            ConfigKey("min_length", "table of role → integer ≥ 1", "{}"),
            ConfigKey("rule", "array of tables", "[]"),
        ),
    ),
    ConfigTable(
        path="provenance.rule",
        array=True,
        keys=(
            ConfigKey("tool", "string", required=True),
            ConfigKey("parameter", "JSON pointer", '""'),
            ConfigKey("kind", "string", required=True, choices=_RULE_KINDS),
            ConfigKey("strict", "boolean", "true"),
            ConfigKey("trust", _STRINGS, "[]"),
            ConfigKey("otherwise", "string", '"confirm"', choices=_OTHERWISE),
        ),
    ),
    ConfigTable(
        path="telemetry",
        keys=(
            ConfigKey("exporter", "string", '"none"', choices=_EXPORTERS),
            ConfigKey("endpoint", "URL"),
            ConfigKey("service_name", "string", '"toolbound"'),
            ConfigKey("metrics", "boolean", "true"),
        ),
    ),
    ConfigTable(
        path="logging",
        keys=(
            ConfigKey("level", "string", '"info"', choices=_LOG_LEVELS),
            ConfigKey("format", "string", '"text"', choices=_LOG_FORMATS),
        ),
    ),
)


def _allowed(path: str, kind: str | None = None) -> frozenset[str]:
    """The keys of the table at ``path`` (of ``kind``, for a variant)."""
    return next(t.allowed() for t in TABLES if t.path == path and t.kind == kind)


# [gateway] and [[upstream]] belong to the MCP gateway (toolbound.mcp.config), which
# reads the same file.
_TOP = frozenset(t.path for t in TABLES if "." not in t.path) | {"gateway", "upstream"}


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem in a configuration file: where (a key path) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(ToolboundError):
    """A configuration file that cannot be used; ``issues`` lists every problem."""

    def __init__(self, issues: list[ConfigIssue], *, source: str = "") -> None:
        self.issues = tuple(issues)
        self.source = source
        head = f"{source}: " if source else ""
        lines = "\n".join(f"  - {issue}" for issue in issues)
        super().__init__(f"{head}{len(issues)} problem(s) in the configuration\n{lines}")


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpToolConfig:
    """An HTTP endpoint declared as a tool."""

    name: str
    version: str
    description: str
    effect: EffectClass
    method: str
    url: str
    input_schema: Mapping[str, object]
    output_schema: Mapping[str, object] | None
    capabilities: tuple[str, ...]
    timeout: float
    max_attempts: int
    bearer_secret: str | None
    # The argument that is the URL's host, if the model may choose it; a domain
    # scope on every grant of the tool's capabilities then decides which hosts.
    host_argument: str | None = None
    # Internal networks and host names the tool may connect to (all refused otherwise).
    allow_destinations: tuple[str, ...] = ()
    # What its results are, for the flow rules: text others wrote, data not public.
    reads_untrusted: bool = True
    reads_private: bool = True
    roles: Mapping[str, RoleName] = field(default_factory=dict)
    data_classes: Mapping[str, DataClassName] = field(default_factory=dict)
    intents: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookConfig:
    """A ``[[webhook]]``: where the call events go, signed, and which of them.

    ``secret_env`` names the environment variable holding the signing secret (the
    Standard Webhooks form, ``whsec_`` and base64); ``tenant`` limits it to one
    tenant's calls (every tenant's otherwise); ``allow_destinations`` lists the internal
    networks or hosts it may reach, as for HTTP tools (all refused otherwise).
    """

    name: str
    url: str
    secret_env: str
    events: tuple[str, ...] = ("parked", "decided", "outcome_unknown", "reconciled")
    tenant: str | None = None
    allow_destinations: tuple[str, ...] = ()
    timeout: float = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetryConfig:
    """Where spans and metrics go: nowhere (the default), the console, or OTLP/HTTP."""

    exporter: Literal["none", "console", "otlp"] = "none"
    endpoint: str | None = None
    service_name: str = "toolbound"
    metrics: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class LoggingConfig:
    """How much the service and the MCP commands log, and how: text or JSON lines."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["text", "json"] = "text"


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowRuleConfig:
    """One ``[[provenance.rule]]``: a flow rule on one tool's parameter."""

    tool: str
    parameter: str = ""
    kind: Literal["trusted_source", "no_private_data"] = "trusted_source"
    strict: bool = True
    trust: tuple[str, ...] = ()
    otherwise: Literal["confirm", "refuse"] = "confirm"

    def build(self) -> FlowRule:
        """The :mod:`toolbound.provenance` rule this table declares."""
        otherwise: Literal["confirm", "deny"] = "deny" if self.otherwise == "refuse" else "confirm"
        if self.kind == "no_private_data":
            return NoPrivateData(self.tool, self.parameter, otherwise=otherwise)
        return TrustedSource(
            self.tool,
            self.parameter,
            trust=frozenset(self.trust),
            strict=self.strict,
            otherwise=otherwise,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProvenanceConfig:
    """``[provenance]``: the role preset and flow rules every surface applies (R6)."""

    preset: Literal["none", "guard_writes"] = "none"
    trust: tuple[str, ...] = ()
    min_length: Mapping[RoleName, int] = field(default_factory=dict)
    rules: tuple[FlowRuleConfig, ...] = ()

    @property
    def enabled(self) -> bool:
        """Whether any flow rule applies: calls then need to carry their provenance."""
        return self.preset != "none" or bool(self.rules)

    def build(self, tools: Registry | None = None) -> FlowPolicy | None:
        """The flow policy, or ``None`` when nothing is configured.

        With the preset, ``tools`` are planned now, so a bad role fails at start-up.
        """
        rules = tuple(rule.build() for rule in self.rules)
        if self.preset == "guard_writes":
            return guard_writes(
                () if tools is None else tools,
                trust=frozenset(self.trust),
                min_length=self.min_length,
                rules=rules,
            )
        return FlowPolicy(*rules) if rules else None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServiceConfig:
    """A validated configuration. Build the working parts with the ``build_*`` methods."""

    source: Path | None
    store_url: str
    packs: tuple[str, ...]
    http_tools: tuple[HttpToolConfig, ...]
    principals: tuple[Principal, ...]
    grants: tuple[Mapping[str, object], ...]
    # The [[identity.jwt]] issuers, with the key caches this process keeps for them.
    identity: Identity = field(default_factory=Identity, compare=False)
    host: str = "127.0.0.1"
    port: int = 8780
    four_eyes: bool = False
    console_secret_env: str | None = None
    console_trace_url: str | None = None
    """A tracing UI's page for a trace, with ``{trace_id}``: the console links to it."""
    tool_approvals: Path | None = None
    """The MCP gateway's approvals file: the console reviews its quarantined tools."""
    max_body_bytes: int = _MAX_BODY_BYTES
    confirmation_ttl: timedelta = _CONFIRMATION_TTL
    lease: timedelta = _LEASE
    """How long a call stays its process's without a renewal (the service's owners)."""
    store_timeouts: StoreTimeouts = StoreTimeouts()
    io_threads: int = _IO_THREADS
    """The threads of the one pool the service's blocking calls run on (stores, identity)."""
    cookie_secure: bool = False
    """Mark the console's session cookie ``Secure`` (sent over HTTPS only)."""
    max_connections: int = _MAX_CONNECTIONS
    """Open connections and requests the server takes at once; more are refused 503."""
    keep_alive: float = _KEEP_ALIVE
    """Seconds an idle connection is kept open for its next request."""
    header_timeout: float = _HEADER_TIMEOUT
    """Seconds a client has to send a request's head; slower ones are disconnected."""
    body_timeout: float = _BODY_TIMEOUT
    """Seconds a client has to send a request's body; slower ones are answered 408."""
    timeout: float | None = None
    result_budget: int | None = None
    retention: timedelta = timedelta(days=30)
    telemetry: TelemetryConfig = TelemetryConfig()
    provenance: ProvenanceConfig = ProvenanceConfig()
    webhooks: tuple[WebhookConfig, ...] = ()
    logging: LoggingConfig = LoggingConfig()

    def console_secret(self) -> bytes | None:
        """The console's session-signing secret, from ``[service] console_secret_env``.

        Unset, each process signs with a random secret of its own (a restart logs
        everyone out); replicas behind one address need the same secret.
        """
        if self.console_secret_env is None:
            return None
        value = os.environ.get(self.console_secret_env)
        if not value:
            msg = f"[service] console_secret_env names {self.console_secret_env}, which is unset"
            raise ConfigError([ConfigIssue("service.console_secret_env", msg)])
        return value.encode()

    def warnings(self) -> list[str]:
        """What is valid but likely a mistake: roles no ``role_map`` entry gives.

        A ``[[identity.jwt]]`` table with a ``role_map`` grants only the roles its
        entries name; a token whose roles are all outside it is refused
        (``token_roles_unmapped``). Each toolbound role no entry maps to is named, so
        an operator sees before a token does that, say, nobody can approve through
        that issuer.
        """
        found = []
        for i, issuer in enumerate(self.identity.issuers):
            if not issuer.role_map:
                continue
            missing = sorted(ROLES - set(issuer.role_map.values()))
            if missing:
                found.append(
                    f"identity.jwt[{i}].role_map: no role of {issuer.issuer} maps to"
                    f" {', '.join(missing)}; its tokens can never act as {' or '.join(missing)}"
                )
        return found

    def principal_for(self, key: str) -> Principal | None:
        """The principal whose API key this is, if any (static keys only)."""
        return next((p for p in self.principals if p.matches(key)), None)

    def authenticate(self, token: str) -> Principal:
        """The principal behind a bearer credential: an API key first, else a JWT.

        A JWT is tried only when ``[[identity.jwt]]`` trusts an issuer; a credential
        that names no caller raises :class:`~toolbound.identity.TokenRefused`, whose
        ``code`` says why (``unauthenticated``, ``token_expired``, ...).
        """
        principal = self.principal_for(token)
        if principal is not None:
            return principal
        if self.identity and token.count(".") == 2:  # noqa: PLR2004 - a JWS's three parts
            return self.identity.verify(token)
        msg = "unknown API key"
        raise TokenRefused(msg, code="unauthenticated")

    def build_registry(self) -> Registry:
        """Import every pack and register it, then the HTTP tools, into one Registry."""
        registry = Registry()
        for spec in self.packs:
            _load_pack(spec)(registry)
        for http in self.http_tools:
            from toolbound.execution.http import HttpTool  # noqa: PLC0415 - needs httpx

            registry.register(
                _http_spec(http),
                HttpTool(
                    method=http.method,
                    url=http.url,
                    effect=http.effect,
                    bearer_secret=http.bearer_secret,
                    host_argument=http.host_argument,
                    egress=EgressPolicy(allow=http.allow_destinations),
                ),
            )
        return registry

    def build_policy(self, clock: Clock) -> GrantPolicy:
        """The grant policy; rate limits count on ``clock``."""
        return GrantPolicy(_grant(raw, clock) for raw in self.grants)


def load_config(path: str | Path) -> ServiceConfig:
    """Read and validate the TOML file at ``path``."""
    return parse_config(read_config_text(path), source=Path(path))


def read_config_text(path: str | Path) -> str:
    """The text of a configuration file; a file that cannot be read is a ConfigError."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            [ConfigIssue("", f"cannot read the file: {exc}")], source=str(path)
        ) from None


def toml_tables(text: str, *, source: Path | None = None) -> dict[str, Any]:
    """Parse TOML ``text``; a syntax error is a ConfigError naming ``source``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        name = str(source) if source else ""
        raise ConfigError([ConfigIssue("", f"not valid TOML: {exc}")], source=name) from None


def parse_config(text: str, *, source: Path | None = None) -> ServiceConfig:
    """Validate TOML ``text``; relative SQLite paths resolve against ``source``'s folder."""
    name = str(source) if source else ""
    raw = toml_tables(text, source=source)
    config, issues = check_tables(raw, source=source)
    if issues or config is None:
        raise ConfigError(issues, source=name)
    return config


def check_tables(
    raw: Mapping[str, object], *, source: Path | None = None
) -> tuple[ServiceConfig | None, list[ConfigIssue]]:
    """Validate already-parsed TOML tables: the configuration, or ``None`` and every issue.

    For a program that reads more sections of the same file (the MCP gateway's
    ``[gateway]`` and ``[[upstream]]``) and reports all problems together.
    """
    checker = _Checker()
    config = checker.config(raw, source)
    return (None if checker.issues else config), checker.issues


# ---------------------------------------------------------------------------
# Validation: collect every problem, then fail once.


class _Primitives:
    """Collects every problem with its key path; reads typed values."""

    def __init__(self) -> None:
        self.issues: list[ConfigIssue] = []

    def fail(self, path: str, message: str) -> None:
        self.issues.append(ConfigIssue(path, message))

    def table(self, raw: Mapping[str, object], key: str) -> Mapping[str, object]:
        value = raw.get(key, {})
        if not isinstance(value, dict):
            self.fail(key, f"must be a table, got {_kind(value)}")
            return {}
        return cast("Mapping[str, object]", value)

    def tables(self, raw: Mapping[str, object], key: str) -> list[Mapping[str, object]]:
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.fail(key, f"must be an array of tables ([[{key}]]), got {_kind(value)}")
            return []
        return cast("list[Mapping[str, object]]", value)

    def known(self, raw: Mapping[str, object], path: str, allowed: frozenset[str]) -> None:
        for key in raw:
            if key not in allowed:
                where = f"{path}.{key}" if path else key
                self.fail(where, f"unknown key (expected one of {', '.join(sorted(allowed))})")

    def string(
        self, raw: Mapping[str, object], path: str, key: str, *, default: str | None = None
    ) -> str:
        value = raw.get(key, default)
        if not isinstance(value, str) or not value:
            self.fail(f"{path}.{key}", _expected("a non-empty string", value))
            return ""
        return value

    def strings(self, raw: Mapping[str, object], path: str, key: str) -> tuple[str, ...]:
        value = raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(f"{path}.{key}", _expected("an array of non-empty strings", value))
            return ()
        return tuple(cast("list[str]", value))

    def number(
        self, raw: Mapping[str, object], path: str, key: str, *, positive: bool = True
    ) -> float | None:
        value = raw.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(f"{path}.{key}", _expected("a number", value))
            return None
        if positive and value <= 0:
            self.fail(f"{path}.{key}", f"must be positive, got {value}")
            return None
        return float(value)

    def integer(self, raw: Mapping[str, object], path: str, key: str, default: int) -> int:
        value = raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.fail(f"{path}.{key}", _expected("a positive integer", value))
            return default
        return value

    def flag(
        self, raw: Mapping[str, object], path: str, key: str, *, default: bool = False
    ) -> bool:
        value = raw.get(key, default)
        if not isinstance(value, bool):
            self.fail(f"{path}.{key}", _expected("true or false", value))
            return default
        return value

    def optional(self, raw: Mapping[str, object], path: str, key: str) -> str | None:
        value = raw.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            self.fail(f"{path}.{key}", _expected("a non-empty string", value))
            return None
        return value

    def unique_keys(self, principals: list[Principal | None]) -> None:
        seen: dict[str, int] = {}
        for i, p in enumerate(principals):
            if p is None:
                continue
            if p.key_sha256 in seen:
                self.fail(
                    f"principal[{i}].key_sha256", f"the same key as principal[{seen[p.key_sha256]}]"
                )
            seen.setdefault(p.key_sha256, i)


class _ToolChecks(_Primitives):
    """The ``[[tools.http]]`` endpoints and the grants that scope a chosen host."""

    def http_tool(self, raw: Mapping[str, object], path: str) -> HttpToolConfig:
        self.known(raw, path, _allowed("tools.http"))
        # Unset, an endpoint is taken for the most conservative class.
        effect = raw.get("effect", "irreversible_write")
        if effect not in _EFFECTS:
            self.fail(
                f"{path}.effect", f"must be one of {', '.join(sorted(_EFFECTS))}, got {effect!r}"
            )
            effect = "irreversible_write"
        method = str(raw.get("method", "POST")).upper()
        if method not in _METHODS:
            self.fail(f"{path}.method", f"unknown HTTP method {method!r}")
        url = self.string(raw, path, "url")
        schema = raw.get("input_schema")
        if not isinstance(schema, dict):
            self.fail(f"{path}.input_schema", "an HTTP tool needs an input_schema table")
            schema = {}
        host_argument, allow = self.http_destination(raw, path, url, schema)
        out = raw.get("output_schema")
        if out is not None and not isinstance(out, dict):
            self.fail(f"{path}.output_schema", _expected("a table", out))
            out = None
        bearer = raw.get("bearer_secret")
        if bearer is not None and not isinstance(bearer, str):
            self.fail(f"{path}.bearer_secret", _expected("a secret name", bearer))
            bearer = None
        tool = HttpToolConfig(
            name=self.string(raw, path, "name"),
            version=str(raw.get("version", "1")),
            description=str(raw.get("description", "")),
            effect=cast("EffectClass", effect),
            method=method,
            url=url,
            input_schema=schema,
            output_schema=out,
            capabilities=self.strings(raw, path, "capabilities"),
            timeout=self.number(raw, path, "timeout") or 10.0,
            max_attempts=self.integer(raw, path, "max_attempts", 1),
            bearer_secret=bearer,
            host_argument=host_argument,
            allow_destinations=allow,
            reads_untrusted=self.flag(raw, path, "reads_untrusted", default=True),
            reads_private=self.flag(raw, path, "reads_private", default=True),
            roles=self.roles(raw.get("roles", {}), f"{path}.roles"),
            data_classes=self.data_classes(raw.get("data_classes", {}), f"{path}.data_classes"),
            intents=self.strings(raw, path, "intents"),
        )
        if tool.name and schema:
            try:
                check_spec(_http_spec(tool))
                plan(_http_spec(tool))
            except (SpecError, SchemaError) as exc:
                self.fail(path, str(exc))
        return tool

    def roles(self, raw: object, path: str) -> dict[str, RoleName]:
        """``roles``: JSON pointers to parameter roles (``{ "/to" = "destination" }``)."""
        if not isinstance(raw, dict):
            self.fail(path, _expected("a table of JSON pointer → role", raw))
            return {}
        roles: dict[str, RoleName] = {}
        for pointer, role in raw.items():
            if not pointer.startswith("/"):
                self.fail(f"{path}.{pointer}", "must be a JSON pointer such as '/to'")
            elif role not in PARAMETER_ROLES:
                self.fail(
                    f"{path}.{pointer}",
                    f"must be one of {', '.join(PARAMETER_ROLES)}, got {role!r}",
                )
            else:
                roles[pointer] = cast("RoleName", role)
        return roles

    def data_classes(self, raw: object, path: str) -> dict[str, DataClassName]:
        """``data_classes``: output JSON pointers to data classes (``{ "/ssn" = ... }``)."""
        if not isinstance(raw, dict):
            self.fail(path, _expected("a table of JSON pointer → data class", raw))
            return {}
        classes: dict[str, DataClassName] = {}
        for pointer, name in raw.items():
            if not pointer.startswith("/"):
                self.fail(f"{path}.{pointer}", "must be a JSON pointer such as '/passport'")
            elif name not in DATA_CLASS_NAMES:
                self.fail(
                    f"{path}.{pointer}",
                    f"must be one of {', '.join(DATA_CLASS_NAMES)}, got {name!r}",
                )
            else:
                classes[pointer] = cast("DataClassName", name)
        return classes

    def http_destination(
        self, raw: Mapping[str, object], path: str, url: str, schema: Mapping[str, object]
    ) -> tuple[str | None, tuple[str, ...]]:
        """Where an HTTP tool may send requests: its host argument and allow-list."""
        host_argument = raw.get("host_argument")
        if host_argument is not None and (
            not isinstance(host_argument, str) or not host_argument.isidentifier()
        ):
            self.fail(f"{path}.host_argument", _expected("an argument name", host_argument))
            host_argument = None
        if url and not url.startswith(("http://", "https://")):
            self.fail(f"{path}.url", f"must be an http(s) URL, got {url!r}")
        elif url and (problem := destination_problem(url, host_argument=host_argument)):
            self.fail(f"{path}.url", problem)
        required = schema.get("required")
        if host_argument is not None and host_argument not in (
            required if isinstance(required, list) else []
        ):
            self.fail(
                f"{path}.host_argument",
                f"{host_argument!r} must be a required argument of input_schema",
            )
        allow = self.strings(raw, path, "allow_destinations")
        for i, entry in enumerate(allow):
            try:
                EgressPolicy(allow=(entry,))
            except ConfigurationError as exc:
                self.fail(f"{path}.allow_destinations[{i}]", str(exc))
        return host_argument, allow

    def host_grants(
        self, tools: tuple[HttpToolConfig, ...], grants: list[Mapping[str, object]]
    ) -> None:
        """A host chosen by the model is checked by a domain scope on every grant of it (R6).

        An unscoped grant (or one of another kind) of the tool's capability would admit
        any host, so each must be a domain scope, and at least one must exist.
        """
        for i, tool in enumerate(tools):
            if tool.host_argument is None:
                continue
            path = f"tools.http[{i}]"
            if not tool.capabilities:
                self.fail(
                    f"{path}.capabilities",
                    "a tool that takes its host from an argument needs a capability, "
                    "granted with a domain scope",
                )
                continue
            granting = [
                (j, g) for j, g in enumerate(grants) if g.get("capability") in tool.capabilities
            ]
            if not granting:
                self.fail(
                    f"{path}.host_argument",
                    f"no [[grant]] of {', '.join(tool.capabilities)} checks the host: add one "
                    'with scope = { kind = "domain", domains = [...] }',
                )
            for j, grant in granting:
                scope = grant.get("scope")
                if not isinstance(scope, dict) or scope.get("kind") != "domain":
                    self.fail(
                        f"grant[{j}].scope",
                        f"{tool.name} takes its host from the argument {tool.host_argument!r}: "
                        f"a grant of {grant.get('capability')!r} needs a domain scope, "
                        "or the model could send the request anywhere",
                    )


class _IdentityChecks(_Primitives):
    """Who may call: ``[[principal]]`` keys and ``[[identity.jwt]]`` issuers."""

    def principal(self, raw: Mapping[str, object], path: str) -> Principal | None:
        self.known(raw, path, _allowed("principal"))
        key = raw.get("key_sha256")
        if not isinstance(key, str) or _SHA256_HEX.fullmatch(key) is None:
            self.fail(
                f"{path}.key_sha256", "must be the 64 lowercase hex digits of the key's SHA-256"
            )
            key = ""
        roles = self.strings(raw, path, "roles")
        for role in roles:
            if role not in ROLES:
                self.fail(
                    f"{path}.roles", f"unknown role {role!r} (expected {', '.join(sorted(ROLES))})"
                )
        name = self.string(raw, path, "name")
        subject = self.string(raw, path, "subject")
        tenant = self.string(raw, path, "tenant")
        if not key:
            return None
        return Principal(
            name=name, key_sha256=key, subject=subject, tenant=tenant, roles=frozenset(roles)
        )

    def jwt_issuer(  # noqa: C901 - one check per key, in table order
        self, raw: Mapping[str, object], path: str, source: Path | None
    ) -> JwtIssuer:
        self.known(raw, path, _allowed("identity.jwt"))
        issuer = self.string(raw, path, "issuer")
        audience = self.string(raw, path, "audience")
        url = self.optional(raw, path, "jwks_url")
        if url is not None and not url.startswith(("https://", "http://")):
            self.fail(f"{path}.jwks_url", f"must be an http(s) URL, got {url!r}")
        file = self.optional(raw, path, "jwks_file")
        jwks_file = None
        if file is not None:
            jwks_file = Path(file)
            if not jwks_file.is_absolute() and source is not None:
                jwks_file = source.resolve().parent / jwks_file
        secret_env = self.optional(raw, path, "secret_env")
        algorithms = self.strings(raw, path, "algorithms") or DEFAULT_ALGORITHMS
        for alg in algorithms:
            if alg not in ASYMMETRIC_ALGORITHMS | HMAC_ALGORITHMS:
                self.fail(f"{path}.algorithms", f"unknown or refused algorithm {alg!r}")
        hmac_only = all(alg in HMAC_ALGORITHMS for alg in algorithms)
        sources = [k for k, v in (("jwks_url", url), ("jwks_file", file)) if v is not None]
        if any(alg in HMAC_ALGORITHMS for alg in algorithms) and not hmac_only:
            # One key trusted for both would let a public key sign as an HMAC secret.
            self.fail(f"{path}.algorithms", "do not mix HMAC (HS*) and public-key algorithms")
        elif hmac_only and (secret_env is None or sources):
            self.fail(
                f"{path}.secret_env",
                "HS* algorithms take their secret from secret_env, and no JWKS",
            )
        elif not hmac_only and (secret_env is not None or len(sources) != 1):
            self.fail(
                f"{path}.jwks_url",
                "name the issuer's public keys: exactly one of jwks_url or jwks_file "
                "(secret_env is for HS* algorithms only)",
            )
        tenant_claim = self.optional(raw, path, "tenant_claim")
        tenant = self.optional(raw, path, "tenant")
        if (tenant_claim is None) == (tenant is None):
            self.fail(f"{path}.tenant", "set exactly one of tenant_claim or tenant")
        role_map = raw.get("role_map", {})
        if not isinstance(role_map, dict) or not all(
            isinstance(v, str) and v in ROLES for v in role_map.values()
        ):
            self.fail(
                f"{path}.role_map",
                f"must map the token's role names to {', '.join(sorted(ROLES))}",
            )
            role_map = {}
        skew = self.number(raw, path, "clock_skew", positive=False)
        interval = self.number(raw, path, "jwks_refresh_interval", positive=False)
        for key, value in (("clock_skew", skew), ("jwks_refresh_interval", interval)):
            if value is not None and value < 0:
                self.fail(f"{path}.{key}", f"must not be negative, got {value}")
        ttl = self.number(raw, path, "jwks_ttl")
        return JwtIssuer(
            issuer=issuer,
            audience=audience,
            jwks_url=url,
            jwks_file=jwks_file,
            secret_env=secret_env,
            algorithms=tuple(algorithms),
            clock_skew=60.0 if skew is None else skew,
            required_claims=self.strings(raw, path, "required_claims"),
            subject_claim=self.string(raw, path, "subject_claim", default="sub"),
            tenant_claim=tenant_claim,
            tenant=tenant,
            roles_claim=self.string(raw, path, "roles_claim", default="roles"),
            role_map=dict(cast("dict[str, str]", role_map)),
            jwks_ttl=300.0 if ttl is None else ttl,
            jwks_refresh_interval=30.0 if interval is None else interval,
        )


class _ProvenanceChecks(_Primitives):
    """``[provenance]`` and its ``[[provenance.rule]]`` tables."""

    def provenance(self, raw: Mapping[str, object]) -> ProvenanceConfig:
        self.known(raw, "provenance", _allowed("provenance"))
        preset = raw.get("preset", "none")
        if preset not in _PRESETS:
            self.fail("provenance.preset", f"must be none or guard_writes, got {preset!r}")
            preset = "none"
        lengths = raw.get("min_length", {})
        min_length: dict[RoleName, int] = {}
        if not isinstance(lengths, dict):
            self.fail("provenance.min_length", _expected("a table of role → length", lengths))
            lengths = {}
        for role, length in lengths.items():
            where = f"provenance.min_length.{role}"
            if role not in PARAMETER_ROLES:
                self.fail(where, f"not a role (expected one of {', '.join(PARAMETER_ROLES)})")
            elif isinstance(length, bool) or not isinstance(length, int) or length < 1:
                self.fail(where, _expected("a positive integer", length))
            else:
                min_length[cast("RoleName", role)] = length
        rules = tuple(
            self.flow_rule(t, f"provenance.rule[{i}]")
            for i, t in enumerate(self.tables(raw, "rule"))
        )
        trust = self.strings(raw, "provenance", "trust")
        for entry in trust:
            tool, hashed, pointer = entry.partition("#")
            if not tool or (hashed and not pointer.startswith("/")):
                self.fail(
                    "provenance.trust",
                    f"{entry!r} must be a tool name or a tool's field such as 'crm.lookup#/id'",
                )
        return ProvenanceConfig(
            preset=cast("Literal['none', 'guard_writes']", preset),
            trust=trust,
            min_length=min_length,
            rules=rules,
        )

    def flow_rule(self, raw: Mapping[str, object], path: str) -> FlowRuleConfig:
        self.known(raw, path, _allowed("provenance.rule"))
        kind = raw.get("kind")
        if kind not in _RULE_KINDS:
            self.fail(f"{path}.kind", f"must be trusted_source or no_private_data, got {kind!r}")
            kind = "trusted_source"
        otherwise = raw.get("otherwise", "confirm")
        if otherwise not in _OTHERWISE:
            self.fail(f"{path}.otherwise", f"must be confirm or refuse, got {otherwise!r}")
            otherwise = "confirm"
        parameter = raw.get("parameter", "")
        if not isinstance(parameter, str) or (parameter and not parameter.startswith("/")):
            self.fail(
                f"{path}.parameter", _expected("a JSON pointer such as '/to' (or '')", parameter)
            )
            parameter = ""
        if kind == "no_private_data":
            for key in ("strict", "trust"):
                if key in raw:
                    self.fail(f"{path}.{key}", "applies to trusted_source rules only")
        return FlowRuleConfig(
            tool=self.string(raw, path, "tool"),
            parameter=parameter,
            kind=cast("Literal['trusted_source', 'no_private_data']", kind),
            strict=self.flag(raw, path, "strict", default=True),
            trust=self.strings(raw, path, "trust"),
            otherwise=cast("Literal['confirm', 'refuse']", otherwise),
        )


class _Checker(_ToolChecks, _IdentityChecks, _ProvenanceChecks):
    """The whole file: every section, then one configuration or the problems."""

    # -- sections ---------------------------------------------------------------

    def trace_url(self, value: object) -> str | None:
        """``[service] console_trace_url``: an http(s) URL with ``{trace_id}``."""
        if value is None or (
            isinstance(value, str)
            and value.startswith(("https://", "http://"))
            and "{trace_id}" in value
        ):
            return value
        self.fail(
            "service.console_trace_url", _expected("an http(s) URL containing {trace_id}", value)
        )
        return None

    def config(self, raw: Mapping[str, object], source: Path | None) -> ServiceConfig | None:
        self.known(raw, "", _TOP)
        store = self.table(raw, "store")
        self.known(store, "store", _allowed("store"))
        url = self.store_url(store, source)
        timeouts = self.store_timeouts(store)
        tools = self.table(raw, "tools")
        self.known(tools, "tools", _allowed("tools"))
        packs = self.strings(tools, "tools", "packs")
        for i, pack in enumerate(packs):
            module, _, func = pack.partition(":")
            if not module or not func:
                self.fail(f"tools.packs[{i}]", f"must be MODULE:FUNCTION, got {pack!r}")
        http = tuple(
            self.http_tool(t, f"tools.http[{i}]") for i, t in enumerate(self.tables(tools, "http"))
        )
        principals = [
            self.principal(p, f"principal[{i}]")
            for i, p in enumerate(self.tables(raw, "principal"))
        ]
        self.unique_keys(principals)
        issuers = self.issuers(self.table(raw, "identity"), source)
        grants = self.tables(raw, "grant")
        for i, grant in enumerate(grants):
            self.grant(grant, f"grant[{i}]")
        self.host_grants(http, grants)
        service = self.table(raw, "service")
        self.known(service, "service", _allowed("service"))
        max_body = self.integer(service, "service", "max_body_bytes", _MAX_BODY_BYTES)
        ttl = self.number(service, "service", "confirmation_ttl")
        lease = self.number(service, "service", "lease")
        secret_env = service.get("console_secret_env")
        if secret_env is not None and (not isinstance(secret_env, str) or not secret_env):
            self.fail(
                "service.console_secret_env", _expected("an environment variable name", secret_env)
            )
            secret_env = None
        trace_url = self.trace_url(service.get("console_trace_url"))
        approvals = self.file_path(service, "service.tool_approvals", source)
        host = self.string(service, "service", "host", default="127.0.0.1")
        port = service.get("port", 8780)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:  # noqa: PLR2004
            self.fail("service.port", _expected("a port number (0-65535)", port))
            port = 8780
        budgets = self.table(raw, "budgets")
        self.known(budgets, "budgets", _allowed("budgets"))
        retention = self.table(raw, "retention")
        self.known(retention, "retention", _allowed("retention"))
        days = self.integer(retention, "retention", "days", 30)
        telemetry = self.telemetry(self.table(raw, "telemetry"))
        logs = self.logging(self.table(raw, "logging"))
        provenance = self.provenance(self.table(raw, "provenance"))
        webhooks = self.webhooks(self.tables(raw, "webhook"))
        result_budget = budgets.get("result_budget")
        if result_budget is not None and (
            isinstance(result_budget, bool)
            or not isinstance(result_budget, int)
            or result_budget < 1
        ):
            self.fail("budgets.result_budget", _expected("a positive integer", result_budget))
            result_budget = None
        if not principals and not issuers:
            self.fail(
                "principal",
                "at least one [[principal]] or [[identity.jwt]] is needed: nobody could call",
            )
        if self.issues:
            return None
        return ServiceConfig(
            source=source,
            store_url=url,
            packs=packs,
            http_tools=http,
            principals=tuple(p for p in principals if p is not None),
            grants=tuple(grants),
            identity=Identity(issuers),
            host=host,
            port=port,
            four_eyes=self.flag(service, "service", "four_eyes"),
            console_secret_env=secret_env,
            console_trace_url=trace_url,
            tool_approvals=approvals,
            max_body_bytes=max_body,
            confirmation_ttl=(_CONFIRMATION_TTL if ttl is None else timedelta(seconds=ttl)),
            lease=_LEASE if lease is None else timedelta(seconds=lease),
            store_timeouts=timeouts,
            io_threads=self.integer(service, "service", "io_threads", _IO_THREADS),
            cookie_secure=self.flag(service, "service", "cookie_secure"),
            max_connections=self.integer(service, "service", "max_connections", _MAX_CONNECTIONS),
            keep_alive=self.number(service, "service", "keep_alive") or _KEEP_ALIVE,
            header_timeout=self.number(service, "service", "header_timeout") or _HEADER_TIMEOUT,
            body_timeout=self.number(service, "service", "body_timeout") or _BODY_TIMEOUT,
            timeout=self.number(budgets, "budgets", "timeout"),
            result_budget=result_budget,
            retention=timedelta(days=days),
            telemetry=telemetry,
            provenance=provenance,
            webhooks=webhooks,
            logging=logs,
        )

    def webhooks(self, tables: list[Mapping[str, object]]) -> tuple[WebhookConfig, ...]:
        """The ``[[webhook]]`` destinations, each name once."""
        found: list[WebhookConfig] = []
        for i, raw in enumerate(tables):
            path = f"webhook[{i}]"
            self.known(raw, path, _allowed("webhook"))
            name = self.string(raw, path, "name")
            url = self.string(raw, path, "url")
            if url and not url.startswith(("https://", "http://")):
                self.fail(f"{path}.url", _expected("an http(s) URL", url))
            events = self.strings(raw, path, "events") if "events" in raw else None
            for event in events or ():
                if event not in WEBHOOK_EVENTS:
                    self.fail(
                        f"{path}.events", f"unknown event {event!r} ({', '.join(WEBHOOK_EVENTS)})"
                    )
            tenant = raw.get("tenant")
            if tenant is not None and (not isinstance(tenant, str) or not tenant):
                self.fail(f"{path}.tenant", _expected("a tenant name", tenant))
            if any(w.name == name for w in found):
                self.fail(f"{path}.name", f"another [[webhook]] is named {name!r}")
            found.append(
                WebhookConfig(
                    name=name,
                    url=url,
                    secret_env=self.string(raw, path, "secret_env"),
                    **({"events": events} if events else {}),
                    tenant=tenant if isinstance(tenant, str) and tenant else None,
                    allow_destinations=self.strings(raw, path, "allow_destinations"),
                    timeout=self.number(raw, path, "timeout") or 10.0,
                )
            )
        return tuple(found)

    def issuers(self, identity: Mapping[str, object], source: Path | None) -> list[JwtIssuer]:
        """The ``[[identity.jwt]]`` issuers, each trusted once."""
        self.known(identity, "identity", _allowed("identity"))
        issuers = [
            self.jwt_issuer(t, f"identity.jwt[{i}]", source)
            for i, t in enumerate(self.tables(identity, "jwt"))
        ]
        for i, issuer in enumerate(issuers):
            if any(other.issuer == issuer.issuer for other in issuers[:i]):
                self.fail(f"identity.jwt[{i}].issuer", f"{issuer.issuer!r} is trusted twice")
        return issuers

    def file_path(self, raw: Mapping[str, object], path: str, source: Path | None) -> Path | None:
        """A file named relative to the configuration file's folder (unset: ``None``)."""
        value = raw.get(path.rpartition(".")[2])
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            self.fail(path, _expected("a path", value))
            return None
        found = Path(value)
        if not found.is_absolute() and source is not None:
            found = source.resolve().parent / found
        return found

    def store_timeouts(self, store: Mapping[str, object]) -> StoreTimeouts:
        default = StoreTimeouts()
        return StoreTimeouts(
            connect=self.number(store, "store", "connect_timeout") or default.connect,
            statement=self.number(store, "store", "statement_timeout") or default.statement,
            pool=self.number(store, "store", "pool_timeout") or default.pool,
        )

    def store_url(self, store: Mapping[str, object], source: Path | None) -> str:
        url = store.get("url", "sqlite:///toolbound.db")
        if not isinstance(url, str):
            self.fail("store.url", _expected("a string", url))
            return ""
        if url == "memory":
            return url
        if url.startswith("sqlite:///"):
            path = Path(url.removeprefix("sqlite:///"))
            if not path.is_absolute() and source is not None:
                path = (source.resolve().parent / path).resolve()
            return f"sqlite:///{path}"
        if url.startswith(("postgresql://", "postgres://")):
            return url
        self.fail("store.url", f"use memory, sqlite:///PATH or postgresql://…, got {url!r}")
        return ""

    def grant(self, raw: Mapping[str, object], path: str) -> None:
        self.known(raw, path, _allowed("grant"))
        for key in ("subject", "tenant", "capability"):
            self.string(raw, path, key)
        actions = self.strings(raw, path, "actions")
        if not actions:
            self.fail(f"{path}.actions", f"name at least one of {', '.join(sorted(_ACTIONS))}")
        for action in actions:
            if action not in _ACTIONS:
                self.fail(
                    f"{path}.actions",
                    f"unknown action {action!r} (expected {', '.join(sorted(_ACTIONS))})",
                )
        self.flag(raw, path, "confirm")
        scope = raw.get("scope")
        if scope is not None:
            self.scope(scope, f"{path}.scope")
        limits = raw.get("limits", [])
        if not isinstance(limits, list):
            self.fail(f"{path}.limits", _expected("an array of tables", limits))
        else:
            for i, limit in enumerate(limits):
                self.limit(limit, f"{path}.limits[{i}]")

    def scope(self, raw: object, path: str) -> None:
        if not isinstance(raw, dict):
            self.fail(path, _expected("a table with a kind", raw))
            return
        kind = raw.get("kind")
        if kind == "owner":
            self.known(raw, path, _allowed("grant.scope", "owner"))
        elif kind == "path":
            self.known(raw, path, _allowed("grant.scope", "path"))
            root = self.string(raw, path, "root")
            if root and not Path(root).is_absolute():
                self.fail(f"{path}.root", f"must be an absolute path, got {root!r}")
        elif kind == "domain":
            self.known(raw, path, _allowed("grant.scope", "domain"))
            self.strings(raw, path, "domains")
            self.flag(raw, path, "allow_subdomains")
        elif kind == "id":
            self.known(raw, path, _allowed("grant.scope", "id"))
            self.strings(raw, path, "ids")
        else:
            self.fail(
                f"{path}.kind", f"unknown scope kind {kind!r} (expected owner, path, domain, id)"
            )

    def limit(self, raw: object, path: str) -> None:
        if not isinstance(raw, dict):
            self.fail(path, _expected("a table with a kind", raw))
            return
        kind = raw.get("kind")
        if kind == "number":
            self.known(raw, path, _allowed("grant.limits", "number"))
            pointer = self.string(raw, path, "pointer")
            if pointer and not pointer.startswith("/"):
                self.fail(
                    f"{path}.pointer", f"must be a JSON pointer starting with '/', got {pointer!r}"
                )
            low = self.number(raw, path, "minimum", positive=False)
            high = self.number(raw, path, "maximum", positive=False)
            if low is None and high is None:
                self.fail(path, "a number limit needs minimum, maximum or both")
        elif kind == "rate":
            self.known(raw, path, _allowed("grant.limits", "rate"))
            self.integer(raw, path, "max_calls", 1)
            if self.number(raw, path, "per_seconds") is None:
                self.fail(f"{path}.per_seconds", "a rate limit needs a positive per_seconds")
        else:
            self.fail(f"{path}.kind", f"unknown limit kind {kind!r} (expected number, rate)")

    def telemetry(self, raw: Mapping[str, object]) -> TelemetryConfig:
        self.known(raw, "telemetry", _allowed("telemetry"))
        exporter = raw.get("exporter", "none")
        if exporter not in _EXPORTERS:
            self.fail("telemetry.exporter", f"must be none, console or otlp, got {exporter!r}")
            exporter = "none"
        endpoint = raw.get("endpoint")
        if endpoint is not None and not isinstance(endpoint, str):
            self.fail("telemetry.endpoint", _expected("a URL", endpoint))
            endpoint = None
        metrics = raw.get("metrics", True)
        if not isinstance(metrics, bool):
            self.fail("telemetry.metrics", _expected("true or false", metrics))
            metrics = True
        return TelemetryConfig(
            exporter=cast("Literal['none', 'console', 'otlp']", exporter),
            endpoint=endpoint,
            service_name=str(raw.get("service_name", "toolbound")),
            metrics=metrics,
        )

    def logging(self, raw: Mapping[str, object]) -> LoggingConfig:
        self.known(raw, "logging", _allowed("logging"))
        level = raw.get("level", "info")
        if level not in _LOG_LEVELS:
            self.fail("logging.level", f"must be debug, info, warning or error, got {level!r}")
            level = "info"
        form = raw.get("format", "text")
        if form not in _LOG_FORMATS:
            self.fail("logging.format", f"must be text or json, got {form!r}")
            form = "text"
        return LoggingConfig(
            level=cast("Literal['debug', 'info', 'warning', 'error']", level),
            format=cast("Literal['text', 'json']", form),
        )


def _http_spec(http: HttpToolConfig) -> ToolSpec:
    return ToolSpec(
        name=http.name,
        version=http.version,
        description=http.description,
        input_schema=http.input_schema,
        output_schema=http.output_schema,
        effect=http.effect,
        capabilities=http.capabilities,
        timeout=http.timeout,
        max_attempts=http.max_attempts,
        idempotency="native_key" if http.effect not in {"pure", "read"} else "none",
        secrets=(http.bearer_secret,) if http.bearer_secret else (),
        reads_untrusted=http.reads_untrusted,
        reads_private=http.reads_private,
        roles=dict(http.roles),
        data_classes=dict(http.data_classes),
        intents=http.intents,
        resources=(
            None
            if http.host_argument is None
            else HostResource(http.host_argument, _host_action(http))
        ),
    )


def _host_action(http: HttpToolConfig) -> Action:
    """What a call does to the host it chooses: read for reads, else by method."""
    if http.effect in {"pure", "read"}:
        return "read"
    return _METHOD_ACTIONS.get(http.method, "modify")


def _grant(raw: Mapping[str, object], clock: Clock) -> Grant:
    limits: list[Limit] = []
    for limit in cast("list[Mapping[str, object]]", raw.get("limits", [])):
        if limit["kind"] == "number":
            limits.append(
                NumberLimit(
                    pointer=str(limit["pointer"]),
                    minimum=cast("float | None", limit.get("minimum")),
                    maximum=cast("float | None", limit.get("maximum")),
                )
            )
        else:
            limits.append(
                RateLimit(
                    cast("int", limit.get("max_calls", 1)),
                    timedelta(seconds=cast("float", limit["per_seconds"])),
                    clock,
                )
            )
    return Grant(
        subject=str(raw["subject"]),
        tenant=str(raw["tenant"]),
        session=cast("str | None", raw.get("session")),
        capability=str(raw["capability"]),
        actions=frozenset(cast("list[Action]", raw["actions"])),
        scope=_scope(cast("Mapping[str, object] | None", raw.get("scope"))),
        limits=tuple(limits),
        confirm=bool(raw.get("confirm", False)),
    )


def _scope(raw: Mapping[str, object] | None) -> Scope | None:
    if raw is None:
        return None
    kind = raw["kind"]
    if kind == "owner":
        return OwnerScope()
    if kind == "path":
        return PathScope(str(raw["root"]))
    if kind == "domain":
        return DomainScope(
            frozenset(cast("list[str]", raw["domains"])),
            allow_subdomains=bool(raw.get("allow_subdomains", False)),
        )
    return IdScope(frozenset(cast("list[str]", raw["ids"])))


def _load_pack(spec: str) -> Callable[[Registry], object]:
    module_name, _, func_name = spec.partition(":")
    try:
        func = getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError([ConfigIssue("tools.packs", f"cannot load {spec}: {exc}")]) from None
    if not callable(func) or len(inspect.signature(func).parameters) < 1:
        raise ConfigError(
            [ConfigIssue("tools.packs", f"{spec} must be a function taking the Registry to fill")]
        )
    return cast("Callable[[Registry], object]", func)


def _kind(value: object) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _expected(what: str, value: object) -> str:
    return f"must be {what}, got {value!r}" if value is not None else f"must be {what}"
