"""The failure table of a tool runtime as a kit any runtime can run.

Cases are data (:mod:`tool_runtime_conformance.cases`).
"""

from __future__ import annotations

from tool_runtime_conformance.cases import Case, CaseFormatError, bundled_cases, load_path

__all__ = ["Case", "CaseFormatError", "bundled_cases", "load_path"]
