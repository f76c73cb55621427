"""The problem catalogue: every code a site emits is defined once, and every entry is used.

The scan reads each module under ``src/toolbound`` (not ``toolbound.packs``: example
tools choose their own codes) and collects every code literal at a site that produces
a problem or an error:

* a ``code=`` keyword on any call (``Problem``, ``Rejection`` helpers, ``LedgerError``,
  ``NotCommitted``, ``dataclasses.replace``, ...);
* the positional code of ``ApiError(status, code, ...)`` and of ``make_problem``;
* the positional argument of a module's own helper whose parameter is named ``code``
  (``_deny("capability_missing", ...)``);
* ``code = "..."`` in a class body and a ``code`` parameter's default.

A value is followed through conditional expressions, ``or``, module and function
constants (including tuple unpacking) and dictionaries (``_CODES[...]``,
``_CODES.get(..., default)``). A value it cannot follow (``code=error.code``) is a
pass-through: the literal is counted where it was written.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import FrozenInstanceError, dataclass, field
from pathlib import Path
from typing import get_args

import pytest

from toolbound._errors import Problem
from toolbound.problems import (
    CATALOGUE,
    R17_ROWS,
    ErrorClass,
    ProblemCode,
    lookup,
    make_problem,
    render_markdown,
)

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "toolbound"
DOC = ROOT / "docs" / "problems.md"

# Constructors that take the code positionally, and where.
POSITIONAL = {"ApiError": 1, "make_problem": 0}
# Sites whose callee is one of these classes must be listed in the entry's raised_as.
CLASSES = frozenset(get_args(ErrorClass))
# Enough for any chain of constants, and an end to a name bound to itself.
MAX_DEPTH = 8


# -- the scan -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Site:
    """One code literal where a problem or an error is produced."""

    code: str
    where: str
    carrier: str
    kind: str | None = None
    status: int | None = None


Bindings = dict[str, list[ast.expr]]


def _callee(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _bind(out: Bindings, target: ast.expr, value: ast.expr) -> None:
    if isinstance(target, ast.Name):
        out.setdefault(target.id, []).append(value)
    elif (
        isinstance(target, ast.Tuple)
        and isinstance(value, ast.Tuple)
        and len(target.elts) == len(value.elts)
    ):
        for t, v in zip(target.elts, value.elts, strict=True):
            _bind(out, t, v)


def _bindings(body: list[ast.stmt]) -> Bindings:
    """Every name assigned in ``body``, outside nested functions and classes."""
    out: Bindings = {}
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                _bind(out, target, node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            _bind(out, node.target, node.value)
        stack.extend(ast.iter_child_nodes(node))
    return out


@dataclass
class _Scanner:
    tree: ast.Module
    path: str
    module: Bindings = field(init=False)
    helpers: dict[str, int] = field(init=False)
    sites: list[Site] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.module = _bindings(self.tree.body)
        # A module's own helper with a positional parameter named ``code``.
        self.helpers = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
                if "code" in names and node.name != "__init__":
                    self.helpers[node.name] = names.index("code")

    def resolve(self, node: ast.expr, local: Bindings, depth: int = 0) -> list[str]:
        """The string literals ``node`` can evaluate to, as far as the source shows."""
        if isinstance(node, ast.Constant):
            return [node.value] if isinstance(node.value, str) else []
        if depth > MAX_DEPTH:
            return []
        return [c for part in self.parts(node, local) for c in self.resolve(part, local, depth + 1)]

    def parts(self, node: ast.expr, local: Bindings) -> list[ast.expr]:
        """The expressions ``node`` takes its value from."""
        match node:
            case ast.IfExp(body=body, orelse=orelse):
                return [body, orelse]
            case ast.BoolOp(values=values) | ast.Dict(values=values):
                return list(values)
            case ast.Name(id=name):
                return local.get(name) or self.module.get(name) or []
            case ast.Subscript(value=mapping):
                return [mapping]
            case ast.Call(func=ast.Attribute(value=mapping, attr="get"), args=[_, *default]):
                return [mapping, *default]
        return []

    def add(
        self,
        value: ast.expr,
        local: Bindings,
        carrier: str,
        kind: str | None = None,
        status: int | None = None,
    ) -> None:
        where = f"{self.path}:{value.lineno}"
        for code in self.resolve(value, local):
            self.sites.append(Site(code, where, carrier, kind, status))

    def visit(self, node: ast.AST, local: Bindings, cls: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                self.defaults(child, cls)
                self.visit(child, _bindings(child.body), cls)
            elif isinstance(child, ast.ClassDef):
                for stmt in child.body:
                    if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                        if any(isinstance(t, ast.Name) and t.id == "code" for t in targets):
                            self.add(stmt.value, {}, child.name)
                self.visit(child, local, child.name)
            else:
                if isinstance(child, ast.Call):
                    self.call(child, local, cls)
                self.visit(child, local, cls)

    def defaults(self, func: ast.FunctionDef | ast.AsyncFunctionDef, cls: str) -> None:
        args = func.args
        positional = list(zip(reversed(args.args), reversed(args.defaults), strict=False))
        keyword = list(zip(args.kwonlyargs, args.kw_defaults, strict=True))
        for arg, default in (*positional, *keyword):
            if arg.arg == "code" and default is not None:
                self.add(default, {}, cls)

    def call(self, call: ast.Call, local: Bindings, cls: str) -> None:
        name = _callee(call)
        if name == "__init__" and isinstance(call.func, ast.Attribute):
            name = cls  # super().__init__(..., code=...) speaks for the class
        keywords = {k.arg: k.value for k in call.keywords if k.arg is not None}
        kind = keywords.get("kind")
        literal_kind = kind.value if isinstance(kind, ast.Constant) else None
        if "code" in keywords:
            self.add(keywords["code"], local, name, literal_kind)
        index = POSITIONAL.get(name, self.helpers.get(name))
        if index is not None and len(call.args) > index:
            first = call.args[0]
            status = first.value if name == "ApiError" and isinstance(first, ast.Constant) else None
            self.add(call.args[index], local, name, literal_kind, status)


def scan_source(source: str, path: str) -> list[Site]:
    """Every problem-code site in one module's source."""
    scanner = _Scanner(ast.parse(source), path)
    scanner.visit(scanner.tree, {}, "")
    return scanner.sites


