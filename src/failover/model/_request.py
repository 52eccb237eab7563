"""The normalized chat request: what the caller asks for, independent of any provider."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._reasoning import Reasoning

Role = Literal["system", "user", "assistant", "tool"]
ReasoningEffort = Literal["minimal", "low", "medium", "high"]
# Lower steps, for a repair after truncation that thinking used up.
LOWER_EFFORT: dict[str, ReasoningEffort] = {"high": "medium", "medium": "low", "low": "minimal"}


# A prompt-caching marker as the client sent it (Anthropic's ``{"type": "ephemeral", "ttl": ...}``),
# kept on the block it marks and sent back verbatim to a target of the client's dialect. Other
# dialects have no such marker and go without it (it changes cost, not the answer).
CacheControl = Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    text: str
    cache_control: CacheControl | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ImagePart:
    """An image input: an ``https://`` URL or a ``data:<media type>;base64,...`` URL.

    Dialects that only accept inline data (Anthropic, Gemini) need ``data:`` URLs; a
    plain URL is sent as a URL where the dialect supports it.
    """

    url: str
    detail: Literal["auto", "low", "high"] | None = None
    cache_control: CacheControl | None = None

    @property
    def is_data(self) -> bool:
        return self.url.startswith("data:")

    def data(self) -> tuple[str, str]:
        """Return ``(media_type, base64_data)`` of a ``data:`` URL."""
        header, _, payload = self.url.partition(",")
        if not header.startswith("data:") or ";base64" not in header:
            raise ValueError("ImagePart.url is not a base64 data: URL")
        return header[5:].split(";", 1)[0] or "application/octet-stream", payload

    def __repr__(self) -> str:
        shown = self.url if len(self.url) <= 48 else self.url[:45] + "..."
        return f"ImagePart(url={shown!r})"


Part = TextPart | ImagePart


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call the model asked for.

    ``arguments`` is the raw JSON text as the provider sent it; ``parsed`` is the decoded
    object, or None when the text was not a JSON object (a ``tool_call_malformed`` failure).
    ``freeform``: a call of an OpenAI Responses freeform tool (``type: custom``, a
    ``custom_tool_call`` item) in the history, whose free-form text input is ``parsed["input"]``;
    only the Responses dialect can send it back as what it was.
    """

    id: str
    name: str
    arguments: str
    parsed: Mapping[str, Any] | None = None
    cache_control: CacheControl | None = None  # a history tool_use block's marker (see CacheControl)
    freeform: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    role: Role
    content: tuple[Part, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # role == "tool": which call this answers
    name: str | None = None
    # role == "assistant": the reasoning that came with this turn, in order. Sent back only to
    # a target that can read it (see failover.model.Reasoning); providers need it in tool loops.
    reasoning: tuple[Reasoning, ...] = ()
    # role == "system": a system message the client put inside the conversation (Anthropic's
    # mid-conversation system message): its JSON object as the client sent it, every field and
    # block in its order. A target of that dialect that takes such messages sends it back there,
    # verbatim; any other target reads ``content`` and treats it as every system message. None:
    # a system message of the prompt's start. Opaque data: read, never changed.
    inline: Mapping[str, Any] | None = None

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=(TextPart(text=text),))

    @classmethod
    def user(cls, *parts: str | Part) -> Message:
        return cls(role="user", content=_parts(parts))

    @classmethod
    def assistant(
        cls, text: str = "", *, tool_calls: tuple[ToolCall, ...] = (), reasoning: tuple[Reasoning, ...] = ()
    ) -> Message:
        content: tuple[Part, ...] = (TextPart(text=text),) if text else ()
        return cls(role="assistant", content=content, tool_calls=tool_calls, reasoning=reasoning)

    @classmethod
    def tool(cls, tool_call_id: str, text: str) -> Message:
        return cls(role="tool", content=(TextPart(text=text),), tool_call_id=tool_call_id)

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def has_image(self) -> bool:
        return any(isinstance(p, ImagePart) for p in self.content)


