"""The orchestrating side of the sandbox: the sandboxes (compile-only, GPU, fake), their settings, the worker
processes they talk to over pipes, the screener, the sanitizer (compute-sanitizer runs), the profiler (ncu
runs), the ceilings cache and ``check_task`` (a task validated without a GPU). It never touches CUDA.

May import the shared vocabulary (``sandbox.candidates``, ``.tasks``, ``.judging``, ``.plumbing``), the
contracts at the top (``sandbox.protocol``, ``.jobs``, ``.wire``), ``sandbox.profile`` and ``sandbox.pytorch`` (a
PyTorch task's confined runs; ``modelnew_host``: what each verb does with a ModelNew candidate); never
``sandbox.worker``.
"""
