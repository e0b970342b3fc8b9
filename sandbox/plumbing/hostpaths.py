"""Host paths out of every text that leaves a worker: compile logs, error texts, tracebacks.

What a worker says reaches results, traces and the next prompt to a model. ``redact(text)`` puts
neutral names in place of the machine's folders, longest first, so that neither the layout of the
host nor a user's name travels with it:

- the CUDA header folders -> ``<cuda-include>``; the compile cache -> ``<cache>``;
- a worker's private folder (its ``HOME``, when that is one of the pool's ``kw-*`` folders) -> ``<worker>``;
- the kernelwright checkout -> ``<kernelwright>``; site-packages -> ``<site-packages>``; the Python
  installation -> ``<python>``; the temp folder -> ``<tmp>``; the user's home -> ``~``.

A folder is replaced only where a path starts (``/tmp`` in ``/var/tmp`` or ``/tmpfoo`` stays), or after ``-I``.
"""

from __future__ import annotations

import os
import pwd
import re
import site
import sys
import sysconfig
import tempfile
from functools import lru_cache
from pathlib import Path

SYSTEM_ROOTS = ("", "/", "/usr", "/usr/local", "/opt")  # too general to name: a prefix of everything else


def redact(text: str, extra: dict[str, str] | None = None) -> str:
    """``text`` with host folders replaced by neutral names; ``extra`` adds folder -> name pairs."""
    if not text:
        return text
    pattern, names = _pattern(tuple(sorted((extra or {}).items())))
    return pattern.sub(lambda m: names[m.group(1)], text)


def host_folders() -> dict[str, str]:
    """Folder -> neutral name, for this process."""
    from ..candidates.compiler import include_dirs
    from .files import cache_dir

    folders: dict[str, str] = {}

    def add(path, name: str) -> None:
        if not path:
            return
        for p in {str(path).rstrip("/"), os.path.realpath(path)}:
            if p not in SYSTEM_ROOTS:
                folders.setdefault(p, name)

    for d in include_dirs():
        add(d, "<cuda-include>")
    home = os.environ.get("HOME", "")
    if Path(home).name.startswith("kw-"):
        add(home, "<worker>")
    add(os.environ.get("KERNELWRIGHT_CACHE_DIR") or cache_dir(), "<cache>")
    add(Path(__file__).resolve().parents[2], "<kernelwright>")
    for p in [*site.getsitepackages(), site.getusersitepackages(), sysconfig.get_paths()["purelib"]]:
        add(p, "<site-packages>")
    for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        add(p, "<python>")
    add(tempfile.gettempdir(), "<tmp>")
    try:
        add(pwd.getpwuid(os.getuid()).pw_dir, "~")
    except KeyError:
        pass
    return folders


@lru_cache(maxsize=8)
def _pattern(extra: tuple[tuple[str, str], ...]) -> tuple[re.Pattern, dict[str, str]]:
    names = host_folders()
    names.update({str(k).rstrip("/"): v for k, v in extra})
    ordered = sorted(names, key=len, reverse=True)
    alternation = "|".join(re.escape(p) for p in ordered)
    return re.compile(rf"(?:(?<=-I)|(?<![\w.-]))({alternation})(?![\w.-])"), names
