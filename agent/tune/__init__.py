"""The built-in search over a kernel's knobs and NVRTC flags: the ``TunerProposer``, its space, the search with
its strategies and the Gaussian-process surrogate of the ``bayes`` strategy.

May import sandbox, ``agent.protocols`` and ``agent.trace`` (what a resumed run recorded); nothing else of agent.
"""
