"""Streaming decode: bytes of a recorded SSE body -> events -> the assembled answer, three ways.

    .bench-venv/bin/python bench/streaming.py              # all rows (httpx-sse, openai, anthropic installed)
    .venv/bin/python bench/streaming.py --rounds 3         # quicker; rows whose package is missing are skipped
    .bench-venv/bin/python bench/streaming.py --chunk 64   # 64-byte reads instead of one read per event
    .venv/bin/python bench/streaming.py --baseline 2f58002 --only-baseline   # just the parser-vs-earlier table
    .venv/bin/python bench/streaming.py --only-baseline --instructions 200   # and instruction counts (valgrind)

Set up the bench venv once (if absent):
``python3 -m venv .bench-venv && .bench-venv/bin/pip install -e '.[test]' httpx-sse``

The input is the same bytes for every row: openai-chat/07 (a 300-token gpt-4.1-nano answer,
302 events; its recorder stripped the SSE framing, which is put back as ``data: ...\\n\\n``
plus ``data: [DONE]``) and anthropic/04 (text then a tool call, 27 events). By default the
body is handed over one event per read, as servers flush them; ``--chunk N`` cuts it into
N-byte reads instead (so events and characters straddle reads).

* (a) failover: ``SSEDecoder.feed`` / ``flush`` + the dialect's ``StreamParser`` (normalized
  events, then ``finish()``: the Response with usage, stop reason and parsed tool arguments).
* (b) httpx-sse 0.4.x: its ``SSELineDecoder`` + ``SSEDecoder`` (what ``EventSource.iter_sse``
  runs over ``response.iter_text()``; here fed from an incremental UTF-8 decoder so no httpx
  Response is involved) + a hand-written assembler doing the same work as (a): one
  ``json.loads`` per event, text joined, tool arguments joined and parsed once, usage kept.
* (c) the official SDKs' own path: the SDK's ``SSEDecoder.iter_bytes``, each event turned into
  its model with ``construct_type`` (what ``Stream`` does for every chunk), and then the SDK's
  accumulator: ``openai.lib.streaming.chat.ChatCompletionStreamState`` (what
  ``client.chat.completions.stream()`` uses; it yields a final ``ChatCompletion``) for the
  OpenAI stream, ``anthropic.lib.streaming._messages.accumulate_event`` (what
  ``client.messages.stream()`` uses) for the Anthropic one. "(c) decode" rows stop after the
  SDK's SSE decoder.

A second table compares failover's OpenAI StreamParser with the same parser at an earlier
commit (``--baseline``, default 2f58002: before tool calls were assembled per call until the
finish and reasoning was read), loaded from git beside the current package, in the same
run: openai-chat/07 (text), openai-chat/08 (two parallel tool calls) and a synthetic stream
of four parallel calls with 40 argument fragments each (sent one call after the other, so
the old parser assembles it right too; the answers are checked to agree). "decode + parse"
includes the SSE decoder, "parse only" feeds pre-decoded events. Each round times 20 short
batches per variant in pairs (order swapped every pair); the ratio is the median over the
pairs, which a burst of other work on a shared machine moves far less than whole rounds.

"decode" rows stop at SSE events; "decode + assemble" rows produce the final answer, and
their text and tool calls are checked to agree before anything is timed. Time is
``time.process_time_ns()`` (CPU of the process); the variants alternate within each round and
each number is the median over rounds of (CPU time of the round / streams decoded). Prints
numbers measured in this run; nothing is asserted about them.
"""

from __future__ import annotations

import argparse
import codecs
import gc
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from importlib import metadata
from pathlib import Path
from typing import Any

from failover.model import Dialect, Message, Request, Response
from failover.providers import dialect_for
from failover.providers._base import SSEEvent
from failover.providers._sse import SSEDecoder

WIRE = Path(__file__).resolve().parents[2] / "shared" / "wire"
REQUEST = Request(messages=(Message.user("hi"),))

try:
    from httpx_sse._decoders import SSEDecoder as HttpxSSEDecoder
    from httpx_sse._decoders import SSELineDecoder as HttpxSSELineDecoder

    HTTPX_SSE: str | None = metadata.version("httpx-sse")
except ImportError:  # pragma: no cover - depends on the venv
    HTTPX_SSE = None

