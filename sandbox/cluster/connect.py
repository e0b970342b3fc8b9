"""Joining a Ray cluster and choosing its GPUs: ``require_ray``, ``connect``, ``choose_group``.

``address``: ``"local"`` starts a Ray instance on this machine for the run (and stops it at the end); ``"auto"``
joins the cluster this machine belongs to (``ray start --head`` or ``ray start --address=HEAD:6379`` ran here);
``"ray://HOST:10001"`` connects through Ray Client; ``"HOST:6379"`` joins a cluster's head directly. A process
that is already connected (a notebook that called ``ray.init``, a test's local cluster) keeps its connection.

Before Ray is asked to join an address, a plain TCP connection to it must succeed within ``CONNECT_DEADLINE_S``:
Ray itself retries an address where nothing answers for minutes; and the join itself must end within
``JOIN_DEADLINE_S`` (an open port that is no Ray head).
"""

from __future__ import annotations

import socket
import threading
from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .actor import Hello

CONNECT_DEADLINE_S = 5.0
JOIN_DEADLINE_S = 60.0   # a real head answers a join in seconds


class ClusterError(RuntimeError):
    """The cluster cannot run this: no Ray installed, no GPU in it, no actor came up. The message says which."""


def require_ray():
    try:
        import ray
    except ImportError:
        raise ClusterError("Ray is not installed: pip install 'kernelwright[ray]' (on the driver and on every "
                           "node of the cluster)") from None
    return ray


def connect(ray, address: str, fake_gpus: int | None = None) -> bool:
    """Connect this process; True when it started a Ray instance that it must stop (``ray.shutdown``).
    ``fake_gpus``: a ``"local"`` instance declares that many GPUs (the fake sandbox on a machine without any)."""
    if ray.is_initialized():
        return False
    quiet = dict(log_to_driver=False)
    if address == "local":
        extra = {"num_gpus": fake_gpus} if fake_gpus else {}
        try:
            ray.init(include_dashboard=False, **quiet, **extra)
        except Exception as exc:  # Ray's own start-up failures (a GCS or raylet that did not come up in time)
            raise ClusterError(f"cannot start a local Ray instance: {str(exc).splitlines()[0]}") from None
        return True
    reachable(address)
    join(ray, address, quiet)
    return True


def join(ray, address: str, options: dict, deadline_s: float = JOIN_DEADLINE_S) -> None:
    """``ray.init(address=...)`` within ``deadline_s``: an address that accepts connections but is no Ray head (or a
    head that never answers) leaves Ray retrying for minutes, so the join runs in a thread of its own and a join
    that outlasts the deadline is a ClusterError (the thread is left to Ray; the process is about to exit)."""
    outcome: dict = {}

    def attempt() -> None:
        try:
            ray.init(address=address, **options)
            outcome["ok"] = True
        except BaseException as exc:  # noqa: BLE001 -- carried to the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=attempt, name="ray-join", daemon=True)
    thread.start()
    thread.join(deadline_s)
    if thread.is_alive():
        raise ClusterError(f"cannot join the Ray cluster at {address!r}: it accepts connections but no Ray head "
                           f"answered within {deadline_s:g} s (is it the head's GCS port?)")
    exc = outcome.get("error")
    if isinstance(exc, (ConnectionError, RuntimeError, ValueError)):
        raise ClusterError(f"cannot join the Ray cluster at {address!r}: {str(exc).splitlines()[0]}") from None
    if exc is not None:
        raise exc


def reachable(address: str, deadline_s: float = CONNECT_DEADLINE_S) -> None:
    """ClusterError unless something accepts a TCP connection at ``address`` (``HOST:PORT`` or
    ``ray://HOST:PORT``; ``auto`` is found by Ray itself) within ``deadline_s``."""
    if address == "auto":
        return
    hostport = address.removeprefix("ray://").rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ClusterError(f"Ray address {address!r}: expected HOST:PORT, ray://HOST:PORT, 'auto' or 'local'")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=deadline_s).close()
    except OSError as exc:
        why = f"no answer within {deadline_s:g} s" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc)).lower()
        raise ClusterError(f"cannot join the Ray cluster at {address!r}: {why} (is the head running, and is the port "
                           "open?)") from None


def gpu_count(ray) -> int:
    return int(ray.cluster_resources().get("GPU", 0))


def model_of(hello: Hello) -> tuple[str, str, str]:
    """What makes two GPUs interchangeable for a claim: the sandbox kind, the GPU model and its arch."""
    return hello.kind, str(hello.device.get("gpu")), str(hello.device.get("arch"))


def choose_group(hellos: dict[str, Hello], gpu_model: str | None) -> tuple[tuple, list[str], list[str]]:
    """(the chosen model, the actors of that model, a note per model left out). Without ``gpu_model``, the model
    with the most GPUs (the first seen on a tie); with it, the model whose name contains it."""
    groups: dict[tuple, list[str]] = defaultdict(list)
    for name, hello in hellos.items():
        groups[model_of(hello)].append(name)
    if gpu_model:
        wanted = [m for m in groups if gpu_model.lower() in m[1].lower()]
        if not wanted:
            found = ", ".join(sorted({m[1] for m in groups}))
            raise ClusterError(f"no GPU of model {gpu_model!r} in the cluster (it has: {found})")
        chosen = max(wanted, key=lambda m: len(groups[m]))
    else:
        chosen = max(groups, key=lambda m: len(groups[m]))
    left = [f"{len(names)} x {m[1]} ({m[0]} sandbox, {m[2]}): another model than the {chosen[1]} measuring this run"
            for m, names in groups.items() if m != chosen]
    return chosen, groups[chosen], left
