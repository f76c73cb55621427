"""Compact JSON text through the standard library's C encoder, built once.

``json.JSONEncoder.encode`` builds its C encoder again on every call (inside
``iterencode``), and for the small values the hot path encodes — a tool's record,
a call's arguments, a trace event — that costs more than the encoding itself.
:func:`compact` builds the encoder once and returns a function that only runs it:
the same text ``JSONEncoder(ensure_ascii=False, separators=(",", ":"))`` gives with
the same options, in about two fifths of the time. The model's messages, the
canonical form, the trace's events and the journal's records are all written
through it.

The one difference is how a value that contains itself fails. The encoder keeps
no table of the containers it is inside (that table would be shared by every
caller, and a call that failed halfway would leave it dirty), so a cycle
recurses until Python's recursion limit, and is reported as the ``ValueError``
the standard encoder raises for one (a value nested too deeply is reported the
same way).
"""

from __future__ import annotations

import json
import json.encoder
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["compact"]

_C_ENCODER: Final = getattr(json.encoder, "c_make_encoder", None)


def _default(value: object) -> object:
    msg = f"Object of type {type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


def compact(
    *,
    sort_keys: bool = False,
    allow_nan: bool = False,
    default: Callable[[object], object] | None = None,
) -> Callable[[object], str]:
    """A function giving the compact JSON text of a value.

    ``default`` renders what JSON has no type for (by default such a value is a
    ``TypeError``); ``allow_nan`` writes NaN and the infinities as JavaScript
    does instead of refusing them. Raises ``TypeError`` for a value JSON has no
    form for and ``ValueError`` for a refused NaN or infinity, or a value that
    contains itself or nests too deeply.
    """
    render = _default if default is None else default
    if _C_ENCODER is None:  # an interpreter without the C accelerator
        return json.JSONEncoder(
            ensure_ascii=False,
            sort_keys=sort_keys,
            separators=(",", ":"),
            allow_nan=allow_nan,
            default=render,
            check_circular=False,
        ).encode
    run = _C_ENCODER(
        None,  # no table of open containers: see the module's docstring
        render,
        json.encoder.encode_basestring,
        None,
        ":",
        ",",
        sort_keys,
        False,  # noqa: FBT003 - skipkeys: the C signature is positional
        allow_nan,
    )
    join = "".join

    def encode(value: object) -> str:
        try:
            return join(run(value, 0))
        except RecursionError as exc:
            msg = "the value contains itself or is nested too deeply"
            raise ValueError(msg) from exc

    return encode
