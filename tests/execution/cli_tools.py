"""The tool registry ``toolbound reconcile --tools cli_tools:tools`` loads in the CLI test."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from crash_child import registry

if TYPE_CHECKING:
    from toolbound import Registry


def tools() -> Registry:
    """The crash child's payment tool, over the effects database the test names."""
    return registry(os.environ["TOOLBOUND_TEST_EFFECTS"])


def tools_that_cannot_ask() -> Registry:
    """The same tool without a query hook: its unknowns need a person."""
    return registry(os.environ["TOOLBOUND_TEST_EFFECTS"], with_query=False)
