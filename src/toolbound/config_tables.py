"""The configuration file's tables as typed models: each key, its type, checks and meaning.

:mod:`toolbound.config` validates a file against :class:`FileTables` and turns it
into the :class:`~toolbound.config.ServiceConfig` the service runs from; the
configuration reference (``docs/configuration.md``) is generated from the same
fields (:mod:`toolbound.config_reference`): a field's description is what the key
means, its first example a TOML value the tests load, ``unset`` what leaving it out
means. A table's docstring is its note on that page.

Every table takes a string key from the environment or a file as well:
``url_env = "VAR"`` or ``url_file = "path"`` stand for ``url``, so secrets stay
out of the file (a relative path is taken from the file's folder). Keys that end
in ``_env`` by their own name (``secret_env``) keep their meaning.

pydantic is imported here only: the core library never loads a configuration.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Final, Literal, Protocol, get_args
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from toolbound._errors import ConfigurationError, SchemaError, SpecError
from toolbound._model import Action, EffectClass, ToolSpec
from toolbound.execution.egress import EgressPolicy, HostResource, destination_problem
from toolbound.identity import ASYMMETRIC_ALGORITHMS, DEFAULT_ALGORITHMS, HMAC_ALGORITHMS
from toolbound.provenance.classes import DataClassName  # noqa: TC001 - pydantic reads it
from toolbound.provenance.roles import RoleName, plan
from toolbound.registry import check_spec

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "TABLES",
    "WEBHOOK_EVENTS",
    "Doc",
    "Fault",
    "FileTables",
    "Sourced",
    "Table",
    "Unresolved",
    "spec_of",
]

WEBHOOK_EVENTS: Final = ("parked", "decided", "finished", "outcome_unknown", "reconciled")
"""What a ``[[webhook]]`` may be told of: the journal's notices (``Journal.notices``)."""

Fault = tuple[str | tuple[str | int, ...], str]
"""A problem a table finds: the key (or key path) it is about (``""``: the table), and what."""

Role = Literal["agent", "approver", "operator"]
WebhookEvent = Literal["parked", "decided", "finished", "outcome_unknown", "reconciled"]
Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
_SHA256_HEX = re.compile("[0-9a-f]{64}")
_PORTS = 65535


class Doc:
    """How the reference names a key's type, where the annotation alone would not say."""

    def __init__(self, type_: str, choices: frozenset[str] = frozenset()) -> None:
        self.type = type_
        self.choices = choices


class Unresolved:
    """A ``KEY_env`` or ``KEY_file`` that gave no value; validating ``KEY`` reports why."""

    def __init__(self, message: str) -> None:
        self.message = message


class Sourced:
    """What :class:`Table` needs while it validates: the file's folder, the values read."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.secrets: set[str] = set()  # values read from the environment or files

    def read(self, key: str, name: object) -> object:
        """The value ``KEY_env``/``KEY_file`` names, or an :class:`Unresolved` saying why."""
        if not isinstance(name, str) or not name:
            return Unresolved(
                f"{key} must name {'a variable' if key.endswith('_env') else 'a file'}"
            )
        if key.endswith("_env"):
            import os  # noqa: PLC0415 - read only when a key asks for it

            value = os.environ.get(name)
            if not value:
                return Unresolved(f"{key} names the environment variable {name}, which is unset")
        else:
            path = Path(name)
            if not path.is_absolute() and self.folder is not None:
                path = self.folder / path
            try:
                value = path.read_text(encoding="utf-8").rstrip("\r\n")
            except OSError as exc:
                return Unresolved(f"{key}: cannot read {path}: {exc.strerror or exc}")
            if not value:
                return Unresolved(f"{key}: {path} is empty")
        self.secrets.add(value)
        return value


def _fault(key: str | tuple[str | int, ...], message: str) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError("fault", "{message}", {"message": message}),
        loc=key if isinstance(key, tuple) else ((key,) if key else ()),
        input=None,
    )


def _again(error: Any) -> InitErrorDetails:  # noqa: ANN401 - pydantic's ErrorDetails
    """A caught error, to be raised again beside the table's own faults."""
    if error["type"] == "fault":
        return _fault(error["loc"], error["ctx"]["message"])
    kept = InitErrorDetails(type=error["type"], loc=error["loc"], input=error["input"])
    if "ctx" in error:
        kept["ctx"] = error["ctx"]
    return kept


class Table(BaseModel):
    """A table of the file: unknown keys refused, TOML's own types only (no coercion)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    path: ClassVar[str] = ""
    array: ClassVar[bool] = False
    kind_of: ClassVar[str | None] = None  # the `kind` that selects this variant

    def faults(self) -> list[Fault]:
        """Checks across this table's keys, once each key is valid on its own."""
        return []

    @classmethod
    def raw_faults(cls, data: dict[str, Any]) -> list[Fault]:  # noqa: ARG003 - a hook
        """Checks of the keys as written, made even when another key is wrong."""
        return []

    @model_validator(mode="wrap")
    @classmethod
    def _every_problem(cls, data: Any, handler: Callable[[Any], Any], info: ValidationInfo) -> Any:  # noqa: ANN401
        """Validate, and raise every problem of this table at once, with its key."""
        found: list[InitErrorDetails] = []
        unresolved: set[str] = set()
        if isinstance(data, dict):
            data, missed = cls._sourced(data, info.context)
            unresolved = {base for base, _, _ in missed}
            found += [_fault(k, m) for _, k, m in missed]
            found += [_fault(k, m) for k, m in cls.raw_faults(data)]
        try:
            made = handler(data)
        except ValidationError as exc:
            kept = [
                e
                for e in exc.errors()
                if not (e["type"] == "missing" and e["loc"][0] in unresolved)
            ]
            if not found:
                raise
            errors = [_again(e) for e in kept]
            raise ValidationError.from_exception_data(cls.__name__, [*errors, *found]) from None
        found += [_fault(k, m) for k, m in made.faults()]
        if found:
            raise ValidationError.from_exception_data(cls.__name__, found)
        return made

    @classmethod
    def _sourced(
        cls, data: dict[str, Any], context: object
    ) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
        """``KEY_env``/``KEY_file`` replaced by the value they name, for a string ``KEY``.

        Also what could not be read: the key, its ``_env``/``_file`` key and why.
        """
        out = dict(data)
        missed: list[tuple[str, str, str]] = []
        for key_, name in data.items():
            base = key_.removesuffix("_env").removesuffix("_file")
            field = cls.model_fields.get(base)
            if base == key_ or key_ in cls.model_fields or field is None:
                continue
            if not _text(field.annotation):
                continue
            del out[key_]
            value = (
                Unresolved(f"set {base} or {key_}, not both")
                if base in data
                else context.read(key_, name)
                if isinstance(context, Sourced)
                else Unresolved(f"{key_} is read only from a file")
            )
            if isinstance(value, Unresolved):
                out.pop(base, None)
                missed.append((base, key_, value.message))
            else:
                out[base] = value
        return out, missed


