"""Text shaped like a credential, and removing it: from error messages the gateway and the SDK
integrations pass on, and from every log line the gateway writes (its own, uvicorn's, and the
DEBUG lines of the HTTP libraries, which may show request headers).
"""

from __future__ import annotations

import re

# Things shaped like credentials: OpenAI / Anthropic / DeepSeek keys, Google API keys, bearer tokens.
KEYLIKE = re.compile(
    r"(sk-[A-Za-z0-9_\-*]{3,}|AIza[0-9A-Za-z_\-]{10,}|(?i:bearer)\s+[A-Za-z0-9._\-~+/=]{8,}|key=[^&\s\"']+)"
)
# A credential header's value however a library prints the header: ``authorization: Basic ...``,
# ``('x-api-key', 'gw-...')``, ``(b'authorization', b'AWS4-HMAC-SHA256 Credential=...')``,
# ``"api-key": "..."``. Whatever the value's shape: a tenant key need not look like a key.
_HEADER = re.compile(
    r"(?i)(\b(?:proxy-)?authorization|\bx-api-key|\bapi-key|\bx-goog-api-key|\bx-amz-security-token"
    r"|\bset-cookie|\bcookie)(['\"]?\s*[:,=]\s*b?['\"]?)([^'\"\r\n]+)"
)
_HINT = re.compile(r"(?i)sk-|aiza|bearer|key|authorization|cookie|token")


def scrub_secrets(text: str) -> str:
    """``text`` with credential header values and key-shaped strings replaced by ``***``."""
    if _HINT.search(text) is None:  # the common case: nothing to look at twice
        return text
    return KEYLIKE.sub("***", _HEADER.sub(r"\1\2***", text))
