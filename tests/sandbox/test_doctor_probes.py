"""The doctor's sandbox probes against the real backends: a process in bubblewrap, and a dockerd of our own."""

from __future__ import annotations

from pathlib import Path

import pytest

from hanzo_hub.config import HubSettings
from hanzo_hub.doctor.machine import check_sandboxes

pytestmark = pytest.mark.anyio


def settings_for(tmp_path: Path, **sandbox: object) -> HubSettings:
    return HubSettings(home=tmp_path / "home", sandbox=sandbox)


async def test_bwrap_probe_runs_a_real_process(tmp_path: Path) -> None:
    checks = {c.name: c for c in await check_sandboxes(settings_for(tmp_path), {"bwrap"})}
    bwrap = checks["sandbox:bwrap"]
    assert bwrap.status in ("ok", "warn")  # warn: no cgroup for limits on this machine, rlimits only
    assert "runs a process in" in bwrap.detail


@pytest.mark.docker
async def test_docker_probe_reports_the_engine(tmp_path: Path, docker_host: str) -> None:
    checks = {c.name: c for c in await check_sandboxes(settings_for(tmp_path, docker_host=docker_host), {"docker"})}
    docker = checks["sandbox:docker"]
    assert docker.status == "ok", docker
    assert docker.detail.startswith("engine ")
    assert docker_host in docker.detail


async def test_an_absent_docker_fails_only_when_used(tmp_path: Path) -> None:
    host = f"unix://{tmp_path}/no-docker.sock"
    used = {c.name: c for c in await check_sandboxes(settings_for(tmp_path, docker_host=host), {"docker"})}
    assert used["sandbox:docker"].status == "fail"
    assert host in used["sandbox:docker"].detail
    assert "dockerd" in (used["sandbox:docker"].hint or "")
    unused = {c.name: c for c in await check_sandboxes(settings_for(tmp_path, docker_host=host), set())}
    assert unused["sandbox:docker"].status == "skip"
    assert unused["sandbox:docker"].detail.endswith("no server uses it")


async def test_a_missing_bwrap_fails_with_the_install_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    bwrap = {c.name: c for c in await check_sandboxes(settings_for(tmp_path), {"bwrap"})}["sandbox:bwrap"]
    assert bwrap.status == "fail"
    assert "bubblewrap is not installed" in bwrap.detail
    assert bwrap.hint == "apt-get install bubblewrap"


async def test_a_bwrap_that_cannot_start_a_process_fails_with_its_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real executable standing in for a bubblewrap the kernel refuses (user namespaces off): it fails like one."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    bwrap = {c.name: c for c in await check_sandboxes(settings_for(tmp_path), {"bwrap"})}["sandbox:bwrap"]
    assert bwrap.status == "fail"
    assert bwrap.detail == f"bubblewrap at {fake} cannot start a process: bwrap: setting up uid map: Permission denied"
    assert "unprivileged user namespaces" in (bwrap.hint or "")