def _text(annotation: object) -> bool:
    """Whether a field of this annotation takes a string (and so ``_env``/``_file``)."""
    return annotation is str or any(_text(arg) for arg in get_args(annotation))


# -- value types --------------------------------------------------------------------------


def _check(test: Callable[[Any], bool], message: str) -> AfterValidator:
    def check(value: Any) -> Any:  # noqa: ANN401 - any checked value
        if not test(value):
            raise ValueError(message)
        return value

    return AfterValidator(check)


def _http(value: str) -> bool:
    return value.startswith(("https://", "http://"))


Text = Annotated[str, Field(min_length=1), Doc("string")]
Texts = Annotated[list[Text], Doc("array of strings")]
Seconds = Annotated[float, Field(gt=0), Doc("number > 0 (seconds)")]
Span = Annotated[float, Field(ge=0), Doc("number ≥ 0 (seconds)")]
Count = Annotated[int, Field(ge=1), Doc("integer ≥ 1")]
Url = Annotated[str, _check(_http, "must be an http(s) URL"), Doc("http(s) URL")]
Pointer = Annotated[
    str,
    _check(lambda v: v.startswith("/"), "must be a JSON pointer such as '/to'"),
    Doc("JSON pointer"),
]
Schema = Annotated[dict[str, Any], Doc("table (JSON Schema)")]


def key(
    default: Any,  # noqa: ANN401 - the field's default, or ... when required
    about: str,
    example: str,
    *,
    unset: str = "",
    snippet: bool = True,
    required: bool = False,
    hidden: bool = False,
) -> Any:  # noqa: ANN401 - a pydantic FieldInfo, typed as the field
    """A key: its default, what it means, an example (TOML), and what unset means.

    ``snippet=False`` keeps the example out of the reference's TOML snippet (which
    must be valid as it stands). ``required`` documents a key as required whose
    absence a later check reports (an HTTP tool's empty description). A ``hidden``
    value (a secret) is left out of the table's ``repr``.
    """
    extra: dict[str, JsonValue] = {"unset": unset, "snippet": snippet, "required": required}
    return Field(
        default, description=about, examples=[example], json_schema_extra=extra, repr=not hidden
    )


# -- the tables ---------------------------------------------------------------------------


class Store(Table):
    """Where the idempotency ledger, the trace and the service's journal are kept."""

    path = "store"
    url: Annotated[
        str,
        _check(
            lambda u: u == "memory" or u.startswith(("sqlite:///", "postgresql://", "postgres://")),
            "use memory, sqlite:///PATH or postgresql://…",
        ),
    ] = key(
        "sqlite:///toolbound.db",
        "`memory`, `sqlite:///PATH` (a relative path is taken from the file's folder) or "
        "`postgresql://…`; `url_env` or `url_file` read it from the environment or a file, "
        "so a password stays out of this file",
        '"postgresql://toolbound@db.internal/toolbound"',
    )
    connect_timeout: Seconds = key(
        5.0, "seconds to open a PostgreSQL connection (libpq's `connect_timeout`)", "3"
    )
    statement_timeout: Seconds = key(
        10.0,
        "seconds one statement may take: PostgreSQL's `statement_timeout` and "
        "`tcp_user_timeout`, SQLite's wait for a writer's lock; past it the request is "
        "answered 503 `storage_unavailable`",
        "5",
    )
    pool_timeout: Seconds = key(
        1.0,
        "seconds a request waits for a pooled PostgreSQL connection; while the server is "
        "down, requests are answered 503 `storage_unavailable` after this long",
        "2",
    )


def _packs(packs: list[str]) -> list[str]:
    for pack in packs:
        module, _, func = pack.partition(":")
        if not module or not func:
            msg = f"each entry must be MODULE:FUNCTION, got {pack!r}"
            raise ValueError(msg)
    return packs


def _destination(entry: str) -> str:
    try:
        EgressPolicy(allow=(entry,))
    except ConfigurationError as exc:
        raise ValueError(str(exc)) from None
    return entry


Destinations = Annotated[
    list[Annotated[Text, AfterValidator(_destination)]], Doc("array of strings")
]


