"""Secrets kept off the screen and out of traces, reports and prompts.

A ``Redactor`` replaces, in any text or JSON-like value, every secret it knows with ``[redacted]``: the
API key in use, the values of the key variables (``OPENAI_API_KEY``, ``[model] api_key_env`` and any
variable whose name ends in ``_API_KEY``, ``_TOKEN`` or ``_SECRET``), the user name and password inside
the endpoint's URL, and text shaped like a common API key (``sk-...``, ``hf_...``, a bearer token). A
run applies one Redactor to everything a model endpoint sends back (so a key echoed in an answer or an
error never reaches the screen, the lineage or a later prompt) and to everything it writes.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4           # shorter values would blank out ordinary words
MIN_ENV_SECRET_CHARS = 8
_SECRET_NAMES = re.compile(r"(^|_)(API_KEY|TOKEN|SECRET)$")
_URL_CREDENTIALS = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_KEY_SHAPES = re.compile(r"\b(?:sk|rk)-[A-Za-z0-9_-]{20,}|\bhf_[A-Za-z0-9]{20,}|(?<=Bearer )[A-Za-z0-9._~+/-]{16,}=*")


class Redactor:
    def __init__(self, values: Iterable[str | None] = ()):
        self.values = sorted({v for v in values if v and len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    @classmethod
    def for_run(cls, base_url: str | None = None, key_env: str | None = None, key: str | None = None) -> "Redactor":
        """The secrets of one run: ``key``, the key variables' values and the endpoint URL's credentials."""
        names = {"OPENAI_API_KEY", key_env} | {n for n in os.environ if _SECRET_NAMES.search(n)}
        env = [os.environ.get(n) for n in sorted(filter(None, names))]
        values = [key, *(v for v in env if v and len(v) >= MIN_ENV_SECRET_CHARS)]
        for url in (base_url, os.environ.get("OPENAI_BASE_URL")):
            values += url_credentials(url)
        return cls(values)

    def text(self, text: str) -> str:
        for secret in self.values:
            text = text.replace(secret, REDACTED)
        return _KEY_SHAPES.sub(REDACTED, text)

    def data(self, value: Any) -> Any:
        """A copy of a JSON-like value (dicts, lists, strings) with every string redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


def url_credentials(url: str | None) -> list[str]:
    """The user name and password in a URL, as written and percent-decoded."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [v for v in (parts.username, parts.password) if v]
    return found + [unquote(v) for v in found if unquote(v) != v]


def redact_urls_in(text: str) -> str:
    """Every ``scheme://user:pass@`` in a text (a command line, a log) becomes ``scheme://[redacted]@``."""
    return _URL_CREDENTIALS.sub(rf"\1{REDACTED}@", text)


def redact_url(url: str) -> str:
    """``http://user:pass@host:8000/v1`` -> ``http://[redacted]@host:8000/v1``; other URLs unchanged."""
    try:
        parts = urlsplit(url)
        if not (parts.username or parts.password):
            return url
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        netloc = f"{REDACTED}@{host}" + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return REDACTED
    return urlunsplit(parts._replace(netloc=netloc))
