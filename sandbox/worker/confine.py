"""The compile worker's confinement: after its warm-up it may read only what compiling needs.

``confine_compiler(home)`` is called once by the compile worker, after NVRTC is loaded and one
compile has run (NVRTC loads ``libnvrtc-builtins`` on its first compile, through ``/etc/ld.so.cache``).
With Landlock (sandbox.worker.landlock) the worker may then read only beneath:

- the CUDA header folders that ``-I`` names (``sandbox.candidates.compiler.include_dirs``);
- the Python installation's standard library and site-packages, and the ``sandbox`` package itself;
- the folders of the shared libraries it has loaded (late ``dlopen`` calls find them);

and read and write only beneath its private folder (``home``) and the compile cache's ``cubins``
folder. ``/etc``, ``/home``, ``/root``, ``/proc`` (``/proc/self/environ`` included), the trace
folders and the rest of the checkout cannot be opened. So an ``#include`` of a host file that the
source filter (sandbox.candidates.source_filter) missed fails to open, as a compile error.

It then installs the socket filter (sandbox.worker.seccomp: no socket of any family, no ptrace, no io_uring).
Where Landlock is unavailable, the worker's files are unconfined and it says why: ``doctor`` shows it.
"""

from __future__ import annotations

import site
import sys
import sysconfig
from pathlib import Path

from . import landlock

WARMUP_SOURCE = 'extern "C" __global__ void kw_warmup(float* x) { x[threadIdx.x] = 1.0f; }\n'


def allowed_folders(home: Path) -> tuple[list[str], list[str]]:
    """(read-only, read-write) paths of a confined compile worker whose private folder is ``home``."""
    from ..candidates.compiler import include_dirs
    from ..plumbing.files import cache_dir

    read = [*include_dirs(), *python_folders()]
    cubins = cache_dir() / "cubins"
    cubins.mkdir(parents=True, exist_ok=True)
    write = [str(home), str(cubins), "/dev/null"]
    return sorted(set(read) - set(write)), write


def python_folders() -> list[str]:
    """What a confined Python process reads: the standard library, site-packages, the ``sandbox`` package, the
    folders of the shared libraries it has loaded, the interpreter's folder and ``/dev/urandom``."""
    paths = sysconfig.get_paths()
    read = [paths["stdlib"], paths["platstdlib"], paths["purelib"], paths["platlib"], *site.getsitepackages(),
            str(Path(__file__).resolve().parents[1]), *loaded_library_folders(), "/dev/urandom",
            *interpreter_folders()]
    if site.ENABLE_USER_SITE and site.getusersitepackages() in sys.path:
        read.append(site.getusersitepackages())
    return read


def interpreter_folders() -> list[str]:
    """The interpreter's folder, as started (a virtual environment's ``bin``) and resolved: what starts another Python
    (``torch.compile`` runs its compiler's steps through ``sys.executable``)."""
    exe = Path(sys.executable)
    return sorted({str(exe.parent), str(exe.resolve().parent)}) if sys.executable else []


def loaded_library_folders() -> list[str]:
    """Folders of the shared libraries mapped into this process (from /proc/self/maps)."""
    folders = set()
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    for line in maps.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5].startswith("/") and ".so" in Path(parts[5]).name:
            folders.add(str(Path(parts[5]).parent))
    return sorted(folders)


def warm_up() -> None:
    """One real compile, so that NVRTC has loaded everything it loads lazily."""
    from ..candidates.candidate import parse_candidate
    from ..candidates.compiler import compile_source

    plan = '/*@kernelwright\n[[launch]]\nkernel = "kw_warmup"\ngrid = "1"\nblock = "32"\nargs = []\n@*/\n'
    compile_source(parse_candidate(plan + WARMUP_SOURCE, label="warmup"), use_cache=False)


def confine_compiler(home: Path) -> dict:
    """Warm up, then confine this process; returns what was done, for ``doctor`` and the worker's status."""
    warm_up()
    read, write = allowed_folders(home)
    from .seccomp import install

    try:
        abi = landlock.restrict(read, write)
    except landlock.LandlockUnavailable as exc:
        return {"confined": False, "reason": f"Landlock unavailable: {exc}", "seccomp": install()["seccomp"]}
    except OSError as exc:
        return {"confined": False, "reason": f"Landlock failed: {exc}", "seccomp": install()["seccomp"]}
    return {"confined": True, "landlock_abi": abi, "read": read, "write": write, "seccomp": install()["seccomp"]}