class HttpTool(Table):
    """An HTTP endpoint declared as a tool.

    See [HTTP endpoints as tools](service.md#http-endpoints-as-tools).
    """

    path = "tools.http"
    array = True
    name: Text = key(..., "the tool's name", '"crm.create_contact"')
    version: str = key("1", "the tool's version", '"2"')
    description: str = key(
        "", "what the model is told the tool does", '"Create a CRM contact."', required=True
    )
    effect: EffectClass = key(
        "irreversible_write",
        "the effect class; unset, the most conservative one",
        '"reversible_write"',
    )
    method: Annotated[Method, BeforeValidator(lambda m: m.upper() if isinstance(m, str) else m)] = (
        key("POST", "the HTTP method (any case)", '"PUT"')
    )
    url: Url = key(
        ...,
        "where requests go; `{placeholders}` may fill the path and the query, never the "
        "scheme, host or port (unless `host_argument` names the host)",
        '"https://crm.example/contacts"',
    )
    input_schema: Schema = key(
        ...,
        "the JSON Schema (2020-12) of the arguments",
        '{ type = "object", properties = { email = { type = "string" } }, '
        'required = ["email"], additionalProperties = false }',
    )
    output_schema: Schema | None = key(
        None,
        "the JSON Schema a response must satisfy",
        '{ type = "object" }',
        unset="responses are not checked against a schema",
    )
    capabilities: Texts = key(
        [], "the capabilities a call needs; a write tool needs at least one", '["crm:write"]'
    )
    timeout: Seconds = key(10.0, "the tool's own deadline", "5")
    max_attempts: Count = key(1, "how many attempts the retry matrix may make", "3")
    bearer_secret: Annotated[str | None, Doc("secret name")] = key(
        None,
        "the name of the secret sent as a bearer token",
        '"crm_token"',
        unset="no Authorization header",
    )
    host_argument: Annotated[
        str | None,
        _check(lambda a: a is None or a.isidentifier(), "must be an argument name"),
        Doc("argument name"),
    ] = key(
        None,
        "a required argument that is the URL's host (`url` then has `{host}` there); every "
        "`[[grant]]` of the tool's capabilities needs a domain scope",
        '"host"',
        unset="the host is the one in `url`",
        snippet=False,
    )
    allow_destinations: Destinations = key(
        [],
        "internal networks (CIDR) and host names the tool may connect to; other internal "
        "addresses are refused",
        '["10.20.0.0/16", "crm.internal"]',
    )
    reads_untrusted: bool = key(
        True,  # noqa: FBT003 - a default
        "whether its results may hold text others wrote (a web page, an email); `false` "
        "makes them a trusted source for the flow rules",
        "false",
    )
    reads_private: bool = key(
        True,  # noqa: FBT003 - a default
        "whether its results hold data that must not leave (a mailbox, an account)",
        "false",
    )
    roles: Annotated[dict[Pointer, RoleName], Doc("table of JSON pointer → role")] = key(
        {},
        "what each parameter does for the flow rules: `destination`, `target`, `secret`, "
        "`content` or `quantity` (`none`: left to the grants), by JSON pointer",
        '{ "/email" = "destination" }',
        unset="read from the input schema",
    )
    intents: Texts = key(
        [],
        "verbs or phrases a person uses when they want this write: with no task scope "
        "declared, it runs unasked only when the user's words express one",
        '["book", "reserve"]',
        unset="none: the user's words do not narrow it",
    )
    data_classes: Annotated[
        dict[Pointer, DataClassName], Doc("table of JSON pointer → data class")
    ] = key(
        {},
        "the kinds of private data fields of its results hold, by JSON pointer into the "
        "output: they leave in a write only when the user's words ask for that kind",
        '{ "/passport" = "identity_document" }',
        unset="read from the field names and the words beside the values",
    )

    def faults(self) -> list[Fault]:
        found: list[Fault] = []
        if problem := destination_problem(self.url, host_argument=self.host_argument):
            found.append(("url", problem))
        required = self.input_schema.get("required")
        if self.host_argument is not None and self.host_argument not in (
            required if isinstance(required, list) else []
        ):
            found.append(
                (
                    "host_argument",
                    f"{self.host_argument!r} must be a required argument of input_schema",
                )
            )
        try:
            check_spec(spec_of(self))
            plan(spec_of(self))
        except (SpecError, SchemaError) as exc:
            found.append(("", str(exc)))
        return found


class Tools(Table):
    """Which tools the service offers."""

    path = "tools"
    packs: Annotated[list[Text], AfterValidator(_packs), Doc("array of strings")] = key(
        [],
        "`MODULE:FUNCTION` entries; each function is called with the `Registry` to fill",
        '["toolbound.packs.example:register"]',
    )
    http: Annotated[list[HttpTool], Doc("array of tables")] = key(
        [],
        "HTTP endpoints as tools, usually written as `[[tools.http]]` tables (below)",
        '[{ name = "weather.now", description = "The weather now.", effect = "read", '
        'url = "https://api.weather.example/now", input_schema = { type = "object" } }]',
        snippet=False,
    )


class Webhook(Table):
    """Where the call events go.

    Signed as the Standard Webhooks specification says, at least once, from an outbox
    in the journal; see [webhooks](service.md#webhooks).
    """

    path = "webhook"
    array = True
    name: Text = key(..., "the webhook's name, in logs and the deliveries' record", '"ops-desk"')
    url: Url = key(..., "where each event is POSTed", '"https://hooks.example.com/toolbound"')
    secret_env: Annotated[Text | None, Doc("environment variable name")] = key(
        None,
        "the environment variable holding the signing secret (`whsec_` and base64), read "
        "at each delivery; unless `secret_file` names a file holding it",
        '"TOOLBOUND_HOOK_SECRET"',
        required=True,
    )
    secret: Annotated[Text | None, Doc("string (a secret)")] = key(
        None,
        "the signing secret itself, read when the file is loaded: write it as "
        '`secret_file = "path"` (a mounted secret), never inline',
        '"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"',
        unset="`secret_env` names it",
        snippet=False,
        hidden=True,
    )
    events: Annotated[list[WebhookEvent], Doc("array of strings")] = key(
        ["parked", "decided", "outcome_unknown", "reconciled"],
        "the call events sent: a call parked for a person, decided, finished after a "
        "decision, of unknown outcome, reconciled",
        '["parked", "decided"]',
    )
    tenant: Text | None = key(
        None, "only this tenant's calls", '"acme"', unset="every tenant's calls", snippet=False
    )
    allow_destinations: Destinations = key(
        [],
        "internal networks or hosts the webhook may reach (the egress rules of HTTP tools "
        "refuse them otherwise)",
        '["10.20.0.0/16"]',
        snippet=False,
    )
    timeout: Seconds = key(10.0, "seconds to wait for the receiver's answer", "5.0")

    def faults(self) -> list[Fault]:
        if (self.secret_env is None) == (self.secret is None):
            return [
                ("secret_env", "name the signing secret: secret_env or secret_file, one of them")
            ]
        return []


class Principal(Table):
    """Who an API key stands for.

    The subject of every call made with it comes from here, never from the arguments.
    """

    path = "principal"
    array = True
    name: Text = key(
        ..., "the principal's name (in logs and `toolbound revoke-sessions`)", '"agent"'
    )
    key_sha256: Annotated[
        str,
        _check(
            lambda k: _SHA256_HEX.fullmatch(k) is not None,
            "must be the 64 lowercase hex digits of the key's SHA-256",
        ),
        Doc("64 lowercase hex digits"),
    ] = key(
        ...,
        "the SHA-256 of the API key (`toolbound hash-key`), never the key itself",
        '"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"',
    )
    subject: Text = key(..., "the subject every call with this key is made for", '"agent-1"')
    tenant: Text = key(..., "the subject's tenant", '"acme"')
    roles: Annotated[list[Role], Doc("array of strings")] = key(
        [],
        "what the key may do: submit calls, confirm them, read traces and reconcile",
        '["agent"]',
    )


_ALGORITHMS = ASYMMETRIC_ALGORITHMS | HMAC_ALGORITHMS


