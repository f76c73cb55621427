"""The official MCP conformance suite against ``mcp-serve`` and ``mcp-gateway`` (R18).

``@modelcontextprotocol/conformance`` (pinned in ``node/package-lock.json``: the
latest release, and the next version's newest pre-release as ``conformance-next``)
runs all its server scenarios over streamable HTTP on loopback, against:

* ``mcp-serve``: ``toolbound mcp-serve --tools conformance_tools:tools --http
  --local-as local`` — the suite's fixtures as a toolbound pack (tools, resources,
  prompts);
* ``mcp-gateway``: ``toolbound mcp-gateway --http --local-as local`` in front of
  ``@modelcontextprotocol/server-everything``, of three of those fixture tools served
  by ``mcp-serve`` over stdio (``conformance_tools:basic``) and of the others from
  ``conformance_upstream.py``, all with ``prefix = ""`` (their own names).

The suite sends no token, hence local mode. A scenario passes when none of its checks
is a FAILURE or a WARNING (the suite's own baseline rule). Every scenario that does
not pass must be listed, with the reason, in ``conformance-expected-failures.json``
under the suite's version; and one that passes must not be (a stale entry fails too,
like a strict xfail). ``docs/mcp.md`` shows the same tables.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from node_support import NODE_DIR, free_port, require_node_modules, serving_command

HERE = Path(__file__).parent
EXPECTED = HERE / "conformance-expected-failures.json"
# Each pinned version of the suite: its package folder under node_modules.
SUITES = {
    "release": NODE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance",
    "next": NODE_DIR / "node_modules" / "conformance-next",
}
EVERYTHING = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")  # the suite's result folders end so
SUITE_TIMEOUT = 200  # seconds for all scenarios of one version; they take about 20

PRINCIPAL = """
[[principal]]
name = "local"
key_sha256 = "{key}"
subject = "local"
tenant = "local"
roles = ["agent"]

[[grant]]
subject = "local"
tenant = "local"
capability = "conformance:call"
actions = ["read"]

[[grant]]
subject = "local"
tenant = "local"
capability = "conformance:confirm"
actions = ["delete"]
confirm = true
"""
# Nobody holds this token: the suite calls in local mode only.
NO_TOKEN = "0" * 64

FIXTURES = (
    "test_simple_text",
    "test_error_handling",
    "json_schema_2020_12_tool",
    "test_reconnection",
)
UPSTREAM_FIXTURES = (
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_progress",
    "test_tool_with_logging",
    "test_logging_tool",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
)
ASKING_FIXTURES = (
    *(f"test_input_required_result_{suffix}"
      for suffix in ("elicitation", "sampling", "list_roots", "request_state", "multiple_inputs",
                     "multi_round", "tampered_state", "capabilities")),
    "test_missing_capability",
    "test_streaming_elicitation",
)  # fmt: skip
EVERYTHING_READS = ("echo", "get-sum", "get-tiny-image", "get-structured-content")


def serve_config(folder: Path) -> Path:
    path = folder / "serve.toml"
    path.write_text(
        f"""
[store]
url = "sqlite:///serve-ledger.db"

[gateway]
name = "toolbound-conformance"
stdio_principal = "local"
{PRINCIPAL.format(key=NO_TOKEN)}
"""
    )
    return path


def gateway_config(folder: Path, inner: Path) -> Path:
    rules = "".join(
        f"""
[upstream.tools.{tool}]
effect = "read"
capability = "conformance:call"
"""
        for tool in FIXTURES
    )
    everything_rules = "".join(
        f"""
[upstream.tools.{tool}]
effect = "read"
capability = "conformance:call"
"""
        for tool in EVERYTHING_READS
    )
    media_rules = "".join(
        f"""
[upstream.tools.{tool}]
effect = "read"
capability = "conformance:call"
"""
        for tool in UPSTREAM_FIXTURES
    )
    asking_rules = "".join(
        f"""
[upstream.tools.{tool}]
effect = "read"
capability = "conformance:call"
"""
        for tool in ASKING_FIXTURES
    )
    toolbound = str(Path(sys.executable).parent / "toolbound")
    pythonpath = ":".join([str(HERE), str(HERE.parents[1] / "src")])  # the code under test
    path = folder / "gateway.toml"
    path.write_text(
        f"""
[store]
url = "sqlite:///gateway-ledger.db"

[gateway]
name = "toolbound-gateway-conformance"
{PRINCIPAL.format(key=NO_TOKEN)}

[[upstream]]
name = "everything"
prefix = ""
command = ["node", "{EVERYTHING / "index.js"}", "stdio"]
{everything_rules}

[[upstream]]
name = "fixtures"
prefix = ""
command = ["{toolbound}", "mcp-serve", "--config", "{inner}", "--tools", "conformance_tools:basic"]
env = {{ PYTHONPATH = "{pythonpath}" }}
{rules}

[[upstream]]
name = "media"
prefix = ""
command = ["{sys.executable}", "{HERE / "conformance_upstream.py"}"]
resources_capability = "conformance:call"
prompts_capability = "conformance:call"
allow_sampling = true
allow_elicitation = true
{media_rules}

