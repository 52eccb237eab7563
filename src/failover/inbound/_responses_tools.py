"""The tools of an OpenAI Responses request body: function tools, ``namespace`` groups of them
(Codex's ``multi_agent_v1``), and hosted tools the provider runs (``web_search``...).

A namespace is flattened for every target: each of its functions becomes the function tool
``<namespace>__<name>`` (:func:`flat_name`), and the model's calls are named back as the client
knows them (:func:`tool_names`). A hosted tool is kept whole (:class:`HostedTool`): only a
target of the Responses API is given it. So is a freeform tool (``type: custom``, Codex's
``apply_patch``: its input is free text, often constrained by a grammar no function schema can
state): its calls in the history (``custom_tool_call`` and ``custom_tool_call_output`` items)
go back to a Responses target as they were (:func:`freeform_call`), and a candidate of another
dialect is left out.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from ..model import Tool, ToolCall
from ._wire import WireError


class _Edge(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


NAME = r"^[A-Za-z0-9_-]{1,64}$"  # a tool or format name, as every provider takes it


class FunctionTool(_Edge):
    type: Literal["function"]
    name: str = Field(pattern=NAME)
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class NamespaceTool(_Edge):
    """A group of function tools (Codex's ``multi_agent_v1``...): flattened, see the module docstring."""

    type: Literal["namespace"]
    name: str = Field(pattern=NAME)
    description: str | None = None
    tools: list[FunctionTool] = Field(min_length=1)


class HostedTool(BaseModel):
    """A tool the provider runs (``web_search``...), kept whole: only a Responses target gets it."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: str = Field(min_length=1)


def _tool_kind(tool: Any) -> str:
    kind = tool.get("type") if isinstance(tool, dict) else getattr(tool, "type", None)
    return kind if kind in ("function", "namespace") else "hosted"


ToolSpec = Annotated[
    Annotated[FunctionTool, Tag("function")]
    | Annotated[NamespaceTool, Tag("namespace")]
    | Annotated[HostedTool, Tag("hosted")],
    Discriminator(_tool_kind),
]


class CustomToolCallItem(_Edge):
    """A call of a freeform tool in the history: ``input`` is its free text."""

    type: Literal["custom_tool_call"]
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: str


class _OutputText(_Edge):
    type: Literal["input_text"]
    text: str


class CustomToolCallOutputItem(_Edge):
    """What the client's freeform tool gave back (text; images are refused before parsing)."""

    type: Literal["custom_tool_call_output"]
    call_id: str = Field(min_length=1)
    output: str | list[_OutputText]

    @property
    def text(self) -> str:
        return self.output if isinstance(self.output, str) else "".join(p.text for p in self.output)


def freeform_call(item: CustomToolCallItem) -> ToolCall:
    """A freeform call as a ToolCall: its text as ``{"input": ...}``, marked ``freeform``."""
    return ToolCall(
        id=item.call_id,
        name=item.name,
        arguments=json.dumps({"input": item.input}, ensure_ascii=False),
        parsed={"input": item.input},
        freeform=True,
    )


NAMESPACE_JOIN = "__"  # a namespace's function as a flat tool: "<namespace>__<name>" (Codex's own MCP style)


def flat_name(namespace: str | None, name: str) -> str:
    """The name every target is given for function ``name`` of ``namespace`` (itself without one)."""
    return name if not namespace else f"{namespace}{NAMESPACE_JOIN}{name}"


def function_tools(defs: list[FunctionTool | NamespaceTool | HostedTool]) -> tuple[Tool, ...]:
    """The function tools (a namespace's flattened), each name once (a provider refuses a repeated one)."""
    tools: dict[str, Tool] = {}
    for i, t in enumerate(defs):
        if isinstance(t, HostedTool):
            continue
        group = (
            [(f"tools[{i}].tools[{j}].name", t.name, f) for j, f in enumerate(t.tools)]
            if isinstance(t, NamespaceTool)
            else [(f"tools[{i}].name", None, t)]
        )
        for at, namespace, f in group:
            name = flat_name(namespace, f.name)
            if name in tools:
                raise WireError(400, f"{at}: tool {name!r} is defined twice; give each tool once", param=at)
            if len(name) > 64:
                raise WireError(
                    400,
                    f"{at}: {namespace!r} and {f.name!r} make the function name {name!r}, over the 64 characters "
                    "every provider takes; shorten the namespace or the name",
                    param=at,
                )
            description = f.description or ""
            if isinstance(t, NamespaceTool) and t.description:
                description = f"{t.description}\n\n{description}" if description else t.description
            tools[name] = Tool(
                name=name,
                description=description,
                parameters=f.parameters or {"type": "object", "properties": {}},
                strict=bool(f.strict),
            )
    return tuple(tools.values())


def tool_names(tools: list[FunctionTool | NamespaceTool | HostedTool] | None) -> dict[str, tuple[str, str]]:
    """Each flattened name of a namespace's function: ``(namespace, name)`` as the client knows it."""
    return {
        flat_name(t.name, f.name): (t.name, f.name)
        for t in tools or ()
        if isinstance(t, NamespaceTool)
        for f in t.tools
    }
