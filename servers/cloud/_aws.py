"""boto3 plumbing shared by the cloud tools: clients, one error map, pagination and tool annotations.

The endpoint (``AWS_ENDPOINT_URL``, e.g. a local moto server), the region and the credentials come from the
environment the hub injects at launch (its vault); botocore reads them itself, so no tool takes a credential argument.
Every client has bounded connect/read timeouts and at most two attempts.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import (  # type: ignore[import-untyped]
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
)
from mcp_types import ToolAnnotations

from servers._common import ToolError

DEFAULT_REGION = "us-east-1"
"""Region used when the environment names none (``AWS_REGION`` / ``AWS_DEFAULT_REGION``)."""

CLIENT_CONFIG = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2, "mode": "standard"})

READ = ToolAnnotations(read_only_hint=True, open_world_hint=True)
"""A tool that only reads."""
CREATE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)
"""A tool that adds something (a second call adds another, or fails because it exists)."""
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True)
"""A tool that overwrites a value or a setting (same arguments, same end state)."""
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True)
"""A tool that removes or stops something."""

_clients: dict[str, Any] = {}
_lock = threading.Lock()


def client(service: str) -> Any:
    """A cached boto3 client for ``service`` (clients are thread-safe; creating one is not, hence the lock)."""
    with _lock:
        found = _clients.get(service)
        if found is None:
            session = boto3.session.Session()
            found = session.client(service, region_name=session.region_name or DEFAULT_REGION, config=CLIENT_CONFIG)
            _clients[service] = found
        return found


def reset_clients() -> None:
    """Forget the cached clients (their endpoint and credentials were read when they were made)."""
    with _lock:
        _clients.clear()


@contextmanager
def aws_errors(action: str) -> Iterator[None]:
    """Map botocore failures to a :class:`ToolError` that says what went wrong and what to change."""
    try:
        yield
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise ToolError(f"{action} failed: {error.get('Code', 'Error')}: {error.get('Message', exc)}") from exc
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise ToolError(
            f"{action} failed: no AWS credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the hub's vault"
        ) from exc
    except NoRegionError as exc:  # pragma: no cover - a default region is always passed
        raise ToolError(f"{action} failed: no region; set AWS_REGION") from exc
    except EndpointConnectionError as exc:
        raise ToolError(f"{action} failed: cannot reach the endpoint ({exc}); check AWS_ENDPOINT_URL") from exc
    except ParamValidationError as exc:
        raise ToolError(f"{action}: invalid parameters: {exc}") from exc
    except BotoCoreError as exc:
        raise ToolError(f"{action} failed: {exc}") from exc


def call(service: str, operation: str, /, **params: Any) -> dict[str, Any]:
    """Call ``operation`` of ``service`` with the non-None ``params``; the response without ``ResponseMetadata``."""
    with aws_errors(f"{service} {operation}"):
        response = getattr(client(service), operation)(**{k: v for k, v in params.items() if v is not None})
    response.pop("ResponseMetadata", None)
    return dict(response)


def paginate(service: str, operation: str, key: str, limit: int, /, **params: Any) -> list[Any]:
    """Up to ``limit`` items of the list ``key`` across the pages of ``operation``."""
    items: list[Any] = []
    with aws_errors(f"{service} {operation}"):
        pages = (
            client(service)
            .get_paginator(operation)
            .paginate(**{k: v for k, v in params.items() if v is not None}, PaginationConfig={"MaxItems": limit})
        )
        for page in pages:
            items.extend(page.get(key, []))
            if len(items) >= limit:
                break
    return items[:limit]


def tags_list(tags: dict[str, str] | None) -> list[dict[str, str]] | None:
    """``{"k": "v"}`` → ``[{"Key": "k", "Value": "v"}]`` (None stays None)."""
    return None if not tags else [{"Key": k, "Value": v} for k, v in tags.items()]


def tags_dict(tags: list[dict[str, str]] | None) -> dict[str, str]:
    """``[{"Key": "k", "Value": "v"}]`` → ``{"k": "v"}``."""
    return {t["Key"]: t.get("Value", "") for t in tags or []}