try:
    from openai._models import construct_type as openai_construct
    from openai._streaming import SSEDecoder as OpenAISSEDecoder
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    OPENAI: str | None = metadata.version("openai")
except ImportError:  # pragma: no cover
    OPENAI = None

try:
    from anthropic._models import construct_type as anthropic_construct
    from anthropic._streaming import SSEDecoder as AnthropicSSEDecoder
    from anthropic.lib.streaming._messages import accumulate_event
    from anthropic.types import RawMessageStreamEvent

    ANTHROPIC: str | None = metadata.version("anthropic")
except ImportError:  # pragma: no cover
    ANTHROPIC = None


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Stream:
    label: str
    dialect: Dialect
    body: bytes
    events: int  # SSE events in the body
    output_tokens: int  # from the stream's own usage


def load_streams() -> list[Stream]:
    lines = (WIRE / "openai-chat/07-stream-text-include-usage-obfuscation.jsonl").read_bytes().splitlines()
    openai_body = b"".join(b"data: " + line + b"\n\n" for line in lines if line.strip()) + b"data: [DONE]\n\n"
    anthropic_body = (WIRE / "anthropic/04-stream-text-then-tool-use-docs.sse").read_bytes()
    out = []
    for label, dialect, body in (
        ("openai-chat/07", Dialect.OPENAI, openai_body),
        ("anthropic/04", Dialect.ANTHROPIC, anthropic_body),
    ):
        result = ours_full(dialect)(split(body, None))
        assert isinstance(result, Response), result
        events = sum(1 for e in _decode_all(body) if isinstance(e, SSEEvent))
        out.append(Stream(label, dialect, body, events, result.usage.output_tokens))
    return out


