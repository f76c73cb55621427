"""R18: a configuration problem says where it is written, as the file reads, and what to write.

Each problem carries the line and column of its key, the key path with entries counted
from 1 as they appear (``[[grant]] #2``), the closest known key for an unknown one, and
any string value may come from the environment or a file without ever being shown.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from toolbound._toml_positions import key_positions
from toolbound.cli import _cli
from toolbound.config import ConfigError, hash_key, load_config, parse_config

KEY = hash_key("k")

PRINCIPAL = f"""
[[principal]]
name = "agent"
key_sha256 = "{KEY}"
subject = "agent-1"
tenant = "acme"
roles = ["agent"]
"""

GRANTS = """
[[grant]]
subject = "agent-1"
tenant = "acme"
capability = "notes:write"
actions = ["create"]

[[grant]]
subject = "agent-1"
tenant = "acme"
capability = "payments:send"
actions = ["create", "send"]
limits = [{ kind = "rate", max_calls = 2, per_seconds = 60 },
          { kind = "number", pointer = "amount", maximum = 100 }]
"""


def _problems(text: str, **kwargs: object) -> dict[str, object]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, **kwargs)  # type: ignore[arg-type]
    return {issue.path: issue for issue in caught.value.issues}


def _line_of(text: str, words: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if words in line)


def test_each_problem_has_the_line_and_column_of_its_key():
    """A key in a table, in the second [[grant]], and inside an inline table on a later line."""
    text = PRINCIPAL + GRANTS + '\n[service]\nport = "eighty"\n'
    found = _problems(text)
    port = found["service.port"]
    assert (port.line, port.column) == (_line_of(text, "port = "), 1)
    actions = found["grant[1].actions"]
    assert (actions.line, actions.column) == (_line_of(text, '"send"'), 1)
    pointer = found["grant[1].limits[1].pointer"]
    line = _line_of(text, 'pointer = "amount"')
    assert (pointer.line, pointer.column) == (
        line,
        text.splitlines()[line - 1].index("pointer") + 1,
    )


def test_entries_are_counted_from_one_as_the_file_reads():
    """The second [[grant]] is `[[grant]] #2`; the path scripts match on keeps its index."""
    found = _problems(PRINCIPAL + GRANTS)
    actions = found["grant[1].actions"]
    assert actions.where == "[[grant]] #2.actions"
    assert "send" in actions.message
    assert "item #2" in actions.message
    assert found["grant[1].limits[1].pointer"].where == "[[grant]] #2.limits #2.pointer"


def test_a_problem_beside_a_file_wide_one_keeps_its_words():
    """No principal at all, and a port that is no number: each said in the file's words."""
    found = _problems('[service]\nport = "eighty"\n')
    assert found["service.port"].message == "must be an integer, got 'eighty'"
    assert "at least one [[principal]]" in found["principal"].message


def test_an_unknown_key_gets_the_closest_known_one():
    """`prot` in [service] suggests `port`; a key like none of them suggests nothing."""
    found = _problems(PRINCIPAL + "\n[service]\nprot = 80\nzzzzzz = 1\n")
    assert "did you mean 'port'?" in found["service.prot"].message
    assert "did you mean" not in found["service.zzzzzz"].message
    assert "unknown key" in found["service.zzzzzz"].message
    top = _problems(PRINCIPAL + "\n[servise]\nport = 80\n")
    assert "did you mean 'service'?" in top["servise"].message
    scope = _problems(
        PRINCIPAL
        + GRANTS.replace(
            'actions = ["create"]',
            'actions = ["create"]\nscope = { kind = "domain", domain = ["x.example"] }',
        ).replace(', "send"', "")
    )
    assert "did you mean 'domains'?" in scope["grant[0].scope.domain"].message


def test_the_store_url_may_come_from_the_environment(monkeypatch, tmp_path):
    """`url_env` reads the URL when the file is loaded; the value is never in a message."""
    monkeypatch.setenv("TB_STORE_URL", "sqlite:///from-env.db")
    config = parse_config(
        PRINCIPAL + '[store]\nurl_env = "TB_STORE_URL"\n', source=tmp_path / "t.toml"
    )
    assert config.store_url == f"sqlite:///{tmp_path / 'from-env.db'}"
    secret = "mysql://root:hunter2-secret@db"  # noqa: S105 - a test value
    monkeypatch.setenv("TB_STORE_URL", secret)
    with pytest.raises(ConfigError) as caught:
        parse_config(PRINCIPAL + '[store]\nurl_env = "TB_STORE_URL"\n')
    (issue,) = caught.value.issues
    assert issue.path == "store.url"
    assert "sqlite:///PATH" in issue.message
    assert "hunter2" not in str(caught.value)


