"""Kubernetes manifests: schema validation of every document (kubernetes-validate, offline schemas) and generation
of a Deployment + Service (+ ConfigMap) that is validated before it is returned.
"""

from __future__ import annotations

from typing import Annotated, Any

import kubernetes_validate
import yaml
from kubernetes_validate.utils import SchemaNotFoundError, VersionNotSupportedError
from mcp.server import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.devops._util import PURE, Content, FilePath, off_loop, read_source

__all__ = ["register"]

K8sVersion = Annotated[
    str | None, Field(pattern=r"^1\.\d{1,2}(\.\d{1,2})?$", description="Kubernetes version (default: latest known)")
]
DnsName = Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", description="DNS-1123 name")]


def _validate_docs(text: str, version: str | None, strict: bool) -> list[list[Any]]:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ToolError(f"not valid YAML: {exc}") from exc
    if not docs:
        raise ToolError("no YAML documents found")
    target = version or kubernetes_validate.latest_version()
    rows = []
    for index, doc in enumerate(docs):
        if not isinstance(doc, dict):
            rows.append([index, None, None, False, "document is not a mapping"])
            continue
        kind, name = doc.get("kind"), (doc.get("metadata") or {}).get("name")
        try:
            kubernetes_validate.validate(doc, target, strict=strict)
            rows.append([index, kind, name, True, None])
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path) or "(root)"
            rows.append([index, kind, name, False, f"{where}: {exc.message}"])
        except SchemaNotFoundError:
            rows.append([index, kind, name, False, f"no schema for {doc.get('apiVersion')}/{kind} in {target}"])
        except VersionNotSupportedError as exc:
            raise ToolError(f"Kubernetes version {target} is not supported by the bundled schemas") from exc
    return rows


def _generate(
    name: str, image: str, port: int, replicas: int, env: dict[str, str], cpu: str, memory: str, service_type: str
) -> list[dict[str, Any]]:
    labels = {"app.kubernetes.io/name": name}
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "ports": [{"containerPort": port, "name": "http"}],
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
        "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 10},
        "securityContext": {"allowPrivilegeEscalation": False, "runAsNonRoot": True},
    }
    docs: list[dict[str, Any]] = []
    if env:
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-env", "labels": labels},
                     "data": dict(sorted(env.items()))})  # fmt: skip
        container["envFrom"] = [{"configMapRef": {"name": f"{name}-env"}}]
    docs.append({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}},
    })  # fmt: skip
    docs.append({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels},
        "spec": {"type": service_type, "selector": labels,
                 "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}]},
    })  # fmt: skip
    return docs


def register(mcp: MCPServer) -> None:
    """Add the Kubernetes tools to ``mcp``."""

    @mcp.tool(annotations=PURE)
    async def k8s_validate(
        content: Content = None,
        path: FilePath = None,
        version: K8sVersion = None,
        strict: Annotated[bool, Field(description="also reject unknown fields (typos such as 'replica')")] = True,
    ) -> CallToolResult:
        """Validate Kubernetes manifests (multi-document YAML) against the official OpenAPI schemas of a Kubernetes
        version, offline. Returns per document its kind, name, valid, and the first error with its field path.
        kubectl and a cluster are not needed.
        """
        text, label = await off_loop(read_source, content, path)
        rows = await off_loop(_validate_docs, text, version, strict)
        return table_result(["document", "kind", "name", "valid", "error"], rows, title=f"kubernetes {label}",
                            valid=all(r[3] for r in rows))  # fmt: skip

    @mcp.tool(annotations=PURE)
    async def k8s_generate(
        name: DnsName,
        image: Annotated[str, Field(min_length=1, max_length=500, pattern=r"^\S+$", description="container image")],
        port: Annotated[int, Field(ge=1, le=65535, description="container port")] = 8080,
        replicas: Annotated[int, Field(ge=0, le=1000)] = 2,
        env: Annotated[dict[str, str] | None, Field(description="environment, stored in a ConfigMap")] = None,
        cpu: Annotated[str, Field(pattern=r"^\d+(\.\d+)?m?$", description="CPU request, e.g. 100m")] = "100m",
        memory: Annotated[str, Field(pattern=r"^\d+(Ki|Mi|Gi)$", description="memory request/limit")] = "256Mi",
        service_type: Annotated[str, Field(pattern=r"^(ClusterIP|NodePort|LoadBalancer)$")] = "ClusterIP",
    ) -> CallToolResult:
        """Generate production-style manifests for one web service: a Deployment (resources, readiness probe,
        non-root security context), a Service and, when env is given, a ConfigMap. The YAML is schema-validated
        before it is returned.
        """
        docs = _generate(name, image, port, replicas, env or {}, cpu, memory, service_type)
        text = yaml.safe_dump_all(docs, sort_keys=False)
        rows = await off_loop(_validate_docs, text, None, True)
        if not all(r[3] for r in rows):
            raise ToolError(f"generated manifests did not validate: {[r[4] for r in rows if not r[3]]}")
        return json_result({"yaml": text, "kinds": [d["kind"] for d in docs]}, text=text)
