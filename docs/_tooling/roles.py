# ruff: noqa: INP001 - loaded by path from mkdocs.yml, not a package
"""A griffe extension: the docstrings' reST roles, rendered as code for the docs site.

toolbound's docstrings cross-reference with Sphinx roles (``:class:`~toolbound.ToolSpec```).
mkdocstrings reads Markdown, where a role would show as stray ``:class:`` text and
a cross-reference to an object no page renders would fail ``mkdocs build --strict``;
so each role becomes inline code naming the object as Sphinx would show it
(``~`` keeps the last part), and a paragraph's closing ``::`` (a reST literal
block) becomes ``:``, the indented block below it a Markdown code block.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):`(~?)([^`]+)`")
_LITERAL = re.compile(r"(?<=\S)::$", re.MULTILINE)


def _code(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    title, sep, _target = target.partition(" <")  # :class:`title <target>`
    if sep:
        return f"`{title}`"
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def plain(text: str) -> str:
    """``text`` with every reST role as inline code and ``::`` block openers as ``:``."""
    return _LITERAL.sub(":", _ROLE.sub(_code, text))


class RolesAsCode(griffe.Extension):
    """Rewrites every docstring of the loaded objects with :func:`plain`."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:  # noqa: ANN401, ARG002
        """Rewrite ``obj``'s docstring once griffe has read it."""
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