def test_an_unset_variable_or_an_unreadable_file_is_named(monkeypatch, tmp_path):
    monkeypatch.delenv("TB_UNSET_URL", raising=False)
    text = PRINCIPAL + '[store]\nurl_env = "TB_UNSET_URL"\n'
    (issue,) = _problems(text).values()
    assert issue.path == "store.url_env"
    assert "TB_UNSET_URL" in issue.message
    assert "unset" in issue.message
    assert (issue.line, issue.column) == (_line_of(text, "url_env"), 1)
    (missing,) = _problems(
        PRINCIPAL + '[store]\nurl_file = "no-such-file"\n', source=tmp_path / "t.toml"
    ).values()
    assert missing.path == "store.url_file"
    assert "cannot read" in missing.message
    (both,) = _problems(PRINCIPAL + '[store]\nurl = "memory"\nurl_file = "x"\n').values()
    assert "not both" in both.message


def test_a_value_from_a_file_is_read_relative_to_the_configuration(tmp_path):
    """`KEY_file` works for any string key: a secret file beside the configuration."""
    (tmp_path / "store-url").write_text("postgresql://tb:s3cret@db.internal/tb\n")
    (tmp_path / "host").write_text("0.0.0.0\n")
    path = tmp_path / "toolbound.toml"
    path.write_text(PRINCIPAL + '[store]\nurl_file = "store-url"\n[service]\nhost_file = "host"\n')
    config = load_config(path)
    assert config.store_url == "postgresql://tb:s3cret@db.internal/tb"
    assert config.host == "0.0.0.0"  # noqa: S104 - read, not bound


def test_a_key_of_its_own_ending_in_env_keeps_its_meaning(monkeypatch):
    """`[service] console_secret_env` names a variable read later, not at load."""
    monkeypatch.delenv("TB_CONSOLE_SECRET", raising=False)
    config = parse_config(PRINCIPAL + '[service]\nconsole_secret_env = "TB_CONSOLE_SECRET"\n')
    assert config.console_secret_env == "TB_CONSOLE_SECRET"  # noqa: S105 - a variable's name
    (issue,) = _problems(PRINCIPAL + '[service]\nport_env = "TB_PORT"\n').values()
    assert issue.path == "service.port_env"
    assert "did you mean 'port'?" in issue.message


def test_check_config_prints_file_line_and_column(tmp_path):
    """check-config: FILE:LINE:COLUMN, the key as the file reads; --json carries both forms."""
    path = tmp_path / "bad.toml"
    text = PRINCIPAL + GRANTS
    path.write_text(text)
    line = _line_of(text, '"send"')
    result = CliRunner().invoke(_cli, ["check-config", str(path)], terminal_width=300)
    assert result.exit_code == 1
    assert f"{path}:{line}:1: [[grant]] #2.actions:" in result.output
    as_json = CliRunner().invoke(_cli, ["check-config", str(path), "--json"])
    problem = next(
        p for p in json.loads(as_json.stdout)["problems"] if p["path"] == "grant[1].actions"
    )
    assert (problem["where"], problem["line"], problem["column"]) == (
        "[[grant]] #2.actions",
        line,
        1,
    )


def test_key_positions_step_over_strings_comments_and_multi_line_arrays():
    text = (
        '# [not] a table\ntitle = "a = [b]"  # x = 1\n'
        "[a.b]\nc = [\n  1,  # one\n  { d = 'e' },\n]\n"
        '"quoted key" = """\n[x]\n"""\n'
        "[[t]]\n[[t]]\nu.v = 1\n"
    )
    found = key_positions(text)
    assert found[("title",)] == (2, 1)
    assert ("not",) not in found
    assert found[("a", "b")] == (3, 1)
    assert found[("a", "b", "c", 1, "d")] == (6, 5)
    assert found[("a", "b", "quoted key")] == (8, 1)
    assert ("x",) not in found
    assert found[("t", 1)] == (12, 1)
    assert found[("t", 1, "u", "v")] == (13, 1)


def test_the_console_secret_may_be_read_from_a_file(tmp_path):
    """`console_secret_file`: the console signs with it; beside console_secret_env it is refused."""
    (tmp_path / "console.secret").write_text("shared-by-every-replica\n")
    text = PRINCIPAL + '[service]\nconsole_secret_file = "console.secret"\n'
    config = parse_config(text, source=tmp_path / "t.toml")
    assert config.console_secret() == b"shared-by-every-replica"
    assert "shared-by-every-replica" not in repr(config)
    (issue,) = _problems(
        text + 'console_secret_env = "TB_CONSOLE"\n', source=tmp_path / "t.toml"
    ).values()
    assert issue.path == "service.console_secret_env"
    assert "not both" in issue.message
