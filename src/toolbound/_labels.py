"""The names the model gives parameters: their roles in a write, and kinds of private data.

:attr:`~toolbound.ToolSpec.roles` and :attr:`~toolbound.ToolSpec.data_classes` hold
these names; :mod:`toolbound.provenance.roles` and :mod:`toolbound.provenance.classes`
say what each one means and export them.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["DataClassName", "RoleName"]

RoleName = Literal["destination", "target", "secret", "content", "quantity", "none"]
"""What one parameter does in a write (see :mod:`toolbound.provenance.roles`); ``none``,
only declared, leaves a parameter to the grants."""

DataClassName = Literal["identity_document", "payment_card", "credential", "health"]
"""A kind of private data that leaves only when the user's words ask for it."""
