"""Real MCP servers through the gateway, each started the way its README says (R18).

The corpus: ``@modelcontextprotocol/server-everything`` over stdio and streamable HTTP,
``server-filesystem``, ``server-memory`` and ``server-sequential-thinking`` (npm,
pinned in ``node/package.json``), ``mcp-server-time`` and ``mcp-server-git`` (PyPI, the
dev group), a server written with the Python SDK's FastMCP API (``corpus_fastmcp.py``)
and one with the TypeScript SDK and zod schemas that share parts through ``$ref``
(``node/zod_server.mjs``). Nothing is filtered: every TypeScript server declares
draft-07 on every schema, FastMCP none (2020-12).

For each server, through the gateway and the SDK's client: every tool it lists is
served (none broken, none quarantined, none left out of the table below), every tool
that can run offline is called once and succeeds, and its resources and prompts are
listed, read and got where it offers them. docs/mcp.md's "works with" table is this.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from mcp import Client
from mcp_support import MIRA, gateway, run, write_config
from node_support import NODE_DIR, free_port, require_node_modules, wait_for_port

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

HERE = NODE_DIR.parent
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@dataclass(frozen=True, slots=True)
class Server:
    """One server of the corpus: how it starts, and what is asked of each tool."""

    name: str
    start: Callable[[Path], str]
    """Its ``[[upstream]]`` lines (command or url, env) for a scratch folder."""
    calls: dict[str, Callable[[Path], dict[str, Any]]]
    """Each tool called, in order, with its arguments for the scratch folder."""
    not_called: dict[str, str] = field(default_factory=dict)
    """Each tool listed but not called, with why."""
    writes: frozenset[str] = frozenset()
    resources: bool = False
    prompts: dict[str, dict[str, str]] = field(default_factory=dict)
    node: bool = True

    def config(self, folder: Path) -> str:
        """The gateway's configuration for this server alone, every tool granted to mira."""
        rules = "".join(
            f'\n[upstream.tools."{tool}"]\n'
            f'effect = "{"reversible_write" if tool in self.writes else "read"}"\n'
            f'capability = "{self.name}:use"\n'
            for tool in (*self.calls, *self.not_called)
        )
        grants = "".join(
            f"""
[[grant]]
subject = "mira"
tenant = "acme"
capability = "{capability}"
actions = ["read", "create", "modify", "delete"]
"""
            for capability in (f"{self.name}:use", f"{self.name}:resources", f"{self.name}:prompts")
        )
        return f"""
[[upstream]]
name = "{self.name}"
timeout = 20
{self.start(folder)}
{rules}
{grants}"""


def npx(package: str, *args: str) -> Callable[[Path], str]:
    """``npx <package> ARGS`` in the pinned packages' folder, as each README starts it."""

    def start(folder: Path) -> str:
        argv = ", ".join(f'"{a}"' for a in ("npx", "--no-install", package, *args))
        memory = f'env = {{ MEMORY_FILE_PATH = "{folder}/memory.jsonl" }}'
        return f'command = [{argv}]\ncwd = "{NODE_DIR}"\n{memory}'

    return start


def python(*args: str) -> Callable[[Path], str]:
    def start(folder: Path) -> str:
        argv = ", ".join(f'"{a}"' for a in (sys.executable, *args))
        return f"command = [{argv}]".replace("{folder}", str(folder))

    return start


def _none(_: Path) -> dict[str, Any]:
    return {}


def _args(**values: Any) -> Callable[[Path], dict[str, Any]]:
    """Arguments that do not depend on the scratch folder."""
    return lambda _: values