def split(body: bytes, size: int | None) -> list[bytes]:
    """One read per event (``size`` None), or fixed-size reads."""
    if size is None:
        parts = body.split(b"\n\n")
        return [p + b"\n\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    return [body[i : i + size] for i in range(0, len(body), size)]


def _decode_all(body: bytes) -> list[Any]:
    d = SSEDecoder()
    return d.feed(body) + d.flush()


# --------------------------------------------------------------------------- (a) failover


def ours_decode(chunks: list[bytes]) -> int:
    d = SSEDecoder()
    n = 0
    for chunk in chunks:
        n += len(d.feed(chunk))
    return n + len(d.flush())


def ours_full(dialect: Dialect) -> Callable[[list[bytes]], Any]:
    adapter = dialect_for(dialect)
    target = _target(dialect)

    def run(chunks: list[bytes]) -> Any:
        parser = adapter.stream_parser(target, REQUEST, {})
        d = SSEDecoder()
        feed = parser.feed
        for chunk in chunks:
            for item in d.feed(chunk):
                if type(item) is SSEEvent:
                    feed(item)
        for item in d.flush():
            if type(item) is SSEEvent:
                feed(item)
        return parser.finish()

    return run


def _target(dialect: Dialect) -> Any:
    from failover.model import Target

    return Target(name="bench", dialect=dialect, model="m", base_url="https://example.invalid/v1")


# --------------------------------------------------------------------------- (b) httpx-sse + hand assembly


def httpx_sse_events(chunks: list[bytes]) -> list[Any]:
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    lines = HttpxSSELineDecoder()
    sse = HttpxSSEDecoder()
    out = []
    for chunk in chunks:
        for line in lines.decode(text.decode(chunk)):
            event = sse.decode(line.rstrip("\n"))
            if event is not None:
                out.append(event)
    for line in lines.flush():
        event = sse.decode(line.rstrip("\n"))
        if event is not None:
            out.append(event)
    return out


def httpx_sse_decode(chunks: list[bytes]) -> int:
    return len(httpx_sse_events(chunks))


def hand_openai(chunks: list[bytes]) -> tuple[str, list[tuple[str, str, Any]], Any]:
    text: list[str] = []
    calls: dict[int, list[Any]] = {}
    usage = None
    for event in httpx_sse_events(chunks):
        if event.data == "[DONE]":
            break
        chunk = json.loads(event.data)
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            for tc in delta.get("tool_calls") or ():
                call = calls.setdefault(tc["index"], [tc.get("id"), "", []])
                fn = tc.get("function") or {}
                if fn.get("name"):
                    call[1] = fn["name"]
                if fn.get("arguments"):
                    call[2].append(fn["arguments"])
        if chunk.get("usage"):
            usage = chunk["usage"]
    tools = [(c[0], c[1], json.loads("".join(c[2]) or "{}")) for c in calls.values()]
    return "".join(text), tools, usage


def hand_anthropic(chunks: list[bytes]) -> tuple[str, list[tuple[str, str, Any]], Any]:
    text: list[str] = []
    blocks: dict[int, list[Any]] = {}
    usage: dict[str, Any] = {}
    for event in httpx_sse_events(chunks):
        if event.event == "ping":
            continue
        data = json.loads(event.data)
        kind = data["type"]
        if kind == "content_block_delta":
            d = data["delta"]
            if d["type"] == "text_delta":
                text.append(d["text"])
            elif d["type"] == "input_json_delta":
                blocks[data["index"]][2].append(d["partial_json"])
        elif kind == "content_block_start" and data["content_block"]["type"] == "tool_use":
            b = data["content_block"]
            blocks[data["index"]] = [b["id"], b["name"], []]
        elif kind == "message_start":
            usage.update(data["message"]["usage"])
        elif kind == "message_delta":
            usage.update(data["usage"])
    tools = [(b[0], b[1], json.loads("".join(b[2]) or "{}")) for b in blocks.values()]
    return "".join(text), tools, usage


# --------------------------------------------------------------------------- (c) the official SDKs


def sdk_decode(chunks: list[bytes], decoder: type[Any]) -> int:
    return sum(1 for _ in decoder().iter_bytes(iter(chunks)))


def sdk_openai(chunks: list[bytes]) -> Any:
    state: Any = ChatCompletionStreamState()
    for sse in OpenAISSEDecoder().iter_bytes(iter(chunks)):
        if sse.data.startswith("[DONE]"):
            break
        chunk = openai_construct(type_=ChatCompletionChunk, value=sse.json())
        state.handle_chunk(chunk)
    return state.get_final_completion()


def sdk_anthropic(chunks: list[bytes]) -> Any:
    snapshot = None
    json_bufs: dict[int, bytes] = {}
    for sse in AnthropicSSEDecoder().iter_bytes(iter(chunks)):
        if sse.event == "ping" or not sse.data:
            continue
        event: Any = anthropic_construct(type_=RawMessageStreamEvent, value=sse.json())
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
    return snapshot


# --------------------------------------------------------------------------- the parser at an earlier commit


ROOT = Path(__file__).resolve().parents[1]


def _show(ref: str, where: str) -> bytes | None:
    """``src/failover/providers/{where}`` at ``ref``, or None when git cannot show it."""
    try:
        return subprocess.run(
            ["git", "show", f"{ref}:src/failover/providers/{where}"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def load_baseline(ref: str) -> Any:
    """``OpenAIDialect`` as it was at ``ref``, imported as a sibling module of the current one
    (so it runs on the same helpers and model), or None when git cannot show it."""
    # The dialect is the package providers/openai/ now, a module providers/openai.py before: the
    # baseline joins the package it was written in, so its relative imports resolve (an old one's
    # ``._openai_errors`` is today's ``openai._errors``).
    package = "failover.providers.openai"
    source = _show(ref, "openai/__init__.py")
    if source is None:
        package = "failover.providers"
        source = _show(ref, "openai.py")
        sys.modules.setdefault(
            "failover.providers._openai_errors", importlib.import_module("failover.providers.openai._errors")
        )
    if source is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="failover-bench-"))
    path = folder / "openai_baseline.py"
    path.write_bytes(source)
    name = f"{package}._openai_at_{ref}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.OpenAIDialect()


def parallel_calls_body(calls: int = 4, fragments: int = 40) -> bytes:
    """``calls`` tool calls of ``fragments`` argument fragments each, one call after the other."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"

    out = [chunk({"role": "assistant", "content": None})]
    for i in range(calls):
        args = json.dumps({f"field_{k}": f"value number {k} of call {i}" for k in range(fragments // 4)})
        step = -(-len(args) // fragments)
        fn = {"name": f"tool_{i}", "arguments": ""}
        head = {"index": i, "id": f"call_{i:024d}", "type": "function", "function": fn}
        out.append(chunk({"tool_calls": [head]}))
        for at in range(0, len(args), step):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[at : at + step]}}]}))
    out.append(chunk({}, finish="tool_calls"))
    usage = {"prompt_tokens": 80, "completion_tokens": 400, "total_tokens": 480}
    out.append(b"data: " + json.dumps({"id": "chatcmpl-bench", "choices": [], "usage": usage}).encode() + b"\n\n")
    return b"".join(out) + b"data: [DONE]\n\n"


def parse_full(adapter: Any) -> Callable[[list[bytes]], Any]:
    target = _target(Dialect.OPENAI)

    def run(chunks: list[bytes]) -> Any:
        parser = adapter.stream_parser(target, REQUEST, {})
        d = SSEDecoder()
        feed = parser.feed
        for chunk in chunks:
            for item in d.feed(chunk):
                if type(item) is SSEEvent:
                    feed(item)
        for item in d.flush():
            if type(item) is SSEEvent:
                feed(item)
        return parser.finish()

    return run


def parse_only(adapter: Any) -> Callable[[list[SSEEvent]], Any]:
    target = _target(Dialect.OPENAI)

    def run(events: list[SSEEvent]) -> Any:
        parser = adapter.stream_parser(target, REQUEST, {})
        feed = parser.feed
        for event in events:
            feed(event)
        return parser.finish()

    return run


def baseline_inputs() -> dict[str, bytes]:
    lines = (WIRE / "openai-chat/07-stream-text-include-usage-obfuscation.jsonl").read_bytes().splitlines()
    return {
        "openai-chat/07 (text)": b"".join(b"data: " + ln + b"\n\n" for ln in lines if ln.strip()) + b"data: [DONE]\n\n",
        "openai-chat/08 (2 calls)": (WIRE / "openai-chat/08-stream-parallel-tool-calls.sse").read_bytes(),
        "4 calls x 40 fragments": parallel_calls_body(),
    }


def compare_baseline(ref: str, rounds: int, target_events: int, size: int | None) -> None:
    old = load_baseline(ref)
    if old is None:
        print(f"NOTE: git cannot show {ref}: the parser-vs-{ref} table is skipped.")
        return
    new = dialect_for(Dialect.OPENAI)
    inputs = baseline_inputs()
    cases = []
    for label, body in inputs.items():
        chunks = split(body, size)
        events = [e for e in _decode_all(body) if isinstance(e, SSEEvent)]
        variants = [
            ("decode + parse", parse_full(new), parse_full(old), chunks),
            ("parse only", parse_only(new), parse_only(old), events),
        ]
        for kind, fn_new, fn_old, data in variants:
            a, b = fn_new(data), fn_old(data)
            assert isinstance(a, Response) and isinstance(b, Response), (a, b)
            if (a.text, a.tool_calls, a.usage, a.stop_reason) != (b.text, b.tool_calls, b.usage, b.stop_reason):
                raise SystemExit(f"the parser at {ref} disagrees on {label}")
            cases.append((label, len(events), kind, fn_new, fn_old, data, [], []))
    # Short batches in pairs (the order swapped every pair), so a burst of other work on the
    # machine lands in few pairs; each pair gives a ratio, and the median ratio is reported.
    batches = 20
    for r in range(rounds):
        for _label, n, _kind, fn_new, fn_old, data, t_new, t_old in cases:
            reps = max(1, target_events // (n * batches))
            for b in range(batches):
                pair = ((fn_new, t_new), (fn_old, t_old))
                for fn, samples in pair if (r + b) % 2 == 0 else pair[::-1]:
                    gc.collect()
                    start = time.process_time_ns()
                    for _ in range(reps):
                        fn(data)
                    samples.append((time.process_time_ns() - start) / reps)
    print()
    print(f"OpenAI StreamParser: this tree against {ref} ({rounds} rounds of {batches} paired batches; CPU per stream)")
    print()
    print(
        f"| stream | events | variant | µs/stream now | µs/stream at {ref} | now / {ref} (median of pairs) "
        "| middle half of pairs | fastest / fastest |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | --- | ---: |")
    for label, n, kind, _fn_new, _fn_old, _data, t_new, t_old in cases:
        ratios = sorted(x / y for x, y in zip(t_new, t_old, strict=True))
        q1, q3 = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
        now_us, then_us = statistics.median(t_new) / 1000, statistics.median(t_old) / 1000
        print(
            f"| {label} | {n} | {kind} | {now_us:,.1f} | {then_us:,.1f} "
            f"| {statistics.median(ratios):.3f}x | {q1:.3f}–{q3:.3f} | {min(t_new) / min(t_old):.3f}x |"
        )


def count_instructions(ref: str, reps: int) -> None:
    """Instructions per stream of "parse only", counted by callgrind: a cost that does not move
    when other work shares the machine. This script runs under callgrind once per stream and
    parser, parsing the stream ``reps`` times, and once parsing nothing (imports, inputs and
    pre-decoding are the same in every run); (run - empty run) / reps is one stream's parse."""
    if shutil.which("valgrind") is None:
        print("NOTE: valgrind is not installed: no instruction counts.")
        return

    def run(label: str, variant: str) -> int:
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "callgrind.out"
            cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__]
            cmd += ["--baseline", ref, "--_parse", label, variant, "--reps", str(reps)]
            subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"})
            for line in out.read_text().splitlines():
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        raise RuntimeError("no total in callgrind's output")

    empty = run("", "none")
    print()
    print(f"OpenAI StreamParser, parse only: instructions per stream (callgrind; {reps} parses per run)")
    print()
    print(f"| stream | instructions now | instructions at {ref} | now / {ref} |")
    print("| --- | ---: | ---: | ---: |")
    for label in baseline_inputs():
        now = (run(label, "now") - empty) / reps
        then = (run(label, ref) - empty) / reps
        print(f"| {label} | {now:,.0f} | {then:,.0f} | {now / then:.3f}x |")


