"""The documentation: generated pages are current, every page is reachable, links resolve.

``make docs-check`` builds the site with ``mkdocs build --strict``; these tests keep
what the build cannot see: that the configuration reference is what the checker's
tables give and that its defaults and examples are the checker's own, that no page
is left out of the navigation, and that the index and the API reference follow the
README and the curated top level.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

import toolbound
from toolbound import config
from toolbound._clock import FixedClock
from toolbound.config import TABLES, ConfigTable, check_tables
from toolbound.config_reference import KEYS, TABLE_NOTES, key_id, render_markdown, undescribed

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# Pages deliberately kept out of the navigation (none yet), relative to docs/.
NOT_IN_NAV: frozenset[str] = frozenset()
# Folders under docs/ that hold build tooling, not pages (mkdocs.yml's exclude_docs).
TOOLING = ("_tooling/",)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _pages() -> list[str]:
    pages = (p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    return sorted(p for p in pages if not p.startswith(TOOLING))


def _nav_files(entries: object) -> list[str]:
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [f for entry in entries for f in _nav_files(entry)]
    if isinstance(entries, dict):
        return [f for value in entries.values() for f in _nav_files(value)]
    return []


def _mkdocs() -> dict[str, object]:
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))


# -- the configuration reference ----------------------------------------------------------


def test_configuration_reference_is_generated():
    """docs/configuration.md is exactly what render_markdown() gives (`make docs` writes it)."""
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert page == render_markdown()


def test_every_key_the_checker_accepts_is_described():
    """Each table and key in config.TABLES has a meaning and an example, and nothing else does."""
    assert undescribed() == []
    ids = {key_id(t, k) for t in TABLES for k in t.keys}
    tables = {t.path if t.kind is None else f"{t.path}[kind={t.kind}]" for t in TABLES}
    assert set(KEYS) - ids == set()
    assert set(TABLE_NOTES) - tables == set()


# Key paths as the checker reports them, where they differ from the table's path.
WHERE = {
    "tools.http": "tools.http[0]",
    "principal": "principal[0]",
    "identity.jwt": "identity.jwt[0]",
    "grant": "grant[0]",
    "grant.scope": "grant[0].scope",
    "grant.limits": "grant[0].limits[0]",
    "provenance.rule": "provenance.rule[0]",
    "webhook": "webhook[0]",
}


def test_the_checker_accepts_exactly_the_tables_keys():
    """A key outside the table is refused with its path; the top level knows every table."""
    for table in TABLES:
        raw = _minimal()
        _section(raw, table)["invented"] = 1
        _, issues = check_tables(raw)
        assert [i.path for i in issues] == [f"{WHERE.get(table.path, table.path)}.invented"]
    assert {t.path for t in TABLES if "." not in t.path} <= config._TOP


def _value(toml: str) -> object:
    return tomllib.loads(f"value = {toml}")["value"]


# What a table needs beyond its required keys to pass the checker.
VALID = {("grant.limits", "number"): {"maximum": 100}}  # one of the two bounds


def _required(table: ConfigTable) -> dict[str, object]:
    """The table's required keys, set to their examples (and what it needs beyond them)."""
    keys = {k.name: _value(KEYS[key_id(table, k)].example) for k in table.keys if k.required}
    return {**keys, **VALID.get((table.path, table.kind), {})}


def _variant(path: str, kind: str) -> ConfigTable:
    return next(t for t in TABLES if t.path == path and t.kind == kind)


def _table(path: str) -> ConfigTable:
    return next(t for t in TABLES if t.path == path and t.kind is None)


def _minimal() -> dict[str, Any]:
    """A small valid file: principal, grant, HTTP tool and webhook, with their required keys."""
    grant = _required(_table("grant"))
    grant["scope"] = {"kind": "owner"}
    grant["limits"] = [{"kind": "rate", **_required(_variant("grant.limits", "rate"))}]
    # A read needs no capability; with one, the tool stays valid as a write too.
    tool = {**_required(_table("tools.http")), "effect": "read", "capabilities": ["crm:read"]}
    issuer = {**_required(_table("identity.jwt")), "jwks_url": "https://idp.test/jwks.json"}
    return {
        "tools": {"http": [tool]},
        "principal": [_required(_table("principal"))],
        "identity": {"jwt": [{**issuer, "tenant_claim": "tid"}]},
        "grant": [grant],
        "webhook": [_required(_table("webhook"))],
    }


def _section(raw: dict[str, Any], table: ConfigTable) -> dict[str, Any]:  # noqa: PLR0911 - one per nesting
    """Where ``table``'s keys go in ``raw`` (made if absent)."""
    if table.path == "tools.http":
        return raw["tools"]["http"][0]
    if table.path == "identity.jwt":
        return raw["identity"]["jwt"][0]
    if table.path == "provenance.rule":
        return raw.setdefault("provenance", {}).setdefault("rule", [_required(table)])[0]
    if table.array:
        return raw[table.path][0]
    if table.path == "grant.scope":
        grant = raw["grant"][0]
        grant["scope"] = {"kind": table.kind, **_required(table)}
        return grant["scope"]
    if table.path == "grant.limits":
        grant = raw["grant"][0]
        grant["limits"] = [{"kind": table.kind, **_required(table)}]
        return grant["limits"][0]
    return raw.setdefault(table.path, {})


def _built(raw: dict[str, Any]) -> object:
    """What the checker made of ``raw``, grants built (a raw grant keeps the keys it was given)."""
    made, issues = check_tables(raw)
    assert issues == []
    assert made is not None
    clock = FixedClock(datetime(2026, 7, 19, 6, tzinfo=UTC))
    grants = [repr(config._grant(g, clock)) for g in made.grants]
    return dataclasses.replace(made, grants=()), grants, made.identity.issuers


