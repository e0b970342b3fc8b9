"""kernelwright's agent: proposers, prompts, lineage, budgets, traces, CLI and the notebook API.

Importing this package imports neither CuPy nor the openai SDK; they load when first used.
"""


def __getattr__(name: str):
    if name in ("optimize", "Run", "load_run", "NoWinner"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'agent' has no attribute {name!r}")
