"""What a run claims and how the claim is checked: the cost ledger and break-even, the winner at held-out
sizes, re-verification on another GPU, and the store of best kernels per machine.

May import sandbox, ``agent.protocols`` and ``agent.trace``.
"""
