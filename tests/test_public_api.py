"""The public surface: __all__ is curated, lazy, and the README example runs."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import toolbound

ROOT = Path(__file__).resolve().parents[1]

CURATED = {
    # defining tools
    "ToolSpec", "Registry", "ToolSet", "ToolContext", "ToolOutput", "NotCommitted",
    "CommitUnknown",
    # running calls
    "Runtime", "CallContext", "Preview", "Proposal", "Subject",
    # how calls end
    "Outcome", "Observed", "Rejected", "AwaitingConfirmation", "Failed", "OutcomeUnknown",
    "Cancelled", "Problem",
    # errors
    "ToolboundError", "ConfigurationError", "ConfirmationMismatch", "Rejection",
    # policy and provenance
    "Grant", "GrantPolicy", "AllOf", "FlowPolicy", "Provenance",
    # ledgers
    "MemoryLedger", "SQLiteLedger",
    # the loop and batches
    "Loop", "Budgets", "LoopOutcome", "ModelTurn", "BatchOutcome", "run_batch", "arun_batch",
    # clocks
    "Clock", "FixedClock",
}  # fmt: skip

# Names the top level once exported, and the module each is imported from now.
MOVED = [
    ("SystemClock", "toolbound._clock"),
    ("IllegalTransition", "toolbound._errors"),
    ("SchemaError", "toolbound._errors"),
    ("SpecError", "toolbound._errors"),
    ("Attempt", "toolbound._model"),
    ("Invocation", "toolbound._model"),
    ("NormalizationContext", "toolbound._model"),
    ("ReadBack", "toolbound._model"),
    ("Resource", "toolbound._model"),
    ("Result", "toolbound._model"),
    ("State", "toolbound._state"),
    ("Reconciled", "toolbound.execution.reconcile"),
    ("Reconciler", "toolbound.execution.reconcile"),
    ("RemoteCommitted", "toolbound.execution.reconcile"),
    ("RemoteNotCommitted", "toolbound.execution.reconcile"),
    ("RemoteUnknown", "toolbound.execution.reconcile"),
    ("UnknownCall", "toolbound.execution.reconcile"),
    ("EnvSecrets", "toolbound.execution.tool"),
    ("SecretProvider", "toolbound.execution.tool"),
    ("StaticSecrets", "toolbound.execution.tool"),
    ("Allow", "toolbound.gates.authorize"),
    ("AuthzRequest", "toolbound.gates.authorize"),
    ("Confirm", "toolbound.gates.authorize"),
    ("Deny", "toolbound.gates.authorize"),
    ("DomainScope", "toolbound.gates.authorize"),
    ("IdScope", "toolbound.gates.authorize"),
    ("NumberLimit", "toolbound.gates.authorize"),
    ("OwnerScope", "toolbound.gates.authorize"),
    ("PathScope", "toolbound.gates.authorize"),
    ("Policy", "toolbound.gates.authorize"),
    ("RateLimit", "toolbound.gates.authorize"),
    ("TimeRangeLimit", "toolbound.gates.authorize"),
    ("Confirmation", "toolbound.gates.confirm"),
    ("ConfirmationRequest", "toolbound.gates.confirm"),
    ("canonical_json", "toolbound.gates.normalize"),
    ("date_fields", "toolbound.gates.normalize"),
    ("digest", "toolbound.gates.normalize"),
    ("normalize_date", "toolbound.gates.normalize"),
    ("ParseLimits", "toolbound.gates.parse"),
    ("parse_arguments", "toolbound.gates.parse"),
    ("CompiledSchema", "toolbound.gates.validate"),
    ("ValidatorInfo", "toolbound.gates.validate"),
    ("Ledger", "toolbound.ledger.store"),
    ("LedgerError", "toolbound.ledger.store"),
    ("NoPrivateData", "toolbound.provenance"),
    ("TrustedSource", "toolbound.provenance"),
    ("RegisteredTool", "toolbound.registry"),
    ("HumanProjection", "toolbound.results.encode"),
    ("ModelProjection", "toolbound.results.encode"),
    ("EMAIL", "toolbound.results.redact"),
    ("PAYMENT_CARD", "toolbound.results.redact"),
    ("Redactor", "toolbound.results.redact"),
    ("Trace", "toolbound.trace"),
    ("TraceEvent", "toolbound.trace"),
    ("TraceSink", "toolbound.trace"),
]

# Modules `import toolbound` must not load: stores, event loops, HTTP, provider SDKs.
HEAVY = [
    "sqlite3",
    "asyncio",
    "concurrent.futures",
    "httpx",
    "starlette",
    "openai",
    "anthropic",
    "mcp",
    "psycopg",
]


def test_all_is_the_curated_list():
    """__all__ is exactly the curated list, sorted, without duplicates."""
    assert set(toolbound.__all__) == CURATED
    assert toolbound.__all__ == sorted(CURATED, key=lambda n: (n[0].islower(), n))


@pytest.mark.parametrize("name", sorted(CURATED))
def test_every_public_name_resolves(name):
    """Each public name is served from the module the lazy table names."""
    value = getattr(toolbound, name)
    module = importlib.import_module(toolbound._MODULES[name])
    assert value is getattr(module, name)


def test_lazy_table_matches_type_checking_imports():
    """Type checkers see the same names, from the same modules, as the lazy table serves."""
    source = Path(toolbound.__file__).read_text()
    (block,) = [
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    ]
    seen = {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == toolbound._MODULES
    assert set(seen) == set(toolbound.__all__)


def test_dir_lists_the_public_names():
    """dir(toolbound) lists every public name, imported yet or not."""
    assert set(toolbound.__all__) <= set(dir(toolbound))


def test_unknown_names_are_attribute_errors():
    """A name the top level does not export raises AttributeError, and a submodule still imports."""
    with pytest.raises(AttributeError, match="IdScope"):
        _ = toolbound.IdScope  # type: ignore[attr-defined]
    from toolbound import streams

    assert streams.__name__ == "toolbound.streams"


def test_import_loads_no_store_or_event_loop():
    """A fresh `import toolbound` loads no SQLite, asyncio, thread pool, HTTP or SDK module."""
    src = str(Path(toolbound.__file__).parents[1])
    probe = f"import sys; sys.path.insert(0, {src!r}); import toolbound; print(*sys.modules)"
    done = subprocess.run(  # noqa: S603 - our own interpreter, fixed code
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    loaded = set(done.stdout.split())
    assert [m for m in HEAVY if m in loaded] == []
    assert sorted(m for m in loaded if m.startswith("toolbound")) == ["toolbound"]


@pytest.mark.parametrize(("name", "module"), MOVED)
def test_moved_names_import_from_their_module(name, module):
    """A name the top level no longer exports is importable from its module, and only there."""
    assert hasattr(importlib.import_module(module), name)
    assert name not in toolbound.__all__
    assert not hasattr(toolbound, name)


def test_readme_example_runs(capsys):
    """The README's example runs and prints what its comments say."""
    text = (ROOT / "README.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("observed ['PROPOSED', 'PARSED'")
    assert out[0].endswith("'OBSERVED']")
    assert '"trust":"untrusted_tool_data"' in out[1]
    assert out[2] == "rejected duplicate_key"
    namespace["runtime"].close()  # type: ignore[attr-defined]