def scan_tree() -> list[Site]:
    """Every problem-code site in toolbound, leaving out the example packs and the catalogue."""
    sites: list[Site] = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC)
        if relative.parts[0] == "packs" or relative == Path("problems.py"):
            continue  # example tools' own codes; the catalogue's definitions
        sites += scan_source(path.read_text(encoding="utf-8"), f"src/toolbound/{relative}")
    return sites


def uncatalogued(sites: list[Site]) -> list[str]:
    """``file:line: code`` for each site whose code the catalogue does not define."""
    return [f"{s.where}: {s.code!r}" for s in sites if s.code not in CATALOGUE]


def disagreements(sites: list[Site]) -> list[str]:
    """Sites whose kind, class or HTTP status contradicts the code's entry."""
    out = []
    for s in sites:
        entry = CATALOGUE.get(s.code)
        if entry is None:
            continue
        if s.carrier in {"Problem", "make_problem"} and entry.kind is None:
            out.append(f"{s.where}: {s.code!r} builds a Problem but has no kind")
        elif s.carrier == "Problem" and s.kind is not None and s.kind != entry.kind:
            out.append(f"{s.where}: {s.code!r} used with kind {s.kind!r}, not {entry.kind!r}")
        if s.carrier in CLASSES and s.carrier not in entry.raised_as:
            out.append(f"{s.where}: {s.code!r} raised as {s.carrier}, not in its raised_as")
        if s.status is not None and s.status not in entry.statuses:
            out.append(f"{s.where}: {s.code!r} answered with {s.status}, not {entry.statuses}")
    return out


SITES = scan_tree()


# -- the catalogue against the source -----------------------------------------------------


