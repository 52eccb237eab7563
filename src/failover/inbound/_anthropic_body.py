"""The Messages request body as the gateway validates it: the pydantic models and
:func:`parse_body`. What is translated and what is refused is told in
:mod:`failover.inbound.anthropic`, which turns a validated body into a Request."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from ._wire import WireError, validation_error


class _Edge(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


# A block's prompt-caching marker, kept as sent: an Anthropic target gets it back verbatim.
CacheControl = dict[str, Any] | None


class TextBlock(_Edge):
    type: Literal["text"]
    text: str
    cache_control: CacheControl = None


class Base64Source(_Edge):
    type: Literal["base64"]
    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    data: str = Field(min_length=1)


class UrlSource(_Edge):
    type: Literal["url"]
    url: str = Field(min_length=1)

    @field_validator("url")
    @classmethod
    def _scheme(cls, url: str) -> str:
        if not url.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL (send other images as a base64 source)")
        return url


ImageSource = Annotated[Base64Source | UrlSource, Field(discriminator="type")]


class ImageBlock(_Edge):
    type: Literal["image"]
    source: ImageSource
    cache_control: CacheControl = None


class ToolUseBlock(_Edge):
    type: Literal["tool_use"]
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, Any]
    cache_control: CacheControl = None


class ToolResultBlock(_Edge):
    type: Literal["tool_result"]
    tool_use_id: str = Field(min_length=1)
    content: str | list[TextBlock] = ""
    is_error: bool = False
    cache_control: CacheControl = None

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        content = data.get("content") if isinstance(data, dict) else None
        if isinstance(content, list):
            for i, block in enumerate(content):
                kind = block.get("type") if isinstance(block, dict) else None
                if kind != "text":
                    raise ValueError(
                        f"content[{i}] is a {kind!r} block; a tool_result may hold text only here "
                        "(send images in a user text/image block after the tool results)"
                    )
        return data


class ThinkingBlock(_Edge):
    type: Literal["thinking"]
    thinking: str = ""
    signature: str = ""


class RedactedThinkingBlock(_Edge):
    type: Literal["redacted_thinking"]
    data: str = ""


UserBlock = Annotated[TextBlock | ImageBlock | ToolResultBlock, Field(discriminator="type")]
AssistantBlock = Annotated[
    TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock, Field(discriminator="type")
]


class UserMessage(_Edge):
    role: Literal["user"]
    content: str | list[UserBlock]


class AssistantMessage(_Edge):
    role: Literal["assistant"]
    content: str | list[AssistantBlock]


class SystemMessage(_Edge):
    """A mid-conversation system message; ``raw`` is its JSON object as the client sent it (with
    fields failover does not read, e.g. a per-turn ``output_config``), for an Anthropic target."""

    role: Literal["system"]
    content: str | list[TextBlock]
    _raw: dict[str, Any] = PrivateAttr(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _keep_raw(cls, data: Any, handler: ModelWrapValidatorHandler[SystemMessage]) -> SystemMessage:
        message = handler(data)
        if isinstance(data, dict):
            message._raw = data
        return message

    @property
    def raw(self) -> dict[str, Any]:
        return self._raw


InputMessage = Annotated[UserMessage | AssistantMessage | SystemMessage, Field(discriminator="role")]

_NAME = r"^[A-Za-z0-9_-]{1,64}$"


class ToolDef(_Edge):
    name: str = Field(pattern=_NAME)
    description: str = ""
    input_schema: dict[str, Any]
    strict: bool | None = None
    type: Literal["custom"] | None = None
    cache_control: CacheControl = None

    @model_validator(mode="before")
    @classmethod
    def _custom_only(cls, data: Any) -> Any:
        kind = data.get("type") if isinstance(data, dict) else None
        if kind not in (None, "custom"):
            raise ValueError(
                f"server tool {kind!r} is not supported by the gateway: the answer may come from any approved "
                "model; define a custom tool (name, description, input_schema) and run it yourself"
            )
        return data


_PARALLEL = (
    "disable_parallel_tool_use is not supported: the answer may come from a model that cannot promise one tool "
    "call; remove it and use the first tool_use block"
)


class _ChoiceBase(_Edge):
    disable_parallel_tool_use: bool | None = None

    @field_validator("disable_parallel_tool_use")
    @classmethod
    def _parallel(cls, disabled: bool | None) -> bool | None:
        if disabled:
            raise ValueError(_PARALLEL)
        return disabled


class ChoiceAuto(_ChoiceBase):
    type: Literal["auto"]


class ChoiceAny(_ChoiceBase):
    type: Literal["any"]


class ChoiceTool(_ChoiceBase):
    type: Literal["tool"]
    name: str = Field(min_length=1)


class ChoiceNone(_Edge):
    type: Literal["none"]


ToolChoiceIn = Annotated[ChoiceAuto | ChoiceAny | ChoiceTool | ChoiceNone, Field(discriminator="type")]


class ThinkingEnabled(_Edge):
    type: Literal["enabled"]
    budget_tokens: int = Field(ge=1024)


class ThinkingAdaptive(_Edge):
    type: Literal["adaptive"]


class ThinkingDisabled(_Edge):
    type: Literal["disabled"]


ThinkingIn = Annotated[ThinkingEnabled | ThinkingAdaptive | ThinkingDisabled, Field(discriminator="type")]


class JsonOutputFormat(_Edge):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(_Edge):
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    format: JsonOutputFormat | None = None


# Fields that would change the answer and that failover's Request cannot carry.
_REFUSED = {
    "top_k": "top_k is not supported: the answer may come from any approved model and not all have it; "
    "remove it (temperature and top_p are carried)",
    "container": "container is not supported: server-side code execution is not offered by the gateway",
    "mcp_servers": "mcp_servers is not supported: the gateway does not call MCP servers; define custom tools",
    "inference_geo": "inference_geo is not supported: the route's contract decides data regions; remove it",
}


class MessagesBody(_Edge):
    """The fields of a Messages request the gateway reads (some refused when they would change
    the answer: see the module docstring). Every other top-level field is kept in
    ``model_extra``, to be passed through to an Anthropic target."""

    model_config = ConfigDict(extra="allow", frozen=True)

    model: str = Field(min_length=1)
    max_tokens: int = Field(ge=1)
    messages: list[InputMessage] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[ToolDef] | None = None
    tool_choice: ToolChoiceIn | None = None
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, ge=0, le=1)
    stop_sequences: list[str] | None = None
    stream: bool | None = False
    metadata: dict[str, Any] | None = None
    thinking: ThinkingIn | None = None
    output_config: OutputConfig | None = None
    output_format: JsonOutputFormat | None = None
    top_k: Any = None
    container: Any = None
    mcp_servers: Any = None
    context_management: dict[str, Any] | None = None  # passed through (see failover.inbound.anthropic)
    inference_geo: Any = None

    @field_validator("top_k", "container", "mcp_servers", "inference_geo")
    @classmethod
    def _refused(cls, value: Any, info: Any) -> Any:
        if value is not None:
            raise ValueError(_REFUSED[info.field_name])
        return value


_UNION_FIELDS = frozenset({"content", "system", "source", "tool_choice", "thinking"})
_UNION_TAGS = frozenset(
    {
        "user",
        "assistant",
        "system",
        "text",
        "image",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
        "base64",
        "url",
        "auto",
        "any",
        "tool",
        "none",
        "enabled",
        "adaptive",
        "disabled",
        "str",
    }
)


def parse_body(data: Any) -> MessagesBody:
    """Validate a decoded body; a problem is a 400 :class:`WireError` naming the field."""
    if not isinstance(data, dict):
        raise WireError(400, "the request body must be a JSON object", code="invalid_body")
    try:
        return MessagesBody.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, tags=_UNION_TAGS, unions=_UNION_FIELDS, explain_tags=True) from None