EVERYTHING_CALLS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "echo": _args(message="hello"),
    "get-annotated-message": _args(messageType="success", includeImage=True),
    "get-env": _none,
    "get-resource-links": _args(count=2),
    "get-resource-reference": _args(resourceType="Text", resourceId=1),
    "get-structured-content": _args(location="Chicago"),
    "get-sum": _args(a=2, b=3),
    "get-tiny-image": _none,
    "toggle-simulated-logging": _none,
    "toggle-subscriber-updates": _none,
    "trigger-long-running-operation": _args(duration=0.2, steps=2),
}
EVERYTHING_NOT_CALLED = {
    "trigger-sampling-request": "asks the client for a sampling, relayed only where "
    "allow_sampling says so (test_mcp_relay covers it)",
    "trigger-elicitation-request": "asks the client for an elicitation, relayed only where "
    "allow_elicitation says so (test_mcp_relay covers it)",
    "trigger-url-elicitation": "asks the client for a URL elicitation, relayed only where "
    "allow_elicitation says so",
    "gzip-file-as-resource": "fetches its input over the network by default",
    "simulate-research-query": "runs as a task of the tasks extension, which the gateway "
    "does not relay yet",
}
EVERYTHING_PROMPTS = {"simple-prompt": {}, "args-prompt": {"city": "Paris"}}


def everything_http(folder: Path) -> str:
    del folder
    return f'url = "{EVERYTHING_URL[0]}"'


EVERYTHING_URL: list[str] = []  # set by the fixture that starts the HTTP server

