"""DynamoDB tools: tables and items, with items as plain JSON (numbers, strings, lists, maps, booleans, null)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Annotated, Any, Literal

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer  # type: ignore[import-untyped]
from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.cloud._aws import CREATE, DELETE, READ, WRITE, call, paginate
from servers.cloud.server import mcp

Table = Annotated[str, Field(min_length=3, max_length=255, pattern=r"^[A-Za-z0-9_.-]+$", description="table name")]
Item = Annotated[dict[str, Any], Field(description="attributes as plain JSON, e.g. {'id': 'u1', 'age': 42}")]
KeyAttrs = Annotated[dict[str, Any], Field(min_length=1, max_length=2, description="the full primary key")]
AttrName = Annotated[str, Field(min_length=1, max_length=255, description="attribute name")]
KeyType = Literal["S", "N", "B"]
RangeOp = Literal["=", "<", "<=", ">", ">=", "begins_with", "between"]

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


def to_dynamo(item: dict[str, Any]) -> dict[str, Any]:
    """Plain JSON → DynamoDB attribute values (floats go through Decimal, as DynamoDB requires)."""
    exact = json.loads(json.dumps(item), parse_float=Decimal)
    try:
        return {k: _serializer.serialize(v) for k, v in exact.items()}
    except TypeError as exc:
        raise ToolError(f"cannot store this value in DynamoDB: {exc}") from exc


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | set | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    return value


def from_dynamo(item: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB attribute values → plain JSON."""
    return {k: _plain(_deserializer.deserialize(v)) for k, v in item.items()}


@mcp.tool(
    description="Create a DynamoDB table with a partition (hash) key and an optional sort (range) key, billed on "
    "demand. Returns the table status (CREATING or ACTIVE).",
    annotations=CREATE,
)
def dynamodb_create_table(
    table: Table,
    partition_key: AttrName,
    partition_key_type: Annotated[KeyType, Field(description="S string, N number, B binary")] = "S",
    sort_key: Annotated[str | None, Field(min_length=1, max_length=255, description="optional sort key")] = None,
    sort_key_type: KeyType = "S",
) -> CallToolResult:
    schema = [{"AttributeName": partition_key, "KeyType": "HASH"}]
    attrs = [{"AttributeName": partition_key, "AttributeType": partition_key_type}]
    if sort_key:
        schema.append({"AttributeName": sort_key, "KeyType": "RANGE"})
        attrs.append({"AttributeName": sort_key, "AttributeType": sort_key_type})
    response = call(
        "dynamodb",
        "create_table",
        TableName=table,
        KeySchema=schema,
        AttributeDefinitions=attrs,
        BillingMode="PAY_PER_REQUEST",
    )
    return json_result({"table": table, "status": response["TableDescription"].get("TableStatus")})


@mcp.tool(
    description="List the DynamoDB tables of the account and region. Returns their names.",
    annotations=READ,
)
def dynamodb_list_tables(
    limit: Annotated[int, Field(ge=1, le=1000, description="most tables to return")] = 100,
) -> CallToolResult:
    return json_result({"tables": paginate("dynamodb", "list_tables", "TableNames", limit)})


@mcp.tool(
    description="Describe a DynamoDB table: status, key schema, item count, size and billing mode. Use it to learn "
    "a table's key names before reading or writing items.",
    annotations=READ,
)
def dynamodb_describe_table(table: Table) -> CallToolResult:
    t = call("dynamodb", "describe_table", TableName=table)["Table"]
    return json_result(
        {
            "table": t["TableName"],
            "status": t.get("TableStatus"),
            "keySchema": {k["KeyType"].lower(): k["AttributeName"] for k in t.get("KeySchema", [])},
            "attributeTypes": {a["AttributeName"]: a["AttributeType"] for a in t.get("AttributeDefinitions", [])},
            "itemCount": t.get("ItemCount"),
            "sizeBytes": t.get("TableSizeBytes"),
            "billingMode": t.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED"),
            "arn": t.get("TableArn"),
        }
    )


