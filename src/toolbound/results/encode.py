"""Results back to the model and to people: two projections of one observation (R11, R12).

The **model projection** is a small JSON envelope, byte-budgeted, that marks the
tool's data as untrusted (``"trust": "untrusted_tool_data"``): the model reads it as
data, never as instructions. Success and error have distinct shapes (``tool_result``
and ``tool_error``); errors carry kind, code, recoverable, message and hint; empty
results say what emptiness means; an oversized result is truncated with
``truncated: true`` and a continuation handle. The **human projection** keeps the
structured details. Both name the same invocation and record what was cut; the raw
observation stays the source of truth, and neither decides admission.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from toolbound._jsontext import compact
from toolbound._projection import HumanProjection, ModelProjection
from toolbound.results.redact import Cut

if TYPE_CHECKING:
    from toolbound._errors import Problem
    from toolbound._model import CommitStatus, JSONObject, JSONValue

__all__ = [
    "TRUST_MARK",
    "HumanProjection",
    "ModelProjection",
    "dumps",
    "model_error",
    "model_result",
    "page",
]

TRUST_MARK = "untrusted_tool_data"
"""R11: the value of ``trust`` on every envelope that carries tool output."""

DEFAULT_EMPTY_MEANING = "the tool found nothing matching these arguments"


# Built once: json.dumps with options would build a new encoder on every call.
_ENCODE = compact()


def dumps(value: object) -> bytes:
    """Compact JSON bytes, UTF-8, no NaN/Infinity."""
    return _ENCODE(value).encode()


# The fixed text of a success envelope, around its call id, tool and data.
_OPEN = b'{"type":"tool_result","call_id":'
_TOOL = b',"tool":'
_DATA = b',"status":"ok","trust":"' + TRUST_MARK.encode() + b'","data":'
_CLOSE = b',"truncated":false}'
# What json.dumps(str, ensure_ascii=False) gives, without the encoder around it.
_quoted = json.encoder.encode_basestring
# The envelope's middle for each tool (its ref is a registered tool's, so they are
# few): encoded once. Bounded all the same.
_MIDDLES: dict[str, bytes] = {}
_MAX_MIDDLES = 4096


def _middle(tool: str) -> bytes:
    middle = _MIDDLES.get(tool)
    if middle is None:
        if len(_MIDDLES) >= _MAX_MIDDLES:
            _MIDDLES.clear()
        middle = _MIDDLES[tool] = _TOOL + _quoted(tool).encode() + _DATA
    return middle


_HEAD_KEYS = 5  # type, call_id, tool, status, trust: no "empty" and "meaning"


def model_result(
    *,
    invocation_id: str,
    proposal_id: str,
    tool: str,
    value: JSONValue,
    budget: int,
    empty_meaning: str | None = None,
    cuts: tuple[Cut, ...] = (),
) -> ModelProjection:
    """The success envelope for ``value``, truncated to ``budget`` bytes if needed."""
    head: JSONObject = {
        "type": "tool_result",
        "call_id": proposal_id,
        "tool": tool,
        "status": "ok",
        "trust": TRUST_MARK,
    }
    if value in (None, [], {}, ""):
        # R11: empty results carry meaning, so the model does not read "nothing" as "failed".
        head["empty"] = True
        head["meaning"] = empty_meaning or DEFAULT_EMPTY_MEANING
    payload: JSONObject = {**head, "data": value, "truncated": False}
    if len(head) == _HEAD_KEYS:
        # The usual envelope, from its fixed text and three encoded values: the
        # same bytes dumps(payload) gives, without walking the head as a dict.
        content = b"".join(
            (_OPEN, _quoted(proposal_id).encode(), _middle(tool), dumps(value), _CLOSE)
        )
    else:
        content = dumps(payload)
    if len(content) <= budget:
        return ModelProjection(
            invocation_id=invocation_id,
            proposal_id=proposal_id,
            payload=payload,
            content=content,
            is_error=False,
            cuts=cuts,
        )
    full = len(dumps(value))
    payload = {
        **head,
        "data": None,
        "truncated": True,
        "continuation": {"handle": f"{invocation_id}:0", "total_bytes": full},
    }
    room = budget - len(dumps(payload))
    data, cut = _fit(value, room, "")
    payload["data"] = data
    content = dumps(payload)
    return ModelProjection(
        invocation_id=invocation_id,
        proposal_id=proposal_id,
        payload=payload,
        content=content,
        is_error=False,
        truncated=True,
        cuts=(*cuts, *cut),
    )


def model_error(
    *,
    invocation_id: str,
    proposal_id: str,
    tool: str,
    problem: Problem,
    commit_status: CommitStatus,
) -> ModelProjection:
    """The error envelope: kind, code, recoverable, message, hint and commit status."""
    payload: JSONObject = {
        "type": "tool_error",
        "call_id": proposal_id,
        "tool": tool,
        "status": "error",
        "commit_status": commit_status,
        "error": problem.as_json(),  # type: ignore[dict-item]
    }
    return ModelProjection(
        invocation_id=invocation_id,
        proposal_id=proposal_id,
        payload=payload,
        content=dumps(payload),
        is_error=True,
    )


def page(
    *, invocation_id: str, proposal_id: str, tool: str, value: JSONValue, offset: int, size: int
) -> ModelProjection:
    """One page of the full serialized result, for a continuation handle.

    Pages are slices of the result's compact JSON text on UTF-8 character
    boundaries; ``next`` is the handle of the following page, or ``None``.
    """
    text = dumps(value)
    end = min(len(text), offset + max(size, 1))
    while end < len(text) and (text[end] & 0xC0) == 0x80:  # noqa: PLR2004 - UTF-8 continuation
        end -= 1
    chunk = text[offset:end].decode()
    nxt = f"{invocation_id}:{end}" if end < len(text) else None
    payload: JSONObject = {
        "type": "tool_result_page",
        "call_id": proposal_id,
        "tool": tool,
        "trust": TRUST_MARK,
        "offset": offset,
        "json_text": chunk,
        "next": nxt,
    }
    return ModelProjection(
        invocation_id=invocation_id,
        proposal_id=proposal_id,
        payload=payload,
        content=dumps(payload),
        is_error=False,
        truncated=nxt is not None,
    )


def _size(value: object) -> int:
    return len(dumps(value))


def _fit(  # noqa: C901, PLR0912 - one branch per JSON type reads best
    value: JSONValue, room: int, pointer: str
) -> tuple[JSONValue, list[Cut]]:
    """Shrink ``value`` until its JSON fits in ``room`` bytes, recording each cut."""
    if _size(value) <= room:
        return value, []
    if isinstance(value, str):
        lo, hi = 0, len(value)
        while lo < hi:  # longest prefix that fits
            mid = (lo + hi + 1) // 2
            if _size(value[:mid]) <= room:
                lo = mid
            else:
                hi = mid - 1
        return value[:lo], [
            _cut(pointer, f"kept {lo} of {len(value)} characters"),
        ]
    if isinstance(value, list):
        lo, hi = 0, len(value)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _size(value[:mid]) <= room:
                lo = mid
            else:
                hi = mid - 1
        # Whole items only: a cut-off item would read as a real, different one.
        return value[:lo], [_cut(pointer, f"kept {lo} of {len(value)} items")]
    if isinstance(value, dict):
        out = dict(value)
        cuts = []
        # Shrink the largest members first; a member that cannot shrink enough goes.
        for key in sorted(out, key=lambda k: _size(out[k]), reverse=True):
            excess = _size(out) - room
            if excess <= 0:
                break
            member = out[key]
            target = _size(member) - excess
            child = f"{pointer}/{key.replace('~', '~0').replace('/', '~1')}"
            if target > len('""') and isinstance(member, str | list | dict):
                out[key], sub = _fit(member, target, child)
                cuts.extend(sub)
            else:
                del out[key]
                cuts.append(_cut(child, "member omitted"))
        if _size(out) > room:
            return None, [_cut(pointer, "value omitted")]
        return out, cuts
    return None, [_cut(pointer, "value omitted")]


def _cut(pointer: str, detail: str) -> Cut:
    return Cut(pointer=pointer, reason="truncated", detail=detail)
