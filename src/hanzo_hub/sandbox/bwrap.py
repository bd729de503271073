"""Bubblewrap: namespaces, a read-only system, private /tmp, granted dirs only, rlimits and a per-run cgroup.

The sandbox sees read-only ``/usr`` (with the merged-/usr symlinks), a short list of harmless ``/etc`` files, the
interpreter prefixes of the hub's Python (so venv servers run), a fresh ``/proc``, ``/dev`` and tmpfs ``/tmp``, the
granted readable dirs read-only and the granted writable dirs read-write. Everything else on the host, including the
hub home and its vault, is absent. ``--unshare-all`` gives it its own user, pid, ipc, uts, cgroup and network
namespaces: network ``none`` and ``loopback`` both leave only the sandbox's own ``lo``; ``full`` shares the host's.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from hanzo_hub.config import SandboxSettings
from hanzo_hub.errors import SandboxStartFailed, SandboxUnavailable
from hanzo_hub.sandbox._process import launcher_argv, run_process
from hanzo_hub.sandbox.base import HOST_PYTHON_PREFIXES, Grants, LaunchPlan, Limits, RunResult
from hanzo_hub.sandbox.cgroup import Cgroup, CgroupFactory

__all__ = ["ETC_FILES", "BwrapSandbox"]

logger = logging.getLogger(__name__)

ETC_FILES: tuple[str, ...] = (
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ssl/certs",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/mime.types",
)
"""The /etc entries bound read-only; ``/etc/shadow``, ``/etc/ssh`` and the like stay invisible."""
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
SANDBOX_HOME = "/tmp"


def sandbox_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment inside the sandbox: a safe PATH, HOME and TMPDIR, then ``env``."""
    return {"PATH": DEFAULT_PATH, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp", **env}


class BwrapSandbox:
    """The default backend on Linux.

    Raises:
        SandboxUnavailable: bubblewrap is not installed.
    """

    name = "bwrap"

    def __init__(self, settings: SandboxSettings | None = None, *, bwrap: str | None = None) -> None:
        settings = settings or SandboxSettings()
        found = bwrap or shutil.which("bwrap")
        if found is None:
            raise SandboxUnavailable("bubblewrap is not installed (apt-get install bubblewrap)")
        self.bwrap = found
        self.cgroups = CgroupFactory(v2_root=settings.cgroup_root)
        if not self.cgroups.available:
            logger.warning("sandbox limits fall back to rlimits: %s", self.cgroups.reason)

    def _fs_args(self, grants: Grants) -> list[str]:
        args = ["--ro-bind", "/usr", "/usr"]
        for link in ("bin", "lib", "lib64", "sbin"):
            host = Path("/") / link
            if host.is_symlink():
                args += ["--symlink", str(host.readlink()), f"/{link}"]
            elif host.is_dir():
                args += ["--ro-bind", str(host), f"/{link}"]
        for entry in ETC_FILES:
            args += ["--ro-bind-try", entry, entry]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for prefix in HOST_PYTHON_PREFIXES:
            if not prefix.startswith("/usr/"):
                args += ["--ro-bind-try", prefix, prefix]
        for path in grants.readable:
            real = str(Path(path).resolve())
            args += ["--ro-bind", real, real]
        for path in grants.writable:
            real = str(Path(path).resolve())
            args += ["--bind", real, real]
        return args

    def _argv(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        cwd: str | None,
        limits: Limits,
        grants: Grants,
        *,
        inline_env: bool = True,
    ) -> list[str]:
        """bwrap's argv; ``inline_env=False`` leaves the environment to bwrap's own (values stay out of argv)."""
        argv = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session"]
        if inline_env:
            argv.append("--clearenv")
        if limits.network == "full":
            argv.append("--share-net")
        argv += ["--hostname", "sandbox", *self._fs_args(grants)]
        if inline_env:
            for key, value in sandbox_env(env).items():
                argv += ["--setenv", key, value]
        workdir = cwd or (str(Path(grants.writable[0]).resolve()) if grants.writable else "/tmp")
        argv += ["--chdir", workdir]
        return [*argv, "--", *command]

    def _cgroup(self, limits: Limits) -> Cgroup | None:
        try:
            return self.cgroups.create(memory_bytes=limits.memory_bytes, cpus=limits.cpus, pids=limits.pids)
        except OSError as exc:
            raise SandboxStartFailed(f"cannot create a cgroup: {exc.strerror}") from exc

    def wrap(
        self, command: Sequence[str], env: Mapping[str, str], cwd: str | None, limits: Limits, grants: Grants
    ) -> LaunchPlan:
        """Plan a stdio server launch inside bubblewrap (see ``Sandbox.wrap``).

        The environment goes in ``LaunchPlan.env`` (bwrap passes it on), never in argv: a server's env may carry
        vault secrets, and any local user can read a process's command line.
        """
        cgroup = self._cgroup(limits)
        plan_env = sandbox_env(env)
        shim = launcher_argv(
            limits.with_(wall_seconds=None, cpu_seconds=None), cgroup, setsid=False, env_keep=list(plan_env)
        )
        argv = [*shim, *self._argv(command, env, cwd, limits, grants, inline_env=False)]
        cleanup = cgroup.destroy if cgroup is not None else None
        return LaunchPlan(argv=argv, env=plan_env, cwd=None, cleanup=cleanup)

    async def run(
        self,
        argv: Sequence[str],
        limits: Limits,
        grants: Grants,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: bytes | None = None,
    ) -> RunResult:
        """Run ``argv`` inside bubblewrap to completion (see ``Sandbox.run``)."""
        cgroup = self._cgroup(limits)
        full = [*launcher_argv(limits, cgroup, setsid=False), *self._argv(argv, env or {}, cwd, limits, grants)]
        return await run_process(full, limits, env={}, cwd=None, stdin=stdin, cgroup=cgroup)

    async def aclose(self) -> None:
        """Nothing to release."""
