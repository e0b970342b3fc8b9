"""kernelwright's agent: proposers, prompts, lineage, budgets, traces, CLI and the notebook API.

Importing this package imports neither CuPy nor the openai SDK; they load when first used.
"""