SERVERS = [
    Server(
        name="everything",
        start=npx("@modelcontextprotocol/server-everything"),
        calls=EVERYTHING_CALLS,
        not_called=EVERYTHING_NOT_CALLED,
        resources=True,
        prompts=EVERYTHING_PROMPTS,
    ),
    Server(
        name="everything_http",
        start=everything_http,
        calls=EVERYTHING_CALLS,
        not_called=EVERYTHING_NOT_CALLED,
        resources=True,
        prompts=EVERYTHING_PROMPTS,
    ),
    Server(
        name="filesystem",
        start=lambda folder: npx("@modelcontextprotocol/server-filesystem", str(folder / "files"))(
            folder
        ),
        calls={
            "list_allowed_directories": _none,
            "write_file": lambda f: {"path": str(f / "files/a.txt"), "content": "one\ntwo\n"},
            "edit_file": lambda f: {
                "path": str(f / "files/a.txt"),
                "edits": [{"oldText": "two", "newText": "three"}],
            },
            "read_file": lambda f: {"path": str(f / "files/a.txt")},
            "read_text_file": lambda f: {"path": str(f / "files/a.txt"), "head": 1},
            "read_media_file": lambda f: {"path": str(f / "files/dot.png")},
            "read_multiple_files": lambda f: {"paths": [str(f / "files/a.txt")]},
            "create_directory": lambda f: {"path": str(f / "files/sub")},
            "move_file": lambda f: {
                "source": str(f / "files/a.txt"),
                "destination": str(f / "files/sub/a.txt"),
            },
            "list_directory": lambda f: {"path": str(f / "files")},
            "list_directory_with_sizes": lambda f: {"path": str(f / "files")},
            "directory_tree": lambda f: {"path": str(f / "files")},
            "search_files": lambda f: {"path": str(f / "files"), "pattern": "*.txt"},
            "get_file_info": lambda f: {"path": str(f / "files/sub/a.txt")},
        },
        writes=frozenset({"write_file", "edit_file", "create_directory", "move_file"}),
    ),
    Server(
        name="memory",
        start=npx("@modelcontextprotocol/server-memory"),
        calls={
            "create_entities": _args(
                entities=[
                    {"name": "Ada", "entityType": "person", "observations": ["wrote notes"]},
                    {"name": "Engine", "entityType": "machine", "observations": []},
                ]
            ),
            "create_relations": _args(
                relations=[{"from": "Ada", "to": "Engine", "relationType": "described"}]
            ),
            "add_observations": _args(
                observations=[{"entityName": "Engine", "contents": ["analytical"]}]
            ),
            "read_graph": _none,
            "search_nodes": _args(query="Ada"),
            "open_nodes": _args(names=["Engine"]),
            "delete_observations": _args(
                deletions=[{"entityName": "Engine", "observations": ["analytical"]}]
            ),
            "delete_relations": _args(
                relations=[{"from": "Ada", "to": "Engine", "relationType": "described"}]
            ),
            "delete_entities": _args(entityNames=["Engine"]),
        },
        writes=frozenset(
            {
                "create_entities",
                "create_relations",
                "add_observations",
                "delete_observations",
                "delete_relations",
                "delete_entities",
            }
        ),
        resources=True,
    ),
    Server(
        name="thinking",
        start=npx("@modelcontextprotocol/server-sequential-thinking"),
        calls={
            "sequentialthinking": _args(
                thought="One step is enough.",
                nextThoughtNeeded=False,
                thoughtNumber=1,
                totalThoughts=1,
            )
        },
    ),
    Server(
        name="time",
        start=python("-m", "mcp_server_time", "--local-timezone", "UTC"),
        calls={
            "get_current_time": _args(timezone="Asia/Tokyo"),
            "convert_time": _args(
                source_timezone="Europe/Paris", time="14:30", target_timezone="America/New_York"
            ),
        },
        node=False,
    ),
    Server(
        name="git",
        start=python("-m", "mcp_server_git", "--repository", "{folder}/repo"),
        calls={
            "git_status": lambda f: {"repo_path": str(f / "repo")},
            "git_diff_unstaged": lambda f: {"repo_path": str(f / "repo")},
            "git_add": lambda f: {"repo_path": str(f / "repo"), "files": ["notes.txt"]},
            "git_diff_staged": lambda f: {"repo_path": str(f / "repo")},
            "git_commit": lambda f: {"repo_path": str(f / "repo"), "message": "second"},
            "git_reset": lambda f: {"repo_path": str(f / "repo")},
            "git_log": lambda f: {"repo_path": str(f / "repo"), "max_count": 5},
            "git_show": lambda f: {"repo_path": str(f / "repo"), "revision": "HEAD"},
            "git_diff": lambda f: {"repo_path": str(f / "repo"), "target": "HEAD"},
            "git_create_branch": lambda f: {"repo_path": str(f / "repo"), "branch_name": "side"},
            "git_checkout": lambda f: {"repo_path": str(f / "repo"), "branch_name": "side"},
            "git_branch": lambda f: {"repo_path": str(f / "repo"), "branch_type": "local"},
        },
        writes=frozenset(
            {"git_add", "git_reset", "git_commit", "git_create_branch", "git_checkout"}
        ),
        node=False,
    ),
    Server(
        name="fastmcp",
        start=python(str(HERE / "corpus_fastmcp.py")),
        calls={
            "add": _args(a=2, b=3),
            "order_total": _args(
                lines=[{"sku": "ABC-001", "quantity": 2}, {"sku": "XYZ-002", "quantity": 1}]
            ),
            "greet": _args(name="Ada", tone="warm"),
        },
        resources=True,
        prompts={"review": {"topic": "the gateway"}},
        node=False,
    ),
    Server(
        name="zod",
        start=lambda _: f'command = ["node", "{NODE_DIR / "zod_server.mjs"}"]',
        calls={
            "ship": _args(
                **{
                    "from": {"street": "1 Main St", "city": "Lyon", "postcode": "69001"},
                    "to": {"street": "2 Quay", "city": "Nantes", "postcode": "44000"},
                    "parcels": 2,
                }
            ),
            "count_categories": _args(
                root={"name": "all", "children": [{"name": "a"}, {"name": "b", "children": []}]}
            ),
        },
    ),
]


@pytest.fixture(scope="module")
def everything_url() -> Iterator[str]:
    """server-everything over streamable HTTP, as its README starts it, on a free port."""
    require_node_modules()
    port = free_port()
    process = subprocess.Popen(
        ["npx", "--no-install", "@modelcontextprotocol/server-everything", "streamableHttp"],  # noqa: S607
        cwd=NODE_DIR,
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()


def scratch(folder: Path) -> Path:
    """The files, the repository and the image the calls work on."""
    (folder / "files").mkdir()
    (folder / "files" / "dot.png").write_bytes(PNG)
    repo = folder / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)  # noqa: S603
    (repo / "notes.txt").write_text("first\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)  # noqa: S603
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)  # noqa: S603
    (repo / "notes.txt").write_text("first\nsecond\n")
    return folder


