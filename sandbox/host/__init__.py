"""The orchestrating side of the sandbox: the sandboxes (compile-only, GPU, fake), their settings, the worker
processes they talk to over pipes, the screener, the sanitizer (compute-sanitizer runs), the ceilings cache,
the running of one-shot tools and ``check_task`` (a task validated without a GPU). It never touches CUDA.

May import the shared vocabulary (``sandbox.*`` modules) and ``sandbox.profile``; never ``sandbox.worker``.
"""
