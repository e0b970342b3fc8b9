"""Secrets kept off the screen and out of traces, reports and prompts.

A ``Redactor`` replaces, in any text or JSON-like value, every secret it knows with ``[redacted]``: the
API key in use, the values of the key variables (``OPENAI_API_KEY``, ``[model] api_key_env`` and any
variable whose name ends in ``_API_KEY``, ``_TOKEN`` or ``_SECRET``), the user name and password inside
the endpoint's URL and the values of its key-like query parameters (``?api-key=``, ``?token=``, ``?sig=``...),
the same parts of any other URL in the text, the values of a config's credential-like keys (``api_key``,
``upstream_password``... inside ``extra_body``, at any depth), the ``Authorization: Basic`` value an HTTP client
builds from the URL's user name and password, and text shaped like a common API key (``sk-...``, ``hf_...``, a
bearer or basic credential). A
run applies one Redactor to everything a model endpoint sends back (so a key echoed in an answer or an
error never reaches the screen, the lineage or a later prompt) and to everything it writes.
"""

from __future__ import annotations

import base64
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
_KEY_SHAPES = re.compile(r"\b(?:sk|rk)-[A-Za-z0-9_-]{20,}|\bhf_[A-Za-z0-9]{20,}|(?<=Bearer )[A-Za-z0-9._~+/-]{16,}=*"
                         r"|(?<=Basic )[A-Za-z0-9+/]{8,}={0,2}", re.IGNORECASE)
# A config key whose name holds one of these carries a credential (``token`` but not ``max_tokens``, a count).
_SECRET_KEY = re.compile(r"key|secret|pass|pwd|auth|cred|cookie|session|signature|token(?!s)", re.IGNORECASE)


class Redactor:
    def __init__(self, values: Iterable[str | None] = ()):
        self.values = sorted({v for v in values if v and len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)

    @classmethod
    def for_run(cls, base_url: str | None = None, key_env: str | None = None, key: str | None = None,
                config: Any = None) -> "Redactor":
        """The secrets of one run: ``key``, the key variables' values, the endpoint URL's credentials (and the Basic
        credential built from them) and the credentials inside ``config`` (a model's ``extra_body``, say)."""
        names = {"OPENAI_API_KEY", key_env} | {n for n in os.environ if _SECRET_NAMES.search(n)}
        env = [os.environ.get(n) for n in sorted(filter(None, names))]
        values = [key, *(v for v in env if v and len(v) >= MIN_ENV_SECRET_CHARS)]
        for url in (base_url, os.environ.get("OPENAI_BASE_URL")):
            values += url_credentials(url) + basic_credentials(url)
        return cls(values + secrets_in(config))

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


def basic_credentials(url: str | None) -> list[str]:
    """The ``Authorization: Basic`` values an HTTP client may build from a URL's user name and password."""
    parts = _split(url) if url else None
    if parts is None or not parts[1]:
        return []
    user, _, password = parts[1][:-1].partition(":")
    pairs = {f"{user}:{password}", f"{unquote(user)}:{unquote(password)}"}
    return [base64.b64encode(pair.encode()).decode() for pair in pairs]


def is_secret_key(name: str) -> bool:
    """Whether a config key's name says its value is a credential (``api_key``, ``upstream_password``, ``token``)."""
    return bool(_SECRET_KEY.search(name))


def secrets_in(value: Any, under_secret: bool = False) -> list[str]:
    """Every credential in a JSON-like config value: each string (or number) under a credential-like key, at any
    depth, and the credentials of every URL in it."""
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in secrets_in(v, under_secret or is_secret_key(str(k)))]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in secrets_in(v, under_secret)]
    if isinstance(value, str):
        found = [value] if under_secret else []
        return found + [c for url in _URL.findall(value) for c in url_credentials(url) + basic_credentials(url)]
    if under_secret and isinstance(value, (int, float)) and not isinstance(value, bool):
        return [str(value)]
    return []


def redact_config(value: Any, under_secret: bool = False) -> Any:
    """A copy of a JSON-like config value with every value under a credential-like key replaced by ``[redacted]``
    and every URL's credentials redacted."""
    if isinstance(value, dict):
        return {k: redact_config(v, under_secret or is_secret_key(str(k))) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_config(v, under_secret) for v in value]
    if under_secret and value is not None and not isinstance(value, bool):
        return REDACTED
    return redact_urls_in(value) if isinstance(value, str) else value


def has_redacted(value: Any) -> bool:
    """Whether a JSON-like value holds ``[redacted]`` anywhere (a config read back from run.json)."""
    if isinstance(value, dict):
        return any(has_redacted(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_redacted(v) for v in value)
    return isinstance(value, str) and REDACTED in value


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
