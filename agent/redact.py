"""Secrets kept off the screen and out of traces, reports and prompts.

A ``Redactor`` replaces, in any text or JSON-like value, every secret it knows with ``[redacted]``: the
API key in use, the values of the key variables (``OPENAI_API_KEY``, ``[model] api_key_env`` and any
variable whose name ends in ``_API_KEY``, ``_TOKEN`` or ``_SECRET``), the user name and password inside
the endpoint's URL and the values of its key-like query parameters (``?api-key=``, ``?token=``, ``?sig=``...),
the same parts of any other URL in the text, and text shaped like a common API key (``sk-...``, ``hf_...``, a
bearer token). A
run applies one Redactor to everything a model endpoint sends back (so a key echoed in an answer or an
error never reaches the screen, the lineage or a later prompt) and to everything it writes.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable
from urllib.parse import unquote

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 4           # shorter values would blank out ordinary words
MIN_ENV_SECRET_CHARS = 8
_SECRET_NAMES = re.compile(r"(^|_)(API_KEY|TOKEN|SECRET)$")
# A URL ends at a quote or a backslash too: in JSON text (a trace line) what follows may be an escaped quote.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`\\]+")
# A query parameter whose name holds one of these words carries a credential (Azure's api-key, S3's signature...).
_SECRET_PARAM = re.compile(r"key|token|secret|pass|pwd|sig|auth|cred|session", re.IGNORECASE)
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

    def joined(self, other: "Redactor") -> "Redactor":
        """A redactor for the secrets of both."""
        return Redactor([*self.values, *other.values])

    def text(self, text: str) -> str:
        for secret in self.values:
            text = text.replace(secret, REDACTED)
        return _KEY_SHAPES.sub(REDACTED, redact_urls_in(text))

    def data(self, value: Any) -> Any:
        """A copy of a JSON-like value (dicts, lists, strings) with every string redacted."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v) for v in value]
        return value


def _split(url: str) -> tuple[str, str, str, str, str] | None:
    """scheme://, userinfo (with its @), host and port, path, ?query#fragment; by hand, since a URL already
    redacted (``[redacted]@host``) is no valid URL to ``urllib``."""
    m = re.fullmatch(r"([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)([^?#]*)(.*)", url, re.DOTALL)
    if m is None:
        return None
    scheme, netloc, path, tail = m.groups()
    user, at, host = netloc.rpartition("@")
    return scheme, user + at, host, path, tail


def _params(query: str) -> list[tuple[str, str, str]]:
    return [p.partition("=") for p in query.split("&")] if query else []


def url_credentials(url: str | None) -> list[str]:
    """The user name, password and key-like query values in a URL, as written and percent-decoded."""
    parts = _split(url) if url else None
    if parts is None:
        return []
    user, query = parts[1][:-1], parts[4].partition("#")[0].removeprefix("?")
    found = [v for v in user.partition(":")[::2] if v]
    found += [value for name, _, value in _params(query) if value and _SECRET_PARAM.search(name)]
    return found + [unquote(v) for v in found if unquote(v) != v]


def redact_urls_in(text: str) -> str:
    """Every URL in a text (a command line, a log, an error) with its credentials and key-like query values
    replaced by ``[redacted]``."""
    return _URL.sub(lambda m: redact_url(m.group(0)), text) if "://" in text else text


def redact_url(url: str) -> str:
    """``http://user:pass@host:8000/v1?api-key=K&x=1`` -> ``http://[redacted]@host:8000/v1?api-key=[redacted]&x=1``;
    a URL with neither is unchanged, and so is one already redacted."""
    parts = _split(url)
    if parts is None:
        return url
    scheme, user, host, path, tail = parts
    query, hash_, fragment = tail.removeprefix("?").partition("#")
    query = "&".join(f"{name}={REDACTED}" if sep and value and _SECRET_PARAM.search(name) else name + sep + value
                     for name, sep, value in _params(query))
    return (scheme + (f"{REDACTED}@" if user else "") + host + path + ("?" if tail.startswith("?") else "") + query
            + hash_ + fragment)
