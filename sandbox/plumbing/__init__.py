"""Plumbing: the machine the sandbox runs on. ``files`` (the cache folder, atomic writes), ``tempdirs`` (private
temporary folders and their sweep), ``tools`` (child processes' environment, one-shot tools), ``hostpaths`` (host
folders scrubbed from a worker's text), ``envinfo`` (the environment fingerprint). It imports only the compiler's
folders and version (``sandbox.candidates.compiler``, inside functions); never the contracts at the top (protocol,
jobs, wire), ``host``, ``worker``, ``cluster``, ``profile`` or ``pytorch``."""
