"""A run's trace folder: the writer (``run.json``, the append-only ``events.jsonl``, candidates, summary) and
the reader of stored runs.

A folder lock keeps each run folder to one process at a time (``lock``).

May import sandbox, ``agent.protocols``, ``agent.redact``, the ranking in ``agent.loop.lineage`` and the stop reasons
in ``agent.loop.stops``.
"""
