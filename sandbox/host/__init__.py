"""The orchestrating side of the sandbox: the sandboxes (compile-only, GPU, fake), their settings, the worker
processes they talk to over pipes, the screener and the ceilings cache. It never touches CUDA.

May import the shared vocabulary (``sandbox.*`` modules) and ``sandbox.profile``; never ``sandbox.worker``.
"""
