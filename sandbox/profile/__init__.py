"""Profiling with Nsight Compute and the diagnosis drawn from it: the ``Profiler`` a sandbox holds, ncu's
command lines and CSV pages, the counters summary, the issues found in them and the diagnosis, and the program
ncu profiles (``target``).

May import the shared vocabulary, ``sandbox.host.pool`` (a child's environment), ``sandbox.host.tools`` (running
and finding tools), ``sandbox.host.tempdirs`` (private temporary folders) and, in ``target`` only,
``sandbox.worker.harness``.
"""
