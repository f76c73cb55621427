"""Events → tool calls: the types and the machinery every provider assembler shares (R15).

An assembler is sans-IO. It takes a provider's stream events one at a time
(:meth:`StreamAssembler.feed`) and, at the end, gives one :class:`StreamOutcome`
(:meth:`StreamAssembler.finish`). The provider modules only say how their events map
onto four operations here: open a call buffer, append argument text to it, mark it
complete, and end the response (successfully, stopped short, or failed).

The guarantees, whatever the provider (R15, R16):

* **One buffer per call.** Buffers are keyed by the provider's own handle (Chat
  ``tool_calls[].index``, Responses item id, Anthropic content block index); a
  fragment that names another call's buffer raises ``call_id_conflict``. Two calls
  with one call id also raise: results pair with calls by id (R16).
* **Nothing before it is complete.** A call becomes a :class:`~toolbound.Proposal`
  only once its arguments are done *and* its item/block is complete.
* **Conservative release.** By default every call is released when the *whole
  response* ends successfully. A ``may_start_early(name)`` policy may release a call
  as soon as its own item is complete (e.g. for ``pure``/``read`` tools); such calls
  are marked ``early`` and stay released whatever happens to the response later.
* **A response that does not end successfully releases nothing more.** Cut off,
  stopped for ``max_tokens``/``length``/``incomplete``, refused, errored or broken:
  every unreleased call is reported as an :class:`IncompleteCall` with the bytes
  received. That includes calls that were themselves complete
  (``response_incomplete``): a truncated response is not the model's final word.
* **Nothing after a terminal state.** Once the response has ended, failed, or
  :meth:`~StreamAssembler.finish` was called, further events are ignored (R17, last row)
  — except one that starts *another* response (a new response or message id), which
  raises ``several_responses``: one assembler assembles one response, and a second
  one in the same stream is refused rather than silently dropped.
* **Bounded.** What is held is counted against :class:`StreamLimits` as it arrives:
  a call over ``max_call_bytes`` fails the response with ``too_large`` (the call is
  reported with reason ``arguments_too_large``), everything held over
  ``max_stream_bytes`` with ``stream_too_large``. Either way nothing more is released.

The assembler's phases and the only edges between them::

    open ──→ complete    the provider said the response ended normally
         ├─→ stopped     it ended for a reason that may have cut output short
         ├─→ failed      an error event, or a StreamError in the stream
         └─→ cut_off     finish() before any of the above: the stream ended early
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from toolbound._errors import IllegalTransition
from toolbound._model import Proposal
from toolbound.streams.jsonl import JSONLinesDecoder, parse_event
from toolbound.streams.limits import DEFAULT_STREAM_LIMITS, StreamLimits, utf8_size
from toolbound.streams.sse import SSEDecoder, StreamError, stream_too_large

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

__all__ = [
    "PHASES",
    "EarlyStart",
    "IncompleteCall",
    "IncompleteReason",
    "OtherItem",
    "Phase",
    "Ready",
    "StreamAssembler",
    "StreamOutcome",
    "assemble_events",
    "assemble_jsonl",
    "assemble_sse",
]

EarlyStart: TypeAlias = "Callable[[str], bool]"
"""A readiness policy: given a tool name, may its call start once its own item is
complete, before the whole response has ended? Typically ``True`` only for tools
whose effect class is ``pure`` or ``read`` (R16)."""

IncompleteReason = Literal["arguments_incomplete", "arguments_too_large", "response_incomplete"]
"""Why a call was withheld: its own arguments or item never completed; its arguments
went over ``StreamLimits.max_call_bytes`` (the bytes kept are those within it); or it
was complete but the response around it did not end successfully."""

Phase = Literal["open", "complete", "stopped", "failed", "cut_off"]

PHASES: dict[Phase, frozenset[Phase]] = {
    "open": frozenset({"complete", "stopped", "failed", "cut_off"}),
    # Terminal: nothing leaves them, so nothing after them can release a call.
    "complete": frozenset(),
    "stopped": frozenset(),
    "failed": frozenset(),
    "cut_off": frozenset(),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready:
    """A call released for execution by the event just fed.

    ``early`` is true when the readiness policy released it at item completion,
    before the response had ended.
    """

    proposal: Proposal
    early: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class IncompleteCall:
    """A call that was started but never released; it must not execute (R15)."""

    call_id: str
    name: str
    received_arguments: bytes
    reason: IncompleteReason


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherItem:
    """A call-like output item this runtime never executes.

    Responses custom-tool calls (free text, not JSON arguments), MCP approval
    requests and hosted tool calls, Anthropic server tool uses, Chat custom tool
    calls. ``kind`` is the provider's item or block type, ``content`` what was
    received as its input, ``done`` whether the provider finished the item.
    """

    kind: str
    item_id: str | None
    call_id: str | None
    name: str | None
    content: bytes | None
    done: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamOutcome:
    """Everything a stream produced, once it is over.

    ``calls`` are every released :class:`~toolbound.Proposal`, in the model's order
    (on an unsuccessful response, only those released early by policy);
    ``incomplete`` the calls withheld; ``complete`` whether the provider said the
    response ended normally; ``stop_reason`` the provider's own word for how it ended
    (``tool_calls``, ``tool_use``, ``completed``, ``max_tokens``, ``length``, …);
    ``text`` the assistant text seen; ``error``/``error_code`` what went wrong, if
    anything (a provider error, or a :class:`StreamError` code).
    """

    calls: tuple[Proposal, ...]
    incomplete: tuple[IncompleteCall, ...]
    complete: bool
    stop_reason: str | None
    text: str
    error: str | None
    error_code: str | None = None
    model_call_id: str | None = None
    other_items: tuple[OtherItem, ...] = ()


class _Call:
    """The mutable buffer of one call (or one other item) while it streams in."""

    __slots__ = (
        "args_done",
        "buffer",
        "call_id",
        "item_done",
        "item_id",
        "kind",
        "name",
        "order",
        "over",
        "released",
        "surrogates",
    )

    def __init__(
        self, *, order: int, call_id: str, name: str, kind: str | None, item_id: str | None
    ) -> None:
        self.order = order
        self.call_id = call_id
        self.name = name
        self.kind = kind  # None for an executable function call, else the foreign type
        self.item_id = item_id
        # The arguments (or other item's input) as UTF-8, one buffer rather than a
        # list of small strings: what is held is what the budget counts.
        self.buffer = bytearray()
        self.surrogates = False  # a piece held a surrogate, kept as its 3 bytes
        self.over = False  # refused: more than max_call_bytes
        self.args_done = False
        self.item_done = False
        self.released = False

    def received(self) -> bytes:
        data = bytes(self.buffer)
        if not self.surrogates:
            return data
        # Deltas can split a UTF-16 surrogate pair that the event JSON escaped as
        # \uXXXX\uXXXX; joined, the halves are two code points. Recombine them. A
        # surrogate left alone after that has no UTF-8 form at all.
        text = data.decode("utf-8", "surrogatepass")
        try:
            return text.encode("utf-16", "surrogatepass").decode("utf-16").encode("utf-8")
        except UnicodeError as exc:
            msg = "the arguments contain an unpaired UTF-16 surrogate"
            raise StreamError(msg, code="invalid_utf8") from exc

    def reported(self) -> bytes:
        """The bytes to report; never fails: what cannot be UTF-8 is shown as received."""
        try:
            return self.received()
        except StreamError:
            return bytes(self.buffer)


def _withheld_because(call: _Call) -> IncompleteReason:
    if call.over:
        return "arguments_too_large"
    if call.args_done and call.item_done:
        return "response_incomplete"
    return "arguments_incomplete"


# -- typed access to event fields, for the provider modules --------------------------


def _wrong_type(key: str, want: str) -> StreamError:
    return StreamError(f"event field {key!r} is not {want}", code="protocol")


def str_field(event: Mapping[str, object], key: str) -> str | None:
    """``event[key]`` if it is a string, ``None`` if absent or null; else a StreamError."""
    value = event.get(key)
    if value is None or isinstance(value, str):
        return value
    raise _wrong_type(key, "a string")


def int_field(event: Mapping[str, object], key: str) -> int | None:
    """``event[key]`` if it is an integer, ``None`` if absent or null; else a StreamError."""
    value = event.get(key)
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _wrong_type(key, "an integer")


def map_field(event: Mapping[str, object], key: str) -> Mapping[str, object] | None:
    """``event[key]`` if it is an object, ``None`` if absent or null; else a StreamError."""
    value = event.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise _wrong_type(key, "an object")


def list_field(event: Mapping[str, object], key: str) -> list[object] | None:
    """``event[key]`` if it is an array, ``None`` if absent or null; else a StreamError."""
    value = event.get(key)
    if value is None or isinstance(value, list):
        return value
    raise _wrong_type(key, "an array")


class StreamAssembler:
    """The shared state machine behind every provider assembler.

    Subclasses implement :meth:`_handle` for one provider's events and call the
    protected helpers; they never release a call themselves.
    """

    provider: str = "unknown"

    def __init__(
        self,
        *,
        may_start_early: EarlyStart | None = None,
        limits: StreamLimits = DEFAULT_STREAM_LIMITS,
    ) -> None:
        self._may_start_early = may_start_early
        self._limits = limits
        self._buffered = 0  # UTF-8 bytes held: every call's buffer, the text, …
        self._phase: Phase = "open"
        self._calls: dict[object, _Call] = {}
        self._by_call_id: dict[str, _Call] = {}
        self._text = io.StringIO()  # grows in place; no string per delta
        self._stop_reason: str | None = None
        self._error: str | None = None
        self._error_code: str | None = None
        self._model_call_id: str | None = None
        self._outcome: StreamOutcome | None = None

    # -- the public interface ------------------------------------------------------

    @property
    def phase(self) -> Phase:
        """Where the response stands; anything but ``open`` is terminal."""
        return self._phase

    @property
    def terminal(self) -> bool:
        """Whether further events will be ignored."""
        return self._phase != "open"

    @property
    def limits(self) -> StreamLimits:
        """The byte budgets this assembler holds its stream to."""
        return self._limits

    @property
    def buffered_bytes(self) -> int:
        """The UTF-8 bytes held so far: arguments, other items' input, text."""
        return self._buffered

    def feed(self, event: Mapping[str, object]) -> list[Ready]:
        """Take one provider event; return the calls it releases, in model order.

        Raises :class:`StreamError` when the events break the provider's format or
        go over a budget; the assembler is then failed, and releases nothing more.
        Once terminal, events are ignored, but one that starts another response
        raises ``several_responses`` (and changes nothing).
        """
        if self._phase != "open":
            self._refuse_another_response(event)
            return []  # R17: nothing after a terminal state
        try:
            return self._handle(event)
        except StreamError as exc:
            self.fail(exc)
            raise

    def fail(self, error: StreamError) -> None:
        """Fail the response because the stream below it broke (ignored once terminal)."""
        if self._phase == "open":
            self._error, self._error_code = str(error), error.code
            self._enter("failed")

    def finish(self) -> StreamOutcome:
        """End the stream and report. Repeated calls return the same outcome."""
        if self._outcome is not None:
            return self._outcome
        if self._phase == "open":
            self._enter("cut_off")  # R15: the stream ended before the response did
        calls = sorted(self._calls.values(), key=lambda c: c.order)
        released = tuple(self._proposal(c) for c in calls if c.released)
        incomplete: list[IncompleteCall] = []
        others: list[OtherItem] = []
        for c in calls:
            if c.kind is not None:
                others.append(
                    OtherItem(
                        kind=c.kind,
                        item_id=c.item_id,
                        call_id=c.call_id or None,
                        name=c.name or None,
                        content=c.reported() if c.buffer else None,
                        done=c.item_done,
                    )
                )
            elif not c.released:
                incomplete.append(
                    IncompleteCall(
                        call_id=c.call_id,
                        name=c.name,
                        received_arguments=c.reported(),
                        reason=_withheld_because(c),
                    )
                )
        self._outcome = StreamOutcome(
            calls=released,
            incomplete=tuple(incomplete),
            complete=self._phase == "complete",
            stop_reason=self._stop_reason,
            text=self._text.getvalue(),
            error=self._error,
            error_code=self._error_code,
            model_call_id=self._model_call_id,
            other_items=tuple(others),
        )
        return self._outcome

    # -- for subclasses ------------------------------------------------------------

    def _handle(self, event: Mapping[str, object]) -> list[Ready]:
        raise NotImplementedError

    def _response_id(self, event: Mapping[str, object]) -> str | None:
        """The id of the response ``event`` starts (Chat: belongs to), if it says."""
        raise NotImplementedError

    def _refuse_another_response(self, event: Mapping[str, object]) -> None:
        # A replay of this response (same id) is ignored like any event after the
        # end; a different id is a second response, which this assembler cannot
        # assemble and must not drop without a word.
        other = self._response_id(event)
        if other is not None and other != self._model_call_id:
            msg = (
                f"{self.provider}: response {other!r} follows response "
                f"{self._model_call_id!r} in one stream; assemble each response with "
                "its own assembler"
            )
            raise StreamError(msg, code="several_responses")

    def _count(self, size: int) -> None:
        """Hold ``size`` more bytes, within ``max_stream_bytes``."""
        if self._buffered + size > self._limits.max_stream_bytes:
            raise stream_too_large(self._limits.max_stream_bytes)
        self._buffered += size

    def _append(self, call: _Call, piece: str) -> None:
        """Append argument (or other item input) text to ``call``, within the budgets."""
        try:
            data = piece.encode("utf-8")
        except UnicodeEncodeError:
            data = piece.encode("utf-8", "surrogatepass")  # recombined when read
            call.surrogates = True
        limit = self._limits.max_call_bytes
        if len(call.buffer) + len(data) > limit:
            call.over = True
            msg = (
                f"{self.provider}: call {call.call_id or call.item_id!r} has more than "
                f"{limit} bytes of arguments (its max_call_bytes)"
            )
            raise StreamError(msg, code="too_large")
        self._count(len(data))
        call.buffer += data

    def _replace(self, call: _Call, text: str) -> None:
        """Replace what ``call`` holds with ``text`` (an item restating its input)."""
        self._buffered -= len(call.buffer)
        call.buffer, call.surrogates = bytearray(), False
        self._append(call, text)

    def _add_text(self, piece: str) -> None:
        """Collect assistant text, within ``max_stream_bytes``."""
        self._count(utf8_size(piece))
        self._text.write(piece)

    def _enter(self, phase: Phase) -> None:
        if phase not in PHASES[self._phase]:
            msg = f"stream assembler: {self._phase} → {phase} is not allowed"
            raise IllegalTransition(msg)
        self._phase = phase

    def _set_model_call_id(self, value: str | None) -> None:
        if self._model_call_id is None and value:
            self._model_call_id = value

    def _open(
        self,
        key: object,
        *,
        order: int,
        call_id: str,
        name: str,
        kind: str | None = None,
        item_id: str | None = None,
    ) -> _Call:
        call = _Call(order=order, call_id=call_id, name=name, kind=kind, item_id=item_id)
        if kind is None:
            if not call_id or not name:
                msg = f"{self.provider}: a tool call starts without an id or a name"
                raise StreamError(msg, code="protocol")
            if call_id in self._by_call_id:
                # R16 pairs results with calls by id: two calls, one id, cannot pair.
                msg = f"{self.provider}: two calls share the call id {call_id!r}"
                raise StreamError(msg, code="call_id_conflict")
            self._by_call_id[call_id] = call
        self._calls[key] = call
        return call

    def _call_complete(self, call: _Call) -> list[Ready]:
        """Mark a call's arguments and item done; release it early if policy allows."""
        call.args_done = call.item_done = True
        early = self._may_start_early
        if call.kind is None and early is not None and early(call.name):
            call.released = True
            return [Ready(proposal=self._proposal(call), early=True)]
        return []

    def _complete(self, stop_reason: str | None) -> list[Ready]:
        """The response ended normally: release every call not yet released."""
        pending = sorted(
            (c for c in self._calls.values() if c.kind is None and not c.released),
            key=lambda c: c.order,
        )
        for call in pending:
            if not (call.args_done and call.item_done):
                msg = (
                    f"{self.provider}: the response ended normally but call "
                    f"{call.call_id!r} never completed"
                )
                raise StreamError(msg, code="protocol")
        # Build every proposal before marking any released, so an encoding error in
        # one call leaves all of them withheld.
        ready = [Ready(proposal=self._proposal(call), early=False) for call in pending]
        for call in pending:
            call.released = True
        self._stop_reason = stop_reason
        self._enter("complete")
        return ready

    def _stop(self, stop_reason: str | None) -> list[Ready]:
        """The response ended for a reason that may have cut it short: release nothing."""
        self._stop_reason = stop_reason
        self._enter("stopped")
        return []

    def _provider_error(self, code: str | None, message: str | None) -> list[Ready]:
        """The provider reported an error: release nothing more."""
        self._error = message or code or "the provider reported an error"
        self._error_code = code or "provider_error"
        self._enter("failed")
        return []

    def _proposal(self, call: _Call) -> Proposal:
        return Proposal(
            name=call.name,
            arguments=call.received(),
            proposal_id=call.call_id,
            model_call_id=self._model_call_id,
        )


