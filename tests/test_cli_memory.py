"""``hanzo-hub memory``: import, recall and export through the real command line, on a real store under a home."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hanzo_hub.cli import main
from hanzo_hub.hub.project import project_id

LINES = [
    {"content": "the staging database listens on port 5433", "tier": "project"},
    {"content": "ana prefers tabs over spaces", "tier": "global"},
]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"mcpServers": {}, "memory": {"embedder": "fake"}}))
    return path


def _cli(config: Path, home: Path, *args: str) -> list[str]:
    return ["memory", *args[:1], "--config", str(config), "--home", str(home), *args[1:]]


def test_import_recall_export_round_trip_in_one_scope(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    assert main(_cli(config, home, "import", str(source), "--user", "ana", "--project", "p1")) == 0
    assert "imported 2 memories into ana/p1" in capsys.readouterr().out

    assert (
        main(_cli(config, home, "recall", "staging database port", "--user", "ana", "--project", "p1", "--json")) == 0
    )
    body = json.loads(capsys.readouterr().out)
    assert (body["user"], body["project"]) == ("ana", "p1")
    assert body["memories"][0]["content"] == LINES[0]["content"]
    assert body["memories"][0]["tier"] == "project"
    assert "project tier" in body["memories"][0]["why"]

    out = tmp_path / "out.jsonl"
    assert main(_cli(config, home, "export", "--user", "ana", "--project", "p1", "--output", str(out))) == 0
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(e["content"] for e in exported) == sorted(line["content"] for line in LINES)
    assert all("embedding" not in e for e in exported)
    assert f"exported 2 memories of ana/p1 to {out}" in capsys.readouterr().out
    # only the global tier
    assert main(_cli(config, home, "export", "--user", "ana", "--project", "p1", "--tier", "global")) == 0
    assert [json.loads(line)["content"] for line in capsys.readouterr().out.splitlines()] == [LINES[1]["content"]]


def test_other_users_and_projects_see_nothing_and_roots_map_like_the_hub(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    root = tmp_path / "repo"
    root.mkdir()
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(LINES[0]) + "\n")
    assert main(_cli(config, home, "import", str(source), "--user", "ana", "--project-root", str(root))) == 0
    assert f"ana/{project_id(root.as_uri())}" in capsys.readouterr().out
    query = ["recall", "staging database port", "--json"]
    assert main(_cli(config, home, *query, "--user", "ana", "--project-root", str(root))) == 0
    assert len(json.loads(capsys.readouterr().out)["memories"]) == 1
    for who in (["--user", "bob", "--project-root", str(root)], ["--user", "ana", "--project", "other"]):
        assert main(_cli(config, home, *query, *who)) == 0
        assert json.loads(capsys.readouterr().out)["memories"] == []
    assert main(_cli(config, home, "recall", "staging", "--user", "bob")) == 0
    assert "no memories of bob/default match" in capsys.readouterr().out


HOLDER = """
import sys, anyio
from pathlib import Path
from hanzo_hub.config import MemorySettings
from hanzo_hub.memory import MemoryService
from hanzo_hub.vectors.fake import HashEmbedder

async def hold():
    async with MemoryService.open(MemorySettings(embedder="fake"), Path(sys.argv[1]), HashEmbedder()):
        print("open", flush=True)
        sys.stdin.readline()

anyio.run(hold)
"""


def test_a_store_in_use_by_another_process_is_a_clear_error(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(home / "memory")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "open"
        assert main(_cli(config, home, "recall", "anything")) == 2
        assert "is in use by another process" in capsys.readouterr().err
    finally:
        holder.communicate("\n", timeout=30)
    assert main(_cli(config, home, "recall", "anything")) == 0  # released with the other process


def test_bad_import_lines_are_refused_and_nothing_is_added(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    source = tmp_path / "bad.jsonl"
    source.write_text(json.dumps(LINES[0]) + "\nnot json\n")
    assert main(_cli(config, home, "import", str(source))) == 2
    assert "line 2" in capsys.readouterr().err
    assert main(_cli(config, home, "export")) == 0
    assert capsys.readouterr().out == ""
    assert main(_cli(config, home, "import", str(tmp_path / "missing.jsonl"))) == 2
    assert "cannot read" in capsys.readouterr().err


def test_consolidate_supersedes_a_changed_fact_in_the_named_scope_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"mcpServers": {}, "memory": {"embedder": "fake", "duplicate_cosine": 0.8}}))
    home = tmp_path / "home"
    for project in ("p1", "p2"):
        for port in (5432, 5433):  # the later import is the newer fact
            source = tmp_path / f"{project}-{port}.jsonl"
            source.write_text(json.dumps({"content": f"the staging database runs on port {port}"}) + "\n")
            assert main(_cli(config, home, "import", str(source), "--user", "ana", "--project", project)) == 0
    capsys.readouterr()
    assert main(_cli(config, home, "consolidate", "--user", "ana", "--project", "p1", "--json")) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["user"], report["project"], len(report["superseded"])) == ("ana", "p1", 1)
    assert "generalize: no LLM configured" in report["skipped"]
    assert main(_cli(config, home, "consolidate", "--user", "ana", "--project", "p1")) == 0
    assert "consolidated ana/p1: 0 superseded" in capsys.readouterr().out  # done already
    for project, superseded in (("p1", 1), ("p2", 0)):
        assert main(_cli(config, home, "export", "--user", "ana", "--project", project)) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert sum(row.get("superseded_by") is not None for row in rows) == superseded
