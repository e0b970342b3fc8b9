"""The task side: what a candidate must compute. ``task`` loads a task folder (``task_spec``: task.toml's schema,
``torch_spec``: its ``[torch]`` table, ``task_reference``: its reference.py), ``dtypes`` and ``expr`` are the element
types and size expressions it is written in, ``inputs`` its seeded inputs, ``strength`` whether its comparison rejects
wrong answers. It imports the judging side's comparison and ``sandbox.pytorch`` (the inputs of PyTorch problems); never
the contracts at the top (protocol, jobs, wire), ``host``, ``worker``, ``cluster`` or ``profile``."""
