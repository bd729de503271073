"""The devops server over MCP: real linters, schema validators and parsers, make, and a dockerd started here."""

from __future__ import annotations

import io
import shutil
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from servers.devops.server import mcp
from tests.sandbox.conftest import docker_host  # noqa: F401 - the session dockerd fixture
from tests.servers.conftest import Client, err, ok

pytestmark = pytest.mark.anyio

EXPECTED_TOOLS = 32


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp) as connected:
        yield connected


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DEVOPS_WORKSPACE", str(tmp_path))
    return tmp_path


async def test_lists_every_tool(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert len(tools) == EXPECTED_TOOLS
    assert all(t.annotations is not None for t in tools)


DOCKERFILE = """FROM python:3.12-slim AS build
RUN apt-get update && apt-get install -y curl
ARG VERSION=1
ENV APP_HOME=/app MODE=prod
FROM debian:bookworm
COPY --from=build /app /app
EXPOSE 8080/tcp 9090
USER app
ENTRYPOINT ["/app/run"]
CMD ["--serve"]
"""


async def test_dockerfile_lint_and_parse(client: Client, workspace: Path) -> None:
    lint = ok(await client.call_tool("dockerfile_lint", {"content": DOCKERFILE}))
    codes = {row[1] for row in lint["rows"]}
    assert {"DL3008", "DL3015"} <= codes  # unpinned apt packages, no --no-install-recommends
    ignored = ok(await client.call_tool("dockerfile_lint", {"content": DOCKERFILE, "ignore": ["DL3008"]}))
    assert "DL3008" not in {row[1] for row in ignored["rows"]}
    (workspace / "Dockerfile").write_text(DOCKERFILE)
    parsed = ok(await client.call_tool("dockerfile_parse", {"path": "Dockerfile"}))
    assert [s["base"] for s in parsed["stages"]] == ["python:3.12-slim", "debian:bookworm"]
    assert parsed["stages"][0]["alias"] == "build"
    assert parsed["exposed_ports"] == ["8080/tcp", "9090"]
    assert parsed["final_user"] == "app"
    assert parsed["env"] == ["APP_HOME", "MODE"]
    assert "not a Dockerfile" in err(await client.call_tool("dockerfile_parse", {"content": "RUN echo\n"}))
    assert "exactly one" in err(await client.call_tool("dockerfile_parse", {}))
    assert "outside the workspace" in err(await client.call_tool("dockerfile_parse", {"path": "../../etc/passwd"}))


async def test_yaml_and_shell_lint(client: Client) -> None:
    yml = ok(await client.call_tool("yaml_lint", {"content": "a: 1\na: 2\nb: yes\n"}))
    rules = {row[3] for row in yml["rows"]}
    assert {"key-duplicates", "truthy", "document-start"} <= rules
    assert yml["errors"] >= 1
    relaxed = ok(await client.call_tool("yaml_lint", {"content": "---\nx: 1\n", "config": "extends: relaxed"}))
    assert relaxed["rows"] == []
    assert "invalid yamllint config" in err(await client.call_tool("yaml_lint", {"content": "a: 1", "config": "[x"}))
    sh = ok(await client.call_tool("shell_lint", {"content": "#!/bin/bash\nrm -rf $DIR/*\ncat f | grep x\n"}))
    codes = {row[2] for row in sh["rows"]}
    assert {"SC2086", "SC2115"} <= codes  # unquoted $DIR, rm -rf "$DIR/"* may hit /
    plain = ok(await client.call_tool("shell_lint", {"content": 'echo "$1"\n', "shell": "sh"}))
    assert plain["rows"] == []


async def test_actions_lint(client: Client) -> None:
    workflow = """on: push
jobs:
  test:
    runs-on: ubuntu-latest
    needs: build
    steps:
      - uses: actions/checkout@v4
      - run: echo ${{ github.event.nope.x }}
"""
    found = ok(await client.call_tool("actions_lint", {"content": workflow}))
    messages = " ".join(row[3] for row in found["rows"])
    assert "build" in messages  # needs: an unknown job
    good = "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo hi\n"
    assert ok(await client.call_tool("actions_lint", {"content": good}))["rows"] == []


async def test_compose_validate(client: Client) -> None:
    good = (
        "services:\n  web:\n    build: .\n    ports: ['8080:80', '127.0.0.1:5432:5432/tcp']\n    depends_on: [db]\n"
        "    volumes: ['data:/var/lib', './src:/src']\n  db:\n    image: postgres:16\nvolumes:\n  data: {}\n"
    )
    result = ok(await client.call_tool("compose_validate", {"content": good}))
    assert result["valid"] is True
    assert result["services"]["web"]["depends_on"] == ["db"]
    bad = (
        "servics: {}\nservices:\n  a:\n    image: x\n    depends_on: [b]\n    ports: ['80:abc']\n"
        "    volumes: ['cache:/c']\n"
        "  b:\n    depends_on: [a]\n"
    )
    problems = ok(await client.call_tool("compose_validate", {"content": bad}))["problems"]
    assert "unknown top-level key 'servics'" in problems
    assert "services.b: needs image or build" in problems
    assert any("is not [host:]container" in p for p in problems)
    assert any("named volume 'cache'" in p for p in problems)
    assert any(p.startswith("depends_on cycle") for p in problems)
    assert "not valid YAML" in err(await client.call_tool("compose_validate", {"content": "a: [\n"}))


async def test_k8s_generate_then_validate(client: Client) -> None:
    generated = ok(
        await client.call_tool(
            "k8s_generate", {"name": "web", "image": "nginx:1.27", "port": 80, "env": {"MODE": "prod"}}
        )
    )
    assert generated["kinds"] == ["ConfigMap", "Deployment", "Service"]
    checked = ok(await client.call_tool("k8s_validate", {"content": generated["yaml"]}))
    assert checked["valid"] is True
    assert [r[1] for r in checked["rows"]] == ["ConfigMap", "Deployment", "Service"]
    broken = "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  prots: [{port: 80}]\n"
    result = ok(await client.call_tool("k8s_validate", {"content": broken, "version": "1.30"}))
    assert result["valid"] is False
    assert "prots" in result["rows"][0][4]
    unknown = ok(await client.call_tool("k8s_validate", {"content": "apiVersion: nope/v9\nkind: Thing\n"}))
    assert "no schema" in unknown["rows"][0][4]
    assert err(await client.call_tool("k8s_generate", {"name": "Bad_Name", "image": "x"}))


JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="unit" tests="3">
<testcase classname="t.m" name="test_ok" time="0.5"/>
<testcase classname="t.m" name="test_bad" time="1.25"><failure message="assert 1 == 2">trace</failure></testcase>
<testcase classname="t.m" name="test_skip" time="0"><skipped message="later"/></testcase>
</testsuite></testsuites>"""


async def test_junit_summary(client: Client, workspace: Path) -> None:
    (workspace / "report.xml").write_text(JUNIT)
    summary = ok(await client.call_tool("junit_summary", {"path": "report.xml"}))
    assert (summary["tests"], summary["passed"], summary["failures"], summary["skipped"]) == (3, 1, 1, 1)
    assert summary["failing"][0]["message"] == "assert 1 == 2"
    assert summary["slowest"][0] == {"case": "t.m.test_bad", "time": 1.25}
    assert "not a JUnit" in err(await client.call_tool("junit_summary", {"content": "<testsuites"}))


MAKEFILE = """.PHONY: build test
VERSION := 1.0
build: deps ## Build the app
\t@echo building $(VERSION)
test: build ## Run the tests
\t@echo testing
deps:
\t@echo deps
%.o: %.c
\tcc -c $<
"""


async def test_makefile_targets_and_make_run(client: Client, workspace: Path) -> None:
    (workspace / "Makefile").write_text(MAKEFILE)
    targets = ok(await client.call_tool("makefile_targets", {"path": "Makefile"}))
    assert targets["rows"] == [
        ["build", ["deps"], "Build the app", True],
        ["test", ["build"], "Run the tests", True],
        ["deps", [], None, False],
    ]
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    ran = ok(await client.call_tool("make_run", {"target": "test", "variables": {"VERSION": "2.0"}}))
    assert ran["exit_code"] == 0
    assert ran["stdout"].splitlines() == ["deps", "building 2.0", "testing"]
    dry = ok(await client.call_tool("make_run", {"target": "deps", "dry_run": True}))
    assert dry["stdout"].strip() == "echo deps"
    missing = ok(await client.call_tool("make_run", {"target": "nope"}))
    assert missing["exit_code"] == 2
    assert "outside the workspace" in err(await client.call_tool("make_run", {"target": "x", "directory": ".."}))
    assert "invalid make variable" in err(
        await client.call_tool("make_run", {"target": "x", "variables": {"A B": "1"}})
    )


async def test_env_toml_ini_files(client: Client) -> None:
    env = "export A=1\nB=\nA=2\nC=two words\nAPI_TOKEN=abc\nnot a line\nD='open\n"
    result = ok(await client.call_tool("env_file_validate", {"content": env, "required": ["A", "E"]}))
    problems = [p["problem"] for p in result["problems"]]
    assert "B is empty" in problems
    assert "A already set on line 1" in problems
    assert "C: unquoted value with spaces" in problems
    assert "D: unterminated quote" in problems
    assert any(p.startswith("no '='") for p in problems)
    assert result["missing"] == ["E"]
    assert result["variables"]["API_TOKEN"] == "<redacted>"
    toml = ok(
        await client.call_tool("toml_validate", {"content": "[project]\nname = 'x'\n[tool.ruff]\nline-length = 9\n"})
    )
    assert toml["valid"] is True
    assert toml["tables"] == ["project", "tool"]
    bad_toml = ok(await client.call_tool("toml_validate", {"content": "a = 1\na = 2\n"}))
    assert bad_toml["valid"] is False
    assert "line 2" in bad_toml["error"]
    ini = ok(await client.call_tool("ini_validate", {"content": "[paths]\nroot = /srv\ndata = %(root)s/data\n"}))
    assert ini["sections"]["paths"]["data"] == "/srv/data"
    dup = ok(await client.call_tool("ini_validate", {"content": "[a]\nx = 1\nx = 2\n"}))
    assert dup["valid"] is False
    assert "already exists" in dup["error"]


async def test_json_schema_validate(client: Client) -> None:
    schema = '{"type": "object", "required": ["name"], "properties": {"port": {"type": "integer", "maximum": 65535}}}'
    good = ok(await client.call_tool("json_schema_validate", {"document": "name: x\nport: 80\n", "schema": schema}))
    assert good["valid"] is True
    bad = ok(await client.call_tool("json_schema_validate", {"document": '{"port": 70000}', "schema": schema}))
    assert {(r[0], r[1]) for r in bad["rows"]} == {("/", "required"), ("/port", "maximum")}
    assert "invalid JSON Schema" in err(
        await client.call_tool("json_schema_validate", {"document": "{}", "schema": '{"type": 5}'})
    )


async def test_systemd_unit_validate(client: Client) -> None:
    good = (
        "[Unit]\nDescription=Web\nAfter=network.target\n[Service]\nType=simple\nExecStart=/usr/bin/web --port 80\n"
        "Restart=on-failure\nRestartSec=5s\n[Install]\nWantedBy=multi-user.target\n"
    )
    result = ok(await client.call_tool("systemd_unit_validate", {"content": good}))
    assert result["valid"] is True
    assert result["unit_type"] == "service"
    assert result["warnings"] == []
    assert result["sections"]["Service"]["ExecStart"] == "/usr/bin/web --port 80"
    bad = "[Service]\nType=daemon\nExecStar=/bin/x\nRestartSec=soon\nPrivateTmp=maybe\n"
    errors = ok(await client.call_tool("systemd_unit_validate", {"content": bad}))["errors"]
    assert "[Service] unknown key ExecStar (did you mean ExecStart?)" in errors
    assert any("Type=daemon" in e for e in errors)
    assert any("not a time span" in e for e in errors)
    assert any("expected a boolean" in e for e in errors)
    assert "[Service] needs ExecStart=" in errors
    timer = ok(
        await client.call_tool("systemd_unit_validate", {"content": "[Timer]\nPersistent=true\n", "unit_type": "timer"})
    )
    assert "[Timer] needs OnCalendar= or an On*Sec= trigger" in timer["errors"]


TERRAFORM = """terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = "~> 5.0" }
  }
}
provider "aws" { region = var.region }
variable "region" {
  type    = string
  default = "eu-west-1"
}
variable "name" { type = string }
resource "aws_s3_bucket" "logs" { bucket = var.name }
data "aws_caller_identity" "me" {}
module "vpc" { source = "./modules/vpc" }
output "bucket" { value = aws_s3_bucket.logs.id }
"""


async def test_hcl_and_terraform(client: Client, workspace: Path) -> None:
    parsed = ok(await client.call_tool("hcl_parse", {"content": TERRAFORM}))["data"]
    assert parsed["variable"][0] == {"region": {"type": "string", "default": "eu-west-1"}}
    assert "HCL parse error" in err(await client.call_tool("hcl_parse", {"content": 'resource "x" {'}))
    (workspace / "infra").mkdir()
    (workspace / "infra" / "main.tf").write_text(TERRAFORM)
    inventory = ok(await client.call_tool("terraform_inventory", {"path": "infra"}))
    assert inventory["resources"] == ["aws_s3_bucket.logs"]
    assert inventory["data_sources"] == ["data.aws_caller_identity.me"]
    assert inventory["modules"] == {"vpc": "./modules/vpc"}
    assert inventory["variables"]["name"]["required"] is True
    assert inventory["variables"]["region"]["default"] == "eu-west-1"
    assert inventory["outputs"] == ["bucket"]
    assert inventory["providers"] == ["aws"]
    assert inventory["required_providers"]["aws"]["version"] == "~> 5.0"


async def test_semver_tools(client: Client) -> None:
    async def bump(version: str, part: str) -> str:
        return str(ok(await client.call_tool("semver_bump", {"version": version, "part": part}))["version"])

    assert await bump("1.4.2", "minor") == "1.5.0"
    assert await bump("v1.4.2", "major") == "v2.0.0"
    assert await bump("1.4.2", "prerelease") == "1.4.3-rc.1"
    assert await bump("1.4.3-rc.1", "prerelease") == "1.4.3-rc.2"
    assert await bump("1.4.3-rc.2", "finalize") == "1.4.3"
    assert "not a semantic version" in err(await client.call_tool("semver_bump", {"version": "1.2.x", "part": "patch"}))
    versions = ["1.10.0", "1.2.0", "2.0.0-rc.1", "1.2.0-beta.1", "0.9.9"]
    compared = ok(await client.call_tool("semver_compare", {"versions": versions, "constraint": ">=1.2.0,<2.0.0"}))
    assert compared["sorted"] == ["0.9.9", "1.2.0-beta.1", "1.2.0", "1.10.0", "2.0.0-rc.1"]
    assert compared["latest_stable"] == "1.10.0"
    assert compared["matching"] == ["1.2.0", "1.10.0"]  # prereleases only with include_prerelease
    with_pre = {"versions": versions, "constraint": ">=1.2.0,<2.0.0", "include_prerelease": True}
    assert ok(await client.call_tool("semver_compare", with_pre))["matching"] == ["1.2.0", "1.10.0", "2.0.0-rc.1"]
    assert err(await client.call_tool("semver_compare", {"versions": ["1.0.0"], "constraint": "~1"}))


CHANGELOG = """# Changelog
## [Unreleased]
### Added
- Dark mode
## [1.1.0] - 2026-03-01
### Added
- Export to CSV
  with headers
