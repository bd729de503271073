"""S3 tools: buckets, objects, presigned URLs, versioning and tags."""

from __future__ import annotations

import base64
from typing import Annotated, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.cloud._aws import CREATE, DELETE, READ, WRITE, aws_errors, call, client, paginate, tags_dict, tags_list
from servers.cloud.server import mcp

Bucket = Annotated[
    str, Field(min_length=3, max_length=63, pattern=r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$", description="bucket name")
]
Key = Annotated[str, Field(min_length=1, max_length=1024, description="object key, e.g. 'reports/2024/q1.csv'")]
MAX_READ_BYTES = 1024 * 1024


@mcp.tool(
    description="List the S3 buckets of the account with their creation dates. Use it to find a bucket name before "
    "listing or reading objects. Returns a table of name and created.",
    annotations=READ,
)
def s3_list_buckets() -> CallToolResult:
    buckets = call("s3", "list_buckets").get("Buckets", [])
    return table_result(["name", "created"], [[b["Name"], str(b.get("CreationDate", ""))] for b in buckets])


@mcp.tool(
    description="Create an S3 bucket, optionally in a given region. Fails if the name is taken. Returns the bucket "
    "name and its location.",
    annotations=CREATE,
)
def s3_create_bucket(
    bucket: Bucket,
    region: Annotated[str | None, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$", description="e.g. eu-west-1")] = None,
) -> CallToolResult:
    config = {"CreateBucketConfiguration": {"LocationConstraint": region}} if region and region != "us-east-1" else {}
    response = call("s3", "create_bucket", Bucket=bucket, **config)
    return json_result({"bucket": bucket, "location": response.get("Location")})


@mcp.tool(
    description="Delete an S3 bucket. A bucket must be empty unless force=true, which first deletes every object "
    "(and every version) in it. Returns the number of objects deleted.",
    annotations=DELETE,
)
def s3_delete_bucket(
    bucket: Bucket,
    force: Annotated[bool, Field(description="delete all objects and versions first")] = False,
) -> CallToolResult:
    deleted = 0
    if force:
        versions = paginate("s3", "list_object_versions", "Versions", 100_000, Bucket=bucket)
        markers = paginate("s3", "list_object_versions", "DeleteMarkers", 100_000, Bucket=bucket)
        targets = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in versions + markers]
        for start in range(0, len(targets), 1000):
            call("s3", "delete_objects", Bucket=bucket, Delete={"Objects": targets[start : start + 1000]})
        deleted = len(versions)
    call("s3", "delete_bucket", Bucket=bucket)
    return json_result({"bucket": bucket, "deleted": True, "objectsDeleted": deleted})


@mcp.tool(
    description="List objects in an S3 bucket under a key prefix. With delimiter '/' it lists one 'folder' level "
    "(common prefixes). Returns a table of key, size, modified and storage class, plus prefixes and a "
    "continuationToken when more objects remain.",
    annotations=READ,
)
def s3_list_objects(
    bucket: Bucket,
    prefix: Annotated[str, Field(max_length=1024, description="only keys starting with this")] = "",
    delimiter: Annotated[str | None, Field(max_length=8, description="e.g. '/' to group by folder")] = None,
    max_keys: Annotated[int, Field(ge=1, le=1000, description="objects per call")] = 100,
    continuation_token: Annotated[str | None, Field(description="token from a previous call")] = None,
) -> CallToolResult:
    response = call(
        "s3",
        "list_objects_v2",
        Bucket=bucket,
        Prefix=prefix,
        Delimiter=delimiter,
        MaxKeys=max_keys,
        ContinuationToken=continuation_token,
    )
    rows = [
        [o["Key"], o.get("Size", 0), str(o.get("LastModified", "")), o.get("StorageClass", "")]
        for o in response.get("Contents", [])
    ]
    return table_result(
        ["key", "size", "modified", "storageClass"],
        rows,
        prefixes=[p["Prefix"] for p in response.get("CommonPrefixes", [])],
        continuationToken=response.get("NextContinuationToken"),
    )


@mcp.tool(
    description="Upload an object to S3 from text (encoding 'text', stored as UTF-8) or from base64 bytes "
    "(encoding 'base64'), with an optional content type and user metadata. Overwrites an existing key (or adds a "
    "version when versioning is on). Returns the ETag and version id.",
    annotations=WRITE,
)
def s3_put_object(
    bucket: Bucket,
    key: Key,
    content: Annotated[str, Field(max_length=10_000_000, description="the body: text, or base64 bytes")],
    encoding: Annotated[Literal["text", "base64"], Field(description="how `content` is given")] = "text",
    content_type: Annotated[str | None, Field(max_length=255, description="e.g. 'application/json'")] = None,
    metadata: Annotated[dict[str, str] | None, Field(description="user metadata (x-amz-meta-*)")] = None,
) -> CallToolResult:
    if encoding == "base64":
        try:
            body = base64.b64decode(content, validate=True)
        except ValueError as exc:
            raise ToolError(f"content is not valid base64: {exc}") from exc
    else:
        body = content.encode("utf-8")
    response = call("s3", "put_object", Bucket=bucket, Key=key, Body=body, ContentType=content_type, Metadata=metadata)
    return json_result(
        {
            "bucket": bucket,
            "key": key,
            "size": len(body),
            "etag": response.get("ETag"),
            "versionId": response.get("VersionId"),
        }
    )


@mcp.tool(
    description="Download an S3 object (or a version of it) and return its body as text when it is UTF-8, else as "
    "base64, up to max_bytes. Use s3_head_object first for big objects. Returns the body, "
    "content type, size, metadata and whether it was truncated.",
    annotations=READ,
)
def s3_get_object(
    bucket: Bucket,
    key: Key,
    version_id: Annotated[str | None, Field(description="a version from s3_list_objects/versioning")] = None,
    max_bytes: Annotated[int, Field(ge=1, le=MAX_READ_BYTES, description="bytes to read from the start")] = 65536,
) -> CallToolResult:
    response = call("s3", "get_object", Bucket=bucket, Key=key, VersionId=version_id)
    with aws_errors("s3 get_object"), response["Body"] as stream:
        body: bytes = stream.read(max_bytes)
    size = int(response.get("ContentLength", len(body)))
    try:
        content, encoding = body.decode("utf-8"), "text"
    except UnicodeDecodeError:
        content, encoding = base64.b64encode(body).decode("ascii"), "base64"
    return json_result(
        {
            "bucket": bucket,
            "key": key,
            "content": content,
            "encoding": encoding,
            "contentType": response.get("ContentType"),
            "size": size,
            "truncated": size > len(body),
            "metadata": response.get("Metadata", {}),
            "versionId": response.get("VersionId"),
        }
    )


@mcp.tool(
    description="Read an S3 object's metadata without downloading it: size, content type, ETag, last modified, "
    "version id and user metadata. Use it to check that an object exists or how big it is.",
    annotations=READ,
)
def s3_head_object(bucket: Bucket, key: Key) -> CallToolResult:
    r = call("s3", "head_object", Bucket=bucket, Key=key)
    return json_result(
        {
            "bucket": bucket,
            "key": key,
            "size": r.get("ContentLength"),
            "contentType": r.get("ContentType"),
            "etag": r.get("ETag"),
            "modified": str(r.get("LastModified", "")),
            "versionId": r.get("VersionId"),
            "metadata": r.get("Metadata", {}),
        }
    )


@mcp.tool(
    description="Delete one or more objects (up to 1000 keys) from an S3 bucket. Returns the keys deleted and any "
    "per-key errors.",
    annotations=DELETE,
)
def s3_delete_objects(
    bucket: Bucket,
    keys: Annotated[list[Key], Field(min_length=1, max_length=1000, description="keys to delete")],
) -> CallToolResult:
    response = call("s3", "delete_objects", Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})
    errors = [{"key": e.get("Key"), "error": e.get("Message") or e.get("Code")} for e in response.get("Errors", [])]
    return json_result({"deleted": [d["Key"] for d in response.get("Deleted", [])], "errors": errors})


