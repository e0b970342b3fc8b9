"""PyTorch problems as tasks: KernelBench-format modules (``Model``, ``get_inputs()``, ``get_init_inputs()``)
loaded with their size constants overridden, imported into task folders, and run as references and baselines.

Importing this package does not import torch; ``require_torch()`` does, or names the extra to install.
May import the shared vocabulary (``sandbox.candidates``, ``.tasks``, ``.judging``, ``.plumbing``) and the
contracts at the top (``sandbox.protocol``, ``.jobs``, ``.wire``); never ``sandbox.host``, ``sandbox.worker`` or
``sandbox.profile``. ``confined`` starts the confined process that problem code runs in
(sandbox.worker.problem_child) with the workers' scrubbed environment (``sandbox.plumbing.tools``) and private
folders (``sandbox.plumbing.tempdirs``). ``runtime`` runs inside the worker processes (NumPy or CuPy arrays handed in);
``problem``, ``shapes``, ``sizes``, ``numerics`` and ``importer.survey`` execute the problem and run only in the
confined process or a worker; the host parses problem files but never executes them. KernelBench's answer format,
a ``ModelNew`` solution: ``modelnew`` parses it on the host, ``modelnew_pairs`` pairs solutions with problems,
``modelnew_judge`` judges it through ``confined``, where ``modelnew_run`` (with ``modelnew_load``, ``_checks`` and
``_timing``) builds, checks and times it.
"""

from __future__ import annotations

EXTRA_HINT = 'install the torch extra: pip install "kernelwright[torch]"'


class TorchMissing(RuntimeError):
    """PyTorch is needed for this and is not installed."""


def require_torch():
    """The ``torch`` module, or one clear error naming the extra to install."""
    try:
        import torch
    except ImportError as exc:
        raise TorchMissing(f"PyTorch is not installed ({exc}); {EXTRA_HINT}") from None
    return torch
