"""Whether the model endpoint can be reached at all, asked before any GPU work: a TCP connection to its host
(or to the proxy the environment routes it through), no HTTP request, so nothing is spent and no server-side
script is disturbed. A run whose endpoint cannot be reached fails in one line before it compiles anything."""

from __future__ import annotations

import socket
import urllib.request
from urllib.parse import urlsplit

DEFAULT_URL = "https://api.openai.com/v1"
TIMEOUT_S = 5.0


class EndpointUnreachable(RuntimeError):
    """The model endpoint did not accept a connection (the message names it and why)."""


def _target(url: str) -> tuple[str, int, str]:
    """(host, port, what) to connect to: the endpoint's, or its proxy's where the environment sets one."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        p = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        return p.hostname or "", p.port or 80, f"its proxy {p.hostname}:{p.port or 80}"
    return host, port, f"{host}:{port}"


def check(url: str | None, shown: str | None = None, timeout_s: float = TIMEOUT_S) -> None:
    """Raise ``EndpointUnreachable`` unless a TCP connection to ``url``'s host (or proxy) opens within
    ``timeout_s``; ``shown`` is the URL as it may be printed (credentials redacted)."""
    url = url or DEFAULT_URL
    host, port, what = _target(url)
    if not host:
        raise EndpointUnreachable(f"model endpoint {shown or url}: no host in the URL")
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except socket.gaierror as exc:
        raise EndpointUnreachable(f"model endpoint {shown or url} cannot be reached: {host!r} does not resolve "
                                  f"({exc.strerror or exc}); nothing was compiled or run") from None
    except TimeoutError:
        raise EndpointUnreachable(f"model endpoint {shown or url} cannot be reached: no answer from {what} within "
                                  f"{timeout_s:g} s; nothing was compiled or run") from None
    except OSError as exc:
        raise EndpointUnreachable(f"model endpoint {shown or url} cannot be reached: {what}: "
                                  f"{exc.strerror or exc}; nothing was compiled or run") from None