def _parts(parts: tuple[str | Part, ...]) -> tuple[Part, ...]:
    return tuple(TextPart(text=p) if isinstance(p, str) else p for p in parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    strict: bool = False
    cache_control: CacheControl | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolChoice:
    mode: Literal["auto", "none", "required", "tool"] = "auto"
    name: str | None = None  # mode == "tool"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseFormat:
    """Structured output. ``json_schema`` carries the schema the result must match."""

    kind: Literal["text", "json_object", "json_schema"] = "text"
    schema: Mapping[str, Any] | None = None
    name: str = "result"
    strict: bool = True

    @classmethod
    def json_schema(cls, schema: Mapping[str, Any], *, name: str = "result") -> ResponseFormat:
        return cls(kind="json_schema", schema=schema, name=name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Passthrough:
    """What a client sent that failover does not interpret, for the targets of its dialect.

    An inbound endpoint builds one (``/v1/messages``: ``dialect="anthropic"``; ``/v1/responses``:
    ``"openai-responses"``; ``/v1/chat/completions``: ``"openai"``); the dialect of that name
    sends ``fields`` verbatim as top-level body fields (never over its own) and merges
    ``headers`` into its own (a comma-separated header such as ``anthropic-beta`` is joined with
    the target's). A target of another dialect goes without them: ``hints`` name those that
    change cost or bookkeeping, never the answer (dropped, and the attempt records the drop);
    ``opaque`` those whose meaning failover cannot judge, which make a target of another dialect
    ineligible. A target of the own dialect that declares it takes no pass-through fields
    (``Target.passthrough`` false) is treated as one of another dialect here. Block-level
    markers (``cache_control``) live on the blocks themselves, written by the target's dialect
    whatever ``Target.passthrough`` says; their name is in ``hints`` so a drop by another
    dialect is recorded. Opaque data: read, never changed.
    """

    dialect: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    hints: frozenset[str] = frozenset()
    opaque: frozenset[str] = frozenset()

    def receives(self, dialect: str, *, takes: bool = True) -> bool:
        """Whether a target of ``dialect`` gets ``fields`` and ``headers`` (``takes``: whether the
        target takes pass-through fields at all; ``Target.passthrough``)."""
        return takes and dialect == self.dialect

    def ineligible(self, dialect: str, *, takes: bool = True) -> str | None:
        """Why a target of ``dialect`` cannot serve the request, or None (``takes``: as in
        :meth:`receives`; a target that takes none is as one of another dialect)."""
        if self.receives(dialect, takes=takes) or not self.opaque:
            return None
        names = ", ".join(sorted(self.opaque))
        if dialect == self.dialect:
            return (
                f"passthrough: the {self.dialect} field(s) {names} need a target that takes pass-through fields,"
                " and this target declares it takes none (passthrough: false)"
            )
        return (
            f"passthrough: the {self.dialect} field(s) {names} have no meaning failover can carry to a {dialect} target"
        )

    def dropped(self, dialect: str, *, takes: bool = True) -> tuple[str, ...]:
        """The hints a target of ``dialect`` goes without (sorted; empty for one that receives
        them). A target of the own dialect that takes no pass-through fields still gets the
        block-level markers (``cache_control`` on blocks): only the fields and headers are dropped."""
        if self.receives(dialect, takes=takes):
            return ()
        if dialect == self.dialect:
            return tuple(sorted(h for h in self.hints if h in self.fields or h in self.headers))
        return tuple(sorted(self.hints))


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """A provider-neutral chat request. The model comes from the Target, not from here.

    >>> Request(messages=(Message.system("Be brief."), Message.user("Hi")), max_tokens=64)
    """

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    tool_choice: ToolChoice | None = None
    response_format: ResponseFormat | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None
    reasoning_effort: ReasoningEffort | None = None  # for reasoning models; None: the provider's default
    # the client's fields failover does not interpret, for targets of the client's dialect
    passthrough: Passthrough | None = None
    # OpenAI Responses API settings only a Responses-dialect target reads, sent to it verbatim and
    # ignored by every other dialect: its hosted tools (web_search...; the router gives a request
    # with any only to a Responses-dialect target), ``include`` and ``reasoning.summary``.
    hosted_tools: tuple[Mapping[str, Any], ...] = ()
    include: tuple[str, ...] = ()
    reasoning_summary: str | None = None

    @classmethod
    def simple(cls, prompt: str, *, system: str | None = None, max_tokens: int | None = None) -> Request:
        msgs = (Message.system(system),) if system else ()
        return cls(messages=(*msgs, Message.user(prompt)), max_tokens=max_tokens)

    @property
    def system_text(self) -> str:
        return "\n\n".join(m.text for m in self.messages if m.role == "system")

    @property
    def has_images(self) -> bool:
        return any(m.has_image for m in self.messages)

    @property
    def freeform_calls(self) -> bool:
        """Whether the history holds a call of a freeform tool (see ToolCall.freeform)."""
        return any(c.freeform for m in self.messages for c in m.tool_calls)

    @property
    def wants_json_schema(self) -> bool:
        return self.response_format is not None and self.response_format.kind == "json_schema"
