"""The npm servers that need no service: code-runner, sequential-thinking, desktop-commander, cyanheads' git server."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.catalog.live.helpers import Call, git_repo, run_live, text

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


async def test_code_runner_runs_python_and_bash(tmp_path: Path) -> None:
    calls = [
        Call("run-code", {"code": "print(6 * 7)", "languageId": "python"}, "42"),
        Call("run-code", {"code": "echo catalog-$((40 + 2))", "languageId": "shellscript"}, "catalog-42"),
    ]
    await run_live("code-runner", tmp_path, calls)


async def test_sequential_thinking_records_a_thought(tmp_path: Path) -> None:
    thought = {"thought": "list the catalog", "thoughtNumber": 1, "totalThoughts": 2, "nextThoughtNeeded": True}
    outcome = await run_live("sequential-thinking", tmp_path, [Call("sequentialthinking", thought, "thoughtNumber")])
    assert '"totalThoughts": 2' in text(outcome.results[0])


async def test_desktop_commander_files_and_processes(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    calls = [
        Call("read_file", {"path": str(work / "notes.txt")}, "beta"),
        Call("write_file", {"path": str(work / "new.txt"), "content": "written by the hub"}, "new.txt"),
        Call("list_directory", {"path": str(work)}, "new.txt"),
        Call("get_file_info", {"path": str(work / "notes.txt")}, "size"),
        Call(
            "edit_block", {"file_path": str(work / "notes.txt"), "old_string": "beta", "new_string": "gamma"}, "gamma"
        ),
        Call("start_process", {"command": "echo dc-$((6 * 7))", "timeout_ms": 10000}, "dc-42"),
    ]
    outcome = await run_live("desktop-commander", tmp_path, calls)
    assert (work / "new.txt").read_text(encoding="utf-8") == "written by the hub"
    assert "gamma" in (work / "notes.txt").read_text(encoding="utf-8")
    names = {t.name for t in outcome.tools}
    assert "give_feedback_to_desktop_commander" not in names


def _repo_with_remote(tmp: Path) -> tuple[Path, Path]:
    repo, remote = git_repo(tmp / "repo"), tmp / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True, timeout=30)
    subprocess.run(["git", "remote", "add", "origin", str(remote)], cwd=repo, check=True, timeout=30)
    (repo / "feature.txt").write_text("new feature\n", encoding="utf-8")
    return repo, remote


def _log(repo: Path) -> str:
    return subprocess.run(
        ["git", "log", "--oneline", "main"], cwd=repo, capture_output=True, text=True, timeout=30
    ).stdout


async def test_cyanheads_git_status_commit_log_and_push(tmp_path: Path) -> None:
    repo, remote = _repo_with_remote(tmp_path)
    author = {"name": "Catalog Test", "email": "catalog@example.com"}
    calls = [
        Call("git_status", {"path": str(repo), "includeUntracked": True}, "feature.txt"),
        Call("git_add", {"path": str(repo), "paths": ["feature.txt"]}, "feature.txt"),
        Call("git_commit", {"path": str(repo), "message": "add the feature", "author": author}, "add the feature"),
        Call("git_log", {"path": str(repo), "maxCount": 5}, "add the feature"),
        Call("git_push", {"path": str(repo), "remote": "origin", "branch": "main"}, "origin"),
    ]
    # The sandbox hides the host's ~/.gitconfig: the identity comes from the launch environment.
    identity = {
        "GIT_AUTHOR_NAME": "Catalog Test",
        "GIT_AUTHOR_EMAIL": "catalog@example.com",
        "GIT_COMMITTER_NAME": "Catalog Test",
        "GIT_COMMITTER_EMAIL": "catalog@example.com",
    }
    await run_live("git-cyanheads", tmp_path, calls, env=identity)
    assert "add the feature" in _log(remote)  # pushed to the bare remote
