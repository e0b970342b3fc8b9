"""The ``kernelwright`` command line: ``app`` and ``main`` (the entry point). Each group of commands lives in
its own module and registers itself on ``app`` when imported below.

May import everything in ``agent`` and ``sandbox``; nothing imports it but the entry point, ``agent.launch`` (which
``kernelwright._cli`` runs).
"""

from __future__ import annotations

from .app import app

# Each import registers its commands on app; --help lists them in this order.
from . import sandbox  # noqa: E402,F401,I001  (tasks, compile, eval)
from . import check  # noqa: E402,F401  (check-task)
from . import doctor  # noqa: E402,F401  (doctor)
from . import profile  # noqa: E402,F401  (profile)
from . import optimize  # noqa: E402,F401  (optimize, batch)
from . import report  # noqa: E402,F401  (report, show, verify)
from . import best  # noqa: E402,F401  (best)
from . import pytorch  # noqa: E402,F401  (import, export)
from . import judge  # noqa: E402,F401  (judge)


def main() -> None:
    app()


__all__ = ["app", "main"]
