"""Proposers that make candidates: a language model (``llm``, its prompts and the parser of its answers) and
the replay of a stored run's answers. (The built-in search is ``agent.tune``.) ``formats`` pairs each answer
format's prompts with its parser: a ``.cu`` candidate (``prompts``, ``answer``) or a ModelNew module (``modelnew``).

``endpoint`` gives each model request its deadline and records its HTTP attempts.

May import sandbox, ``agent.protocols``, ``agent.config``, ``agent.redact`` and ``agent.trace``.
"""
