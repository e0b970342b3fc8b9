"""The candidate side: a candidate's code, from its text to what runs. ``candidate`` parses it and its launch plan,
``source_filter`` holds its preprocessor to what NVRTC may read, ``fast_math`` and ``approx_ptx`` refuse approximate
math in the source and in the PTX, ``compiler`` and ``cubin`` compile it with NVRTC and name its machine code, ``plan``
resolves its launches at concrete sizes. It imports the task side, the judging records and the plumbing; never the
contracts at the top (protocol, jobs, wire), ``host``, ``worker``, ``cluster``, ``profile`` or ``pytorch``."""