[[upstream]]
name = "asking"
prefix = ""
command = ["{sys.executable}", "{HERE / "conformance_asking.py"}"]
prompts_capability = "conformance:call"
allow_sampling = true
allow_elicitation = true
relay_input_requests = true
{asking_rules}
"""
    )
    return path


def suite_version(suite: str) -> str:
    """The version of the pinned suite ``suite`` (``release`` or ``next``)."""
    package = json.loads((SUITES[suite] / "package.json").read_text())
    return str(package["version"])


def run_suite(node: str, suite: str, url: str, out: Path) -> dict[str, str | None]:
    """Every server scenario of the suite: ``None`` if it passed, else what its checks said."""
    cli = SUITES[suite] / "dist" / "index.js"
    subprocess.run(  # noqa: S603 - our own pinned suite
        [node, "--import", "./node20.mjs", str(cli), "server", "--url", url, "--suite", "all",
         "-o", str(out)],
        cwd=NODE_DIR,
        capture_output=True,
        timeout=SUITE_TIMEOUT,
        check=False,  # it exits 1 when any scenario fails; the table below decides
    )  # fmt: skip
    results: dict[str, str | None] = {}
    for checks in sorted(out.glob("server-*/checks.json")):
        scenario = STAMP.sub("", checks.parent.name.removeprefix("server-"))
        bad = [c for c in json.loads(checks.read_text()) if c["status"] in {"FAILURE", "WARNING"}]
        results[scenario] = (
            "; ".join(f"{c['id']}: {c.get('errorMessage', c['status'])}" for c in bad) or None
        )
    return results


@pytest.fixture(scope="module")
def node() -> str:
    return require_node_modules()


@pytest.fixture(scope="module")
def expected() -> dict[str, dict[str, dict[str, str]]]:
    return json.loads(EXPECTED.read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module", params=sorted(SUITES))
def suite(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def scenarios(node: str, suite: str) -> list[str]:
    cli = SUITES[suite] / "dist" / "index.js"
    listing = subprocess.run(  # noqa: S603 - our own pinned suite
        [node, "--import", "./node20.mjs", str(cli), "list", "--server"],
        cwd=NODE_DIR, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    lines = listing.stdout.splitlines()
    return [line.split()[1] for line in lines if line.strip().startswith("- ")]


def check_table(
    target: str,
    suite: str,
    results: dict[str, str | None],
    scenarios: list[str],
    expected: dict[str, dict[str, dict[str, str]]],
) -> None:
    assert sorted(results) == sorted(scenarios), "every scenario ran once"
    failing = {s: why for s, why in results.items() if why is not None}
    listed = expected[suite_version(suite)][target]
    unexpected = {s: why for s, why in failing.items() if s not in listed}
    assert not unexpected, f"{target}: failures not in conformance-expected-failures.json:\n" + (
        "\n".join(f"  {s}: {why}" for s, why in sorted(unexpected.items()))
    )
    stale = sorted(set(listed) - set(failing))
    assert not stale, f"{target}: expected to fail, but they pass (remove them): {stale}"


def test_mcp_serve_passes_the_conformance_suite_except_what_is_listed(
    tmp_path: Path,
    node: str,
    suite: str,
    expected: dict[str, dict[str, dict[str, str]]],
) -> None:
    """mcp-serve with the fixture tools: each scenario passes or is an expected failure."""
    port = free_port()
    config = serve_config(tmp_path)
    args = ["mcp-serve", "--config", str(config), "--tools", "conformance_tools:tools",
            "--http", "--host", "127.0.0.1", "--port", str(port),
            "--local-as", "local"]  # fmt: skip
    with serving_command(args, port=port):
        results = run_suite(node, suite, f"http://127.0.0.1:{port}/mcp", tmp_path / "results")
    check_table("mcp-serve", suite, results, scenarios(node, suite), expected)


def test_mcp_gateway_passes_the_conformance_suite_except_what_is_listed(
    tmp_path: Path,
    node: str,
    suite: str,
    expected: dict[str, dict[str, dict[str, str]]],
) -> None:
    """mcp-gateway before server-everything and the fixtures: each passes or is expected."""
    port = free_port()
    inner = serve_config(tmp_path)
    config = gateway_config(tmp_path, inner)
    args = ["mcp-gateway", "--config", str(config), "--http", "--host", "127.0.0.1",
            "--port", str(port), "--local-as", "local"]  # fmt: skip
    with serving_command(args, port=port):
        results = run_suite(node, suite, f"http://127.0.0.1:{port}/mcp", tmp_path / "results")
    check_table("mcp-gateway", suite, results, scenarios(node, suite), expected)


def test_the_docs_show_the_expected_failures_tables(
    expected: dict[str, dict[str, dict[str, str]]],
) -> None:
    """docs/mcp.md has one table per suite version, each saying what the JSON file says."""
    docs = (HERE.parents[1] / "docs" / "mcp.md").read_text()
    section = docs.split("\n## Conformance", 1)[1].split("\n## ", 1)[0]
    tables = section.split("\n### ")[1:]
    assert sorted(t.split("\n", 1)[0].strip("` ") for t in tables) == sorted(expected)
    for table in tables:
        version = table.split("\n", 1)[0].strip("` ")
        rows = {}
        for line in table.splitlines():
            if line.startswith("| `") and line.count("|") == 4:
                scenario, *cells = (c.strip() for c in line.strip("|").split("|"))
                rows[scenario.strip("`")] = cells
        for target, column in (("mcp-serve", 0), ("mcp-gateway", 1)):
            said = {s: cells[column] for s, cells in rows.items() if cells[column] != "pass"}
            reasons = expected[version][target]
            assert said == {s: f"expected failure — {why}" for s, why in reasons.items()}
