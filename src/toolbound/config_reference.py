"""The configuration reference, ``docs/configuration.md``, generated from the checker's tables.

Which tables and keys exist, each key's type, default, whether it is required and its
allowed values come from :data:`toolbound.config.TABLES`, the table the checker
accepts keys from; this module adds what each table and key means and an example
value. A key added to the checker appears in the reference (``make docs`` writes
it; a test fails while the committed page differs), and :func:`undescribed` names
any key that still needs a meaning and an example here.

The MCP gateway's ``[gateway]`` and ``[[upstream]]`` tables have their own checker in
:mod:`toolbound.mcp.config` (a surface, which this core module does not import); the
page points to their guide.
"""

from __future__ import annotations

from typing import NamedTuple

from toolbound.config import TABLES, ConfigKey, ConfigTable

__all__ = ["KEYS", "TABLE_NOTES", "Described", "key_id", "render_markdown", "undescribed"]


class Described(NamedTuple):
    """What a key means, an example value (TOML text), and what leaving it unset means.

    ``snippet=False`` keeps the example out of the table's TOML snippet (which must be
    valid as it stands) and shows it beside the meaning instead.
    """

    about: str
    example: str
    unset: str = ""
    snippet: bool = True


def table_id(table: ConfigTable) -> str:
    """``grant.scope`` for a plain table, ``grant.scope[kind=path]`` for a variant."""
    return table.path if table.kind is None else f"{table.path}[kind={table.kind}]"


def key_id(table: ConfigTable, key: ConfigKey) -> str:
    """The id a key's description is filed under: ``service.port``, ``grant.scope[kind=id].ids``."""
    return f"{table_id(table)}.{key.name}"


TABLE_NOTES: dict[str, str] = {
    "store": "Where the idempotency ledger, the trace and the service's journal are kept.",
    "tools": "Which tools the service offers.",
    "tools.http": "An HTTP endpoint declared as a tool; see "
    "[HTTP endpoints as tools](service.md#http-endpoints-as-tools).",
    "principal": "Who an API key stands for: the subject of every call made with it comes "
    "from here, never from the arguments.",
    "identity": "Bearer JWTs of trusted identity providers as callers, beside API keys "
    "(`toolbound.identity`). A bearer value that is no API key is tried as a JWT.",
    "identity.jwt": "One issuer whose tokens are trusted: its keys, the algorithms it may "
    "sign with, and how its claims map to a subject, tenant and roles. The service API, "
    "the MCP endpoint, the MCP confirmation endpoint and the gateway's /metrics accept "
    "its tokens; the console's sign-in takes API keys only.",
    "grant": "One capability held by one subject of one tenant; the grant policy decides "
    "from these.",
    "grant.scope[kind=owner]": "Only resources the subject owns.",
    "grant.scope[kind=path]": "Only files under one folder, after resolving symlinks.",
    "grant.scope[kind=domain]": "Only hosts in the listed domains.",
    "grant.scope[kind=id]": "Only resources with the listed ids (a calendar id, say).",
    "grant.limits[kind=number]": "Bounds on a number in the arguments.",
    "grant.limits[kind=rate]": "At most so many calls in a sliding window, per subject.",
    "webhook": "Where the call events go, signed as the Standard Webhooks specification "
    "says, at least once, from an outbox in the journal; see "
    "[webhooks](service.md#webhooks).",
    "service": "The HTTP service and its console.",
    "budgets": "Bounds on every call the service runs.",
    "retention": "How long the service keeps what it answered (its journal).",
    "telemetry": "Where OpenTelemetry spans and metrics go; see [telemetry](telemetry.md).",
    "logging": "What the service and the MCP commands log on standard error: one access "
    "line per HTTP request, and their own messages; see [operations](operations.md#logs). "
    "No key, secret or argument value is ever logged.",
    "provenance": "Flow rules: where the values steering a write may come from, so that "
    "text injected into a tool result cannot choose a recipient (R6). The service, "
    "`mcp-serve` and `mcp-gateway` apply them beside the grants; see "
    "[provenance](provenance.md#in-a-configuration-file).",
    "provenance.rule": "One flow rule by hand, on one tool's parameter, beside the preset.",
}

