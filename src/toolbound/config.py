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

import dataclasses
import difflib
import importlib
import inspect
import os
import re
import tomllib
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, get_args, get_origin

from pydantic import ValidationError

from toolbound import config_tables as tables
from toolbound._errors import ToolboundError
from toolbound._toml_positions import key_positions, locate
from toolbound.config_tables import WEBHOOK_EVENTS
from toolbound.execution.egress import EgressPolicy
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
from toolbound.identity import ROLES, Identity, JwtIssuer, Principal, TokenRefused, hash_key
from toolbound.provenance import FlowPolicy, NoPrivateData, TrustedSource, guard_writes
from toolbound.registry import Registry

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from pydantic.fields import FieldInfo
    from pydantic_core import ErrorDetails

    from toolbound._clock import Clock
    from toolbound._model import Action, EffectClass
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
    "placed",
    "read_config_text",
    "relative",
    "service_config",
    "toml_tables",
    "validate_tables",
]

Role = Literal["agent", "approver", "operator"]
_MAX_BODY_BYTES = 4 << 20  # as large as the proposal envelope the service parses
_CONFIRMATION_TTL = timedelta(minutes=15)
_LEASE = timedelta(seconds=30)
_IO_THREADS = 32
_MAX_CONNECTIONS = 1000
_KEEP_ALIVE = 5.0
_BODY_TIMEOUT = 30.0
_HEADER_TIMEOUT = 10.0


# ---------------------------------------------------------------------------
# The file's tables and keys, as the reference lists them: read off the typed
# tables of toolbound.config_tables, which the checker validates against.


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
    note: str = ""
    model: type[tables.Table] | None = field(default=None, compare=False, repr=False)

    def allowed(self) -> frozenset[str]:
        """The keys the checker accepts here (a variant's ``kind`` included)."""
        names = frozenset(key.name for key in self.keys)
        return names | {"kind"} if self.kind is not None else names


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreTimeouts:
    """``[store]``'s bounds on every store call, so a sick store fails fast (503).

    ``connect``: seconds to open a PostgreSQL connection. ``statement``: seconds one
    statement may run (PostgreSQL's ``statement_timeout`` and ``tcp_user_timeout``;
    SQLite's busy timeout, the wait for a writer's lock). ``pool``: seconds to wait
    for a pooled PostgreSQL connection, which is how long a request waits while the
    server is down before it is answered 503.
    """

    connect: float = 5.0
    statement: float = 10.0
    pool: float = 1.0


def _toml(value: object) -> str:
    """A default as TOML writes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float | int):
        return str(int(value)) if value == int(value) else str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{}"
            if not value
            else "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
        )
    return f'"{value}"'


def _choices(annotation: object) -> frozenset[str]:
    """The values a ``Literal`` somewhere in ``annotation`` allows."""
    if get_origin(annotation) is Literal:
        return frozenset(str(a) for a in get_args(annotation))
    return frozenset(c for arg in get_args(annotation) for c in _choices(arg))


def _doc(metadata: Iterable[object], annotation: object) -> tables.Doc | None:
    """The :class:`~toolbound.config_tables.Doc` of a field, in or under its annotation."""
    found = next((m for m in metadata if isinstance(m, tables.Doc)), None)
    if found is not None or get_origin(annotation) is list:
        return found
    meta = getattr(annotation, "__metadata__", ())
    return next((d for arg in (*get_args(annotation),) if (d := _doc(meta, arg))), None)


def _key_of(name: str, info: FieldInfo) -> ConfigKey:
    doc = _doc(info.metadata, info.annotation)
    extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
    choices = doc.choices if doc is not None and doc.choices else _choices(info.annotation)
    required = info.is_required() or bool(extra.get("required"))
    default = info.get_default(call_default_factory=True)
    return ConfigKey(
        name,
        doc.type if doc is not None else ("string" if choices else _TYPES.get(info.annotation, "")),
        None if required or default is None else _toml(default),
        required=required,
        choices=choices,
    )


_TYPES: dict[object, str] = {str: "string", bool: "boolean", float: "number", int: "integer"}


def _table_of(model: type[tables.Table]) -> ConfigTable:
    fields = [(n, f) for n, f in model.model_fields.items() if model.kind_of is None or n != "kind"]
    return ConfigTable(
        path=model.path,
        keys=tuple(_key_of(name, info) for name, info in fields),
        array=model.array,
        kind=model.kind_of,
        note=" ".join(inspect.cleandoc(model.__doc__ or "").split()),
        model=model,
    )


TABLES: tuple[ConfigTable, ...] = tuple(_table_of(model) for model in tables.TABLES)
"""Every table and key the file may hold, in the reference's order."""