# -- drivers: from bytes or events to an outcome -----------------------------------

_DONE = "[DONE]"  # Chat Completions' end-of-stream sentinel; not JSON


def assemble_events(
    assembler: StreamAssembler,
    events: Iterable[Mapping[str, object]],
    *,
    on_ready: Callable[[Ready], None] | None = None,
) -> StreamOutcome:
    """Feed already-decoded events to ``assembler`` and finish it.

    ``on_ready`` sees each released call as soon as it is released (early ones
    before the response ends). A :class:`StreamError` fails the assembler and is
    reported in the outcome instead of raised.

    ``events`` is read to its end, so that a recording holding several responses is
    refused: after the response's terminal state events change nothing (R17), but
    the start of another response raises :class:`StreamError` ``several_responses``
    (calls already handed to ``on_ready`` stay released). Anything else that breaks
    after the terminal state just ends the reading.
    """
    try:
        for event in events:
            for ready in assembler.feed(event):
                if on_ready is not None:
                    on_ready(ready)
    except StreamError as exc:
        if not assembler.terminal:
            assembler.fail(exc)
        elif exc.code == "several_responses":
            raise
        # else R17: bytes broken after the end change nothing
    return assembler.finish()


def _over_budget(assembler: StreamAssembler, held: int, budget: int) -> StreamError | None:
    """Whether the decoder's ``held`` bytes and the assembler's exceed one stream budget.

    Checked for every group of lines as it completes, before its event is fed, and
    for the unfinished group at the end of every chunk. The assembler then holds
    exactly what the events before that group gave it, whatever the chunking, so
    the check gives the same answer however the bytes are split (R15).
    """
    return stream_too_large(budget) if assembler.buffered_bytes + held > budget else None


