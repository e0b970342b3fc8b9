"""kernelwright's code lives in two top-level packages, ``agent`` and ``sandbox``, imported by those absolute
names. A project of the user's with a package of the same name earlier on ``sys.path`` (a ``sandbox/`` folder
beside a notebook) would be imported in their place. ``claim()`` binds both names to the folders installed
beside this package before anything imports them by name; worker processes need nothing of this, as they
start with this folder first on their PYTHONPATH (``sandbox.plumbing.tools.scrubbed_env``).

Imports only the standard library.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # the folder holding kernelwright/, agent/ and sandbox/
NAMES = ("sandbox", "agent")  # sandbox first: agent's modules import it


def claim() -> None:
    """Make ``import agent`` and ``import sandbox`` mean kernelwright's packages in this process.

    A package of either name imported earlier from elsewhere cannot be swapped out without breaking whoever
    holds it: that is an ImportError naming both folders."""
    for name in NAMES:
        folder = ROOT / name
        loaded = sys.modules.get(name)
        if loaded is not None:
            where = Path(getattr(loaded, "__file__", None) or "?").resolve().parent
            if where != folder:
                raise ImportError(f"a package named {name!r} from {where} was imported before kernelwright, whose "
                                  f"own {name!r} is at {folder}: import kernelwright first, or rename that package")
            continue
        spec = importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])
        if spec is None or spec.loader is None:
            raise ImportError(f"kernelwright is incomplete: {folder / '__init__.py'} is missing")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
