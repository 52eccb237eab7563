"""What one fake provider answers, call after call: a :class:`Script` of replies.

A script is the ordered replies one provider gives to its successive calls, then a
``default`` for every later call. It is plain immutable data, and can be written as data:
each reply in its string or mapping form (see :mod:`._reply`), the script as a list or a
mapping, so it can live in YAML or JSON next to the test that uses it::

    Script.parse(["rate_limit(retry_after=2)", "ok"])
    Script.parse({"replies": ["hang"], "default": "server_error"})

A :class:`~._scenario.Scenario` names the script of each of several providers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ._reply import Reply, ReplySpec

__all__ = ["Script", "ScriptSpec"]


@dataclass(frozen=True, slots=True)
class Script:
    """What one provider answers: ``replies[0]`` to its first call, ``replies[1]`` to the
    second, ..., then ``default`` to every later call.

    >>> s = Script.of("rate_limit(retry_after=2)", "ok", default="server_error")
    >>> [s.reply_for(i).kind.value for i in range(4)]
    ['rate_limit', 'ok', 'server_error', 'server_error']
    """

    replies: tuple[Reply, ...] = ()
    default: Reply = Reply()  # noqa: RUF009 - a frozen dataclass, shared safely

    def __post_init__(self) -> None:
        replies: object = self.replies
        if not isinstance(replies, tuple):
            object.__setattr__(self, "replies", tuple(self.replies))
        for i, reply in enumerate(self.replies):
            item: object = reply
            if not isinstance(item, Reply):
                raise ValueError(f"Script.replies[{i}] is not a Reply: {reply!r} (use Script.of for strings)")

    @classmethod
    def of(cls, *replies: ReplySpec, default: ReplySpec = "ok") -> Script:
        """A script from replies in any data form."""
        parsed = tuple(Reply.parse(r, where=f"reply #{i + 1}") for i, r in enumerate(replies))
        return cls(parsed, Reply.parse(default, where="default"))

    @classmethod
    def always(cls, reply: ReplySpec) -> Script:
        """The same reply to every call."""
        return cls((), Reply.parse(reply, where="default"))

    @classmethod
    def parse(cls, spec: ScriptSpec | None, *, where: str = "script") -> Script:
        """A Script from its data form.

        * a list: the replies in order, then ok for every later call;
        * a mapping ``{"replies": [...], "default": ...}`` (both optional);
        * a single reply (string, Reply or reply mapping): that reply to EVERY call;
        * None: ok to every call.
        """
        if spec is None:
            return cls()
        if isinstance(spec, Script):
            return spec
        if isinstance(spec, Reply | str):
            return cls((), Reply.parse(spec, where=f"{where}: default"))
        if isinstance(spec, Mapping):
            if "replies" in spec or "default" in spec:
                unknown = set(spec) - {"replies", "default"}
                if unknown:
                    raise ValueError(f"{where}: unknown key(s) {sorted(unknown)}; expected 'replies', 'default'")
                return cls._from_parts(spec.get("replies", ()), spec.get("default", "ok"), where)
            return cls((), Reply.parse(spec, where=f"{where}: default"))
        if isinstance(spec, Sequence):
            return cls._from_parts(spec, "ok", where)
        raise ValueError(f"{where}: expected a list of replies or {{'replies': [...], 'default': ...}}, got {spec!r}")

    @classmethod
    def _from_parts(cls, replies: object, default: object, where: str) -> Script:
        if isinstance(replies, str | Mapping) or not isinstance(replies, Sequence):
            raise ValueError(f"{where}: 'replies' must be a list, got {replies!r}")
        parsed = tuple(Reply.parse(r, where=f"{where}, reply #{i + 1}") for i, r in enumerate(replies))
        return cls(parsed, Reply.parse(default, where=f"{where}, default"))  # type: ignore[arg-type]

    def reply_for(self, index: int) -> Reply:
        """The reply to the call number ``index`` (0-based)."""
        return self.replies[index] if 0 <= index < len(self.replies) else self.default

    def __len__(self) -> int:
        return len(self.replies)

    def __repr__(self) -> str:
        shown = ", ".join(repr(r.to_string()) for r in self.replies)
        return f"Script.of({shown}{', ' if shown else ''}default={self.default.to_string()!r})"


ScriptSpec: TypeAlias = "Script | Reply | str | Sequence[ReplySpec] | Mapping[str, Any]"
