"""The code-exec server's launch configuration, read once from its environment (set by the hub's manifest).

- ``CODE_EXEC_SANDBOX``: the ``hanzo_hub.sandbox`` backend (``bwrap`` default, ``docker``; ``none`` only when the
  operator says so, never the model).
- ``CODE_EXEC_NETWORK``: ``none`` (default), ``loopback`` or ``full``: what sandboxed code may reach. A tool argument
  can never widen it.
- ``CODE_EXEC_WORKSPACE``: the folder ``exec_file``/``pytest_run`` may read (default: the working directory).
- ``CODE_EXEC_MAX_SECONDS`` / ``CODE_EXEC_MAX_MEMORY_MB``: ceilings for the per-call limits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

__all__ = ["ExecSettings", "load_settings"]

NetworkGrant = Literal["none", "loopback", "full"]


@dataclass(frozen=True, slots=True)
class ExecSettings:
    """What the operator granted this server."""

    sandbox: str = "bwrap"
    network: NetworkGrant = "none"
    workspace: Path = Path()
    max_seconds: float = 60.0
    max_memory_mb: int = 2048
    max_kernels: int = 4


def load_settings() -> ExecSettings:
    """Settings from the environment (the only place this server reads it)."""
    env = os.environ  # noqa: TID251 - launch configuration, read in this one module
    network = env.get("CODE_EXEC_NETWORK", "none")
    if network not in ("none", "loopback", "full"):
        network = "none"
    return ExecSettings(
        sandbox=env.get("CODE_EXEC_SANDBOX", "bwrap"),
        network=cast(NetworkGrant, network),
        workspace=Path(env.get("CODE_EXEC_WORKSPACE") or os.getcwd()).resolve(),
        max_seconds=float(env.get("CODE_EXEC_MAX_SECONDS", "60")),
        max_memory_mb=int(env.get("CODE_EXEC_MAX_MEMORY_MB", "2048")),
        max_kernels=int(env.get("CODE_EXEC_MAX_KERNELS", "4")),
    )