### Fixed
- Crash on empty input
## [1.0.0] - 2026-01-15 [YANKED]
### Added
- First release
"""


async def test_changelog_parse(client: Client) -> None:
    parsed = ok(await client.call_tool("changelog_parse", {"content": CHANGELOG}))
    assert [r["version"] for r in parsed["releases"]] == ["Unreleased", "1.1.0", "1.0.0"]
    assert parsed["latest"] == "1.1.0"
    assert parsed["releases"][1]["changes"] == {
        "Added": ["Export to CSV with headers"],
        "Fixed": ["Crash on empty input"],
    }
    assert parsed["releases"][2]["yanked"] is True
    one = ok(await client.call_tool("changelog_parse", {"content": CHANGELOG, "version": "v1.1.0"}))
    assert one["releases"][0]["date"] == "2026-03-01"
    assert "no release" in err(await client.call_tool("changelog_parse", {"content": CHANGELOG, "version": "9.9.9"}))
    assert "no '## [version]" in err(await client.call_tool("changelog_parse", {"content": "# nothing\n"}))


async def test_cron_tools(client: Client) -> None:
    explained = ok(await client.call_tool("cron_explain", {"expression": "*/15 9-17 * * MON-FRI"}))
    assert explained["fields"]["minute"] == [0, 15, 30, 45]
    assert explained["fields"]["day of week"] == [1, 2, 3, 4, 5]
    assert explained["description"] == "Runs every 15 minutes from 0 to 45; hour 9-17; day of week Mon-Fri"
    assert "out of range" in err(await client.call_tool("cron_explain", {"expression": "61 * * * *"}))
    runs = ok(
        await client.call_tool(
            "cron_next_runs",
            {"expression": "30 2 * * *", "count": 3, "start": "2026-03-28T12:00:00", "timezone": "Europe/Berlin"},
        )
    )
    # 29 March 2026: Berlin skips 02:00-03:00 (DST), so that run fires at the first existing moment
    assert [r[0] for r in runs["rows"]] == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]
    assert "unknown time zone" in err(
        await client.call_tool("cron_next_runs", {"expression": "* * * * *", "timezone": "Mars/Base"})
    )


def _busybox_rootfs(path: Path) -> None:
    """A rootfs tarball holding only a static busybox and a few applet links."""
    busybox = Path("/bin/busybox")
    with tarfile.open(path, "w") as tar:
        for folder in ("bin", "tmp"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        tar.add(busybox, "bin/busybox")
        for applet in ("sh", "echo", "sleep", "cat", "ls"):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        hosts = b"127.0.0.1 localhost\n"
        info = tarfile.TarInfo("etc/hosts")
        info.size = len(hosts)
        tar.addfile(info, io.BytesIO(hosts))


@pytest.mark.docker
@pytest.mark.skipif(not Path("/bin/busybox").is_file(), reason="busybox-static is not installed")
async def test_docker_lifecycle_on_a_local_daemon(
    client: Client,
    workspace: Path,
    docker_host: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", docker_host)
    _busybox_rootfs(workspace / "rootfs.tar")
    imported = ok(await client.call_tool("docker_import", {"path": "rootfs.tar", "repository": "hzt/busybox"}))
    assert imported["tags"] == ["hzt/busybox:latest"]
    assert "hzt/busybox:latest" in [
        t for row in ok(await client.call_tool("docker_images", {}))["rows"] for t in row[1]
    ]
    run = ok(
        await client.call_tool(
            "docker_run",
            {"image": "hzt/busybox", "command": ["sh", "-c", "echo out; echo err >&2; exit 3"], "remove": True},
        )
    )
    assert (run["exit_code"], run["stdout"], run["stderr"], run["removed"]) == (3, "out\n", "err\n", True)
    started = ok(
        await client.call_tool(
            "docker_run",
            {
                "image": "hzt/busybox",
                "name": "hzt-sleeper",
                "wait": False,
                "command": ["sh", "-c", "echo ready; exec sleep 300"],
            },
        )
    )
    try:
        listed = ok(await client.call_tool("docker_containers", {"status": "running"}))
        assert "hzt-sleeper" in [row[1] for row in listed["rows"]]
        executed = ok(
            await client.call_tool("docker_exec", {"container": "hzt-sleeper", "command": ["cat", "/etc/hosts"]})
        )
        assert executed["exit_code"] == 0
        assert "localhost" in executed["stdout"]
        inspected = ok(await client.call_tool("docker_inspect", {"target": "hzt-sleeper"}))
        assert inspected["HostConfig"]["NetworkMode"] == "none"
        assert inspected["HostConfig"]["Memory"] == 512 * 1024**2
        logs = ok(await client.call_tool("docker_logs", {"container": started["id"]}))
        assert logs["logs"] == "ready\n"
        stopped = ok(await client.call_tool("docker_stop", {"container": "hzt-sleeper", "timeout": 1}))
        assert stopped["status"] == "exited"
    finally:
        ok(await client.call_tool("docker_remove", {"target": "hzt-sleeper", "force": True}))
    assert "not found" in err(await client.call_tool("docker_logs", {"container": "hzt-sleeper"}))
    image = ok(await client.call_tool("docker_inspect", {"target": "hzt/busybox", "kind": "image"}))
    assert image["RepoTags"] == ["hzt/busybox:latest"]
    assert "not found" in err(await client.call_tool("docker_run", {"image": "hzt/missing"}))
    ok(await client.call_tool("docker_remove", {"target": "hzt/busybox", "kind": "image"}))


async def test_docker_without_a_daemon_is_a_clear_error(
    client: Client, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    assert "no Docker daemon answers" in err(await client.call_tool("docker_images", {}))
