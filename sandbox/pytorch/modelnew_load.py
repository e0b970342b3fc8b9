"""A ModelNew solution executed and built, in the confined problem process only (sandbox.pytorch.modelnew_run).

The solution's module runs with ``TORCH_EXTENSIONS_DIR`` set to a folder of its own (the cache of its builds,
keyed by the hash of the sources it builds), under a build deadline. Every ``load_inline`` / ``load`` it calls is
watched:
the seconds it took, whether it failed, and the compiler's log; so a build that fails is a compile error with the
log, and a solution that catches that failure and goes on (a silent fallback to PyTorch) is named as such. What
it prints goes to a file of its own, never to a terminal.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import types
from contextlib import contextmanager
from dataclasses import dataclass, field

LOG_CHARS = 20_000


class BuildDeadline(Exception):
    """The build ran past its deadline."""


@dataclass
class Built:
    """What executing the solution gave: its namespace, or why there is none, and what each build did."""

    ns: dict | None
    error: str = ""                 # one line: why the solution could not be loaded
    log: str = ""                   # the compiler's log (or the traceback's last lines)
    timed_out: bool = False
    seconds: float = 0.0
    builds: list[dict] = field(default_factory=list)   # one per load_inline/load call: name, seconds, ok, error
    modules: list = field(default_factory=list)        # the extension modules built

    @property
    def swallowed(self) -> list[dict]:
        """Builds that failed while the solution still loaded: it caught the failure and went on."""
        return [b for b in self.builds if not b["ok"]] if self.ns is not None else []


@contextmanager
def _watched_builds(builds: list[dict], modules: list):
    from torch.utils import cpp_extension

    originals = {name: getattr(cpp_extension, name) for name in ("load_inline", "load")}

    def watch(name, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            record = {"call": name, "name": str(kwargs.get("name", args[0] if args else "?")), "ok": False,
                      "error": ""}
            builds.append(record)
            try:
                module = fn(*args, **kwargs)
            except BuildDeadline:
                record["error"] = "ran past the build deadline"
                raise
            except Exception as exc:
                record["error"] = str(exc)[-LOG_CHARS:]
                raise
            finally:
                record["seconds"] = time.perf_counter() - t0
            record["ok"] = True
            modules.append(module)
            return module
        return wrapper

    for name, fn in originals.items():
        setattr(cpp_extension, name, watch(name, fn))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(cpp_extension, name, fn)


@contextmanager
def _deadline(seconds: float):
    def expire(signum, frame):
        raise BuildDeadline()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def load_solution(source: str, key: str, extensions_dir: str, deadline_s: float) -> Built:
    """Execute the solution's module (building what it builds) and return its namespace with ``ModelNew``."""
    import torch

    os.environ["TORCH_EXTENSIONS_DIR"] = extensions_dir
    os.makedirs(extensions_dir, exist_ok=True)
    os.environ.setdefault("MAX_JOBS", str(max(1, min(8, os.cpu_count() or 1))))
    module = types.ModuleType(f"kernelwright_solution_{key}")
    module.__file__ = f"<solution {key}>"
    ns = module.__dict__
    built = Built(ns=None)
    t0 = time.perf_counter()
    try:
        with _watched_builds(built.builds, built.modules), _deadline(deadline_s):
            code = compile(source, f"solution_{key}.py", "exec")
            sys.modules[module.__name__] = module
            exec(code, ns)   # the solution's own code, in the confined process
    except BuildDeadline:
        built.timed_out = True
        built.error = f"the build ran past its {deadline_s:.0f} s deadline"
    except SyntaxError as exc:
        built.error = f"line {exc.lineno}: cannot parse: {exc.msg}"
    except BaseException as exc:  # a failed build, or the solution's own code failing at import
        failed = next((b for b in built.builds if not b["ok"]), None)
        built.error = (f"{failed['call']}({failed['name']!r}) failed to build" if failed else
                       f"executing the solution failed: {type(exc).__name__}: {_first_line(exc)}")
        built.log = (failed["error"] if failed else _tail(exc))[-LOG_CHARS:]
    else:
        model_new = ns.get("ModelNew")
        if not (isinstance(model_new, type) and issubclass(model_new, torch.nn.Module)):
            built.error = "ModelNew is not a subclass of torch.nn.Module"
        else:
            built.ns = ns
    built.seconds = time.perf_counter() - t0
    return built


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def _tail(exc: BaseException) -> str:
    import traceback

    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:])