class Jwt(Table):
    """One issuer whose tokens are trusted.

    Its keys, the algorithms it may sign with, and how its claims map to a subject,
    tenant and roles. The service API, the MCP endpoint, the MCP confirmation endpoint
    and the gateway's /metrics accept its tokens; the console's sign-in takes API keys
    only.
    """

    path = "identity.jwt"
    array = True
    issuer: Text = key(
        ...,
        "the token's `iss`, exactly; picks the table a token is checked against",
        '"https://login.example.com/"',
    )
    audience: Text = key(..., "what the token's `aud` must name", '"toolbound"')
    jwks_url: Url | None = key(
        None,
        "where the issuer publishes its public keys (a JWKS document)",
        '"https://login.example.com/.well-known/jwks.json"',
    )
    jwks_file: Annotated[Text | None, Doc("path")] = key(
        None,
        "a JWKS document on disk instead of `jwks_url`, relative to this file; re-read like a URL",
        '"jwks.json"',
        snippet=False,
    )
    secret_env: Annotated[Text | None, Doc("environment variable name")] = key(
        None,
        "for HS* algorithms only, instead of a JWKS: the environment variable holding "
        "the shared secret",
        '"TOOLBOUND_JWT_SECRET"',
        snippet=False,
    )
    secret: Annotated[Text | None, Doc("string (a secret)")] = key(
        None,
        "for HS* algorithms only, instead of `secret_env`: the shared secret, read when "
        'the file is loaded; write it as `secret_file = "path"`, never inline',
        '"s3cret-s3cret-s3cret-s3cret-s3cret"',
        snippet=False,
        hidden=True,
    )
    algorithms: Annotated[
        list[str],
        _check(lambda algs: set(algs) <= _ALGORITHMS, "an unknown or refused algorithm"),
        Doc("array of strings", _ALGORITHMS),
    ] = key(
        list(DEFAULT_ALGORITHMS),
        "the algorithms a token may be signed with; never `none`, and HS* never beside "
        "public-key algorithms",
        '["RS256"]',
    )
    clock_skew: Span = key(
        60.0, "seconds of grace on `exp`, `nbf` and `iat` for clocks that disagree", "30"
    )
    required_claims: Texts = key(
        [], "claims a token must carry besides `exp`, `iss` and `aud`", '["iat", "jti"]'
    )
    subject_claim: Text = key("sub", "the claim naming the subject (and the principal)", '"oid"')
    tenant_claim: Text | None = key(
        None, "the claim naming the tenant; set this or `tenant`", '"tid"'
    )
    tenant: Text | None = key(
        None,
        "the tenant of every token of this issuer; set this or `tenant_claim`",
        '"acme"',
        snippet=False,
    )
    roles_claim: Text = key(
        "roles", "the claim listing roles: an array, or a space-separated string", '"groups"'
    )
    role_map: Annotated[
        dict[str, str],
        _check(
            lambda m: set(m.values()) <= set(get_args(Role)),
            "must map the token's role names to agent, approver or operator",
        ),
        Doc("table of role names"),
    ] = key(
        {},
        "the token's role names → agent, approver or operator; empty, those names themselves",
        '{ "Tools.Approve" = "approver" }',
    )
    jwks_ttl: Seconds = key(300.0, "seconds the fetched keys are kept", "600")
    jwks_refresh_interval: Span = key(
        30.0, "the least seconds between fetches a token naming an unknown key id may cause", "10"
    )

    def faults(self) -> list[Fault]:
        found: list[Fault] = []
        hmac = [a in HMAC_ALGORITHMS for a in self.algorithms]
        sources = [s for s in (self.jwks_url, self.jwks_file) if s is not None]
        secrets = self.secret_env is not None or self.secret is not None
        if any(hmac) and not all(hmac):
            # One key trusted for both would let a public key sign as an HMAC secret.
            found.append(("algorithms", "do not mix HMAC (HS*) and public-key algorithms"))
        elif all(hmac) and ((self.secret_env is None) == (self.secret is None) or sources):
            found.append(
                (
                    "secret_env",
                    "HS* algorithms take one secret, secret_env or secret_file, and no JWKS",
                )
            )
        elif not all(hmac) and (secrets or len(sources) != 1):
            found.append(
                (
                    "jwks_url",
                    (
                        "name the issuer's public keys: exactly one of jwks_url or jwks_file "
                        "(secret_env and secret_file are for HS* algorithms only)"
                    ),
                )
            )
        if (self.tenant_claim is None) == (self.tenant is None):
            found.append(("tenant", "set exactly one of tenant_claim or tenant"))
        return found


class Identity(Table):
    """Bearer JWTs of trusted identity providers as callers, beside API keys.

    See `toolbound.identity`. A bearer value that is no API key is tried as a JWT.
    """

    path = "identity"
    jwt: Annotated[list[Jwt], Doc("array of tables")] = key(
        [],
        "the trusted issuers, one `[[identity.jwt]]` table each",
        "[]",
        unset="API keys only",
        snippet=False,
    )


class OwnerScope(Table):
    """Only resources the subject owns."""

    path = "grant.scope"
    kind_of = "owner"
    kind: Literal["owner"]


class PathScope(Table):
    """Only files under one folder, after resolving symlinks."""

    path = "grant.scope"
    kind_of = "path"
    kind: Literal["path"]
    root: Annotated[
        str,
        Field(min_length=1),
        _check(lambda r: Path(r).is_absolute(), "must be an absolute path"),
        Doc("absolute path"),
    ] = key(..., "the folder", '"/srv/files"')


class DomainScope(Table):
    """Only hosts in the listed domains."""

    path = "grant.scope"
    kind_of = "domain"
    kind: Literal["domain"]
    domains: Texts = key(..., "the domains", '["example.com"]')
    allow_subdomains: bool = key(False, "whether subdomains count as well", "true")  # noqa: FBT003


class IdScope(Table):
    """Only resources with the listed ids (a calendar id, say)."""

    path = "grant.scope"
    kind_of = "id"
    kind: Literal["id"]
    ids: Texts = key(..., "the ids", '["cal-team", "cal-mira"]')


class NumberLimit(Table):
    """Bounds on a number in the arguments."""

    path = "grant.limits"
    kind_of = "number"
    kind: Literal["number"]
    pointer: Annotated[Pointer, Field(min_length=1)] = key(..., "where the number is", '"/amount"')
    minimum: Annotated[float | None, Doc("number")] = key(
        None,
        "the least value allowed",
        "1",
        unset="no lower bound (one of the two bounds is needed)",
    )
    maximum: Annotated[float | None, Doc("number")] = key(
        None,
        "the largest value allowed",
        "100",
        unset="no upper bound (one of the two bounds is needed)",
    )

    @classmethod
    def raw_faults(cls, data: dict[str, Any]) -> list[Fault]:
        if data.get("minimum") is None and data.get("maximum") is None:
            return [("", "a number limit needs minimum, maximum or both")]
        return []


