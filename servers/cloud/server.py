"""The ``cloud`` MCP server: one ``MCPServer`` with the tools of each AWS service module registered onto it."""

from __future__ import annotations

from mcp.server import MCPServer

mcp = MCPServer(
    "cloud",
    title="Cloud (AWS)",
    description="AWS through boto3: S3, DynamoDB, EC2, SSM, Secrets Manager, SQS, SNS, Lambda, Logs, KMS, IAM, STS.",
    instructions=(
        "Tools for AWS (or an AWS-compatible endpoint such as moto or LocalStack). The endpoint, region and "
        "credentials come from the environment the hub injects; tools never take credentials as arguments. "
        "Secret values are returned only when a tool is asked to reveal them."
    ),
)

# Importing a module registers its tools onto ``mcp``.
from servers.cloud import (  # noqa: E402
    compute_tools,
    dynamodb_tools,
    messaging_tools,
    s3_tools,
    security_tools,
)

__all__ = ["compute_tools", "dynamodb_tools", "mcp", "messaging_tools", "s3_tools", "security_tools"]
