"""What Nsight Compute measures and the diagnosis drawn from it: ncu's command lines and CSV pages, the counters
summary, the issues found in them and the diagnosis. The ``Profiler`` a sandbox holds is host side
(``sandbox.host.profiler``), the program ncu profiles worker side (``sandbox.worker.profile_target``).

May import the shared vocabulary (``sandbox.candidates``, ``.tasks``, ``.judging``, ``.plumbing``) and the
contracts at the top (``sandbox.protocol``, ``.jobs``, ``.wire``); never ``sandbox.host`` or ``sandbox.worker``.
"""