def test_every_code_a_site_emits_is_catalogued():
    """A code literal at a problem or error site that the catalogue lacks fails, by file:line."""
    assert uncatalogued(SITES) == []


def test_no_catalogued_code_is_dead():
    """Every catalogue entry is emitted by at least one site."""
    used = {s.code for s in SITES}
    assert sorted(set(CATALOGUE) - used) == []


def test_sites_agree_with_their_entries():
    """A site's literal kind, exception class and HTTP status are the ones its entry names."""
    assert disagreements(SITES) == []


def test_the_scan_sees_the_whole_tree():
    """The scan finds the codes of every layer: gates, runtime, ledger, service, streams."""
    found = {s.code for s in SITES}
    assert {"too_large", "additional_properties", "key_reused", "storage_full"} <= found
    assert {"not_pending", "request_in_progress", "protocol", "tool_failed"} <= found
    assert len(SITES) > 200


SNIPPET = """
from toolbound._errors import Problem

_FALLBACK = "made_up_fallback"

def gate(flag):
    problem = Problem(kind="parse", code="made_up_code", message="m", recoverable=True)
    other = Problem(kind="parse", code="too_large" if flag else "made_up_branch", message="m",
                    recoverable=True)
    raise ApiError(418, "made_up_status", "teapot")

def later(code=None):
    raise LedgerError("m", code=code or _FALLBACK)
"""


def test_the_scan_fails_on_an_undefined_code():
    """A snippet using codes the catalogue lacks is refused, each named by file:line."""
    assert uncatalogued(scan_source(SNIPPET, "snippet.py")) == [
        "snippet.py:7: 'made_up_code'",
        "snippet.py:8: 'made_up_branch'",
        "snippet.py:10: 'made_up_status'",
        "snippet.py:13: 'made_up_fallback'",
    ]


def test_the_scan_follows_helpers_constants_and_tables():
    """Codes passed to a module's own helper, through constants, tuples and dicts are found."""
    source = """
_TABLE = {"a": "from_table"}
_NAMED = "from_constant"

def _deny(code, message):
    return Problem(kind="authorization", code=code, message=message, recoverable=False)

def f(key):
    _deny("from_helper", "m")
    _deny(_NAMED, "m")
    make_problem(_TABLE.get(key, "from_default"), "m")
    what, code = "x", "from_tuple"
    raise LedgerError("m", code=code)

class Signal(Exception):
    code = "from_class"

    def __init__(self, message, *, code="from_default_arg"):
        super().__init__(message, code="from_super")
"""
    sites = scan_source(source, "s.py")
    assert {s.code for s in sites} == {
        "from_helper",
        "from_constant",
        "from_table",
        "from_default",
        "from_tuple",
        "from_class",
        "from_default_arg",
        "from_super",
    }
    assert next(s for s in sites if s.code == "from_super").carrier == "Signal"


def test_disagreements_are_reported():
    """A catalogued code used with another kind, class or status is named by file:line."""
    source = """
Problem(kind="output", code="key_reused", message="m", recoverable=False)
StreamError("m", code="key_reused")
ApiError(500, "not_pending", "m")
Problem(kind="parse", code="storage_full", message="m", recoverable=False)
"""
    assert disagreements(scan_source(source, "d.py")) == [
        "d.py:2: 'key_reused' used with kind 'output', not 'idempotency'",
        "d.py:3: 'key_reused' raised as StreamError, not in its raised_as",
        "d.py:4: 'not_pending' answered with 500, not (404, 409)",
        "d.py:5: 'storage_full' builds a Problem but has no kind",
    ]


def test_packs_are_left_to_their_authors():
    """Example packs choose their own codes; the scan does not read them."""
    assert not any(s.where.startswith("src/toolbound/packs/") for s in SITES)
    pack_sites = scan_source((SRC / "packs" / "files.py").read_text(), "files.py")
    assert "outside_workspace" in {s.code for s in pack_sites}
    assert "outside_workspace" not in CATALOGUE


# -- the catalogue itself -----------------------------------------------------------------