@mcp.tool(
    description="Write one item to a DynamoDB table (the item must include the table's key). Replaces an item with "
    "the same key unless only_if_absent=true, which fails instead. Returns the key written.",
    annotations=WRITE,
)
def dynamodb_put_item(
    table: Table,
    item: Item,
    only_if_absent: Annotated[bool, Field(description="fail if an item with this key exists")] = False,
) -> CallToolResult:
    params: dict[str, Any] = {"TableName": table, "Item": to_dynamo(item)}
    if only_if_absent:
        schema = call("dynamodb", "describe_table", TableName=table)["Table"]["KeySchema"]
        hash_key = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
        params |= {"ConditionExpression": "attribute_not_exists(#k)", "ExpressionAttributeNames": {"#k": hash_key}}
    call("dynamodb", "put_item", **params)
    return json_result({"table": table, "written": True, "attributes": sorted(item)})


@mcp.tool(
    description="Read one DynamoDB item by its full primary key (partition key, plus sort key if the table has "
    "one). Returns the item as plain JSON, or found=false.",
    annotations=READ,
)
def dynamodb_get_item(
    table: Table,
    key: KeyAttrs,
    consistent: Annotated[bool, Field(description="strongly consistent read")] = False,
) -> CallToolResult:
    response = call("dynamodb", "get_item", TableName=table, Key=to_dynamo(key), ConsistentRead=consistent)
    item = response.get("Item")
    return json_result({"found": item is not None, "item": from_dynamo(item) if item else None})


@mcp.tool(
    description="Update attributes of one DynamoDB item by key: set new values and/or remove attributes, creating "
    "the item if it does not exist. Returns the item as it is after the update.",
    annotations=WRITE,
)
def dynamodb_update_item(
    table: Table,
    key: KeyAttrs,
    set_attributes: Annotated[dict[str, Any] | None, Field(description="attributes to set to these values")] = None,
    remove_attributes: Annotated[list[AttrName] | None, Field(description="attributes to remove")] = None,
) -> CallToolResult:
    if not set_attributes and not remove_attributes:
        raise ToolError("nothing to update: give set_attributes and/or remove_attributes")
    names: dict[str, str] = {}
    clauses = []
    values: dict[str, Any] = {}
    if set_attributes:
        sets = []
        for i, (name, value) in enumerate(set_attributes.items()):
            names[f"#s{i}"] = name
            values[f":v{i}"] = value
            sets.append(f"#s{i} = :v{i}")
        clauses.append("SET " + ", ".join(sets))
    if remove_attributes:
        for i, name in enumerate(remove_attributes):
            names[f"#r{i}"] = name
        clauses.append("REMOVE " + ", ".join(f"#r{i}" for i in range(len(remove_attributes))))
    response = call(
        "dynamodb",
        "update_item",
        TableName=table,
        Key=to_dynamo(key),
        UpdateExpression=" ".join(clauses),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=to_dynamo(values) if values else None,
        ReturnValues="ALL_NEW",
    )
    return json_result({"item": from_dynamo(response.get("Attributes", {}))})


@mcp.tool(
    description="Delete one DynamoDB item by its full primary key. Returns the deleted item, or existed=false when "
    "there was none.",
    annotations=DELETE,
)
def dynamodb_delete_item(table: Table, key: KeyAttrs) -> CallToolResult:
    response = call("dynamodb", "delete_item", TableName=table, Key=to_dynamo(key), ReturnValues="ALL_OLD")
    old = response.get("Attributes")
    return json_result({"existed": old is not None, "item": from_dynamo(old) if old else None})


def _range_condition(sort_key: str, op: RangeOp, value: Any, value2: Any) -> tuple[str, dict[str, Any]]:
    if op == "between":
        if value2 is None:
            raise ToolError("sort_op 'between' needs sort_value2 (the upper bound)")
        return "#sk BETWEEN :s1 AND :s2", {":s1": value, ":s2": value2}
    if op == "begins_with":
        return "begins_with(#sk, :s1)", {":s1": value}
    return f"#sk {op} :s1", {":s1": value}