KEYS: dict[str, Described] = {
    "store.url": Described(
        "`memory`, `sqlite:///PATH` (a relative path is taken from the file's folder) or "
        "`postgresql://…`",
        '"postgresql://toolbound@db.internal/toolbound"',
    ),
    "store.connect_timeout": Described(
        "seconds to open a PostgreSQL connection (libpq's `connect_timeout`)", "3"
    ),
    "store.statement_timeout": Described(
        "seconds one statement may take: PostgreSQL's `statement_timeout` and "
        "`tcp_user_timeout`, SQLite's wait for a writer's lock; past it the request is "
        "answered 503 `storage_unavailable`",
        "5",
    ),
    "store.pool_timeout": Described(
        "seconds a request waits for a pooled PostgreSQL connection; while the server is "
        "down, requests are answered 503 `storage_unavailable` after this long",
        "2",
    ),
    "tools.packs": Described(
        "`MODULE:FUNCTION` entries; each function is called with the `Registry` to fill",
        '["toolbound.packs.example:register"]',
    ),
    "tools.http": Described(
        "HTTP endpoints as tools, usually written as `[[tools.http]]` tables (below)",
        '[{ name = "weather.now", description = "The weather now.", effect = "read", '
        'url = "https://api.weather.example/now", input_schema = { type = "object" } }]',
        snippet=False,
    ),
    "tools.http.name": Described("the tool's name", '"crm.create_contact"'),
    "tools.http.version": Described("the tool's version", '"2"'),
    "tools.http.description": Described(
        "what the model is told the tool does", '"Create a CRM contact."'
    ),
    "tools.http.effect": Described(
        "the effect class; unset, the most conservative one", '"reversible_write"'
    ),
    "tools.http.method": Described("the HTTP method (any case)", '"PUT"'),
    "tools.http.url": Described(
        "where requests go; `{placeholders}` may fill the path and the query, never the "
        "scheme, host or port (unless `host_argument` names the host)",
        '"https://crm.example/contacts"',
    ),
    "tools.http.input_schema": Described(
        "the JSON Schema (2020-12) of the arguments",
        '{ type = "object", properties = { email = { type = "string" } }, '
        'required = ["email"], additionalProperties = false }',
    ),
    "tools.http.output_schema": Described(
        "the JSON Schema a response must satisfy",
        '{ type = "object" }',
        "responses are not checked against a schema",
    ),
    "tools.http.capabilities": Described(
        "the capabilities a call needs; a write tool needs at least one", '["crm:write"]'
    ),
    "tools.http.timeout": Described("the tool's own deadline", "5"),
    "tools.http.max_attempts": Described("how many attempts the retry matrix may make", "3"),
    "tools.http.bearer_secret": Described(
        "the name of the secret sent as a bearer token",
        '"crm_token"',
        "no Authorization header",
    ),
    "tools.http.host_argument": Described(
        "a required argument that is the URL's host (`url` then has `{host}` there); every "
        "`[[grant]]` of the tool's capabilities needs a domain scope",
        '"host"',
        "the host is the one in `url`",
        snippet=False,
    ),
    "tools.http.allow_destinations": Described(
        "internal networks (CIDR) and host names the tool may connect to; other internal "
        "addresses are refused",
        '["10.20.0.0/16", "crm.internal"]',
    ),
    "tools.http.reads_untrusted": Described(
        "whether its results may hold text others wrote (a web page, an email); `false` "
        "makes them a trusted source for the flow rules",
        "false",
    ),
    "tools.http.reads_private": Described(
        "whether its results hold data that must not leave (a mailbox, an account)",
        "false",
    ),
    "tools.http.roles": Described(
        "what each parameter does for the flow rules: `destination`, `target`, `secret`, "
        "`content` or `quantity` (`none`: left to the grants), by JSON pointer",
        '{ "/email" = "destination" }',
        "read from the input schema",
    ),
    "tools.http.intents": Described(
        "verbs or phrases a person uses when they want this write: with no task scope "
        "declared, it runs unasked only when the user's words express one",
        '["book", "reserve"]',
        "none: the user's words do not narrow it",
    ),
    "tools.http.data_classes": Described(
        "the kinds of private data fields of its results hold, by JSON pointer into the "
        "output: they leave in a write only when the user's words ask for that kind",
        '{ "/passport" = "identity_document" }',
        "read from the field names and the words beside the values",
    ),
    "principal.name": Described(
        "the principal's name (in logs and `toolbound revoke-sessions`)", '"agent"'
    ),
    "principal.key_sha256": Described(
        "the SHA-256 of the API key (`toolbound hash-key`), never the key itself",
        '"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"',
    ),
    "principal.subject": Described("the subject every call with this key is made for", '"agent-1"'),
    "principal.tenant": Described("the subject's tenant", '"acme"'),
    "principal.roles": Described(
        "what the key may do: submit calls, confirm them, read traces and reconcile",
        '["agent"]',
    ),
    "webhook.name": Described(
        "the webhook's name, in logs and the deliveries' record", '"ops-desk"'
    ),
    "webhook.url": Described("where each event is POSTed", '"https://hooks.example.com/toolbound"'),
    "webhook.secret_env": Described(
        "the environment variable holding the signing secret (`whsec_` and base64)",
        '"TOOLBOUND_HOOK_SECRET"',
    ),
    "webhook.events": Described(
        "the call events sent: a call parked for a person, decided, finished after a "
        "decision, of unknown outcome, reconciled",
        '["parked", "decided"]',
    ),
    "webhook.tenant": Described(
        "only this tenant's calls", '"acme"', "every tenant's calls", snippet=False
    ),
    "webhook.allow_destinations": Described(
        "internal networks or hosts the webhook may reach (the egress rules of HTTP tools "
        "refuse them otherwise)",
        '["10.20.0.0/16"]',
        snippet=False,
    ),
    "webhook.timeout": Described("seconds to wait for the receiver's answer", "5.0"),
    "identity.jwt": Described(
        "the trusted issuers, one `[[identity.jwt]]` table each",
        "[]",
        "API keys only",
        snippet=False,
    ),
    "identity.jwt.issuer": Described(
        "the token's `iss`, exactly; picks the table a token is checked against",
        '"https://login.example.com/"',
    ),
    "identity.jwt.audience": Described("what the token's `aud` must name", '"toolbound"'),
    "identity.jwt.jwks_url": Described(
        "where the issuer publishes its public keys (a JWKS document)",
        '"https://login.example.com/.well-known/jwks.json"',
    ),
    "identity.jwt.jwks_file": Described(
        "a JWKS document on disk instead of `jwks_url`, relative to this file; re-read like a URL",
        '"jwks.json"',
        snippet=False,
    ),
    "identity.jwt.secret_env": Described(
        "for HS* algorithms only, instead of a JWKS: the environment variable holding "
        "the shared secret",
        '"TOOLBOUND_JWT_SECRET"',
        snippet=False,
    ),
    "identity.jwt.algorithms": Described(
        "the algorithms a token may be signed with; never `none`, and HS* never beside "
        "public-key algorithms",
        '["RS256"]',
    ),
    "identity.jwt.clock_skew": Described(
        "seconds of grace on `exp`, `nbf` and `iat` for clocks that disagree", "30"
    ),
    "identity.jwt.required_claims": Described(
        "claims a token must carry besides `exp`, `iss` and `aud`", '["iat", "jti"]'
    ),
    "identity.jwt.subject_claim": Described(
        "the claim naming the subject (and the principal)", '"oid"'
    ),
    "identity.jwt.tenant_claim": Described(
        "the claim naming the tenant; set this or `tenant`", '"tid"'
    ),
    "identity.jwt.tenant": Described(
        "the tenant of every token of this issuer; set this or `tenant_claim`",
        '"acme"',
        snippet=False,
    ),
    "identity.jwt.roles_claim": Described(
        "the claim listing roles: an array, or a space-separated string", '"groups"'
    ),
    "identity.jwt.role_map": Described(
        "the token's role names → agent, approver or operator; empty, those names themselves",
        '{ "Tools.Approve" = "approver" }',
    ),
    "identity.jwt.jwks_ttl": Described("seconds the fetched keys are kept", "600"),
    "identity.jwt.jwks_refresh_interval": Described(
        "the least seconds between fetches a token naming an unknown key id may cause",
        "10",
    ),
    "grant.subject": Described("who holds the capability", '"agent-1"'),
    "grant.tenant": Described("the subject's tenant", '"acme"'),
    "grant.session": Described(
        "the one session the grant holds for", '"s-42"', "every session of the subject"
    ),
    "grant.capability": Described("the capability", '"orders:write"'),
    "grant.actions": Described("which actions it allows, at least one", '["create", "modify"]'),
    "grant.confirm": Described("whether a person confirms each call", "true"),
    "grant.scope": Described(
        "which resources, by `kind` (the tables below)", '{ kind = "owner" }', "any resource"
    ),
    "grant.limits": Described(
        "bounds on arguments and call rates, by `kind` (the tables below)",
        '[{ kind = "rate", max_calls = 10, per_seconds = 60 }]',
    ),
    "grant.scope[kind=path].root": Described("the folder", '"/srv/files"'),
    "grant.scope[kind=domain].domains": Described("the domains", '["example.com"]'),
    "grant.scope[kind=domain].allow_subdomains": Described(
        "whether subdomains count as well", "true"
    ),
    "grant.scope[kind=id].ids": Described("the ids", '["cal-team", "cal-mira"]'),
    "grant.limits[kind=number].pointer": Described("where the number is", '"/amount"'),
    "grant.limits[kind=number].minimum": Described(
        "the least value allowed", "1", "no lower bound (one of the two bounds is needed)"
    ),
    "grant.limits[kind=number].maximum": Described(
        "the largest value allowed", "100", "no upper bound (one of the two bounds is needed)"
    ),
    "grant.limits[kind=rate].max_calls": Described("calls allowed in the window", "10"),
    "grant.limits[kind=rate].per_seconds": Described("the window", "60"),
    "service.host": Described("where `toolbound serve` listens", '"0.0.0.0"'),
    "service.port": Described("the port it listens on", "8443"),
    "service.four_eyes": Described(
        "whether nobody may approve a call made for their own subject", "true"
    ),
    "service.console_secret_env": Described(
        "the environment variable holding the console's session-signing secret, which "
        "replicas behind one address must share",
        '"TOOLBOUND_CONSOLE_SECRET"',
        "a random secret per process (a restart logs everyone out)",
    ),
    "service.console_trace_url": Described(
        "a tracing UI's page for one trace, with {trace_id} where the id goes: the "
        "console links each invocation's trace id there",
        '"https://jaeger.example/trace/{trace_id}"',
        "trace ids are shown, not linked",
    ),
    "service.tool_approvals": Described(
        "the MCP gateway's approvals file, relative to this file: the console reviews "
        "its quarantined tools (/console/tools) and the gateway keeps its approvals there "
        "unless [gateway] approvals names another file",
        '"gateway.approvals.json"',
        "no tool review in the console",
    ),
    "service.max_body_bytes": Described(
        "the largest request body, API and console; a larger one is answered 413", "1048576"
    ),
    "service.confirmation_ttl": Described(
        "how long a parked call waits for a person before its confirmation expires", "600"
    ),
    "service.lease": Described(
        "how long a call stays its replica's without a renewal (renewed every third of "
        "it); after that another replica sharing the store takes it over",
        "10",
    ),
    "service.io_threads": Described(
        "threads of the one pool every blocking store and identity call runs on, off the "
        "event loop; a proposal holds one while its pipeline runs",
        "64",
    ),
    "service.cookie_secure": Described(
        "mark the console's session cookie `Secure`, so browsers send it over HTTPS only "
        "(`toolbound serve --cookie-secure` too)",
        "true",
    ),
    "service.max_connections": Described(
        "connections and requests `toolbound serve` takes at once (uvicorn's "
        "`limit_concurrency`); more are answered 503 at once",
        "2000",
    ),
    "service.keep_alive": Described(
        "seconds an idle connection is kept for its next request (uvicorn's "
        "`timeout_keep_alive`, whole seconds)",
        "10",
    ),
    "service.header_timeout": Described(
        "seconds a client has to send a request's line and headers, from its first byte "
        "(or from connecting); a slower one is disconnected",
        "5",
    ),
    "service.body_timeout": Described(
        "seconds a client has to send a request body once its head arrived; a slower "
        "one is answered 408 `body_timeout`",
        "10",
    ),
    "budgets.timeout": Described(
        "the request deadline; a call's deadline is the shorter of this and the tool's timeout",
        "30",
        "each tool's own timeout",
    ),
    "budgets.result_budget": Described(
        "the most bytes of one result sent back to the model (a tool's smaller budget "
        "still applies)",
        "16384",
        "each tool's own budget",
    ),
    "retention.days": Described("days before what the service answered is purged", "90"),
    "telemetry.exporter": Described("where spans and metrics go", '"otlp"'),
    "telemetry.endpoint": Described(
        "the OTLP/HTTP collector (`/v1/traces` and `/v1/metrics` are added)",
        '"http://collector.internal:4318"',
        "the exporter's own default",
    ),
    "telemetry.metrics": Described(
        "export the metrics (`gen_ai.execute_tool.duration`, the MCP durations) beside the "
        "spans; `false` for a collector that takes traces only",
        "false",
    ),
    "telemetry.service_name": Described(
        "`service.name` on the spans and metrics", '"toolbound-eu"'
    ),
    "logging.level": Described(
        "the least severe messages written; `info` includes the access log, `warning` "
        "leaves it out; `--log-level` on the command line wins",
        '"warning"',
    ),
    "logging.format": Described(
        "`text` for a person reading the terminal, `json` for one JSON object a line "
        "(for a log shipper)",
        '"json"',
    ),
    "provenance.preset": Described(
        "`guard_writes`: rules for every write tool from its parameters' roles "
        "(destinations, targets and secrets need a trusted source; private data may not "
        "flow to a destination the user did not name)",
        '"guard_writes"',
        "no preset",
    ),
    "provenance.trust": Described(
        "tools whose results count as trusted sources (besides those declared "
        "`reads_untrusted = false`), or single fields of them (`tool#/pointer`: only a "
        "value that was that whole field)",
        '["crm.lookup", "drive.search#/id"]',
    ),
    "provenance.min_length": Described(
        "the shortest value of a role the preset accepts at all",
        "{ destination = 5, secret = 6 }",
        "destination 3, target 1, secret 4",
    ),
    "provenance.rule": Described(
        "flow rules by hand, usually written as `[[provenance.rule]]` tables (below)",
        '[{ tool = "mail.send", parameter = "/to", kind = "trusted_source" }]',
        snippet=False,
    ),
    "provenance.rule.tool": Described("the tool (`name` or `name@version`)", '"mail.send"'),
    "provenance.rule.parameter": Described(
        "a JSON pointer into the arguments; the rule covers everything below it",
        '"/to"',
        "every argument",
    ),
    "provenance.rule.kind": Described(
        "`trusted_source`: the value must come from the user, the configuration or a "
        "trusted tool; `no_private_data`: no private data may flow into it",
        '"trusted_source"',
    ),
    "provenance.rule.strict": Described(
        "(`trusted_source`) a value found in no trusted source breaks the rule; `false` "
        "stops only values whose sole sources are untrusted",
        "false",
    ),
    "provenance.rule.trust": Described(
        "(`trusted_source`) more tools whose results count as trusted for this rule",
        '["directory.lookup"]',
    ),
    "provenance.rule.otherwise": Described(
        "what a broken rule asks for: `confirm` parks the call for a person, `refuse` "
        "refuses it with the parameter's pointer",
        '"refuse"',
    ),
}