@mcp.tool(
    description="Copy an S3 object to another key or bucket inside S3 (no download). Returns the new ETag.",
    annotations=WRITE,
)
def s3_copy_object(source_bucket: Bucket, source_key: Key, dest_bucket: Bucket, dest_key: Key) -> CallToolResult:
    response = call(
        "s3",
        "copy_object",
        Bucket=dest_bucket,
        Key=dest_key,
        CopySource={"Bucket": source_bucket, "Key": source_key},
    )
    etag = response.get("CopyObjectResult", {}).get("ETag")
    return json_result({"bucket": dest_bucket, "key": dest_key, "etag": etag, "versionId": response.get("VersionId")})


@mcp.tool(
    description="Make a presigned URL that lets anyone holding it GET (download) or PUT (upload) one S3 object "
    "without credentials, for a limited time. Returns the URL and its expiry in seconds.",
    annotations=READ,
)
def s3_presign_url(
    bucket: Bucket,
    key: Key,
    method: Annotated[Literal["get", "put"], Field(description="download (get) or upload (put)")] = "get",
    expires_seconds: Annotated[int, Field(ge=1, le=604800, description="lifetime of the URL")] = 3600,
) -> CallToolResult:
    with aws_errors("s3 presign"):
        url = client("s3").generate_presigned_url(
            f"{method}_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=expires_seconds
        )
    return json_result({"url": url, "method": method.upper(), "expiresSeconds": expires_seconds})


@mcp.tool(
    description="Show an S3 bucket's settings: region, versioning status and tags. Use it before changing "
    "versioning or tags.",
    annotations=READ,
)
def s3_bucket_info(bucket: Bucket) -> CallToolResult:
    location = call("s3", "get_bucket_location", Bucket=bucket).get("LocationConstraint") or "us-east-1"
    versioning = call("s3", "get_bucket_versioning", Bucket=bucket).get("Status", "Disabled")
    try:
        tags = tags_dict(call("s3", "get_bucket_tagging", Bucket=bucket).get("TagSet"))
    except ToolError as exc:
        if "NoSuchTagSet" not in str(exc):
            raise
        tags = {}
    return json_result({"bucket": bucket, "region": location, "versioning": versioning, "tags": tags})


@mcp.tool(
    description="Turn S3 bucket versioning on ('Enabled') or pause it ('Suspended'). With versioning on, "
    "overwrites and deletes keep older versions. Returns the new status.",
    annotations=WRITE,
)
def s3_set_bucket_versioning(
    bucket: Bucket, status: Annotated[Literal["Enabled", "Suspended"], Field(description="the new state")]
) -> CallToolResult:
    call("s3", "put_bucket_versioning", Bucket=bucket, VersioningConfiguration={"Status": status})
    return json_result({"bucket": bucket, "versioning": status})


@mcp.tool(
    description="Replace all tags of an S3 bucket with the given key/value pairs (an empty mapping removes all "
    "tags). Returns the tags now set.",
    annotations=WRITE,
)
def s3_set_bucket_tags(
    bucket: Bucket,
    tags: Annotated[dict[str, str], Field(max_length=50, description="e.g. {'team': 'data', 'env': 'dev'}")],
) -> CallToolResult:
    if tags:
        call("s3", "put_bucket_tagging", Bucket=bucket, Tagging={"TagSet": tags_list(tags)})
    else:
        call("s3", "delete_bucket_tagging", Bucket=bucket)
    return json_result({"bucket": bucket, "tags": tags})
