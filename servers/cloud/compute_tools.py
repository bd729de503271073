"""Compute tools: EC2 instances, images, security groups and VPCs; Lambda functions (listing)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import table_result
from servers.cloud._aws import CREATE, DELETE, READ, WRITE, call, paginate, tags_dict
from servers.cloud.server import mcp

InstanceId = Annotated[str, Field(pattern=r"^i-[0-9a-f]{8,17}$", description="instance id, e.g. i-0abc1234def567890")]
InstanceIds = Annotated[list[InstanceId], Field(min_length=1, max_length=100, description="instance ids")]
State = Literal["pending", "running", "shutting-down", "terminated", "stopping", "stopped"]


def _filters(pairs: dict[str, list[str] | None]) -> list[dict[str, Any]] | None:
    found = [{"Name": name, "Values": values} for name, values in pairs.items() if values]
    return found or None


def _instance_row(i: dict[str, Any]) -> list[Any]:
    return [
        i["InstanceId"],
        i.get("State", {}).get("Name"),
        i.get("InstanceType"),
        i.get("ImageId"),
        i.get("PrivateIpAddress"),
        i.get("PublicIpAddress"),
        tags_dict(i.get("Tags")).get("Name", ""),
        str(i.get("LaunchTime", "")),
    ]


INSTANCE_COLUMNS = ["instanceId", "state", "type", "imageId", "privateIp", "publicIp", "name", "launched"]


@mcp.tool(
    description="List EC2 instances, optionally by id, state (running, stopped, ...) or tag value (e.g. "
    "tag {'env': 'dev'}). Returns a table of id, state, type, image, IPs, Name tag and launch time.",
    annotations=READ,
)
def ec2_describe_instances(
    instance_ids: Annotated[list[InstanceId] | None, Field(max_length=100, description="only these")] = None,
    states: Annotated[list[State] | None, Field(description="only instances in these states")] = None,
    tags: Annotated[dict[str, str] | None, Field(description="only instances with these tag values")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="most reservations to read")] = 200,
) -> CallToolResult:
    pairs: dict[str, list[str] | None] = {"instance-state-name": list(states) if states else None}
    pairs |= {f"tag:{k}": [v] for k, v in (tags or {}).items()}
    reservations = paginate(
        "ec2", "describe_instances", "Reservations", limit, InstanceIds=instance_ids, Filters=_filters(pairs)
    )
    rows = [_instance_row(i) for r in reservations for i in r.get("Instances", [])]
    return table_result(INSTANCE_COLUMNS, rows)


@mcp.tool(
    description="Launch EC2 instances from an AMI (image id) with an instance type, count, optional key pair, "
    "security groups, subnet and tags (a 'Name' tag names them). Costs money on real AWS. Returns the new instance "
    "ids and states.",
    annotations=CREATE,
)
def ec2_run_instances(
    image_id: Annotated[str, Field(pattern=r"^ami-[0-9a-f]{8,17}$", description="AMI id (see ec2_describe_images)")],
    instance_type: Annotated[str, Field(pattern=r"^[a-z0-9]+\.[a-z0-9]+$", description="e.g. t3.micro")] = "t3.micro",
    count: Annotated[int, Field(ge=1, le=20, description="number of instances")] = 1,
    key_name: Annotated[str | None, Field(max_length=255, description="EC2 key pair name")] = None,
    security_group_ids: Annotated[list[str] | None, Field(max_length=5, description="sg-... ids")] = None,
    subnet_id: Annotated[str | None, Field(pattern=r"^subnet-[0-9a-f]+$", description="subnet id")] = None,
    tags: Annotated[dict[str, str] | None, Field(max_length=50, description="tags, e.g. {'Name': 'web-1'}")] = None,
) -> CallToolResult:
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}] if tags else None
    response = call(
        "ec2",
        "run_instances",
        ImageId=image_id,
        InstanceType=instance_type,
        MinCount=count,
        MaxCount=count,
        KeyName=key_name,
        SecurityGroupIds=security_group_ids,
        SubnetId=subnet_id,
        TagSpecifications=spec,
    )
    return table_result(INSTANCE_COLUMNS, [_instance_row(i) for i in response.get("Instances", [])])


def _state_changes(response: dict[str, Any], key: str) -> CallToolResult:
    rows = [
        [c["InstanceId"], c.get("PreviousState", {}).get("Name"), c.get("CurrentState", {}).get("Name")]
        for c in response.get(key, [])
    ]
    return table_result(["instanceId", "previousState", "currentState"], rows)


@mcp.tool(
    description="Start stopped EC2 instances. Returns each instance's previous and current state.",
    annotations=WRITE,
)
def ec2_start_instances(instance_ids: InstanceIds) -> CallToolResult:
    return _state_changes(call("ec2", "start_instances", InstanceIds=instance_ids), "StartingInstances")


@mcp.tool(
    description="Stop running EC2 instances (they keep their disks and can be started again; force skips a clean "
    "shutdown). Returns each instance's previous and current state.",
    annotations=DELETE,
)
def ec2_stop_instances(
    instance_ids: InstanceIds, force: Annotated[bool, Field(description="stop without a clean OS shutdown")] = False
) -> CallToolResult:
    return _state_changes(call("ec2", "stop_instances", InstanceIds=instance_ids, Force=force), "StoppingInstances")


@mcp.tool(
    description="Terminate EC2 instances permanently (their instance-store and delete-on-termination volumes are "
    "lost). Returns each instance's previous and current state.",
    annotations=DELETE,
)
def ec2_terminate_instances(instance_ids: InstanceIds) -> CallToolResult:
    return _state_changes(call("ec2", "terminate_instances", InstanceIds=instance_ids), "TerminatingInstances")


@mcp.tool(
    description="Find EC2 machine images (AMIs) by owner ('self', 'amazon', an account id) and/or a name pattern "
    "with * wildcards (e.g. 'ubuntu*22.04*'). Use it to get an image id for ec2_run_instances. Returns a table of "
    "image id, name, architecture, state and creation date.",
    annotations=READ,
)
def ec2_describe_images(
    owners: Annotated[list[str] | None, Field(max_length=10, description="e.g. ['amazon'] or ['self']")] = None,
    name_pattern: Annotated[str | None, Field(max_length=255, description="name filter with * wildcards")] = None,
    image_ids: Annotated[list[str] | None, Field(max_length=100, description="only these ami-... ids")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="most images to return")] = 50,
) -> CallToolResult:
    images = call(
        "ec2",
        "describe_images",
        Owners=owners,
        ImageIds=image_ids,
        Filters=_filters({"name": [name_pattern] if name_pattern else None}),
    ).get("Images", [])
    images.sort(key=lambda i: str(i.get("CreationDate", "")), reverse=True)
    rows = [
        [i["ImageId"], i.get("Name"), i.get("Architecture"), i.get("State"), i.get("CreationDate"), i.get("OwnerId")]
        for i in images[:limit]
    ]
    return table_result(["imageId", "name", "architecture", "state", "created", "owner"], rows, total=len(images))


def _rule(perm: dict[str, Any]) -> str:
    ports = "all" if perm.get("IpProtocol") == "-1" else f"{perm.get('FromPort')}-{perm.get('ToPort')}"
    sources = [r["CidrIp"] for r in perm.get("IpRanges", [])] + [g["GroupId"] for g in perm.get("UserIdGroupPairs", [])]
    return f"{perm.get('IpProtocol')}:{ports} from {','.join(sources) or '-'}"


@mcp.tool(
    description="List EC2 security groups (optionally of one VPC or by id) with their inbound and outbound rules "
    "summarised as 'protocol:ports from sources'. Use it to audit which ports are open.",
    annotations=READ,
)
def ec2_describe_security_groups(
    vpc_id: Annotated[str | None, Field(pattern=r"^vpc-[0-9a-f]+$", description="only groups of this VPC")] = None,
    group_ids: Annotated[list[str] | None, Field(max_length=100, description="only these sg-... ids")] = None,
    limit: Annotated[int, Field(ge=1, le=1000, description="most groups to return")] = 200,
) -> CallToolResult:
    groups = paginate(
        "ec2",
        "describe_security_groups",
        "SecurityGroups",
        limit,
        GroupIds=group_ids,
        Filters=_filters({"vpc-id": [vpc_id] if vpc_id else None}),
    )
    rows = [
        [
            g["GroupId"],
            g.get("GroupName"),
            g.get("VpcId"),
            g.get("Description"),
            "; ".join(_rule(p) for p in g.get("IpPermissions", [])),
            "; ".join(_rule(p) for p in g.get("IpPermissionsEgress", [])),
        ]
        for g in groups
    ]
    return table_result(["groupId", "name", "vpcId", "description", "inbound", "outbound"], rows)


@mcp.tool(
    description="List the VPCs of the region with CIDR block, state, whether it is the default VPC and its Name "
    "tag. Use it to pick a VPC or subnet for new resources.",
    annotations=READ,
)
def ec2_describe_vpcs(
    vpc_ids: Annotated[list[str] | None, Field(max_length=100, description="only these vpc-... ids")] = None,
) -> CallToolResult:
    vpcs = call("ec2", "describe_vpcs", VpcIds=vpc_ids).get("Vpcs", [])
    rows = [
        [
            v["VpcId"],
            v.get("CidrBlock"),
            v.get("State"),
            v.get("IsDefault", False),
            tags_dict(v.get("Tags")).get("Name", ""),
        ]
        for v in vpcs
    ]
    return table_result(["vpcId", "cidr", "state", "isDefault", "name"], rows)


@mcp.tool(
    description="List the Lambda functions of the region with runtime, handler, memory, timeout and last change. "
    "Returns a table.",
    annotations=READ,
)
def lambda_list_functions(
    limit: Annotated[int, Field(ge=1, le=1000, description="most functions to return")] = 100,
) -> CallToolResult:
    functions = paginate("lambda", "list_functions", "Functions", limit)
    rows = [
        [
            f["FunctionName"],
            f.get("Runtime"),
            f.get("Handler"),
            f.get("MemorySize"),
            f.get("Timeout"),
            f.get("LastModified"),
            f.get("Description", ""),
        ]
        for f in functions
    ]
    return table_result(["name", "runtime", "handler", "memoryMb", "timeoutS", "modified", "description"], rows)
