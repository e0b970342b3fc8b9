"""kernelwright's agent: proposers, prompts, lineage, budgets, traces, CLI and the notebook API.

Importing this package imports neither CuPy nor the openai SDK; they load when first used.
"""


def __getattr__(name: str):
    if name in ("optimize", "Run"):
        from . import api

        return getattr(api, name)
    if name == "load_run":
        from .trace.reader import load_run

        return load_run
    raise AttributeError(f"module 'agent' has no attribute {name!r}")
