"""Tiny exec shim: join cgroups, set rlimits, optionally start a session, then exec the real command.

Run as ``python -I -S _launcher.py [--cg PROCS_FILE]... [--rl NAME=VALUE]... [--setsid] [--env-keep A,B] -- ARGV...``
(``--env-keep``: drop every environment variable but these names, whatever the caller's process added) so it needs
neither ``site`` nor the hub package and starts in a few milliseconds. Joining the cgroup before ``exec`` means
every descendant is accounted for, with no window in which a child could fork outside it. It imports nothing from
``hanzo_hub`` on purpose.
"""

from __future__ import annotations

import os
import resource
import sys

_RLIMITS = {
    "as": resource.RLIMIT_AS,
    "cpu": resource.RLIMIT_CPU,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
}


def main(argv: list[str]) -> int:
    """Parse the shim's flags and exec the command after ``--``; returns only on failure (exit 125-127)."""
    try:
        split = argv.index("--")
    except ValueError:
        sys.stderr.write("hanzo-sandbox-launcher: missing --\n")
        return 125
    flags, command = argv[:split], argv[split + 1 :]
    if not command:
        sys.stderr.write("hanzo-sandbox-launcher: empty command\n")
        return 125
    pid = str(os.getpid())
    i = 0
    try:
        while i < len(flags):
            flag, value = flags[i], flags[i + 1] if i + 1 < len(flags) else ""
            if flag == "--cg":
                with open(value, "w") as procs:
                    procs.write(pid)
                i += 2
            elif flag == "--rl":
                name, _, number = value.partition("=")
                limit = int(number)
                _soft, hard = resource.getrlimit(_RLIMITS[name])
                # CPU: hard one second above soft, so SIGXCPU (reported as the cpu limit) comes before SIGKILL
                top = limit + 1 if name == "cpu" else limit
                capped = (limit, top) if hard == resource.RLIM_INFINITY else (min(limit, hard), min(top, hard))
                resource.setrlimit(_RLIMITS[name], capped)
                i += 2
            elif flag == "--setsid":
                os.setsid()
                i += 1
            elif flag == "--env-keep":
                keep = set(value.split(",")) if value else set()
                # The exec shim's whole job is the child's process state; it reads no configuration.
                for name in [n for n in os.environ if n not in keep]:  # noqa: TID251
                    del os.environ[name]  # noqa: TID251
                i += 2
            else:
                sys.stderr.write(f"hanzo-sandbox-launcher: unknown flag {flag}\n")
                return 125
    except (OSError, ValueError, KeyError) as exc:
        sys.stderr.write(f"hanzo-sandbox-launcher: setup failed: {exc}\n")
        return 125
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"hanzo-sandbox-launcher: cannot exec {command[0]}: {exc.strerror}\n")
        return 127 if isinstance(exc, FileNotFoundError) else 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
