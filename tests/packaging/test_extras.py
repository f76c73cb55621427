"""Each command works with the extra the docs name for it, or says which one to install."""

import subprocess
import sys
from pathlib import Path

import pytest

from toolbound.cli import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "toolbound.toml")

_BLOCKING = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
BLOCKED = set(sys.argv[1].split(","))
sys.meta_path.insert(0, Block())
sys.argv = ["toolbound", *sys.argv[2:]]
from toolbound.cli import main
main()
"""


def run_without(
    blocked: tuple[str, ...], *argv: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-c", _BLOCKING, ",".join(blocked), *argv],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("extra", "argv"),
    [
        ("cli", ("check-config", EXAMPLE)),
        ("service", ("serve", "--config", EXAMPLE)),
        ("mcp", ("mcp-gateway", "--config", EXAMPLE, "tools")),
        ("mcp", ("mcp-serve", "--config", EXAMPLE, "--tools", "toolbound.packs.example:registry")),
        ("http", ("pending",)),
        ("http", ("decide", "inv", "--approve", "--digest", "sha256:0")),
    ],
)
def test_a_command_without_its_extra_names_the_extra_to_install(extra, argv):
    """Without its extra a command exits 2 with the pip line, never a traceback."""
    done = run_without(EXTRAS[extra][:1], *argv)
    assert done.returncode == 2, done.stderr
    assert f"pip install 'toolbound[{extra}]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_commands_of_the_cli_extra_run_without_the_service_or_mcp_extras():
    """check-config needs only the cli extra: the service's and MCP's modules may be absent."""
    blocked = (*EXTRAS["service"], *EXTRAS["mcp"], *EXTRAS["postgres"])
    done = run_without(blocked, "check-config", EXAMPLE)
    assert done.returncode == 0, done.stderr
    assert "valid" in done.stdout


def test_hash_key_prints_the_digest_the_configuration_stores():
    """hash-key reads the key on stdin and prints its key_sha256 (the example agent's)."""
    done = run_without((), "hash-key", stdin="demo-agent-key\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in Path(EXAMPLE).read_text()


def test_hash_key_refuses_an_empty_key():
    """No key on stdin is an error, not the digest of the empty string."""
    done = run_without((), "hash-key", stdin="\n")
    assert done.returncode == 2
    assert "no key" in done.stderr


def test_serve_names_the_console_and_the_demo_keys():
    """The start-up lines say where the console is and which demo keys the file lists."""
    from toolbound.cli import _key_hints

    hints = _key_hints(EXAMPLE)
    assert any("demo-approver-key" in h for h in hints)
    assert len(hints) == 3


def test_the_core_library_does_not_import_pydantic():
    """Only loading a configuration file needs pydantic: importing the library does not."""
    code = (
        "import sys, toolbound, toolbound.define, toolbound.loop, toolbound.registry; "
        "print('pydantic' in sys.modules)"
    )
    done = subprocess.run(  # noqa: S603 - this interpreter, fixed arguments
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
