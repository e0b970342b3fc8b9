"""A run's trace folder: the writer (``run.json``, the append-only ``events.jsonl``, candidates, summary) and
the reader of stored runs.

A folder lock keeps each run folder to one process at a time (``lock``).

May import sandbox, ``agent.protocols``, ``agent.redact`` and the stop reasons in ``agent.stops``.
"""