class RateLimit(Table):
    """At most so many calls in a sliding window, per subject."""

    path = "grant.limits"
    kind_of = "rate"
    kind: Literal["rate"]
    max_calls: Count = key(1, "calls allowed in the window", "10")
    per_seconds: Seconds = key(..., "the window", "60")


Scope = Annotated[OwnerScope | PathScope | DomainScope | IdScope, Field(discriminator="kind")]
Limit = Annotated[NumberLimit | RateLimit, Field(discriminator="kind")]


class Grant(Table):
    """One capability held by one subject of one tenant; the grant policy decides from these."""

    path = "grant"
    array = True
    subject: Text = key(..., "who holds the capability", '"agent-1"')
    tenant: Text = key(..., "the subject's tenant", '"acme"')
    session: Text | None = key(
        None, "the one session the grant holds for", '"s-42"', unset="every session of the subject"
    )
    capability: Text = key(..., "the capability", '"orders:write"')
    actions: Annotated[list[Action], Field(min_length=1), Doc("array of strings")] = key(
        ..., "which actions it allows, at least one", '["create", "modify"]'
    )
    confirm: bool = key(False, "whether a person confirms each call", "true")  # noqa: FBT003
    scope: Annotated[Scope | None, Doc("inline table")] = key(
        None,
        "which resources, by `kind` (the tables below)",
        '{ kind = "owner" }',
        unset="any resource",
    )
    limits: Annotated[list[Limit], Doc("array of inline tables")] = key(
        [],
        "bounds on arguments and call rates, by `kind` (the tables below)",
        '[{ kind = "rate", max_calls = 10, per_seconds = 60 }]',
    )


class Service(Table):
    """The HTTP service and its console."""

    path = "service"
    host: Text = key("127.0.0.1", "where `toolbound serve` listens", '"0.0.0.0"')
    port: Annotated[
        int,
        _check(lambda p: 0 <= p <= _PORTS, "must be a port number (0-65535)"),
        Doc("integer, 0 to 65535"),
    ] = key(8780, "the port it listens on", "8443")
    four_eyes: bool = key(
        False,  # noqa: FBT003 - a default
        "whether nobody may approve a call made for their own subject",
        "true",
    )
    console_secret_env: Annotated[Text | None, Doc("environment variable name")] = key(
        None,
        "the environment variable holding the console's session-signing secret, which "
        "replicas behind one address must share",
        '"TOOLBOUND_CONSOLE_SECRET"',
        unset="a random secret per process (a restart logs everyone out)",
    )
    console_secret: Annotated[Text | None, Doc("string (a secret)")] = key(
        None,
        "the console's session-signing secret itself, instead of `console_secret_env`, "
        'read when the file is loaded: write it as `console_secret_file = "path"`',
        '"a-long-random-string-the-replicas-share"',
        unset="`console_secret_env`, or a random secret per process",
        snippet=False,
        hidden=True,
    )
    console_trace_url: Annotated[
        str | None,
        _check(
            lambda u: u is None or (_http(u) and "{trace_id}" in u),
            "must be an http(s) URL containing {trace_id}",
        ),
        Doc("http(s) URL with {trace_id}"),
    ] = key(
        None,
        "a tracing UI's page for one trace, with {trace_id} where the id goes: the "
        "console links each invocation's trace id there",
        '"https://jaeger.example/trace/{trace_id}"',
        unset="trace ids are shown, not linked",
    )
    tool_approvals: Annotated[Text | None, Doc("path (relative to this file)")] = key(
        None,
        "the MCP gateway's approvals file, relative to this file: the console reviews "
        "its quarantined tools (/console/tools) and the gateway keeps its approvals there "
        "unless [gateway] approvals names another file",
        '"gateway.approvals.json"',
        unset="no tool review in the console",
    )
    max_body_bytes: Count = key(
        4 << 20,  # as large as the proposal envelope the service parses
        "the largest request body, API and console; a larger one is answered 413",
        "1048576",
    )
    confirmation_ttl: Seconds = key(
        900.0, "how long a parked call waits for a person before its confirmation expires", "600"
    )
    lease: Seconds = key(
        30.0,
        "how long a call stays its replica's without a renewal (renewed every third of "
        "it); after that another replica sharing the store takes it over",
        "10",
    )
    io_threads: Count = key(
        32,
        "threads of the one pool every blocking store and identity call runs on, off the "
        "event loop; a proposal holds one while its pipeline runs",
        "64",
    )
    cookie_secure: bool = key(
        False,  # noqa: FBT003 - a default
        "mark the console's session cookie `Secure`, so browsers send it over HTTPS only "
        "(`toolbound serve --cookie-secure` too)",
        "true",
    )
    max_connections: Count = key(
        1000,
        "connections and requests `toolbound serve` takes at once (uvicorn's "
        "`limit_concurrency`); more are answered 503 at once",
        "2000",
    )
    keep_alive: Seconds = key(
        5.0,
        "seconds an idle connection is kept for its next request (uvicorn's "
        "`timeout_keep_alive`, whole seconds)",
        "10",
    )
    header_timeout: Seconds = key(
        10.0,
        "seconds a client has to send a request's line and headers, from its first byte "
        "(or from connecting); a slower one is disconnected",
        "5",
    )
    body_timeout: Seconds = key(
        30.0,
        "seconds a client has to send a request body once its head arrived; a slower "
        "one is answered 408 `body_timeout`",
        "10",
    )
    workers: Count = key(
        1,
        "processes `toolbound serve` runs on its one address (`--workers` too), each a "
        "replica of the others over the shared store: more use more cores; "
        "`max_connections` is each one's",
        "4",
    )

    def faults(self) -> list[Fault]:
        if self.console_secret_env is not None and self.console_secret is not None:
            return [
                ("console_secret_env", "set console_secret_env or console_secret_file, not both")
            ]
        return []


class Budgets(Table):
    """Bounds on every call the service runs."""

    path = "budgets"
    timeout: Seconds | None = key(
        None,
        "the request deadline; a call's deadline is the shorter of this and the tool's timeout",
        "30",
        unset="each tool's own timeout",
    )
    result_budget: Count | None = key(
        None,
        "the most bytes of one result sent back to the model (a tool's smaller budget "
        "still applies)",
        "16384",
        unset="each tool's own budget",
    )


class Retention(Table):
    """How long the service keeps what it answered (its journal)."""

    path = "retention"
    days: Count = key(30, "days before what the service answered is purged", "90")


