"""The ``kernelwright`` command's entry point (``[project.scripts]``) and ``python -m kernelwright``'s.

It is reached through this package so that importing it first binds ``agent`` and ``sandbox`` to kernelwright's own
packages (``_packages.claim``): a package of the user's named ``agent`` or ``sandbox`` on ``sys.path`` (a project
folder in ``PYTHONPATH``, the current folder) is not imported in their place.
"""

from __future__ import annotations


def main() -> None:
    from agent.launch import main as launch

    launch()
