"""The ``devops`` MCP server: linters, CI reports, Kubernetes, Docker engine, config files, releases, schedules."""

from __future__ import annotations

from mcp.server import MCPServer

from servers.devops import builds, configs, docker_tools, k8s, lint, release

__all__ = ["mcp"]

mcp = MCPServer(
    "devops",
    title="DevOps",
    version="0.1.0",
    description="Lint Dockerfiles, YAML, shell and workflows; validate Kubernetes, Compose, config files; run Docker.",
    instructions=(
        "Local DevOps tools: linters (hadolint, yamllint, shellcheck, actionlint), validators (Kubernetes schemas, "
        "Compose, .env, TOML, INI, JSON Schema, systemd, HCL/Terraform), JUnit reports, make, semver, changelogs, "
        "cron, and the local Docker daemon. Files are read from the workspace only."
    ),
)
for module in (lint, k8s, builds, configs, release, docker_tools):
    module.register(mcp)
