"""The agent loop (select -> propose -> evaluate -> record) and what drives it: the lineage, budgets, judging a
candidate, one run's session (start, resume, phases, summary, progress) and batches of runs.

May import sandbox and the rest of agent except ``agent.api``, ``agent.cli`` and the HTML side of ``agent.report``.
"""