def _parse_for_count(ref: str, label: str, variant: str, reps: int) -> None:
    parsers = {"now": parse_only(dialect_for(Dialect.OPENAI)), ref: parse_only(load_baseline(ref))}
    events = {k: [e for e in _decode_all(v) if isinstance(e, SSEEvent)] for k, v in baseline_inputs().items()}
    for fn in parsers.values():  # warm both the same way in every run, the empty one too
        for data in events.values():
            fn(data)
    if variant == "none":
        return
    fn, data = parsers[variant], events[label]
    for _ in range(reps):
        fn(data)


# --------------------------------------------------------------------------- agreement


def summary(result: Any) -> tuple[str, list[tuple[str, str, Any]]]:
    """(text, [(id, name, arguments)]) of any variant's final answer."""
    if isinstance(result, Response):
        return result.text, [(c.id, c.name, dict(c.parsed or {})) for c in result.tool_calls]
    if isinstance(result, tuple):
        return result[0], result[1]
    if hasattr(result, "choices"):  # openai ParsedChatCompletion
        message = result.choices[0].message
        calls = [(t.id, t.function.name, json.loads(t.function.arguments)) for t in message.tool_calls or ()]
        return message.content or "", calls
    texts = "".join(b.text for b in result.content if b.type == "text")  # anthropic Message
    return texts, [(b.id, b.name, b.input) for b in result.content if b.type == "tool_use"]


