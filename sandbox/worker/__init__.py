"""The worker side of the sandbox: the processes that run NVRTC (confined by Landlock: ``confine``,
``landlock``), candidate device code and the trusted reference (``python -m sandbox.worker.main ROLE``), the
programs compute-sanitizer and Nsight Compute run (``sanitize_target``, ``profile_target``), and the device
harness they load. Only here is CuPy used.

May import the shared vocabulary (``sandbox.candidates``, ``.tasks``, ``.judging``, ``.plumbing``) and the
contracts at the top (``sandbox.protocol``, ``.jobs``, ``.wire``); never ``sandbox.host`` or ``sandbox.profile``.
"""
