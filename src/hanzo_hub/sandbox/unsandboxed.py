"""``none``: no isolation, explicitly chosen for trusted servers. Only rlimits, a session and (if any) a cgroup."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hanzo_hub.config import SandboxSettings
from hanzo_hub.errors import SandboxStartFailed
from hanzo_hub.sandbox._process import launcher_argv, run_process
from hanzo_hub.sandbox.base import Grants, LaunchPlan, Limits, RunResult
from hanzo_hub.sandbox.cgroup import Cgroup, CgroupFactory

__all__ = ["UnsandboxedRunner"]


class UnsandboxedRunner:
    """Runs commands as plain subprocesses: the filesystem and network are NOT confined (``grants`` are ignored)."""

    name = "none"

    def __init__(self, settings: SandboxSettings | None = None) -> None:
        settings = settings or SandboxSettings()
        self.cgroups = CgroupFactory(v2_root=settings.cgroup_root)

    def _cgroup(self, limits: Limits) -> Cgroup | None:
        try:
            return self.cgroups.create(memory_bytes=limits.memory_bytes, cpus=limits.cpus, pids=limits.pids)
        except OSError as exc:
            raise SandboxStartFailed(f"cannot create a cgroup: {exc.strerror}") from exc

    def wrap(
        self, command: Sequence[str], env: Mapping[str, str], cwd: str | None, limits: Limits, grants: Grants
    ) -> LaunchPlan:
        """The command behind the rlimit/cgroup launcher, with the environment it was given."""
        cgroup = self._cgroup(limits)
        prefix = launcher_argv(limits.with_(wall_seconds=None, cpu_seconds=None), cgroup, setsid=False)
        return LaunchPlan(
            argv=[*prefix, *command],
            env=dict(env),
            cwd=cwd,
            cleanup=cgroup.destroy if cgroup is not None else None,
        )

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
        """Run ``argv`` as a subprocess under rlimits and a cgroup."""
        cgroup = self._cgroup(limits)
        full = [*launcher_argv(limits, cgroup, setsid=False), *argv]  # run_process starts a new session
        return await run_process(full, limits, env=dict(env or {}), cwd=cwd, stdin=stdin, cgroup=cgroup)

    async def aclose(self) -> None:
        """Nothing to release."""