# --------------------------------------------------------------------------- timing


@dataclass
class Row:
    stream: Stream
    name: str
    fn: Callable[[list[bytes]], Any]
    full: bool
    samples: list[float]


def measure(rows: list[Row], chunks: dict[str, list[bytes]], rounds: int, target_events: int) -> None:
    for _ in range(rounds):
        for row in rows:
            reps = max(1, target_events // row.stream.events)
            data = chunks[row.stream.label]
            gc.collect()
            start = time.process_time_ns()
            for _ in range(reps):
                row.fn(data)
            row.samples.append((time.process_time_ns() - start) / reps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--events", type=int, default=60_000, help="SSE events per variant per round")
    parser.add_argument("--chunk", type=int, default=None, help="bytes per read (default: one read per event)")
    parser.add_argument("--baseline", default="2f58002", help="git ref of the OpenAI parser to compare with ('' skips)")
    parser.add_argument("--only-baseline", action="store_true", help="only the parser-vs-baseline table")
    parser.add_argument("--instructions", type=int, default=0, metavar="REPS", help="count instructions too")
    parser.add_argument("--_parse", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--reps", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args._parse:  # one run under callgrind, for count_instructions
        _parse_for_count(args.baseline, args._parse[0], args._parse[1], args.reps)
        return
    if args.only_baseline:
        print(f"Python {platform.python_version()} on {platform.machine()} {platform.system()}; {date.today()}")
        compare_baseline(args.baseline, args.rounds, args.events, args.chunk)
        if args.instructions:
            count_instructions(args.baseline, args.instructions)
        return
    streams = load_streams()
    chunks = {s.label: split(s.body, args.chunk) for s in streams}
    rows: list[Row] = []
    notes: list[str] = []
    if HTTPX_SSE is None:
        notes.append(
            "httpx-sse is not installed here: (b) rows skipped. Run with .bench-venv/bin/python "
            "(pip install httpx-sse)."
        )
    for s in streams:
        rows.append(Row(s, "(a) failover decode", ours_decode, False, []))
        if HTTPX_SSE:
            rows.append(Row(s, f"(b) httpx-sse {HTTPX_SSE} decode", httpx_sse_decode, False, []))
        if s.dialect is Dialect.OPENAI and OPENAI:
            rows.append(Row(s, f"(c) openai {OPENAI} SSEDecoder", lambda c: sdk_decode(c, OpenAISSEDecoder), False, []))
        if s.dialect is Dialect.ANTHROPIC and ANTHROPIC:
            rows.append(
                Row(s, f"(c) anthropic {ANTHROPIC} SSEDecoder", lambda c: sdk_decode(c, AnthropicSSEDecoder), False, [])
            )
        rows.append(Row(s, "(a) failover decode + StreamParser", ours_full(s.dialect), True, []))
        if HTTPX_SSE:
            hand = hand_openai if s.dialect is Dialect.OPENAI else hand_anthropic
            rows.append(Row(s, "(b) httpx-sse + hand assembly", hand, True, []))
        if s.dialect is Dialect.OPENAI and OPENAI:
            rows.append(Row(s, "(c) openai SDK + ChatCompletionStreamState", sdk_openai, True, []))
        if s.dialect is Dialect.ANTHROPIC and ANTHROPIC:
            rows.append(Row(s, "(c) anthropic SDK + accumulate_event", sdk_anthropic, True, []))
    if OPENAI is None:
        notes.append("openai is not installed here: its (c) rows skipped.")
    if ANTHROPIC is None:
        notes.append("anthropic is not installed here: its (c) rows skipped.")

    for s in streams:  # every decode + assemble variant must produce the same answer
        data = chunks[s.label]
        expected = summary(ours_full(s.dialect)(data))
        for row in rows:
            if row.stream is s and row.full:
                got = summary(row.fn(data))
                if got != expected:
                    raise SystemExit(f"{row.name} disagrees on {s.label}: {got!r} != {expected!r}")

    measure(rows, chunks, args.rounds, args.events)

    reads = "one read per event" if args.chunk is None else f"{args.chunk}-byte reads"
    print(f"Streaming decode ({reads}; {args.rounds} rounds; median CPU per stream)  {date.today().isoformat()}")
    print(f"Python {platform.python_version()} on {platform.machine()} {platform.system()}; {sys.executable}")
    for note in notes:
        print("NOTE:", note)
    print()
    header = (
        f"| {'stream':<16} | {'variant':<44} | {'events/s':>10} | {'µs/stream':>10} "
        f"| {'CPU µs per 1k out tok':>21} | {'vs (a)':>7} |"
    )
    print(header)
    print("|" + "|".join("-" * (len(c) + 0) for c in header.split("|")[1:-1]) + "|")
    for s in streams:
        for full in (False, True):
            group = [r for r in rows if r.stream is s and r.full is full]
            base = statistics.median(group[0].samples)
            for row in group:
                ns = statistics.median(row.samples)
                per_stream_us = ns / 1000
                events_per_s = s.events / (ns / 1e9)
                per_1k = per_stream_us * 1000 / s.output_tokens
                print(
                    f"| {s.label:<16} | {row.name:<44} | {events_per_s:>10,.0f} | {per_stream_us:>10,.1f} "
                    f"| {per_1k:>21,.1f} | {ns / base:>6.2f}x |"
                )
    print()
    for s in streams:
        print(f"{s.label}: {len(s.body):,} bytes, {s.events} events, {s.output_tokens} output tokens")
    if args.baseline:
        compare_baseline(args.baseline, args.rounds, args.events, args.chunk)
        if args.instructions:
            count_instructions(args.baseline, args.instructions)


if __name__ == "__main__":
    main()
