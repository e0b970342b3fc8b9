"""What a run achieved, for people: the views of a stored run, plots, the self-contained HTML
report and the notebook displays.

May import sandbox, ``agent.protocols``, the stop reasons (``agent.stops``), ``agent.trace`` and ``agent.claims``.
"""
