"""A run's trace folder: the writer (``run.json``, the append-only ``events.jsonl``, candidates, summary) and
the reader of stored runs.

May import sandbox, ``agent.protocols`` and the ranking in ``agent.loop.lineage``.
"""