class FlowRule(Table):
    """One flow rule by hand, on one tool's parameter, beside the preset."""

    path = "provenance.rule"
    array = True
    tool: Text = key(..., "the tool (`name` or `name@version`)", '"mail.send"')
    parameter: Annotated[
        str,
        _check(
            lambda p: not p or p.startswith("/"), "must be a JSON pointer such as '/to' (or '')"
        ),
        Doc("JSON pointer"),
    ] = key(
        "",
        "a JSON pointer into the arguments; the rule covers everything below it",
        '"/to"',
        unset="every argument",
    )
    kind: Literal["trusted_source", "no_private_data"] = key(
        ...,
        "`trusted_source`: the value must come from the user, the configuration or a "
        "trusted tool; `no_private_data`: no private data may flow into it",
        '"trusted_source"',
    )
    strict: bool = key(
        True,  # noqa: FBT003 - a default
        "(`trusted_source`) a value found in no trusted source breaks the rule; `false` "
        "stops only values whose sole sources are untrusted",
        "false",
    )
    trust: Texts = key(
        [],
        "(`trusted_source`) more tools whose results count as trusted for this rule",
        '["directory.lookup"]',
    )
    otherwise: Literal["confirm", "refuse"] = key(
        "confirm",
        "what a broken rule asks for: `confirm` parks the call for a person, `refuse` "
        "refuses it with the parameter's pointer",
        '"refuse"',
    )

    @classmethod
    def raw_faults(cls, data: dict[str, Any]) -> list[Fault]:
        if data.get("kind") != "no_private_data":
            return []
        return [
            (k, "applies to trusted_source rules only") for k in ("strict", "trust") if k in data
        ]


def _trusted(entries: list[str]) -> list[str]:
    for entry in entries:
        tool, hashed, pointer = entry.partition("#")
        if not tool or (hashed and not pointer.startswith("/")):
            msg = f"{entry!r} must be a tool name or a tool's field such as 'crm.lookup#/id'"
            raise ValueError(msg)
    return entries


class Provenance(Table):
    """Flow rules: where the values steering a write may come from.

    So that text injected into a tool result cannot choose a recipient (R6). The
    service, `mcp-serve` and `mcp-gateway` apply them beside the grants; see
    [provenance](provenance.md#in-a-configuration-file).
    """

    path = "provenance"
    preset: Literal["none", "guard_writes"] = key(
        "none",
        "`guard_writes`: rules for every write tool from its parameters' roles "
        "(destinations, targets and secrets need a trusted source; private data may not "
        "flow to a destination the user did not name)",
        '"guard_writes"',
        unset="no preset",
    )
    trust: Annotated[list[Text], AfterValidator(_trusted), Doc("array of strings")] = key(
        [],
        "tools whose results count as trusted sources (besides those declared "
        "`reads_untrusted = false`), or single fields of them (`tool#/pointer`: only a "
        "value that was that whole field)",
        '["crm.lookup", "drive.search#/id"]',
    )
    min_length: Annotated[dict[RoleName, Count], Doc("table of role → integer ≥ 1")] = key(
        {},
        "the shortest value of a role the preset accepts at all",
        "{ destination = 5, secret = 6 }",
        unset="destination 3, target 1, secret 4",
    )
    rule: Annotated[list[FlowRule], Doc("array of tables")] = key(
        [],
        "flow rules by hand, usually written as `[[provenance.rule]]` tables (below)",
        '[{ tool = "mail.send", parameter = "/to", kind = "trusted_source" }]',
        snippet=False,
    )


class Telemetry(Table):
    """Where OpenTelemetry spans and metrics go; see [telemetry](telemetry.md)."""

    path = "telemetry"
    exporter: Literal["none", "console", "otlp"] = key(
        "none", "where spans and metrics go", '"otlp"'
    )
    endpoint: Annotated[str | None, Doc("URL")] = key(
        None,
        "the OTLP/HTTP collector (`/v1/traces` and `/v1/metrics` are added)",
        '"http://collector.internal:4318"',
        unset="the exporter's own default",
    )
    service_name: str = key(
        "toolbound", "`service.name` on the spans and metrics", '"toolbound-eu"'
    )
    metrics: bool = key(
        True,  # noqa: FBT003 - a default
        "export the metrics (`gen_ai.execute_tool.duration`, the MCP durations) beside the "
        "spans; `false` for a collector that takes traces only",
        "false",
    )


class Logging(Table):
    """What the service and the MCP commands log on standard error.

    One access line per HTTP request, and their own messages; see
    [operations](operations.md#logs). No key, secret or argument value is ever logged.
    """

    path = "logging"
    level: Literal["debug", "info", "warning", "error"] = key(
        "info",
        "the least severe messages written; `info` includes the access log, `warning` "
        "leaves it out; `--log-level` on the command line wins",
        '"warning"',
    )
    format: Literal["text", "json"] = key(
        "text",
        "`text` for a person reading the terminal, `json` for one JSON object a line "
        "(for a log shipper)",
        '"json"',
    )


