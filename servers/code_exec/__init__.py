"""The ``code-exec`` server: run code in the hub's sandbox, persistent Python kernels, tests, lint and analysis."""
