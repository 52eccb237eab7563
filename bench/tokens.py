"""Token counting speed: counts per second for a ~2k-token chat request, both counters.

    .venv/bin/python bench/tokens.py

Prints numbers measured in this run; nothing is asserted. Counting runs in every request's
preflight, once per distinct counter among the candidate targets.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(Path(__file__).resolve().parents[2] / "shared" / "tiktoken"))

from failover.model import Message, Request, Tool
from failover.tokens import EstimateCounter, TiktokenCounter, TokenCounter

SYSTEM = (
    "You are a support triage assistant for an online store. Classify each customer message into "
    "one of: billing, shipping, returns, account, other. Answer with the category and one sentence "
    "explaining why. Be brief and never invent order numbers. "
)
USER = (
    "Hi, I ordered a pair of running shoes last Tuesday (order 4417-2231) and the tracking page has "
    "said 'label created' for five days now. I need them before a race on Saturday. Can you tell me "
    "whether the parcel actually left the warehouse, and if not, can I get a refund for the express "
    "shipping I paid for? Thanks. "
)
ASSISTANT = "Category: shipping. The customer asks about a parcel that has not moved since the label was created. "
TOOL = Tool(
    name="lookup_order",
    description="Look up an order by its number and return its status and tracking events.",
    parameters={
        "type": "object",
        "properties": {"order": {"type": "string", "description": "The order number, e.g. 4417-2231"}},
        "required": ["order"],
    },
)


def chat_request(target_tokens: int = 2_000) -> Request:
    messages = [Message.system(SYSTEM * 3)]
    while True:
        request = Request(messages=(*messages,), tools=(TOOL,), max_tokens=256)
        if TiktokenCounter("o200k_base").count(request) >= target_tokens:
            return request
        messages += [Message.user(USER), Message.assistant(ASSISTANT)]


def rate(counter: TokenCounter, request: Request, seconds: float = 1.0) -> tuple[float, int]:
    n = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(50):
            counter.count(request)
        n += 50
    return n / elapsed, counter.count(request)


def main() -> None:
    request = chat_request()
    chars = sum(len(m.text) for m in request.messages)
    print(f"request: {len(request.messages)} messages, {chars} characters of text, 1 tool")
    t0 = time.perf_counter()
    counters: list[tuple[str, TokenCounter]] = [
        ("tiktoken:o200k_base, text cache off", TiktokenCounter("o200k_base", cache_size=0)),
        ("tiktoken:cl100k_base, text cache off", TiktokenCounter("cl100k_base", cache_size=0)),
        ("tiktoken:o200k_base, texts cached", TiktokenCounter("o200k_base")),
        ("estimate", EstimateCounter()),
    ]
    print(f"loading counters: {time.perf_counter() - t0:.3f} s (once per process)")
    for label, counter in counters:
        per_second, tokens = rate(counter, request)
        print(f"{label:38} {tokens:6} tokens  {per_second:10,.0f} counts/s  {1e6 / per_second:8.1f} us/count")
    print("(texts cached: the same conversation counted again, as when it is resent on the next turn)")


if __name__ == "__main__":
    main()
