"""Isolation for downstream servers and code (bwrap, docker, none), per-call policy and the secrets vault.

The hub calls three things: ``load_sandbox(kind, settings)`` → ``Sandbox.wrap()/run()``, ``PolicyEngine`` (in
``policy.py``) before and after each proxied call, and ``Vault``/``Redactor`` (in ``vault.py``) for credentials.
Importing this package imports no backend; ``SANDBOXES`` names them by import string.
"""

from hanzo_hub.sandbox.base import (
    SANDBOXES,
    Grants,
    LaunchPlan,
    Limits,
    RunResult,
    Sandbox,
    aload_sandbox,
    load_sandbox,
)

__all__ = ("SANDBOXES", "Grants", "LaunchPlan", "Limits", "RunResult", "Sandbox", "aload_sandbox", "load_sandbox")
