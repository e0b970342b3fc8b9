"""The HTTP side of a model endpoint: a deadline for each whole request, a record of every HTTP attempt
(the SDK's own retries included) and a cap on the bytes one request may receive.

The openai SDK's ``timeout`` bounds each socket operation, not the request: a server that sends its
headers and then a byte every half second never trips it. Here, while a request runs inside
``request(...)``, every socket operation is given at most the time left until that request's deadline;
once the deadline has passed, or the bytes received pass the cap, the request ends with
``RequestFailed``. That is an ``openai.OpenAIError``, which the SDK passes on without retrying.

Imports the openai SDK and its HTTP stack: only ``agent.proposers.llm`` imports this module, on first use.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator
from urllib.parse import urlsplit

import httpcore2
import httpx2
import openai

MAX_BODY_BYTES = 16 * 2**20
_local = threading.local()


class RequestFailed(openai.OpenAIError):
    """The request passed its deadline, or received more bytes than the cap (the message says which)."""


@dataclass
class Call:
    """One model request in progress on this thread: its deadline and the HTTP attempts it made."""

    limit_s: float
    max_bytes: int
    deadline: float = 0.0
    http: list[dict] = field(default_factory=list)
    received: int = 0

    def allowed(self, timeout: float | None) -> float:
        """The time a socket operation may take now; RequestFailed once the deadline has passed."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RequestFailed(f"no complete answer within the request deadline of {self.limit_s:g} s "
                                f"([model] timeout_s), after {len(self.http) or 1} HTTP attempt(s)")
        return left if timeout is None else min(timeout, left)

    def count(self, received: int) -> None:
        self.received += received
        if self.received > self.max_bytes:
            raise RequestFailed(f"the response passed {self.max_bytes / 2**20:g} MiB; the request was cut off")


@contextmanager
def request(limit_s: float, max_bytes: int | None = None) -> Iterator[Call]:
    """Run one model request (SDK retries included) under a deadline of ``limit_s`` seconds from now."""
    call = Call(limit_s, max_bytes or MAX_BODY_BYTES, time.monotonic() + limit_s)
    _local.call = call
    try:
        yield call
    finally:
        _local.call = None


def _current() -> Call | None:
    return getattr(_local, "call", None)


def _guarded(op, *args, timeout: float | None = None, **kwargs):
    call = _current()
    if call is None:
        return op(*args, timeout=timeout, **kwargs)
    try:
        return op(*args, timeout=call.allowed(timeout), **kwargs)
    except httpcore2.TimeoutException:
        call.allowed(None)  # a timeout caused by the deadline ends the request instead of being retried
        raise


class _Stream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = _guarded(self._inner.read, max_bytes, timeout=timeout)
        call = _current()
        if call is not None:
            call.count(len(data))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        _guarded(self._inner.write, buffer, timeout=timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None, timeout: float | None = None):
        return _Stream(_guarded(self._inner.start_tls, ssl_context, server_hostname, timeout=timeout))

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class _Backend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend):
        self._inner = inner

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return _Stream(_guarded(self._inner.connect_tcp, host, port, timeout=timeout, local_address=local_address,
                                socket_options=socket_options))

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _Stream(_guarded(self._inner.connect_unix_socket, path, timeout=timeout, socket_options=socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Transport(httpx2.HTTPTransport):
    """Applies the deadline to every socket operation and records each HTTP attempt of the current call."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # httpx2 has no public hook for the network layer; its pool creates every connection through this
        self._pool._network_backend = _Backend(self._pool._network_backend)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        call = _current()
        t0 = time.monotonic()
        try:
            response = super().handle_request(request)
        except BaseException as exc:
            if call is not None:
                call.http.append({"error": _brief(exc), "seconds": round(time.monotonic() - t0, 3)})
            raise
        if call is not None:
            call.http.append({"status": response.status_code, "seconds": round(time.monotonic() - t0, 3)})
        return response


def client(base_url: str | None, api_key: str, max_retries: int, timeout_s: float) -> openai.OpenAI:
    """An SDK client whose requests honour ``request(...)``; proxies from the environment still apply."""
    transport = _Transport(proxy=_env_proxy(base_url or "https://api.openai.com/v1"))
    http = httpx2.Client(transport=transport, timeout=timeout_s, follow_redirects=True)
    return openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout_s,
                         http_client=http)


def _env_proxy(url: str) -> str | None:
    """The proxy the environment names for ``url`` (an explicit transport makes httpx2 ignore them)."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _brief(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:200]