def _entries(data: object, *path: str) -> list[dict[str, Any]]:
    """The tables of the array at ``path`` in raw ``data`` (none if it is not one)."""
    for part in path:
        data = data.get(part) if isinstance(data, dict) else None
    return [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []


def _twice(entries: list[dict[str, Any]], path: str, key_: str, says: str) -> list[Fault]:
    """An entry whose ``key_`` an earlier one has already: ``says`` (with the earlier's #)."""
    seen: dict[object, int] = {}
    found: list[Fault] = []
    for i, entry in enumerate(entries):
        value = entry.get(key_)
        if not isinstance(value, str) or not value:
            continue
        if value in seen:
            found.append(
                ((*path.split("."), i, key_), says.format(value=value, first=seen[value] + 1))
            )
        seen.setdefault(value, i)
    return found


def _host_grants(data: dict[str, Any]) -> list[Fault]:
    """A host chosen by the model is checked by a domain scope on every grant of it (R6).

    An unscoped grant (or one of another kind) of the tool's capability would admit
    any host, so each must be a domain scope, and at least one must exist.
    """
    found: list[Fault] = []
    grants = _entries(data, "grant")
    for i, tool in enumerate(_entries(data, "tools", "http")):
        argument, capabilities = tool.get("host_argument"), tool.get("capabilities") or []
        if not isinstance(argument, str) or not isinstance(capabilities, list):
            continue
        if not capabilities:
            found.append(
                (
                    ("tools", "http", i, "capabilities"),
                    (
                        "a tool that takes its host from an argument needs a capability, "
                        "granted with a domain scope"
                    ),
                )
            )
            continue
        granting = [(j, g) for j, g in enumerate(grants) if g.get("capability") in capabilities]
        if not granting:
            found.append(
                (
                    ("tools", "http", i, "host_argument"),
                    (
                        f"no [[grant]] of {', '.join(capabilities)} checks the host: add one "
                        'with scope = { kind = "domain", domains = [...] }'
                    ),
                )
            )
        for j, grant in granting:
            scope = grant.get("scope")
            if not isinstance(scope, dict) or scope.get("kind") != "domain":
                found.append(
                    (
                        ("grant", j, "scope"),
                        (
                            f"{tool.get('name')} takes its host from the argument {argument!r}: "
                            f"a grant of {grant.get('capability')!r} needs a domain scope, "
                            "or the model could send the request anywhere"
                        ),
                    )
                )
    return found


# -- the MCP gateway's tables (toolbound.mcp.config builds its settings from them) ------


_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
_MEBIBYTE = 1024 * 1024


def _url(text: str) -> bool:
    parts = urlsplit(text)
    return parts.scheme in {"http", "https"} and bool(parts.netloc)


def _bytes(value: object) -> object:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        msg = "must be a number of bytes (0 or more)"
        raise ValueError(msg)
    return value


Bytes = Annotated[int, BeforeValidator(_bytes), Doc("integer ≥ 0 (bytes)")]
Name = Annotated[str, _check(lambda n: _NAME.match(n) is not None, f"must match {_NAME.pattern}")]


class ProtectedResource(Table):
    """RFC 9728 metadata for the MCP endpoint, named in every 401."""

    path = "gateway.protected_resource"
    resource: Annotated[
        str,
        _check(lambda r: _url(r) and "#" not in r, "must be an http(s) URL without a fragment"),
    ] = key(..., "the MCP URL as clients reach it", '"https://tools.example.com/mcp"')
    authorization_servers: list[Annotated[str, _check(_url, "must be http(s) URLs")]] = key(
        [], "where a client gets a token", '["https://auth.example.com"]'
    )
    scopes_supported: Texts = key([], "the scopes a token may carry", '["tools"]')
    resource_name: Text | None = key(None, "a name for people", '"Company tools"')


class Gateway(Table):
    """The MCP gateway's own settings; see [the MCP guide](mcp.md#the-gateway)."""

    path = "gateway"
    name: Text = key("toolbound-gateway", "the server name downstream clients see", '"tools"')
    stdio_principal: Text | None = key(
        None, "who a stdio client is (a [[principal]] name)", '"local"'
    )
    confirm: Literal["elicitation", "console"] = key(
        "elicitation", "how a person confirms: through the client, or the console", '"console"'
    )
    approvals: Text | None = key(
        None, "the approved tool versions, relative to this file", '"gateway.approvals.json"'
    )
    http_path: Annotated[str, _check(lambda p: p.startswith("/"), "must start with '/'")] = key(
        "/mcp", "where the streamable HTTP endpoint is", '"/tools/mcp"'
    )
    protected_resource: ProtectedResource | None = key(
        None, "RFC 9728 metadata", '{ resource = "https://tools.example.com/mcp" }'
    )
    max_content_bytes: Bytes = key(
        _MEBIBYTE, "mcp-serve: the most bytes one block of content may carry", "2048"
    )


class ResourceRule(Table):
    """Which resource a call of one upstream tool touches: the argument at ``pointer``."""

    path = "upstream.tools.resource"
    kind: Text = key(..., "what kind of resource", '"repository"')
    pointer: Annotated[Pointer, Field(min_length=1)] = key(..., "where it is", '"/repo_path"')
    action: Action | None = key(None, "what the call does to it", '"modify"')


class ToolRule(Table):
    """What the gateway decides about one upstream tool (nothing comes from the upstream)."""

    path = "upstream.tools"
    effect: EffectClass = key("irreversible_write", "the effect class", '"read"')
    capability: Text | None = key(None, "the capability a call needs", '"git:write"')
    resource: ResourceRule | None = key(None, "the resource a call touches", "{}")
    idempotency: Literal["native_key", "none"] = key(
        "none", "whether the upstream dedupes by key", '"native_key"'
    )
    max_attempts: Count | None = key(None, "attempts the retry matrix may make", "1")
    timeout: Seconds | None = key(None, "seconds per call", "30")
    hidden: bool = key(False, "never listed nor called", "true")  # noqa: FBT003
    task_support: Literal["forbidden", "optional", "required"] = key(
        "forbidden", "whether a call may run as a task of the gateway (MCP tasks)", '"optional"'
    )

    @classmethod
    def raw_faults(cls, data: dict[str, Any]) -> list[Fault]:
        """A read takes no idempotency key, whatever else is wrong."""
        if data.get("idempotency", "none") != "none" and data.get("effect") in {"pure", "read"}:
            return [("idempotency", "only a write has an idempotency key")]
        return []


class Upstream(Table):
    """One upstream MCP server: a command run over stdio, or a streamable HTTP URL."""

    path = "upstream"
    array = True
    name: Name = key(..., "also the default prefix: tools become NAME.TOOL", '"git"')
    prefix: (
        Annotated[str, _check(lambda p: not p or _NAME.match(p), f"must match {_NAME.pattern}")]
        | None
    ) = key(None, "the prefix of its tools' names; empty keeps their own", '""')
    command: Texts = key([], "the stdio server's command line", '["python", "-m", "server"]')
    env: dict[str, str] = key({}, "the command's environment", '{ HOME = "/srv" }')
    cwd: Text | None = key(None, "the command's folder, relative to this file", '"srv"')
    url: Url | None = key(None, "the streamable HTTP server", '"http://127.0.0.1:9000/mcp"')
    bearer_env: Text | None = key(None, "the variable holding its bearer token", '"TOKEN"')
    timeout: Seconds = key(30.0, "seconds per call (the deadline)", "60")
    attempt_timeout: Seconds | None = key(None, "seconds per attempt", "10")
    new_tools: Literal["trust", "quarantine"] = key(
        "trust", "pin a tool's first definition, or quarantine it", '"quarantine"'
    )
    strict_schemas: bool = key(True, "close object schemas", "false")  # noqa: FBT003
    refresh_seconds: Seconds = key(60.0, "seconds between tool list refreshes", "30")
    tools: dict[str, ToolRule] = key({}, "what the gateway decides per tool", "{}")
    max_content_bytes: Bytes = key(_MEBIBYTE, "the most bytes of one block", "2048")
    resources_capability: Text | None = key(None, "who may read its resources", '"git:res"')
    prompts_capability: Text | None = key(None, "who may get its prompts", '"git:prompts"')
    allow_sampling: bool = key(False, "relay its sampling to the caller", "true")  # noqa: FBT003
    allow_elicitation: bool = key(False, "relay its elicitation", "true")  # noqa: FBT003
    relay_input_requests: bool = key(False, "relay its input requests", "true")  # noqa: FBT003

    @classmethod
    def raw_faults(cls, data: dict[str, Any]) -> list[Fault]:
        """A stdio command or a URL, exactly one."""
        if bool(data.get("command")) == (data.get("url") is not None):
            return [("", "give exactly one of command (a stdio server) or url (streamable HTTP)")]
        return []


def _workers_fault(data: dict[str, Any]) -> list[Fault]:
    """Several workers on a ``memory`` store: each would keep calls the others never see."""
    service, store = data.get("service"), data.get("store")
    workers = service.get("workers") if isinstance(service, dict) else None
    url = store.get("url") if isinstance(store, dict) else None
    if isinstance(workers, int) and workers > 1 and url == "memory":
        return [("service.workers", "more than one worker needs a shared store, not `memory`")]
    return []


def _gateway_faults(data: dict[str, Any]) -> list[Fault]:
    """Upstream names and prefixes used once; a stdio principal that is declared."""
    found: list[Fault] = []
    upstreams = _entries(data, "upstream")
    for what in ("name", "prefix"):
        seen: dict[str, int] = {}
        for i, upstream in enumerate(upstreams):
            value = (
                upstream.get(what, upstream.get("name")) if what == "prefix" else upstream.get(what)
            )
            if not isinstance(value, str) or not value:
                continue  # kept names: collisions are found when the tools are listed
            if value in seen:
                found.append(
                    (("upstream", i, what), f"{value!r} is already used by upstream[{seen[value]}]")
                )
            seen.setdefault(value, i)
    gateway = data.get("gateway")
    stdio = gateway.get("stdio_principal") if isinstance(gateway, dict) else None
    names = {p.get("name") for p in _entries(data, "principal")}
    if isinstance(stdio, str) and stdio not in names:
        found.append((("gateway", "stdio_principal"), f"no [[principal]] is named {stdio!r}"))
    return found


class FileTables(Table):
    """The whole file: the service's tables, and the gateway's [gateway] and [[upstream]]."""

    store: Store = Store()
    tools: Tools = Tools()
    webhook: list[Webhook] = []
    principal: list[Principal] = []
    identity: Identity = Identity()
    grant: list[Grant] = []
    service: Service = Service()
    budgets: Budgets = Budgets()
    retention: Retention = Retention()
    provenance: Provenance = Provenance()
    telemetry: Telemetry = Telemetry()
    logging: Logging = Logging()
    gateway: Gateway = Gateway()
    upstream: list[Upstream] = []

    @classmethod
    def raw_faults(cls, data: dict[str, Any]) -> list[Fault]:
        """Who may call at all, keys and names given twice, and hosts no grant checks."""
        found: list[Fault] = []
        if not _entries(data, "principal") and not _entries(data, "identity", "jwt"):
            found.append(
                (
                    "principal",
                    "at least one [[principal]] or [[identity.jwt]] is needed: nobody could call",
                )
            )
        found += _twice(
            _entries(data, "principal"),
            "principal",
            "key_sha256",
            "the same key as [[principal]] #{first}",
        )
        found += _twice(
            _entries(data, "webhook"), "webhook", "name", "another [[webhook]] is named {value!r}"
        )
        found += _twice(
            _entries(data, "identity", "jwt"),
            "identity.jwt",
            "issuer",
            "{value!r} is trusted twice",
        )
        return found + _host_grants(data) + _gateway_faults(data) + _workers_fault(data)


TABLES: Final[tuple[type[Table], ...]] = (
    Store, Tools, HttpTool, Webhook, Principal, Identity, Jwt, Grant, OwnerScope, PathScope,
    DomainScope, IdScope, NumberLimit, RateLimit, Service, Budgets, Retention, Provenance,
    FlowRule, Telemetry, Logging,
)  # fmt: skip
"""The tables in the reference's order (the variants of a grant's scope and limits apart)."""


_METHOD_ACTIONS: dict[str, Action] = {"POST": "create", "DELETE": "delete"}


class HttpDeclaration(Protocol):
    """What an HTTP tool declares: its ``[[http_tool]]`` table, or the configuration made of it."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def effect(self) -> EffectClass: ...
    @property
    def method(self) -> str: ...
    @property
    def input_schema(self) -> Mapping[str, object]: ...
    @property
    def output_schema(self) -> Mapping[str, object] | None: ...
    @property
    def capabilities(self) -> Sequence[str]: ...
    @property
    def timeout(self) -> float: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def bearer_secret(self) -> str | None: ...
    @property
    def host_argument(self) -> str | None: ...
    @property
    def reads_untrusted(self) -> bool: ...
    @property
    def reads_private(self) -> bool: ...
    @property
    def roles(self) -> Mapping[str, RoleName]: ...
    @property
    def data_classes(self) -> Mapping[str, DataClassName]: ...
    @property
    def intents(self) -> Sequence[str]: ...


def spec_of(http: HttpDeclaration) -> ToolSpec:
    """The tool an HTTP endpoint declares: its table, or the configuration made of it."""
    if http.host_argument is None:
        resources = None
    else:
        # What a call does to the host it chooses: read for reads, else by method.
        read = http.effect in {"pure", "read"}
        action: Action = "read" if read else _METHOD_ACTIONS.get(http.method, "modify")
        resources = HostResource(http.host_argument, action)
    return ToolSpec(
        name=http.name,
        version=http.version,
        description=http.description,
        input_schema=http.input_schema,
        output_schema=http.output_schema,
        effect=http.effect,
        capabilities=tuple(http.capabilities),
        timeout=http.timeout,
        max_attempts=http.max_attempts,
        idempotency="native_key" if http.effect not in {"pure", "read"} else "none",
        secrets=(http.bearer_secret,) if http.bearer_secret else (),
        reads_untrusted=http.reads_untrusted,
        reads_private=http.reads_private,
        roles=dict(http.roles),
        data_classes=dict(http.data_classes),
        intents=tuple(http.intents),
        resources=resources,
    )
