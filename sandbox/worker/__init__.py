"""The worker side of the sandbox: the processes that run NVRTC, candidate device code and the trusted
reference (``python -m sandbox.worker.main ROLE``), and the device harness they load. Only here is CuPy used.

May import the shared vocabulary (``sandbox.*`` modules); never ``sandbox.host`` or ``sandbox.profile``.
"""
