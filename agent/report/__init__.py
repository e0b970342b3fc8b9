"""What a run achieved, for people: the summary, the views of a stored run, plots, the self-contained HTML
report and the notebook displays.

May import sandbox, ``agent.protocols``, ``agent.trace``, ``agent.claims`` and ``agent.loop``'s lineage, budget and
stop reasons.
"""
