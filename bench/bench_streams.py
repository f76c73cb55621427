"""Time stream assembly (R15) against a naive SSE split + ``json.loads`` of each event.

Run: ``.venv/bin/python bench/bench_streams.py``. Reads the recorded streams in
``../shared/data/streams`` in place (``.jsonl`` recordings are re-framed as SSE, one
``event:``/``data:`` pair per event).

Two tables, best of several runs, MB/s of SSE bytes:

1. **Throughput.** Every recorded response (the multi-turn Responses fixture is split
   into its four responses), assembled once per copy, copies enough to make a
   few MB, fed in one chunk and in 1 KiB chunks; beside it the baseline on the same
   bytes: split on blank lines, pick the ``data:`` line, ``json.loads`` it. The
   baseline does no UTF-8 streaming, no WHATWG line handling and no assembly, so it
   bounds what any SSE consumer in Python can do; the aim is at least half of it.
2. **Linearity.** One *single* response per format whose delta events are repeated
   1x, 4x and 16x (arguments and text grow; for Responses every restated ``arguments``
   is grown to match, so the ``.done`` check still holds), fed in 1 KiB chunks. Time
   per MB should stay flat as the stream grows.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from toolbound.streams import (
    AnthropicAssembler,
    ChatCompletionsAssembler,
    ResponsesAssembler,
    StreamAssembler,
    assemble_sse,
)

if TYPE_CHECKING:
    from collections.abc import Callable

STREAMS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "streams"
ASSEMBLERS: dict[str, Callable[[], StreamAssembler]] = {
    "openai-chat": ChatCompletionsAssembler,
    "openai-responses": ResponsesAssembler,
    "anthropic": AnthropicAssembler,
}
REPEATS = 5  # best of 5: the minimum is the least disturbed by the rest of the machine
TARGET_BYTES = 4_000_000
CHUNK = 1024


def _frame(events: list[dict[str, object]]) -> bytes:
    out = []
    for event in events:
        data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
        out.append(f"event: {event.get('type', 'message')}\ndata: {data}\n\n")
    return "".join(out).encode()


def _jsonl_events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _responses(events: list[dict[str, object]]) -> list[list[dict[str, object]]]:
    """Split a recording that holds several responses (a multi-turn fixture) apart."""
    out: list[list[dict[str, object]]] = []
    for event in events:
        if not out or event.get("type") in {"response.created", "message_start"}:
            out.append([])
        out[-1].append(event)
    return out


def _recordings() -> list[tuple[str, bytes]]:
    found = []
    for path in sorted(STREAMS.glob("*/*")):
        if path.suffix == ".sse":
            found.append((path.parent.name, path.read_bytes()))
        elif path.suffix == ".jsonl":
            found.extend(
                (path.parent.name, _frame(response)) for response in _responses(_jsonl_events(path))
            )
    return found


def _chunks(data: bytes, size: int | None) -> list[bytes]:
    if size is None:
        return [data]
    return [data[i : i + size] for i in range(0, len(data), size)]


def _baseline(data: bytes) -> int:
    """Naive SSE: split on blank lines, json.loads the data line of each block."""
    n = 0
    for block in data.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data: ") and line != b"data: [DONE]":
                json.loads(line[6:])
                n += 1
    return n


def _best(run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def throughput() -> None:
    """Table 1: the recordings, replicated to a few MB."""
    recordings = _recordings()
    size = sum(len(data) for _, data in recordings)
    copies = max(1, TARGET_BYTES // size)
    total = size * copies
    work = [(ASSEMBLERS[provider], data) for provider, data in recordings] * copies
    framed = [(make, _chunks(data, CHUNK)) for make, data in work]
    whole = [(make, [data]) for make, data in work]

    def ours(items: list[tuple[Callable[[], StreamAssembler], list[bytes]]]) -> None:
        for make, chunks in items:
            assemble_sse(make(), chunks)

    def base() -> None:
        for _, data in work:
            _baseline(data)

    t_base = _best(base)
    t_whole = _best(lambda: ours(whole))
    t_chunked = _best(lambda: ours(framed))
    mb = total / 1e6
    print(f"throughput: {len(recordings)} responses x {copies} = {mb:.1f} MB of SSE")
    print(f"  baseline (split + json.loads)      {mb / t_base:8.1f} MB/s")
    for label, seconds in (("one chunk per stream", t_whole), (f"{CHUNK} B chunks", t_chunked)):
        print(f"  assembled, {label:24}{mb / seconds:8.1f} MB/s  ratio {t_base / seconds:.2f}")


def _grow(events: list[dict[str, object]], factor: int, provider: str) -> list[dict[str, object]]:
    """One response with its delta events repeated ``factor`` times, kept consistent."""
    grown: list[dict[str, object]] = []
    run: list[dict[str, object]] = []
    for event in [*events, {}]:
        if _is_delta(event, provider):
            run.append(event)
            continue
        for _ in range(factor):
            grown.extend(run)
        run = []
        if event:
            grown.append(event)
    if provider == "openai-responses":
        # Every restatement of an item's arguments grows with its deltas.
        text = json.dumps(grown)
        for event in events:
            if event.get("type") == "response.function_call_arguments.done":
                args = json.dumps(event["arguments"])[1:-1]
                text = text.replace(f'"{args}"', f'"{args * factor}"')
        grown = json.loads(text)
        for number, event in enumerate(grown):
            event["sequence_number"] = number
    return grown


def _is_delta(event: dict[str, object], provider: str) -> bool:
    if provider == "openai-chat":
        choices = event.get("choices") or [{}]
        first = choices[0] if isinstance(choices, list) else {}
        delta = first.get("delta") if isinstance(first, dict) else None
        return isinstance(delta, dict) and bool(delta) and first.get("finish_reason") is None
    return str(event.get("type", "")).endswith(".delta") or event.get("type") == (
        "content_block_delta"
    )


def _sse_events(data: bytes) -> list[dict[str, object]]:
    return [
        json.loads(line[6:])
        for line in data.split(b"\n")
        if line.startswith(b"data: ") and line != b"data: [DONE]"
    ]


def linearity() -> None:
    """Table 2: one growing response per format."""
    sources = {
        "openai-chat": _sse_events((STREAMS / "openai-chat" / "f82268f2fefd.sse").read_bytes()),
        "openai-responses": _jsonl_events(STREAMS / "openai-responses" / "azure-tool-call.1.jsonl"),
        "anthropic": _sse_events((STREAMS / "anthropic" / "tool_use_response.sse").read_bytes()),
    }
    print(f"linearity: one response per format, deltas repeated, {CHUNK} B chunks")
    print(f"  {'format':18} {'size':>6} {'bytes':>10} {'MB/s':>8} {'base MB/s':>10} {'ratio':>6}")
    for provider, events in sources.items():
        base_factor = 1
        while len(_frame(_grow(events, base_factor, provider))) < 250_000:
            base_factor *= 2
        for scale in (1, 4, 16):
            data = _frame(_grow(events, base_factor * scale, provider))
            chunks = _chunks(data, CHUNK)
            make = ASSEMBLERS[provider]
            outcome = assemble_sse(make(), chunks)
            assert outcome.complete, (provider, outcome.error)
            t_ours = _best(lambda make=make, chunks=chunks: assemble_sse(make(), chunks))
            t_base = _best(lambda data=data: _baseline(data))
            mb = len(data) / 1e6
            print(
                f"  {provider:18} {scale:>5}x {len(data):>10,} {mb / t_ours:8.1f} "
                f"{mb / t_base:10.1f} {t_base / t_ours:6.2f}"
            )


def main() -> None:
    """Print both tables."""
    if not STREAMS.is_dir():
        msg = f"recorded streams not found at {STREAMS}"
        raise SystemExit(msg)
    throughput()
    print()
    linearity()


if __name__ == "__main__":
    main()