CASES = [pytest.param(t, k, id=key_id(t, k)) for t in TABLES for k in t.keys]


@pytest.mark.parametrize(("table", "key"), [c for c in CASES if c.values[1].default is not None])
def test_a_documented_default_is_what_the_checker_uses(table, key):
    """Setting a key to its documented default gives the same configuration as leaving it out."""
    left_out = _minimal()
    _section(left_out, table).pop(key.name, None)
    spelt_out = _minimal()
    _section(spelt_out, table)[key.name] = _value(key.default)
    assert _built(spelt_out) == _built(left_out)


# The example of host_argument needs a url with {host}, a schema requiring it and a
# domain-scoped grant; tests/execution/test_http_egress.py covers that combination.
# An issuer takes one key source and one tenant: jwks_file, secret_env (with HS*
# algorithms) and tenant replace the minimal file's jwks_url and tenant_claim, which
# tests/service/test_identity.py covers. A secret itself replaces the variable naming it
# (webhook.secret, identity.jwt.secret): tests/service/test_config_locations.py covers them.
ALONE = {
    "tools.http.host_argument",
    "identity.jwt.jwks_file",
    "identity.jwt.secret_env",
    "identity.jwt.secret",
    "identity.jwt.tenant",
    "webhook.secret",
}


@pytest.mark.parametrize(("table", "key"), [c for c in CASES if c.id not in ALONE])
def test_each_example_is_accepted(table, key):
    """Every key's example value passes the checker in an otherwise minimal file."""
    raw = _minimal()
    _section(raw, table)[key.name] = _value(KEYS[key_id(table, key)].example)
    _built(raw)


def test_the_page_s_snippets_together_are_a_valid_file():
    """The TOML snippets of the plain tables, put together, are a file the checker accepts."""
    page = render_markdown()
    snippets = re.findall(r"```toml\n(\[.*?)```", page, re.DOTALL)
    raw = tomllib.loads("\n".join(snippets))
    _built(raw)
    assert set(raw) == {t.path.split(".")[0] for t in TABLES}


# -- the site -------------------------------------------------------------------------------


def test_every_page_is_in_the_navigation():
    """Each docs/*.md page is in mkdocs.yml's nav, or deliberately left out."""
    nav = _nav_files(_mkdocs()["nav"])
    assert len(nav) == len(set(nav)), "a page is in the nav twice"
    assert sorted(set(_pages()) - NOT_IN_NAV) == sorted(nav)


def _anchors(page: Path) -> set[str]:
    """The ids Python-Markdown's toc gives the page's headings (its default slugify)."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    ids = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE):
        plain = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
        ids.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", plain)).strip("-"))
    return ids


@pytest.mark.parametrize("page", _pages())
def test_relative_links_resolve(page):
    """Every relative link on a page names a page under docs/ and, if given, one of its headings."""
    source = DOCS / page
    text = FENCE.sub("", source.read_text(encoding="utf-8"))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        linked = (source.parent / path).resolve() if path else source
        if (
            not linked.is_file()
            or DOCS not in linked.parents
            or (
                anchor
                and linked.suffix == ".md"
                and not _is_api_anchor(linked, anchor)
                and anchor not in _anchors(linked)
            )
        ):
            broken.append(target)
    assert broken == []


def _is_api_anchor(page: Path, anchor: str) -> bool:
    """An API page's anchors are the objects mkdocstrings renders (``toolbound.Proposal``)."""
    return page.parent == DOCS / "api" and anchor.startswith("toolbound")


def test_index_example_is_the_readme_s():
    """The index page shows the README's example, byte for byte (the README's runs in a test)."""
    block = re.compile(r"```python\n.*?```", re.DOTALL)
    readme = block.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    index = block.findall((DOCS / "index.md").read_text(encoding="utf-8"))
    assert index == readme


def test_api_reference_lists_the_public_top_level():
    """docs/api/index.md renders each name of toolbound.__all__, once."""
    text = (DOCS / "api" / "index.md").read_text(encoding="utf-8")
    names = re.findall(r"^::: toolbound\.(\w+)$", text, re.MULTILINE)
    assert sorted(names) == sorted(toolbound.__all__)


def test_api_anchors_in_the_guides_name_public_objects():
    """A guide's link into the API reference names an object the reference renders."""
    rendered = set()
    for page in (DOCS / "api").glob("*.md"):
        for module in re.findall(r"^::: ([\w.]+)$", page.read_text(encoding="utf-8"), re.MULTILINE):
            rendered.add(module)
    for page in _pages():
        for target in LINK.findall((DOCS / page).read_text(encoding="utf-8")):
            path, _, anchor = target.partition("#")
            if path.endswith("api/index.md") and anchor:
                assert anchor in rendered, target


def _roles() -> object:
    spec = importlib.util.spec_from_file_location("roles", DOCS / "_tooling" / "roles.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("rest", "markdown"),
    [
        (":class:`Registry`", "`Registry`"),
        (":class:`~toolbound.loop.Loop`", "`Loop`"),
        (":meth:`toolbound.Runtime.run`", "`toolbound.Runtime.run`"),
        (":func:`the digest <toolbound.gates.normalize.digest>`", "`the digest`"),
        ("three layers::\n\n    bytes", "three layers:\n\n    bytes"),
        ("``literal``", "``literal``"),
    ],
)
def test_docstring_roles_render_as_code(rest, markdown):
    """The site shows a reST role as inline code and opens a literal block with one colon."""
    assert _roles().plain(rest) == markdown
