"""Configuration and identity tools: SSM parameters, Secrets Manager, KMS, IAM (read) and STS.

Secret material is never echoed back by default: SecureString parameters and secret values are returned only when
the call sets ``reveal=true``; writes answer with names, versions and ARNs, never the value written.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.cloud._aws import CREATE, READ, WRITE, call, paginate, tags_list
from servers.cloud.server import mcp

ParamName = Annotated[
    str, Field(min_length=1, max_length=2048, pattern=r"^[A-Za-z0-9_.\-/]+$", description="e.g. /app/db/host")
]
SecretId = Annotated[str, Field(min_length=1, max_length=2048, description="secret name or ARN")]
Reveal = Annotated[bool, Field(description="include the secret value in the result (only when it is needed)")]
KeyId = Annotated[str, Field(min_length=1, max_length=2048, description="KMS key id, ARN or alias/NAME")]
HIDDEN = "<hidden: call again with reveal=true to see it>"


@mcp.tool(
    description="Store a value in SSM Parameter Store (String, StringList or encrypted SecureString). Fails if the "
    "parameter exists unless overwrite=true. Returns the new version, never the value.",
    annotations=WRITE,
)
def ssm_put_parameter(
    name: ParamName,
    value: Annotated[str, Field(min_length=1, max_length=8192, description="the value to store")],
    type: Annotated[Literal["String", "StringList", "SecureString"], Field(description="parameter type")] = "String",
    description: Annotated[str | None, Field(max_length=1024, description="what it is for")] = None,
    overwrite: Annotated[bool, Field(description="replace an existing parameter")] = False,
) -> CallToolResult:
    response = call(
        "ssm", "put_parameter", Name=name, Value=value, Type=type, Description=description, Overwrite=overwrite
    )
    return json_result({"name": name, "type": type, "version": response.get("Version")})


@mcp.tool(
    description="Read one SSM parameter. Plain String values are returned; a SecureString's value is decrypted and "
    "returned only with reveal=true. Returns name, type, value, version and last change.",
    annotations=READ,
)
def ssm_get_parameter(name: ParamName, reveal: Reveal = False) -> CallToolResult:
    p = call("ssm", "get_parameter", Name=name, WithDecryption=reveal)["Parameter"]
    secure = p.get("Type") == "SecureString"
    return json_result(
        {
            "name": p["Name"],
            "type": p.get("Type"),
            "value": HIDDEN if secure and not reveal else p.get("Value"),
            "version": p.get("Version"),
            "modified": str(p.get("LastModifiedDate", "")),
        }
    )


@mcp.tool(
    description="List SSM parameters (names, types, versions; no values), optionally under a path prefix such as "
    "'/app/'. Use ssm_get_parameter to read one.",
    annotations=READ,
)
def ssm_list_parameters(
    path_prefix: Annotated[str | None, Field(max_length=2048, description="only names starting with this")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="most parameters to return")] = 100,
) -> CallToolResult:
    filters = [{"Key": "Name", "Option": "BeginsWith", "Values": [path_prefix]}] if path_prefix else None
    params = paginate("ssm", "describe_parameters", "Parameters", limit, ParameterFilters=filters)
    rows = [[p["Name"], p.get("Type"), p.get("Version"), str(p.get("LastModifiedDate", ""))] for p in params]
    return table_result(["name", "type", "version", "modified"], rows)


@mcp.tool(
    description="Create a secret in AWS Secrets Manager from a string (e.g. a password or a JSON document), with "
    "an optional description and tags. The result has the ARN and version id, never the value.",
    annotations=CREATE,
)
def secrets_create(
    name: Annotated[str, Field(min_length=1, max_length=512, pattern=r"^[A-Za-z0-9/_+=.@-]+$", description="name")],
    value: Annotated[str, Field(min_length=1, max_length=65536, description="the secret string")],
    description: Annotated[str | None, Field(max_length=2048, description="what it is for")] = None,
    tags: Annotated[dict[str, str] | None, Field(max_length=50, description="tags")] = None,
) -> CallToolResult:
    response = call(
        "secretsmanager",
        "create_secret",
        Name=name,
        SecretString=value,
        Description=description,
        Tags=tags_list(tags),
    )
    return json_result(
        {"name": response.get("Name"), "arn": response.get("ARN"), "versionId": response.get("VersionId")}
    )


@mcp.tool(
    description="Read a Secrets Manager secret. By default returns only its metadata (ARN, version, stages, "
    "dates); the secret value itself is included only with reveal=true — set it only when the value is needed.",
    annotations=READ,
)
def secrets_get(secret_id: SecretId, reveal: Reveal = False) -> CallToolResult:
    meta = call("secretsmanager", "describe_secret", SecretId=secret_id)
    result = {
        "name": meta.get("Name"),
        "arn": meta.get("ARN"),
        "description": meta.get("Description"),
        "created": str(meta.get("CreatedDate", "")),
        "changed": str(meta.get("LastChangedDate", "")),
        "versions": dict(meta.get("VersionIdsToStages") or {}),
        "revealed": reveal,
        "value": HIDDEN,
    }
    if reveal:
        value = call("secretsmanager", "get_secret_value", SecretId=secret_id)
        result["value"] = value.get("SecretString")
        if result["value"] is None and value.get("SecretBinary") is not None:
            result["value"] = base64.b64encode(value["SecretBinary"]).decode("ascii")
            result["encoding"] = "base64"
        result["versionId"] = value.get("VersionId")
    return json_result(result)


@mcp.tool(
    description="List Secrets Manager secrets by name (metadata only: description, last change, tags; never "
    "values), optionally those whose name starts with a prefix.",
    annotations=READ,
)
def secrets_list(
    name_prefix: Annotated[str | None, Field(max_length=512, description="only names starting with this")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="most secrets to return")] = 100,
) -> CallToolResult:
    filters = [{"Key": "name", "Values": [name_prefix]}] if name_prefix else None
    secrets = paginate("secretsmanager", "list_secrets", "SecretList", limit, Filters=filters)
    rows = [
        [
            s["Name"],
            s.get("Description", ""),
            str(s.get("LastChangedDate", "")),
            {t["Key"]: t["Value"] for t in s.get("Tags", [])},
        ]
        for s in secrets
    ]
    return table_result(["name", "description", "changed", "tags"], rows)


@mcp.tool(
    description="Create a symmetric KMS key for encrypt/decrypt, optionally with an alias (alias/NAME) and a "
    "description. Returns the key id, ARN and alias.",
    annotations=CREATE,
)
def kms_create_key(
    description: Annotated[str | None, Field(max_length=8192, description="what the key protects")] = None,
    alias: Annotated[
        str | None, Field(pattern=r"^alias/[A-Za-z0-9/_-]{1,250}$", description="e.g. alias/app-data")
    ] = None,
) -> CallToolResult:
    meta = call("kms", "create_key", Description=description, KeyUsage="ENCRYPT_DECRYPT")["KeyMetadata"]
    if alias:
        call("kms", "create_alias", AliasName=alias, TargetKeyId=meta["KeyId"])
    return json_result({"keyId": meta["KeyId"], "arn": meta.get("Arn"), "alias": alias, "state": meta.get("KeyState")})


@mcp.tool(
    description="Encrypt a short text (up to 4 KB) with a KMS key, optionally bound to an encryption context. "
    "Returns the ciphertext as base64, to store and later pass to kms_decrypt.",
    annotations=READ,
)
def kms_encrypt(
    key_id: KeyId,
    plaintext: Annotated[str, Field(min_length=1, max_length=4096, description="text to encrypt")],
    context: Annotated[dict[str, str] | None, Field(description="encryption context (needed again to decrypt)")] = None,
) -> CallToolResult:
    response = call("kms", "encrypt", KeyId=key_id, Plaintext=plaintext.encode("utf-8"), EncryptionContext=context)
    blob = base64.b64encode(response["CiphertextBlob"]).decode("ascii")
    return json_result({"keyId": response.get("KeyId"), "ciphertext": blob})


@mcp.tool(
    description="Decrypt a base64 ciphertext made by kms_encrypt (with the same encryption context). Returns the "
    "plaintext as text and the key that decrypted it.",
    annotations=READ,
)
def kms_decrypt(
    ciphertext: Annotated[str, Field(min_length=4, max_length=16384, description="base64 from kms_encrypt")],
    context: Annotated[dict[str, str] | None, Field(description="the encryption context used to encrypt")] = None,
) -> CallToolResult:
    try:
        blob = base64.b64decode(ciphertext, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ToolError(f"ciphertext is not valid base64: {exc}") from exc
    response = call("kms", "decrypt", CiphertextBlob=blob, EncryptionContext=context)
    plain: bytes = response["Plaintext"]
    return json_result({"keyId": response.get("KeyId"), "plaintext": plain.decode("utf-8", errors="replace")})


@mcp.tool(
    description="List IAM roles (read-only) with ARN, creation date, description and which service or account may "
    "assume them, optionally under a path prefix. Use it to audit roles.",
    annotations=READ,
)
def iam_list_roles(
    path_prefix: Annotated[str | None, Field(pattern=r"^/([\w+=,.@-]+/)*$", description="e.g. /service-role/")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="most roles to return")] = 100,
) -> CallToolResult:
    roles = paginate("iam", "list_roles", "Roles", limit, PathPrefix=path_prefix)

    def principals(role: dict[str, object]) -> str:
        doc = role.get("AssumeRolePolicyDocument")
        statements = doc.get("Statement", []) if isinstance(doc, dict) else []
        found = [str(v) for s in statements for v in (s.get("Principal") or {}).values()]
        return ", ".join(found)

    rows = [
        [r["RoleName"], r.get("Arn"), str(r.get("CreateDate", "")), r.get("Description", ""), principals(r)]
        for r in roles
    ]
    return table_result(["name", "arn", "created", "description", "assumableBy"], rows)


@mcp.tool(
    description="List IAM users (read-only) with ARN, creation date and when their password was last used, "
    "optionally under a path prefix.",
    annotations=READ,
)
def iam_list_users(
    path_prefix: Annotated[str | None, Field(pattern=r"^/([\w+=,.@-]+/)*$", description="e.g. /engineering/")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="most users to return")] = 100,
) -> CallToolResult:
    users = paginate("iam", "list_users", "Users", limit, PathPrefix=path_prefix)
    rows = [
        [u["UserName"], u.get("Arn"), str(u.get("CreateDate", "")), str(u.get("PasswordLastUsed", "") or "")]
        for u in users
    ]
    return table_result(["name", "arn", "created", "passwordLastUsed"], rows)


@mcp.tool(
    description="Show which AWS identity the server's credentials belong to: account id, ARN and user id. Use it "
    "first to check that credentials and endpoint work.",
    annotations=READ,
)
def sts_get_caller_identity() -> CallToolResult:
    r = call("sts", "get_caller_identity")
    return json_result({"account": r.get("Account"), "arn": r.get("Arn"), "userId": r.get("UserId")})
