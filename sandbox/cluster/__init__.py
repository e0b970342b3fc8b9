"""The sandbox spread over a Ray cluster: one sandbox actor per GPU, compiles as CPU tasks (``RaySandbox``).

``connect`` joins (or starts) the cluster, ``ship`` carries task folders to other hosts, ``actor`` is what runs
there, ``jobs`` hands calls to free actors and survives lost ones, ``pool`` is the driver's ``RaySandbox``.
Ray is an optional extra (``pip install 'kernelwright[ray]'``): importing this package does not import it.
"""

from __future__ import annotations

from .connect import ClusterError

__all__ = ["ClusterError", "RaySandbox"]


def __getattr__(name: str):
    if name == "RaySandbox":
        from .pool import RaySandbox

        return RaySandbox
    raise AttributeError(name)
