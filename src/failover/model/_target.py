"""Targets: one callable endpoint each, with what it can do and what it costs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum


class Dialect(StrEnum):
    OPENAI = "openai"  # OpenAI Chat Completions, and every OpenAI-compatible server
    OPENAI_RESPONSES = "openai-responses"  # the OpenAI Responses API (/v1/responses), stateless
    ANTHROPIC = "anthropic"  # Anthropic Messages (also Claude on Vertex AI, with ``vertex``)
    GEMINI = "gemini"  # Gemini generateContent (also on Vertex AI, with ``vertex``)
    BEDROCK = "bedrock"  # AWS Bedrock Converse / ConverseStream


class Capability(StrEnum):
    CHAT = "chat"  # text in, text out
    VISION = "vision"  # image input
    TOOLS = "tools"  # function / tool calling
    STRUCTURED_OUTPUT = "structured_output"  # JSON-schema constrained output
    STREAMING = "streaming"


class Secret:
    """A credential value that never shows itself in a repr, str, log or error.

    >>> Secret("sk-live-123")
    Secret('**********')
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __bool__(self) -> bool:
        return bool(self._value)


@dataclass(frozen=True, slots=True, kw_only=True)
class Price:
    """USD per million tokens."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The provider's quotas for this target; None means not limited (or not known)."""

    rpm: int | None = None
    input_tpm: int | None = None
    output_tpm: int | None = None
    concurrency: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeouts:
    """Per-attempt caps in seconds. Each is further capped by what remains of the deadline.

    ``min_useful`` is the least time an attempt needs to be worth starting: with less left
    on the deadline, the attempt is not made.
    """

    connect: float = 5.0
    first_event: float = 30.0
    idle: float = 30.0
    total: float = 60.0
    min_useful: float = 0.05


class AuthKind(StrEnum):
    """How a request is authorised, beyond a static API key in a header."""

    AWS = "aws"  # SigV4, signed with botocore from its credential chain (env, profile, instance role)
    GOOGLE = "google"  # an OAuth access token from google-auth (application default credentials or a file)
    AZURE = "azure"  # a Microsoft Entra ID token from azure-identity


@dataclass(frozen=True, slots=True, kw_only=True)
class Auth:
    """A cloud credential chain. Holds where the credentials come from, never the credentials.

    ``profile``: AWS: a named profile of the shared config files (None: botocore's default
    chain). ``credentials_file``: Google: a service-account JSON file (None: application
    default credentials). ``scope``: the OAuth scope or Entra resource scope (None: the
    service's usual one). ``tenant_id`` / ``client_id``: Azure: pick one identity (None:
    ``DefaultAzureCredential``'s chain).
    """

    kind: AuthKind
    profile: str | None = None
    credentials_file: str | None = None
    scope: str | None = None
    tenant_id: str | None = None
    client_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Vertex:
    """Google Vertex AI: the project and location a model is served from (``global`` or a
    region such as ``us-east5``). A Gemini or Anthropic target with this is called at Vertex's
    URL with a google-auth token."""

    project: str
    location: str

    @property
    def root_url(self) -> str:
        """The location's endpoint, as Google's SDKs choose it: ``https://aiplatform.googleapis.com``
        for ``global``, ``https://aiplatform.{us|eu}.rep.googleapis.com`` for the multi-regions,
        else ``https://{location}-aiplatform.googleapis.com``."""
        if self.location == "global":
            return "https://aiplatform.googleapis.com"
        if self.location in ("us", "eu"):
            return f"https://aiplatform.{self.location}.rep.googleapis.com"
        return f"https://{self.location}-aiplatform.googleapis.com"


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One callable endpoint: a model behind a base URL with one credential.

    Targets with the same ``equivalence_key`` serve the same model contract (same model in
    another region, deployment or capacity pool) and are candidates for equivalent failover.
    """

    name: str
    dialect: Dialect
    model: str
    base_url: str
    api_key: Secret | None = None
    credential: str | None = None  # where the key came from (env var / file), for scoping
    region: str | None = None
    retention: frozenset[str] = frozenset()  # tags such as "zdr", "no_training"
    safety_profiles: frozenset[str] = frozenset()
    languages: frozenset[str] = frozenset()  # empty: any
    capabilities: frozenset[Capability] = frozenset({Capability.CHAT})
    # The model's context window (input + output tokens); None: not declared, i.e. unknown (never
    # assumed to be any size; a provider's overflow error may state it, see policy.WindowBoard).
    context_window: int | None = None
    max_output_tokens: int = 4_096
    price: Price = Price()
    limits: Limits = Limits()
    timeouts: Timeouts = Timeouts()
    max_attempts: int = 2  # first try plus retries on this target
    output_tps: float = 50.0  # typical output tokens per second, to judge long generations
    equivalence_key: str | None = None
    tokenizer: str | None = None  # "tiktoken:o200k_base", "estimate"; None: by dialect
    headers: tuple[tuple[str, str], ...] = ()  # extra static headers (e.g. api-version)
    query: tuple[tuple[str, str], ...] = ()  # extra query params (e.g. Azure api-version)
    azure_deployment: bool = False  # Azure-style: /openai/deployments/{model}/..., api-key header
    auth: Auth | None = None  # a cloud credential chain instead of (or beside) api_key
    vertex: Vertex | None = None  # Gemini / Anthropic models served by Google Vertex AI
    # Embedding targets: the vector size asked for when a request names none (None: the model's
    # own). Part of what makes two targets' vectors comparable, beside the equivalence key.
    dimensions: int | None = None
    # Whether the target takes a client's pass-through fields and headers (failover.model.Passthrough)
    # when it speaks the client's dialect. False: a server that refuses fields it does not know;
    # it is treated as a target of another dialect for them (hints dropped, opaque ones exclude it).
    passthrough: bool = True
    extra: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @property
    def key(self) -> str:
        """The equivalence key, defaulting to dialect + model."""
        return self.equivalence_key or f"{self.dialect}:{self.model}"

    @property
    def scope(self) -> str:
        """Health scope: provider endpoint + credential + model + region."""
        return f"{self.base_url}|{self.credential or '-'}|{self.model}|{self.region or '-'}"

    def has(self, capability: Capability) -> bool:
        return capability in self.capabilities

    def fits(self, input_tokens: int, max_tokens: int | None, window: int | None = None) -> bool:
        """Whether input + ``max_tokens`` fit ``window`` (default: the declared window). An
        unknown window (None) fits: only a known one may turn a request away."""
        limit = window if window is not None else self.context_window
        if limit is None:
            return True
        out = max_tokens if max_tokens is not None else 0
        return input_tokens + out <= limit

    def attempt_cap(self) -> float:
        return self.timeouts.total if self.timeouts.total > 0 else math.inf
