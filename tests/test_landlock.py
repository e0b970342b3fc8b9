"""Landlock confines a process to the folders it names, and the compile worker's confinement holds."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sandbox.worker import landlock

ROOT = Path(__file__).resolve().parent.parent


def _available() -> str:
    try:
        landlock.abi_version()
    except landlock.LandlockUnavailable as exc:
        return str(exc)
    return ""


needs_landlock = pytest.mark.skipif(bool(_available()), reason=f"no Landlock here: {_available()}")


def run_python(code: str, tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Landlock cannot be undone: every confinement happens in a child process."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "KERNELWRIGHT_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


@needs_landlock
def test_a_confined_process_reads_and_writes_only_where_it_may(tmp_path):
    (tmp_path / "ro").mkdir()
    (tmp_path / "rw").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "ro" / "a.txt").write_text("readable")
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    out = run_python(f"""
        import os
        from sandbox.worker import landlock
        base = {str(tmp_path)!r}
        abi = landlock.restrict([base + "/ro"], [base + "/rw"])
        def attempt(what, fn):
            try:
                fn()
                print(what, "ok")
            except PermissionError:
                print(what, "denied")
        attempt("read ro", lambda: open(base + "/ro/a.txt").read())
        attempt("write ro", lambda: open(base + "/ro/b.txt", "w").write("x"))
        attempt("write rw", lambda: open(base + "/rw/c.txt", "w").write("x"))
        attempt("read rw", lambda: open(base + "/rw/c.txt").read())
        attempt("read outside", lambda: open(base + "/outside/secret.txt").read())
        attempt("list outside", lambda: os.listdir(base + "/outside"))
        attempt("read /etc/hostname", lambda: open("/etc/hostname").read())
        attempt("read environ", lambda: open("/proc/self/environ").read())
        print("abi", abi)
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    lines = dict(line.rsplit(" ", 1) for line in out.stdout.splitlines())
    assert lines == {"read ro": "ok", "write ro": "denied", "write rw": "ok", "read rw": "ok",
                     "read outside": "denied", "list outside": "denied", "read /etc/hostname": "denied",
                     "read environ": "denied", "abi": str(landlock.abi_version())}


def test_an_unknown_machine_reports_landlock_unavailable(monkeypatch):
    monkeypatch.setattr(landlock.platform, "machine", lambda: "sparc64")
    with pytest.raises(landlock.LandlockUnavailable, match="sparc64"):
        landlock.abi_version()


@needs_landlock
def test_the_confined_compiler_cannot_include_host_files_but_compiles_allowed_headers(tmp_path):
    """The source filter is bypassed on purpose: the compile path is called directly."""
    home = tmp_path / "kw-compile-test"
    home.mkdir()
    secret = tmp_path / "outside.h"
    secret.write_text("int KW_HOST_SECRET = 7;\n")
    out = run_python(f"""
        import json
        from pathlib import Path
        from sandbox.candidates.candidate import parse_candidate
        from sandbox.candidates.compiler import compile_source
        from sandbox.worker.confine import confine_compiler
        status = confine_compiler(Path({str(home)!r}))
        plan = '/*@kernelwright\\n[[launch]]\\nkernel = "k"\\ngrid = "1"\\nblock = "32"\\nargs = []\\n@*/\\n'
        body = '\\nextern "C" __global__ void k() {{}}\\n'
        for header in [{str(secret)!r}, "/etc/hostname", "cuda_fp16.h", "mma.h"]:
            info, _ = compile_source(parse_candidate(plan + '#include "' + header + '"' + body), use_cache=False)
            print(json.dumps({{"header": header, "ok": info.ok, "log": info.log}}))
        print(json.dumps(status))
    """, tmp_path)
    assert out.returncode == 0, out.stderr
    *compiles, status = [__import__("json").loads(line) for line in out.stdout.splitlines()]
    assert status["confined"] is True and status["landlock_abi"] >= 1
    by_header = {c["header"]: c for c in compiles}
    for refused in (str(secret), "/etc/hostname"):
        assert not by_header[refused]["ok"]
        assert "cannot open source file" in by_header[refused]["log"]
        assert "Permission denied" in by_header[refused]["log"]
    assert "KW_HOST_SECRET" not in out.stdout
    assert by_header["cuda_fp16.h"]["ok"] and by_header["mma.h"]["ok"], by_header


PLAN = '/*@kernelwright\n[[launch]]\nkernel = "k"\ngrid = "1"\nblock = "32"\nargs = []\n@*/\n'


@needs_landlock
@pytest.mark.timeout(180)
def test_the_compile_worker_cannot_read_host_files_and_names_no_host_folder(tmp_path, monkeypatch):
    """A request straight to the compile worker (as if the source filter had missed the include)."""
    from sandbox.candidates.compiler import include_dirs
    from sandbox.host.pool import WorkerProcess
    from sandbox.candidates.source_filter import ALLOWED_INCLUDES
    from sandbox.wire import Compile, Confinement

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    secret = tmp_path / "outside.h"
    secret.write_text("int KW_HOST_SECRET = 7;\n")
    worker = WorkerProcess("compile")
    try:
        def compile_(source: str) -> dict:
            request = Compile(source=PLAN + source, flags=[], knobs={}, arch="sm_90", cache=False)
            reply = worker.call(request, timeout=120)
            assert reply.ok, reply
            return reply.info

        for header in (str(secret), "/etc/hostname"):
            info = compile_(f'#include "{header}"\nextern "C" __global__ void k() {{}}\n')
            assert not info["ok"] and "Permission denied" in info["log"], info["log"]
        every = "".join(f"#include <{h}>\n" for h in ALLOWED_INCLUDES)
        assert compile_(every + 'extern "C" __global__ void k() {}\n')["ok"]
        broken = compile_('#define __half_raw 1\n#include <cuda_fp16.h>\nextern "C" __global__ void k() {}\n')
        assert not broken["ok"] and broken["log"].startswith("<cuda-include>/cuda_fp16.h("), broken["log"]
        for folder in (*include_dirs(), str(worker.home), str(ROOT)):
            assert folder not in broken["log"] and all(folder not in o for o in broken["options"])
        assert "-I<cuda-include>" in broken["options"]
        status = worker.call(Confinement(), timeout=30)
        assert status.confined is True, status
    finally:
        worker.close()