def undescribed() -> list[str]:
    """Ids of keys and tables in the checker's table that this module does not describe yet."""
    missing = [table_id(t) for t in TABLES if table_id(t) not in TABLE_NOTES]
    missing += [key_id(t, k) for t in TABLES for k in t.keys if key_id(t, k) not in KEYS]
    return missing


def render_markdown() -> str:
    """``docs/configuration.md``: every table and key the checker accepts."""
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by `make docs` from toolbound.config.TABLES (the keys the checker",
        "     accepts) and toolbound.config_reference (what they mean); edit those instead. -->",
        "",
        "One TOML file configures the service (`toolbound serve --config FILE`) and the MCP",
        "gateway. `toolbound check-config FILE` reads it as they do and lists every problem",
        "with its key path (`grant[2].limits[0].pointer: …`); a key that is not listed here",
        "is a problem too. Loading opens and imports nothing. How the pieces fit together:",
        "[the service](service.md).",
        "",
        "Defaults and examples are written as TOML. A key with neither a default nor",
        "*required* is unset unless given; its meaning column says what unset means.",
        "",
    ]
    for table in TABLES:
        out += _table_section(table)
    out += [
        "## The MCP gateway's tables",
        "",
        "`toolbound mcp-gateway` reads `[gateway]` and `[[upstream]]` from the same file, with",
        "a checker of its own (`toolbound.mcp.config`); they are described, with an annotated",
        "example, in [the MCP guide](mcp.md#the-gateway).",
    ]
    return "\n".join(out).rstrip("\n") + "\n"