def _sse_events(
    assembler: StreamAssembler, chunks: Iterable[bytes]
) -> Iterator[Mapping[str, object]]:
    budget = assembler.limits.max_stream_bytes
    decoder = SSEDecoder(max_buffered_bytes=budget)
    for chunk in chunks:
        try:
            groups = decoder.feed_sized(chunk)
        except StreamError as exc:
            # The bytes over budget came before the ones that broke the stream.
            over = _over_budget(assembler, decoder.pending_bytes, budget)
            if over is None:
                raise
            raise over from exc
        for data, held in groups:
            if assembler.buffered_bytes + held > budget:
                raise stream_too_large(budget)
            if data is None:
                continue
            if data == _DONE:
                if not assembler.terminal:
                    return  # the response ends here, cut off or not
                continue  # read on: another response would be refused
            yield parse_event(data)
        if error := _over_budget(assembler, decoder.pending_bytes, budget):
            raise error
    decoder.close()


def _jsonl_events(
    assembler: StreamAssembler, chunks: Iterable[bytes]
) -> Iterator[Mapping[str, object]]:
    budget = assembler.limits.max_stream_bytes
    decoder = JSONLinesDecoder(max_buffered_bytes=budget)
    for chunk in chunks:
        try:
            lines = decoder.feed_sized(chunk)
        except StreamError as exc:
            over = _over_budget(assembler, decoder.pending_bytes, budget)
            if over is None:
                raise
            raise over from exc
        for event, held in lines:
            if assembler.buffered_bytes + held > budget:  # as _over_budget, inline: per event
                raise stream_too_large(budget)
            if event is not None:
                yield event
        if error := _over_budget(assembler, decoder.pending_bytes, budget):
            raise error
    yield from decoder.close()


def assemble_sse(
    assembler: StreamAssembler,
    chunks: Iterable[bytes],
    *,
    on_ready: Callable[[Ready], None] | None = None,
) -> StreamOutcome:
    """Decode SSE bytes (any chunking), feed each event's JSON ``data`` to ``assembler``.

    Chat Completions' ``data: [DONE]`` ends the response. Invalid UTF-8 or JSON, or
    more bytes held than ``assembler.limits`` allow, fails the outcome
    (``error_code``) rather than raising. The bytes are read to their end; a second
    response in them raises ``several_responses`` (see :func:`assemble_events`).
    """
    return assemble_events(assembler, _sse_events(assembler, chunks), on_ready=on_ready)


def assemble_jsonl(
    assembler: StreamAssembler,
    chunks: Iterable[bytes],
    *,
    on_ready: Callable[[Ready], None] | None = None,
) -> StreamOutcome:
    """Like :func:`assemble_sse`, for one-JSON-event-per-line bytes."""
    return assemble_events(assembler, _jsonl_events(assembler, chunks), on_ready=on_ready)