@pytest.mark.parametrize("server", SERVERS, ids=[s.name for s in SERVERS])
def test_every_tool_of_a_real_server_is_served_and_answers_through_the_gateway(
    server: Server, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every tool listed and served, each offline one called once, resources and prompts too."""
    if server.node:
        require_node_modules()
    if server.name == "everything_http":
        EVERYTHING_URL[:] = [request.getfixturevalue("everything_url")]
    folder = scratch(tmp_path)
    config = write_config(tmp_path, server.config(folder))

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            seen["status"] = {s.tool: (s.state, s.reason) for s in gw.status()}
            seen["listed"] = [t.name for t in (await client.list_tools()).tools]
            seen["results"] = {}
            for tool, arguments in server.calls.items():
                result = await client.call_tool(f"{server.name}.{tool}", arguments(folder))
                seen["results"][tool] = result
            if server.resources:
                listed = (await client.list_resources()).resources
                seen["resources"] = listed
                seen["read"] = await client.read_resource(listed[0].uri) if listed else None
            seen["prompts"] = {
                name: await client.get_prompt(f"{server.name}.{name}", arguments)
                for name, arguments in server.prompts.items()
            }
        return seen

    seen = run(scenario())
    expected = {*server.calls, *server.not_called}
    assert set(seen["status"]) == expected, "a tool the table does not know, or one gone"
    assert {tool: state for tool, (state, _) in seen["status"].items()} == dict.fromkeys(
        expected, "served"
    ), seen["status"]
    assert sorted(seen["listed"]) == sorted(f"{server.name}.{tool}" for tool in expected)
    failed = {
        tool: result.content[0].text[:300]
        for tool, result in seen["results"].items()
        if result.is_error
    }
    assert failed == {}
    if server.resources:
        assert seen["resources"], "no resource listed"
        assert seen["read"] is not None
        assert seen["read"].contents
    for name, got in seen["prompts"].items():
        assert got.messages, name


@pytest.mark.parametrize("name", ["everything", "everything_http"])
def test_server_everything_s_content_passes_through_as_blocks(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Images, resource links, embedded resources, annotations and structured content arrive."""
    require_node_modules()
    if name == "everything_http":
        EVERYTHING_URL[:] = [request.getfixturevalue("everything_url")]
    server = next(s for s in SERVERS if s.name == name)
    config = write_config(tmp_path, server.config(scratch(tmp_path)))
    asked = {
        "get-tiny-image": {},
        "get-resource-links": {"count": 2},
        "get-resource-reference": {"resourceType": "Text", "resourceId": 1},
        "get-annotated-message": {"messageType": "error", "includeImage": True},
        "get-structured-content": {"location": "Chicago"},
    }

    async def scenario() -> dict[str, Any]:
        async with gateway(config).running() as gw, Client(gw.server.lowlevel(MIRA)) as client:
            return {
                tool: await client.call_tool(f"{name}.{tool}", arguments)
                for tool, arguments in asked.items()
            }

    got = run(scenario())
    kinds = {tool: [block.type for block in result.content] for tool, result in got.items()}
    assert "image" in kinds["get-tiny-image"]
    assert kinds["get-resource-links"].count("resource_link") == 2
    assert "resource" in kinds["get-resource-reference"]
    annotated = got["get-annotated-message"].content
    assert annotated[0].annotations is not None  # the text block's, on the envelope
    assert annotated[0].annotations.priority == 1.0
    assert any(b.type == "image" and b.annotations is not None for b in annotated)
    structured = got["get-structured-content"].structured_content
    assert structured is not None
    assert "temperature" in structured