def _table_section(table: ConfigTable) -> list[str]:
    tid = table_id(table)
    if table.kind is not None:
        head = f'## `{table.path}`: `kind = "{table.kind}"`'
    elif table.array:
        head = f"## `[[{table.path}]]`"
    else:
        head = f"## `[{table.path}]`"
    out = [head, "", TABLE_NOTES.get(tid, "*Not described yet.*"), ""]
    if table.array:
        out += ["An array of tables: write the header once for each entry.", ""]
    if table.kind is not None:
        out += [f'An inline table with `kind = "{table.kind}"`.', ""]
    if not table.keys:
        return [*out, "No other keys.", "", *_example(table), ""]
    out += ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key in table.keys:
        described = KEYS.get(key_id(table, key))
        out.append(
            f"| `{key.name}` | {_type(key)} | {_default(key, described)} "
            f"| {_cell(_meaning(key, described))} |"
        )
    return [*out, "", *_example(table), ""]


def _meaning(key: ConfigKey, described: Described | None) -> str:
    if described is None:
        return "*not described yet*"
    if described.snippet:
        return described.about
    return f"{described.about}; for example `{key.name} = {described.example}`"


def _type(key: ConfigKey) -> str:
    if not key.choices:
        return _cell(key.type)
    values = ", ".join(f"`{c}`" for c in sorted(key.choices))
    return _cell(f"{key.type}: {values}")


def _default(key: ConfigKey, described: Described | None) -> str:
    if key.required:
        return "*required*"
    if key.default is not None:
        return f"`{key.default}`"
    unset = described.unset if described and described.unset else ""
    return _cell(f"unset: {unset}" if unset else "unset")


def _example(table: ConfigTable) -> list[str]:
    """A TOML snippet that sets every key of ``table`` to its example value."""
    values = [
        (key.name, described.example)
        for key in table.keys
        if (described := KEYS.get(key_id(table, key))) is not None and described.snippet
    ]
    if table.kind is not None:
        fields = ", ".join([f'kind = "{table.kind}"', *(f"{k} = {v}" for k, v in values)])
        name = table.path.rsplit(".", 1)[-1]
        line = f"{name} = {{ {fields} }}" if name == "scope" else f"{name} = [{{ {fields} }}]"
        return ["```toml", line, "```"]
    header = f"[[{table.path}]]" if table.array else f"[{table.path}]"
    return ["```toml", header, *(f"{k} = {v}" for k, v in values), "```"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
