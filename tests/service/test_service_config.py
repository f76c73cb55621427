"""R18: one TOML file configures the service; every problem is named by its key path."""

from __future__ import annotations

import pytest

from toolbound.config import ConfigError, hash_key, load_config, parse_config

KEY = hash_key("k")

MINIMAL = f"""
[store]
url = "sqlite:///data/toolbound.db"

[tools]
packs = ["toolbound.packs.example:register"]

[[principal]]
name = "agent"
key_sha256 = "{KEY}"
subject = "agent-1"
tenant = "acme"
roles = ["agent"]

[[grant]]
subject = "agent-1"
tenant = "acme"
capability = "payments:send"
actions = ["create"]
confirm = true
limits = [{{ kind = "number", pointer = "/amount", maximum = 100 }}]
"""


def test_a_valid_file_loads_with_defaults(tmp_path):
    path = tmp_path / "toolbound.toml"
    path.write_text(MINIMAL)
    config = load_config(path)
    assert config.store_url == f"sqlite:///{tmp_path / 'data' / 'toolbound.db'}"
    assert (config.host, config.port, config.four_eyes) == ("127.0.0.1", 8780, False)
    assert config.principal_for("k").subject == "agent-1"
    assert config.principal_for("other") is None
    assert {t.spec.ref for t in config.build_registry()} == {
        "weather.forecast@v1",
        "payments.send@v1",
    }


def test_the_console_links_traces_to_the_configured_ui():
    """[service] console_trace_url reaches the configuration the console reads."""
    url = "https://jaeger.example/trace/{trace_id}"
    config = parse_config(MINIMAL + f"\n[service]\nconsole_trace_url = '{url}'\n")
    assert config.console_trace_url == url


def test_the_service_lease_is_configured_in_seconds():
    """[service] lease sets how long a replica holds its calls unrenewed (30 s unset)."""
    assert parse_config(MINIMAL).lease.total_seconds() == 30
    assert parse_config(MINIMAL + "\n[service]\nlease = 2.5\n").lease.total_seconds() == 2.5
    with pytest.raises(ConfigError) as info:
        parse_config(MINIMAL + "\n[service]\nlease = 0\n")
    assert [i.path for i in info.value.issues] == ["service.lease"]


def test_the_key_itself_is_never_stored():
    config = parse_config(MINIMAL)
    assert "key_sha256" not in repr(config.principals[0])
    assert config.principals[0].key_sha256 == KEY


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ('[store]\nurl = "mysql://x"', "store.url", "sqlite:///PATH"),
        ("[service]\nport = 70000", "service.port", "port number"),
        ("[service]\nlisten = 1", "service.listen", "unknown key"),
        ("[telemetry]\nexporter = 'jaeger'", "telemetry.exporter", "none, console or otlp"),
        ("bogus = 1", "bogus", "unknown key"),
        (
            "[service]\nconsole_trace_url = 'ftp://x/{trace_id}'",
            "service.console_trace_url",
            "http",
        ),
        ("[service]\nconsole_trace_url = 'https://x/'", "service.console_trace_url", "{trace_id}"),
    ],
)
def test_each_problem_names_its_key(change, path, words):
    text = change + "\n" + MINIMAL.replace('[store]\nurl = "sqlite:///data/toolbound.db"', "")
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    issue = next(i for i in info.value.issues if i.path == path)
    assert words in issue.message


def test_every_problem_is_reported_at_once():
    text = f"""
[[principal]]
name = "a"
key_sha256 = "not-a-hash"
subject = "s"
tenant = "t"
roles = ["admin"]

[[grant]]
subject = "s"
tenant = "t"
capability = "c"
actions = ["write"]
scope = {{ kind = "path", root = "relative/dir" }}
limits = [{{ kind = "number", pointer = "amount" }}]

[[principal]]
name = "b"
key_sha256 = "{KEY}"
subject = "s"
tenant = "t"
roles = ["agent"]

[[principal]]
name = "c"
key_sha256 = "{KEY}"
subject = "s2"
tenant = "t"
roles = ["agent"]
"""
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    paths = {i.path for i in info.value.issues}
    assert paths >= {
        "principal[0].key_sha256",
        "principal[0].roles",
        "grant[0].actions",
        "grant[0].scope.root",
        "grant[0].limits[0].pointer",
        "grant[0].limits[0]",
        "principal[2].key_sha256",
    }
    assert "problem(s)" in str(info.value)


def test_no_principal_means_nobody_could_call():
    with pytest.raises(ConfigError, match="at least one"):
        parse_config('[store]\nurl = "memory"')


def test_toml_syntax_errors_are_config_errors():
    with pytest.raises(ConfigError, match="not valid TOML"):
        parse_config("[store\n")


def test_a_pack_that_cannot_be_loaded_is_named():
    config = parse_config(MINIMAL.replace("toolbound.packs.example:register", "nowhere:fn"))
    with pytest.raises(ConfigError, match="cannot load nowhere:fn"):
        config.build_registry()


def test_http_tools_default_to_the_most_conservative_effect():
    text = (
        MINIMAL
        + """
[[tools.http]]
name = "crm.create_contact"
description = "Create a CRM contact."
capabilities = ["crm:write"]
url = "https://crm.example/contacts"
[tools.http.input_schema]
type = "object"
properties = { email = { type = "string" } }
required = ["email"]
additionalProperties = false
"""
    )
    config = parse_config(text)
    (http,) = config.http_tools
    assert http.effect == "irreversible_write"
    spec = next(t.spec for t in config.build_registry() if t.spec.name == "crm.create_contact")
    assert spec.is_write
    assert spec.idempotency == "native_key"


def test_an_http_tool_the_registry_would_refuse_is_refused_at_load():
    text = (
        MINIMAL
        + """
[[tools.http]]
name = "crm.create_contact"
url = "https://crm.example/contacts"
input_schema = { type = "object" }
"""
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    (issue,) = info.value.issues
    assert issue.path == "tools.http[0]"
    assert "description is empty" in issue.message