def test_each_code_is_defined_once():
    """No code appears twice in the catalogue's entries."""
    from toolbound.problems import _ENTRIES

    codes = [e.code for e in _ENTRIES]
    assert len(codes) == len(set(codes)) == len(CATALOGUE)


@pytest.mark.parametrize("entry", CATALOGUE.values(), ids=lambda e: e.code)
def test_entry_is_well_formed(entry: ProblemCode):
    """Each entry: snake_case code, a meaning, R-ids, a kind or an exception, HTTP statuses."""
    assert re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", entry.code)
    assert entry.meaning
    assert entry.meaning == entry.meaning.strip()
    assert entry.requirements
    assert all(re.fullmatch(r"R(1[0-9]|[1-9])", r) for r in entry.requirements)
    assert entry.kind is not None or entry.raised_as
    assert bool(entry.statuses) == ("ApiError" in entry.raised_as)
    assert all(400 <= s < 600 for s in entry.statuses)
    assert entry.r17 is None or any(entry.r17 is row for row in R17_ROWS)


@pytest.mark.parametrize("row", R17_ROWS, ids=lambda r: r.failure)
def test_every_r17_row_is_answered(row):
    """Each row of R17's failure table is answered by at least one catalogued code."""
    assert any(e.r17 is row for e in CATALOGUE.values())


def test_r17_rows_quote_the_failure_table():
    """The catalogue holds R17's nine rows in SPEC's order, the same as the acceptance tests."""
    assert len(R17_ROWS) == 9
    assert R17_ROWS[0].failure == "unknown tool or version"
    assert R17_ROWS[-1].response == "nothing after a terminal state"


def test_entries_are_frozen():
    """A catalogue entry cannot be changed, and the catalogue cannot be added to."""
    entry = lookup("key_reused")
    with pytest.raises(FrozenInstanceError):
        entry.recoverable = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        CATALOGUE["new_code"] = entry  # type: ignore[index]
    assert not hasattr(entry, "__dict__")


# -- lookup and make_problem --------------------------------------------------------------


def test_lookup_refuses_an_unknown_code():
    """Looking up a code toolbound does not define raises KeyError naming the code."""
    with pytest.raises(KeyError, match="made_up"):
        lookup("made_up")


def test_make_problem_takes_kind_and_recoverable_from_the_entry():
    """A Problem built from a code carries the entry's kind and default recoverable."""
    problem = make_problem("limit_exceeded", "over", hint="less", pointer="/amount")
    assert problem == Problem(
        kind="authorization",
        code="limit_exceeded",
        message="over",
        recoverable=True,
        hint="less",
        pointer="/amount",
    )


def test_make_problem_defaults_can_be_overridden():
    """A recoverable flag and kind given by the caller win over the entry's."""
    problem = make_problem("result_lost", "m", recoverable=True, kind="output")
    assert (problem.kind, problem.recoverable) == ("output", True)


def test_make_problem_refuses_codes_that_are_not_problems():
    """An unknown code raises KeyError; an exception-only code without a kind, ValueError."""
    with pytest.raises(KeyError):
        make_problem("made_up", "m")
    with pytest.raises(ValueError, match="storage_full"):
        make_problem("storage_full", "m")


def test_the_catalogue_is_sans_io():
    """toolbound.problems imports only the standard library and toolbound._errors."""
    tree = ast.parse((SRC / "problems.py").read_text(encoding="utf-8"))
    imported = {
        (node.module or "") if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    third_party = {m for m in imported if m.split(".")[0] not in sys.stdlib_module_names}
    assert third_party == {"toolbound._errors"}


# -- docs/problems.md ---------------------------------------------------------------------


def test_docs_are_the_rendered_catalogue():
    """docs/problems.md is exactly what render_markdown() gives (`make docs` writes it)."""
    assert DOC.read_text(encoding="utf-8") == render_markdown()


def test_docs_name_every_code_and_r17_row():
    """The rendered page lists every code and every R17 failure."""
    page = render_markdown()
    assert all(f"`{code}`" in page for code in CATALOGUE)
    assert all(row.failure.replace("|", "\\|") in page for row in R17_ROWS)
