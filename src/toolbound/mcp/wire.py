"""``tools/call`` answered below the SDK's typed layer (R18).

For every request, the SDK's server checks the params against the protocol
version's schema, builds the typed params and calls the handler; it then shapes the
handler's result for the wire: a dump of the result model, checked and dumped again
against the version's schema, with the ``serverInfo`` stamp on a 2026-07-28
connection. :class:`DirectCalls` is the server middleware that answers
``tools/call`` itself::

    the request     the SDK's own checks, in its order (the version's schema, the
                    initialize gate, the typed params); one they refuse goes on to
                    the SDK, which refuses it exactly as it always has
    the result      written out directly (:func:`wire_result`) when it is made of
                    what a guarded server sends: text blocks, structured content,
                    ``isError`` and ``_meta``, all plain JSON; any other result
                    (image, audio or resource blocks, ``input_required``) is shaped
                    the SDK's way, schema check included

Either way the client receives the same JSON object. Everything else (initialize,
listings, resources, prompts, notifications) goes through the SDK unchanged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from toolbound.mcp.relay import connection_of

try:
    import mcp_types as types
    from mcp.shared.exceptions import MCPError
    from mcp_types import CORE_RESULT_TYPES, INTERNAL_ERROR, SERVER_INFO_META_KEY
    from mcp_types import methods as _methods
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
    from pydantic import ValidationError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    msg = "toolbound.mcp needs the MCP SDK: pip install 'toolbound[mcp]'"
    raise ImportError(msg) from exc

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    Answer = Callable[
        [ServerRequestContext[Any, Any], types.CallToolRequestParams],
        Awaitable[types.CallToolResult | types.InputRequiredResult | dict[str, Any]],
    ]

__all__ = ["DirectCalls", "wire_result"]

_LOG = logging.getLogger("toolbound.mcp")
_METHOD: Final = "tools/call"
_JSON_SCALARS: Final = (str, int, float, bool, type(None))


class DirectCalls:
    """SDK server middleware: ``tools/call`` decoded, answered and encoded here.

    ``answer`` is the server's ``tools/call`` handler; ``server_info`` gives a fresh
    ``serverInfo`` stamp (the SDK server's ``server_info_stamp``).
    """

    def __init__(self, answer: Answer, server_info: Callable[[], dict[str, Any]]) -> None:
        self._answer = answer
        self._server_info = _copies(server_info)

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Answer a ``tools/call`` the SDK's checks accept; pass anything else on."""
        if ctx.method != _METHOD:
            return await call_next(ctx)
        params = _checked(ctx)
        if params is None:
            return await call_next(ctx)  # refused by the SDK, as it always was
        result = await self._answer(ctx, params)
        return wire_result(result, str(ctx.protocol_version), self._server_info)


def _copies(server_info: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """Fresh copies of a server's ``serverInfo`` stamp, which is fixed once the server is built.

    The SDK deep-copies it for every result; a stamp of plain values (a name and a
    version, say) needs only a shallow copy to be a fresh one.
    """
    flat: dict[str, Any] | None = None

    def fresh() -> dict[str, Any]:
        nonlocal flat
        if flat is not None:
            return dict(flat)
        stamp = server_info()
        if all(type(v) in _JSON_SCALARS for v in stamp.values()):
            flat = dict(stamp)
        return stamp

    return fresh


def _checked(ctx: ServerRequestContext[Any, Any]) -> types.CallToolRequestParams | None:
    """The typed params, when the SDK's own checks of the request pass; else ``None``."""
    if not getattr(connection_of(ctx.session), "initialize_accepted", False):
        return None
    try:
        _methods.validate_client_request(_METHOD, ctx.protocol_version, ctx.params)
        return types.CallToolRequestParams.model_validate(
            {} if ctx.params is None else ctx.params, by_name=False
        )
    except (KeyError, ValueError):  # a pydantic ValidationError is a ValueError
        return None


def wire_result(
    result: types.CallToolResult | types.InputRequiredResult | dict[str, Any],
    version: str,
    server_info: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """The JSON object the SDK's server would send for ``result`` on a ``version`` connection.

    A ``dict`` is a result already in its wire form (a task's ``CreateTaskResult``).
    """
    modern = version in MODERN_PROTOCOL_VERSIONS
    if isinstance(result, dict):
        return _stamped(dict(result), modern=modern, server_info=server_info)
    if isinstance(result, types.CallToolResult):
        texts = _plain_texts(result, modern=modern)
        if texts is not None:
            return _written(result, texts, modern=modern, server_info=server_info)
    return _shaped_by_sdk(result, version, server_info)


def _written(
    result: types.CallToolResult,
    texts: list[str],
    *,
    modern: bool,
    server_info: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """A plain result's JSON object, written out field by field as the SDK dumps them."""
    wire: dict[str, Any] = {"content": [{"type": "text", "text": text} for text in texts]}
    if result.structured_content is not None:
        wire["structuredContent"] = result.structured_content
    wire["isError"] = result.is_error
    if modern:
        wire["resultType"] = "complete"
    if result.meta is not None:
        wire["_meta"] = dict(result.meta)
    return _stamped(wire, modern=modern, server_info=server_info)


def _plain_texts(result: types.CallToolResult, *, modern: bool) -> list[str] | None:
    """The texts of ``result``'s blocks, if it holds only what :func:`wire_result` writes."""
    if result.result_type != "complete" or result.model_extra:
        return None
    texts: list[str] = []
    for block in result.content:
        if (
            not isinstance(block, types.TextContent)
            or type(block) is not types.TextContent
            or block.annotations is not None
            or block.meta is not None
            or block.model_extra
        ):
            return None
        texts.append(block.text)
    value = result.structured_content
    # Before 2026-07-28 structured content is an object: anything else is the SDK's
    # to refuse.
    if not modern and value is not None and type(value) is not dict:
        return None
    if not _json(value) or (result.meta is not None and not _json(result.meta)):
        return None
    return texts


def _json(value: object) -> bool:
    """Whether ``value`` is made of JSON's own types only (it dumps as itself)."""
    if type(value) in _JSON_SCALARS:
        return True
    if type(value) is dict:
        return all(type(k) is str and _json(v) for k, v in value.items())
    if type(value) is list:
        return all(_json(v) for v in value)
    return False


def _shaped_by_sdk(
    result: types.CallToolResult | types.InputRequiredResult,
    version: str,
    server_info: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """The SDK server's own shaping of a handler's result, step by step."""
    modern = version in MODERN_PROTOCOL_VERSIONS
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    result_type = dumped.get("resultType")
    if not modern or not isinstance(result_type, str) or result_type in CORE_RESULT_TYPES:
        try:
            dumped = _methods.serialize_server_result(_METHOD, version, dumped)
        except ValidationError:
            _LOG.exception("a tools/call result does not fit protocol version %s", version)
            raise MCPError(
                code=INTERNAL_ERROR, message="Handler returned an invalid result"
            ) from None
    if modern and dumped.get("resultType") is None:
        dumped["resultType"] = "complete"
    return _stamped(dumped, modern=modern, server_info=server_info)


def _stamped(
    wire: dict[str, Any], *, modern: bool, server_info: Callable[[], dict[str, Any]]
) -> dict[str, Any]:
    """A 2026-07-28 result names the server in ``_meta`` (unless it names itself)."""
    if not modern:
        return wire
    meta = wire.get("_meta")
    if meta is None:
        wire["_meta"] = {SERVER_INFO_META_KEY: server_info()}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        wire["_meta"] = {**meta, SERVER_INFO_META_KEY: server_info()}
    return wire
