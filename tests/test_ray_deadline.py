"""A Ray address where nothing answers is one clear error within seconds, not minutes of Ray's retries (tried
against loopback only)."""

from __future__ import annotations

import socket

import pytest

from sandbox.cluster.connect import ClusterError, connect, reachable


class _NoRay:
    """Stands for the ray module: joining must never be asked of it when the address does not answer."""

    def is_initialized(self):
        return False

    def init(self, **kwargs):
        raise AssertionError("ray.init was called for an address that does not answer")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(20)
def test_an_address_where_nothing_listens_is_refused_before_ray_is_asked():
    port = _closed_port()
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        with pytest.raises(ClusterError, match=rf"cannot join the Ray cluster at '{address}': connection refused"):
            connect(_NoRay(), address)


@pytest.mark.timeout(20)
def test_a_listening_address_passes_the_probe():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        reachable(f"127.0.0.1:{s.getsockname()[1]}")


@pytest.mark.timeout(10)
def test_a_malformed_address_says_what_is_expected():
    with pytest.raises(ClusterError, match="expected HOST:PORT"):
        reachable("somewhere")


@pytest.mark.timeout(60)
def test_the_cli_gives_one_line_for_a_dead_ray_address(kw, tmp_path):
    pytest.importorskip("ray")   # without it, the CLI says that first
    out = kw("optimize", "vector_add", "--sandbox", "fake", "--ray-address", "127.0.0.1:1", "--traces",
             tmp_path / "t", "--quiet", timeout=40)
    assert out.returncode == 2
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: cluster: cannot join the Ray cluster at '127.0.0.1:1': connection refused (is the head"
                      " running, and is the port open?)"]
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


class _HangingRay(_NoRay):
    """Stands for the ray module joining a port that answers but is no head: Ray's retries go on."""

    def __init__(self):
        import threading

        self.release = threading.Event()

    def init(self, **kwargs):
        self.release.wait(30)


@pytest.mark.timeout(20)
def test_a_port_that_answers_but_is_no_ray_head_is_one_error_within_the_join_deadline():
    from sandbox.cluster.connect import join

    ray = _HangingRay()
    with pytest.raises(ClusterError, match=r"accepts connections but no Ray head answered within 0.5 s"):
        join(ray, "127.0.0.1:6379", {}, deadline_s=0.5)
    ray.release.set()


@pytest.mark.timeout(20)
def test_a_join_that_fails_quickly_keeps_rays_reason():
    from sandbox.cluster.connect import join

    class _Refusing(_NoRay):
        def init(self, **kwargs):
            raise ConnectionError("could not find any running Ray instance\nmore")

    with pytest.raises(ClusterError, match=r"at '127.0.0.1:6379': could not find any running Ray instance$"):
        join(_Refusing(), "127.0.0.1:6379", {}, deadline_s=5)
