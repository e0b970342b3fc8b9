"""Proposers that make candidates: a language model (``llm``, its prompts and the parser of its answers) and
the replay of a stored run's answers. (The built-in search is ``agent.tune``.)

May import sandbox, ``agent.protocols``, ``agent.config`` and ``agent.trace``.
"""
