"""The judging side: how a candidate's outputs and times are judged and recorded. ``compare`` (against the
reference) and ``agreement`` (against the baseline) decide correctness, ``stats`` turns timings into intervals,
``result`` is the record of an evaluation (``environment``: the device, software and clocks it was measured with;
``result_html`` and ``templates/`` show it as HTML), ``sanitizer_report`` holds compute-sanitizer's verdict. It imports the task side (element types, sizes); never the contracts at the top
(protocol, jobs, wire), ``host``, ``worker``, ``cluster``, ``profile`` or ``pytorch``."""