def _items_table(items: list[dict[str, Any]], **extra: Any) -> CallToolResult:
    plain = [from_dynamo(i) for i in items]
    columns = sorted({k for i in plain for k in i})
    return table_result(columns, [[i.get(c) for c in columns] for i in plain], items=plain, **extra)


@mcp.tool(
    description="Query a DynamoDB table (or a secondary index) for the items of one partition key value, "
    "optionally narrowed by a condition on the sort key (=, <, <=, >, >=, begins_with, between). Returns a table of "
    "items and a nextKey for the next page.",
    annotations=READ,
)
def dynamodb_query(
    table: Table,
    partition_key: AttrName,
    partition_value: Annotated[str | int | float, Field(description="the partition key value")],
    sort_key: Annotated[str | None, Field(min_length=1, max_length=255, description="sort key name")] = None,
    sort_op: RangeOp = "=",
    sort_value: Annotated[str | int | float | None, Field(description="value for the sort key condition")] = None,
    sort_value2: Annotated[str | int | float | None, Field(description="upper bound for 'between'")] = None,
    index: Annotated[str | None, Field(max_length=255, description="secondary index name")] = None,
    descending: Annotated[bool, Field(description="newest/largest sort key first")] = False,
    limit: Annotated[int, Field(ge=1, le=1000, description="items per page")] = 100,
    start_key: Annotated[dict[str, Any] | None, Field(description="nextKey of a previous page")] = None,
) -> CallToolResult:
    condition = "#pk = :pk"
    names = {"#pk": partition_key}
    values: dict[str, Any] = {":pk": partition_value}
    if sort_key is not None and sort_value is not None:
        extra, more = _range_condition(sort_key, sort_op, sort_value, sort_value2)
        condition += " AND " + extra
        names["#sk"] = sort_key
        values |= more
    elif sort_key is not None or sort_value is not None:
        raise ToolError("give both sort_key and sort_value for a sort key condition")
    response = call(
        "dynamodb",
        "query",
        TableName=table,
        IndexName=index,
        KeyConditionExpression=condition,
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=to_dynamo(values),
        ScanIndexForward=not descending,
        Limit=limit,
        ExclusiveStartKey=to_dynamo(start_key) if start_key else None,
    )
    last = response.get("LastEvaluatedKey")
    return _items_table(response.get("Items", []), nextKey=from_dynamo(last) if last else None)


@mcp.tool(
    description="Scan a whole DynamoDB table, optionally keeping only items whose attributes equal the given "
    "values. Reads every item, so prefer dynamodb_query when you know the partition key. Returns a table of items "
    "and a nextKey for the next page.",
    annotations=READ,
)
def dynamodb_scan(
    table: Table,
    equals: Annotated[dict[str, Any] | None, Field(description="keep items with these attribute values")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="items to read per page")] = 100,
    start_key: Annotated[dict[str, Any] | None, Field(description="nextKey of a previous page")] = None,
) -> CallToolResult:
    params: dict[str, Any] = {}
    if equals:
        names = {f"#f{i}": name for i, name in enumerate(equals)}
        values = {f":f{i}": value for i, value in enumerate(equals.values())}
        params = {
            "FilterExpression": " AND ".join(f"#f{i} = :f{i}" for i in range(len(equals))),
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_dynamo(values),
        }
    response = call(
        "dynamodb",
        "scan",
        TableName=table,
        Limit=limit,
        ExclusiveStartKey=to_dynamo(start_key) if start_key else None,
        **params,
    )
    last = response.get("LastEvaluatedKey")
    return _items_table(
        response.get("Items", []), scanned=response.get("ScannedCount"), nextKey=from_dynamo(last) if last else None
    )