# [gateway] and [[upstream]] belong to the MCP gateway (toolbound.mcp.config), which
# reads the same file.
_TOP = frozenset(tables.FileTables.model_fields)


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem in a configuration file: where and what.

    ``path`` is the key path scripts match on, indices from 0 (``grant[1].actions``);
    ``where`` the same path as the file reads, entries counted from 1
    (``[[grant]] #2.actions``); ``line`` and ``column`` where that key is written
    (or the nearest table that is), when the text is known.
    """

    path: str
    message: str
    where: str = ""
    line: int | None = None
    column: int | None = None

    def __str__(self) -> str:
        at = f"{self.line}:{self.column}: " if self.line is not None else ""
        entry = self.where.partition(".")[0] if "#" in self.where else ""
        also = f" (in {entry})" if entry else ""
        return f"{at}{self.path}: {self.message}{also}" if self.path else f"{at}{self.message}"


class ConfigError(ToolboundError):
    """A configuration file that cannot be used; ``issues`` lists every problem.

    Given the file's ``text``, each issue gets the line and column of its key.
    """

    def __init__(
        self, issues: list[ConfigIssue], *, source: str = "", text: str | None = None
    ) -> None:
        self.issues = tuple(placed(issues, text) if text is not None else issues)
        self.source = source
        lines = "\n".join(f"  - {self.locate(issue)}" for issue in self.issues)
        head = f"{source}: " if source else ""
        super().__init__(f"{head}{len(self.issues)} problem(s) in the configuration\n{lines}")

    def locate(self, issue: ConfigIssue) -> str:
        """One issue as ``FILE:LINE:COLUMN: [[grant]] #2.actions: …`` (what is known of it)."""
        if self.source and issue.line is not None:
            return f"{self.source}:{issue}"
        return str(issue)


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
    Standard Webhooks form, ``whsec_`` and base64), or ``secret`` is the secret
    itself (read from ``secret_file``); ``tenant`` limits it to one tenant's calls
    (every tenant's otherwise); ``allow_destinations`` lists the internal networks or
    hosts it may reach, as for HTTP tools (all refused otherwise).
    """

    name: str
    url: str
    secret_env: str | None = None
    secret: str | None = field(default=None, repr=False)
    events: tuple[str, ...] = ("parked", "decided", "outcome_unknown", "reconciled")
    tenant: str | None = None
    allow_destinations: tuple[str, ...] = ()
    timeout: float = 10.0

    def signing_secret(self) -> str:
        """The secret deliveries are signed with; ``LookupError`` if there is none."""
        found = self.secret or os.environ.get(self.secret_env or "", "")
        if not found:
            msg = f"the environment variable {self.secret_env} holds no signing secret"
            raise LookupError(msg)
        return found


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
    console_secret_value: str | None = field(default=None, repr=False)
    """The console's secret itself, from ``[service] console_secret_file``."""
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
    workers: int = 1
    """Processes ``toolbound serve`` runs on its one address, each a replica of the others."""
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
        if self.console_secret_value is not None:
            return self.console_secret_value.encode()
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
                tables.spec_of(http),
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
        raise ConfigError(issues, source=name, text=text)
    return config


def check_tables(
    raw: Mapping[str, object], *, source: Path | None = None
) -> tuple[ServiceConfig | None, list[ConfigIssue]]:
    """Validate already-parsed TOML tables: the configuration, or ``None`` and every issue.

    For a program that reads more sections of the same file (the MCP gateway's
    ``[gateway]`` and ``[[upstream]]``) and reports all problems together.
    """
    made, issues = validate_tables(raw, source=source)
    return (None, issues) if made is None else (service_config(made, raw, source), [])


def validate_tables(
    raw: Mapping[str, object], *, source: Path | None = None
) -> tuple[tables.FileTables | None, list[ConfigIssue]]:
    """The whole file's tables, the gateway's included, or ``None`` and every issue."""
    sourced = tables.Sourced(None if source is None else source.resolve().parent)
    try:
        return tables.FileTables.model_validate(raw, context=sourced), []
    except ValidationError as exc:
        return None, [_issue(error, raw, sourced.secrets) for error in exc.errors()]


# ---------------------------------------------------------------------------
# A validation error in the file's words: its key path, and a message that says
# what the key must be (never a value read from the environment or a file).


_WORDS: dict[str, str] = {
    "missing": "is required",
    "string_type": "must be a string",
    "string_too_short": "must be a non-empty string",
    "bool_type": "must be true or false",
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "list_type": "must be an array",
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "too_short": "must name at least one value",
    "greater_than": "must be positive",
    "greater_than_equal": "must be at least {ge} (a positive integer)",
}


def _issue(error: ErrorDetails, raw: Mapping[str, object], secrets: set[str]) -> ConfigIssue:
    kind = error["type"]
    loc, item = _key_path(error["loc"], raw, values=kind == "literal_error")
    if kind in {"union_tag_invalid", "union_tag_not_found"}:
        loc = (*loc, "kind")
    message = _message(error, loc)
    shown = error.get("ctx", {}).get("tag", error["input"])
    quiet = {"fault", "missing", "extra_forbidden", "union_tag_not_found"}
    if kind not in quiet and not isinstance(shown, dict | list) and shown not in secrets:
        message += f", got {shown!r}"
    if item is not None:
        message = f"item #{item + 1}: {message}"
    if "[key]" in error["loc"]:
        message = f"not a key of this {_field_type(error['loc'])}: {message}"
    for secret in secrets:
        message = message.replace(secret, "***")
    return ConfigIssue(_dotted(loc), message, where=_readable(loc))


def _message(error: ErrorDetails, loc: tuple[str | int, ...]) -> str:  # noqa: PLR0911 - one per kind
    """What the key must be, in the file's words."""
    kind = error["type"]
    ctx = error.get("ctx", {})
    if kind == "fault":
        return str(ctx["message"])
    if kind in {"value_error", "assertion_error"}:
        return str(ctx["error"])
    if kind == "literal_error":
        return f"must be {str(ctx['expected']).replace(chr(39), '')}"
    if kind in {"union_tag_invalid", "union_tag_not_found"}:
        tags = str(ctx.get("expected_tags", "")).replace("'", "")
        return f"unknown {loc[-2]} kind (expected {tags})"
    if kind == "extra_forbidden":
        return _unknown(error["loc"], loc)
    if kind == "missing":
        return _missing(error["loc"])
    return _WORDS.get(kind, error["msg"]).format(**ctx)


def _key_path(
    loc: tuple[str | int, ...], raw: Mapping[str, object], *, values: bool
) -> tuple[tuple[str | int, ...], int | None]:
    """Pydantic's ``loc`` as the file's key path (no union tags), and an array item's index.

    With ``values``, a value that is not one of a list's choices (``roles = ["admin"]``)
    is reported on its array, and the index returned.
    """
    node: object = raw
    path: list[str | int] = []
    for n, part in enumerate(loc):
        last = n == len(loc) - 1
        if isinstance(node, dict) and part == node.get("kind") and not (last and part in node):
            continue  # the tag pydantic names a union's variant by
        if part == "[key]":
            continue
        path.append(part)
        node = _child(node, part)
    if values and path and isinstance(path[-1], int) and not isinstance(node, dict):
        return tuple(path[:-1]), path[-1]
    return tuple(path), None


def _child(node: object, part: str | int) -> object:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and part < len(node):
        return node[part]
    return None


def _tables_at(loc: tuple[str | int, ...]) -> list[type[tables.Table]]:
    """The tables pydantic's ``loc`` may lead to (its union tags pick a variant)."""
    current: list[type[tables.Table]] = [tables.FileTables]
    for part in loc:
        if isinstance(part, int):
            continue
        owner = next((m for m in current if part in m.model_fields), None)
        if owner is not None:
            current = _models(owner.model_fields[part].annotation)
        else:  # a union's tag picks a variant; a table's own key (a tool name) keeps it
            current = [m for m in current if m.kind_of == part] or current
    return current


def _field(loc: tuple[str | int, ...]) -> tuple[type[tables.Table], str] | None:
    """The table and key pydantic's ``loc`` ends at."""
    name = loc[-1] if loc else None
    if not isinstance(name, str):
        return None
    owner = next((m for m in _tables_at(loc[:-1]) if name in m.model_fields), None)
    return None if owner is None else (owner, name)


def _models(annotation: object) -> list[type[tables.Table]]:
    if isinstance(annotation, type) and issubclass(annotation, tables.Table):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models(arg)]


