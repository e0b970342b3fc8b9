"""Every URL a run connects to, checked in one place before anything starts: the model endpoint (``--base-url``,
``model.base_url``, ``OPENAI_BASE_URL``) and the proxy variables the HTTP client obeys (``HTTPS_PROXY``...).
A bad one is one line naming where it came from and what to change, never the HTTP client's traceback."""

from __future__ import annotations

import os
import re
from urllib.parse import urlsplit

from .redact import redact_url

ENDPOINT_SCHEMES = ("http", "https")
PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def url_problem(url: str, schemes: tuple[str, ...] = ENDPOINT_SCHEMES) -> str:
    """What is wrong with ``url`` as a URL of one of ``schemes``, in a few words; '' when nothing is."""
    if not url.strip():
        return "it is empty"
    if re.search(r"[\s\x00-\x1f\x7f]", url):
        return "it holds a space or a control character"
    if "://" not in url:
        return f"it has no scheme: add http:// (or https://), as in http://{url.lstrip('/')}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"it cannot be read as a URL ({exc})"
    if parts.scheme.lower() not in schemes:
        return f"its scheme {parts.scheme!r} is not one of {', '.join(schemes)}"
    if not parts.hostname:
        return "it names no host"
    if port == 0:
        return "its port is 0"
    return ""


def check_endpoint(url: str | None, where: str) -> str:
    """``where``: ``url``'s problem as one line (credentials redacted); '' when there is none (or no URL)."""
    if url is None:
        return ""
    problem = url_problem(url)
    return f"{where}: {redact_url(url)!r}: {problem}" if problem else ""


def check_proxies() -> str:
    """The first proxy variable the HTTP client would refuse, as one line; '' when every one set is usable."""
    for name in PROXY_VARIABLES:
        value = os.environ.get(name)
        if value:
            problem = url_problem(value, PROXY_SCHEMES)
            if problem:
                return f"{name}: {redact_url(value)!r}: {problem}"
    return ""
