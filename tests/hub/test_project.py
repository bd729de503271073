"""Project ids derived from MCP root URIs: stable per folder, distinct between folders, readable."""

from __future__ import annotations

from pathlib import Path

from hanzo_hub.hub.project import project_id


def test_one_folder_is_one_project_however_it_is_spelled(tmp_path: Path) -> None:
    repo = tmp_path / "My Repo"
    repo.mkdir()
    spellings = [repo.as_uri(), repo.as_uri() + "/", f"file://{tmp_path}/./My%20Repo", f"file://{repo}/../My%20Repo"]
    ids = {project_id(uri) for uri in spellings}
    assert len(ids) == 1
    (only,) = ids
    assert only.startswith("my-repo-")
    assert len(only) == len("my-repo-") + 12


def test_different_roots_are_different_projects(tmp_path: Path) -> None:
    a, b = (tmp_path / "a" / "app").as_uri(), (tmp_path / "b" / "app").as_uri()
    assert project_id(a) != project_id(b)
    assert project_id("https://git.example/team/app") != project_id(a)
    assert project_id("https://git.example/team/app").startswith("app-")
    assert project_id("file:///").startswith("root-")