def _unknown(loc: tuple[str | int, ...], path: tuple[str | int, ...]) -> str:
    """An unknown key: the closest known key, if one is close, and every key allowed."""
    found = _tables_at(loc[:-1])
    if len(found) != 1:
        return "unknown key"
    allowed = sorted(found[0].model_fields)
    close = difflib.get_close_matches(str(path[-1]), allowed, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown key{hint} (expected one of {', '.join(allowed)})"


def _missing(loc: tuple[str | int, ...]) -> str:
    found = _field(loc)
    if found is None:
        return "is required"
    key_ = _key_of(found[1], found[0].model_fields[found[1]])
    choices = f": {', '.join(sorted(key_.choices))}" if key_.choices else ""
    return f"is required ({key_.type}{choices})"


def _field_type(loc: tuple[str | int, ...]) -> str:
    """What the table a bad key was found in is (``table of role → integer``)."""
    found = _field(loc[: loc.index("[key]") - 1])
    return "table" if found is None else _key_of(found[1], found[0].model_fields[found[1]]).type


def _dotted(loc: tuple[str | int, ...]) -> str:
    """``grant[1].limits[0].pointer``: the key path, indices from 0."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_ARRAYS = frozenset(t.path for t in TABLES if t.array) | {"upstream"}
_PARTS = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def _readable(loc: tuple[str | int, ...]) -> str:
    """``[[grant]] #2.limits #1.pointer``: the key path as the file reads, entries from 1."""
    parts: list[str] = []
    names: list[str] = []
    for part in loc:
        if isinstance(part, int):
            dotted = ".".join(names)
            if dotted in _ARRAYS:
                parts = [f"[[{dotted}]] #{part + 1}"]
            elif parts:
                parts[-1] += f" #{part + 1}"
        else:
            names.append(part)
            parts.append(part)
    return ".".join(parts)


def _split(path: str) -> tuple[str | int, ...]:
    return tuple(int(i) if i else name for i, name in _PARTS.findall(path))


def placed(issues: list[ConfigIssue], text: str) -> list[ConfigIssue]:
    """``issues`` with the line and column of each key in ``text``, in the file's order."""
    try:
        positions = key_positions(text)
    except (IndexError, ValueError):  # a text tomllib refused: no positions
        positions = {}
    out: list[ConfigIssue] = []
    for issue in issues:
        loc = _split(issue.path)
        at = locate(positions, loc)
        out.append(
            dataclasses.replace(
                issue,
                where=issue.where or _readable(loc),
                line=at[0] if at else issue.line,
                column=at[1] if at else issue.column,
            )
        )
    return sorted(out, key=lambda i: (i.line or 0, i.column or 0))


# ---------------------------------------------------------------------------
# The validated tables as the configuration the service runs from.


def service_config(
    made: tables.FileTables, raw: Mapping[str, object], source: Path | None
) -> ServiceConfig:
    """The configuration the service runs from, made of the validated tables."""
    folder = None if source is None else source.resolve().parent
    service, store = made.service, made.store
    return ServiceConfig(
        source=source,
        store_url=_store_url(store.url, folder),
        packs=tuple(made.tools.packs),
        http_tools=tuple(_http_tool(t) for t in made.tools.http),
        principals=tuple(
            Principal(
                name=p.name,
                key_sha256=p.key_sha256,
                subject=p.subject,
                tenant=p.tenant,
                roles=frozenset(p.roles),
            )
            for p in made.principal
        ),
        grants=tuple(cast("list[Mapping[str, object]]", raw.get("grant", []))),
        identity=Identity([_issuer(j, folder) for j in made.identity.jwt]),
        host=service.host,
        port=service.port,
        four_eyes=service.four_eyes,
        console_secret_env=service.console_secret_env,
        console_secret_value=service.console_secret,
        console_trace_url=service.console_trace_url,
        tool_approvals=None
        if service.tool_approvals is None
        else relative(service.tool_approvals, folder),
        max_body_bytes=service.max_body_bytes,
        confirmation_ttl=timedelta(seconds=service.confirmation_ttl),
        lease=timedelta(seconds=service.lease),
        store_timeouts=StoreTimeouts(
            connect=store.connect_timeout,
            statement=store.statement_timeout,
            pool=store.pool_timeout,
        ),
        io_threads=service.io_threads,
        cookie_secure=service.cookie_secure,
        max_connections=service.max_connections,
        keep_alive=service.keep_alive,
        header_timeout=service.header_timeout,
        body_timeout=service.body_timeout,
        workers=service.workers,
        timeout=made.budgets.timeout,
        result_budget=made.budgets.result_budget,
        retention=timedelta(days=made.retention.days),
        telemetry=TelemetryConfig(**made.telemetry.model_dump()),
        provenance=ProvenanceConfig(
            preset=made.provenance.preset,
            trust=tuple(made.provenance.trust),
            min_length=dict(made.provenance.min_length),
            rules=tuple(
                FlowRuleConfig(**{**r.model_dump(), "trust": tuple(r.trust)})
                for r in made.provenance.rule
            ),
        ),
        webhooks=tuple(
            WebhookConfig(
                **{
                    **w.model_dump(),
                    "events": tuple(w.events),
                    "allow_destinations": tuple(w.allow_destinations),
                }
            )
            for w in made.webhook
        ),
        logging=LoggingConfig(**made.logging.model_dump()),
    )


def relative(name: str, folder: Path | None) -> Path:
    """A file named relative to the configuration file's folder."""
    path = Path(name)
    return folder / path if folder is not None and not path.is_absolute() else path


def _store_url(url: str, folder: Path | None) -> str:
    if not url.startswith("sqlite:///"):
        return url
    path = Path(url.removeprefix("sqlite:///"))
    if not path.is_absolute() and folder is not None:
        path = (folder / path).resolve()
    return f"sqlite:///{path}"


def _http_tool(tool: tables.HttpTool) -> HttpToolConfig:
    values = tool.model_dump()
    for name in ("capabilities", "allow_destinations", "intents"):
        values[name] = tuple(values[name])
    return HttpToolConfig(**values)


def _issuer(jwt: tables.Jwt, folder: Path | None) -> JwtIssuer:
    values = jwt.model_dump()
    values["algorithms"] = tuple(jwt.algorithms)
    values["required_claims"] = tuple(jwt.required_claims)
    values["jwks_file"] = None if jwt.jwks_file is None else relative(jwt.jwks_file, folder)
    return JwtIssuer(**values)


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
