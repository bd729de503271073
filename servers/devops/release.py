"""Release and schedule tools: semantic versions (semver), Keep a Changelog files, cron expressions (croniter)."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import semver
from croniter import croniter
from croniter.croniter import CroniterError
from mcp.server import MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers.devops._util import PURE, Content, FilePath, off_loop, read_source

__all__ = ["explain_cron", "register"]

Version = Annotated[str, Field(min_length=5, max_length=200, description="semantic version, e.g. 1.4.2-rc.1")]
Cron = Annotated[str, Field(min_length=1, max_length=200, description="cron expression (5 fields or @daily...)")]
RELEASE = re.compile(r"^##\s+\[?(?P<version>[^\]\s]+)\]?(?:\s+-\s+(?P<date>\d{4}-\d{2}-\d{2}))?(?P<rest>.*)$")
FIELDS = ("minute", "hour", "day of month", "month", "day of week")
DOW = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
MONTHS = ["", "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]


def _parse_version(value: str) -> semver.Version:
    try:
        return semver.Version.parse(value.removeprefix("v"))
    except ValueError as exc:
        raise ToolError(f"{value!r} is not a semantic version (MAJOR.MINOR.PATCH[-pre][+build])") from exc


def _ranges(values: list[int], names: list[str] | None) -> str:
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    label = (lambda n: names[n]) if names else str
    return ", ".join(label(r[0]) if len(r) == 1 else f"{label(r[0])}-{label(r[-1])}" for r in runs)


def explain_cron(expression: str) -> dict[str, Any]:
    """The expanded fields of a cron expression and an English description."""
    try:
        fields, _ = croniter.expand(expression)
    except (CroniterError, ValueError) as exc:
        raise ToolError(f"invalid cron expression {expression!r}: {exc}") from exc
    parts: dict[str, Any] = {}
    words = []
    for name, values in zip(FIELDS, fields, strict=False):
        if values == ["*"]:
            parts[name] = "every"
            continue
        ints = sorted({int(v) for v in values})
        parts[name] = ints
        names = DOW if name == "day of week" else MONTHS if name == "month" else None
        step = ints[1] - ints[0] if len(ints) > 2 else 0
        if name in ("minute", "hour") and step > 1 and all(b - a == step for a, b in itertools.pairwise(ints)):
            words.append(f"every {step} {name}s from {ints[0]} to {ints[-1]}")
        else:
            words.append(f"{name} {_ranges(ints, names)}")
    if parts.get("minute") == "every":
        words.insert(0, "every minute")
    text = "Runs " + ("; ".join(words) if words else "every minute")
    if parts.get("day of month") != "every" and parts.get("day of week") != "every":
        text += " (day of month OR day of week, as cron does)"
    return {"expression": expression, "fields": parts, "description": text}


def _changelog(text: str) -> list[dict[str, Any]]:
    releases: list[dict[str, Any]] = []
    section = None
    for line in text.splitlines():
        if match := RELEASE.match(line):
            releases.append({"version": match["version"], "date": match["date"],
                             "yanked": "[YANKED]" in match["rest"].upper(), "changes": {}})  # fmt: skip
            section = None
        elif releases and line.startswith("### "):
            section = line[4:].strip()
            releases[-1]["changes"].setdefault(section, [])
        elif releases and section and re.match(r"^\s*[-*+]\s+", line):
            releases[-1]["changes"][section].append(re.sub(r"^\s*[-*+]\s+", "", line).strip())
        elif releases and section and line.startswith("  ") and releases[-1]["changes"][section]:
            releases[-1]["changes"][section][-1] += " " + line.strip()
    return releases


def register(mcp: MCPServer) -> None:  # noqa: C901 - one nested function per tool
    """Add the release and schedule tools to ``mcp``."""

    @mcp.tool(annotations=PURE)
    async def semver_bump(
        version: Version,
        part: Literal["major", "minor", "patch", "prerelease", "build", "finalize"],
        token: Annotated[str, Field(pattern=r"^[0-9A-Za-z-]+$", description="prerelease/build label")] = "rc",
    ) -> CallToolResult:
        """Compute the next semantic version: bump major/minor/patch (resetting lower parts), the prerelease counter
        (1.2.0 -> 1.2.1-rc.1 -> 1.2.1-rc.2), the build metadata, or finalize a prerelease (1.3.0-rc.2 -> 1.3.0).
        A leading 'v' is accepted and kept.
        """
        parsed = _parse_version(version)
        bumped = {
            "major": parsed.bump_major, "minor": parsed.bump_minor, "patch": parsed.bump_patch,
            "prerelease": lambda: (parsed if parsed.prerelease else parsed.bump_patch()).bump_prerelease(token),
            "build": lambda: parsed.bump_build(token),
            "finalize": parsed.finalize_version,
        }[part]()  # fmt: skip
        prefix = "v" if version.startswith("v") else ""
        return json_result({"from": version, "part": part, "version": prefix + str(bumped)})

    @mcp.tool(annotations=PURE)
    async def semver_compare(
        versions: Annotated[list[Version], Field(min_length=1, max_length=1000)],
        constraint: Annotated[str | None, Field(max_length=200, description="e.g. '>=1.2.0,<2.0.0'")] = None,
        include_prerelease: Annotated[bool, Field(description="let prereleases satisfy the constraint")] = False,
    ) -> CallToolResult:
        """Sort semantic versions by precedence (prereleases before their release), give the latest and the latest
        stable, and with a constraint (comma-separated comparisons such as '>=1.2.0,<2.0.0') which ones satisfy it
        (prereleases only when include_prerelease is set, as npm and pip do).
        """
        parsed = sorted(((_parse_version(v), v) for v in versions), key=lambda pv: pv[0])
        stable = [v for p, v in parsed if not p.prerelease]
        result: dict[str, Any] = {"sorted": [v for _, v in parsed], "latest": parsed[-1][1],
                                  "latest_stable": stable[-1] if stable else None}  # fmt: skip
        if constraint:
            clauses = [c.strip() for c in constraint.split(",") if c.strip()]
            try:
                result["matching"] = [v for p, v in parsed if (include_prerelease or not p.prerelease)
                                      and all(p.match(c) for c in clauses)]  # fmt: skip
            except ValueError as exc:
                raise ToolError(f"invalid constraint {constraint!r}: {exc}") from exc
        return json_result(result)

    @mcp.tool(annotations=PURE)
    async def changelog_parse(
        content: Content = None,
        path: FilePath = None,
        version: Annotated[str | None, Field(max_length=100, description="only this release (or 'Unreleased')")] = None,
    ) -> CallToolResult:
        """Parse a Keep a Changelog style CHANGELOG.md into releases (version, date, yanked) with their entries per
        section (Added, Changed, Fixed...). Use it to draft release notes or check what a version contains.
        """
        text, _ = await off_loop(read_source, content, path)
        releases = _changelog(text)
        if not releases:
            raise ToolError("no '## [version] - date' release headings found")
        if version is not None:
            releases = [
                r for r in releases if r["version"].lower().removeprefix("v") == version.lower().removeprefix("v")
            ]
            if not releases:
                raise ToolError(f"no release {version!r} in the changelog")
        latest = next((r["version"] for r in releases if r["version"].lower() != "unreleased"), None)
        return json_result({"releases": releases, "latest": latest})

    @mcp.tool(annotations=PURE)
    async def cron_explain(expression: Cron) -> CallToolResult:
        """Explain a cron expression in words and give each field's expanded values (minute, hour, day of month,
        month, day of week; names like MON and macros like @daily accepted). Fails on out-of-range fields.
        """
        return json_result(explain_cron(expression))

    @mcp.tool(annotations=PURE)
    async def cron_next_runs(
        expression: Cron,
        count: Annotated[int, Field(ge=1, le=500)] = 5,
        start: Annotated[str | None, Field(description="ISO 8601 start time (default: now)")] = None,
        timezone: Annotated[str, Field(max_length=64, description="IANA zone the schedule runs in")] = "UTC",
    ) -> CallToolResult:
        """The next ``count`` times a cron schedule fires after ``start`` in a time zone (DST handled), as ISO 8601
        timestamps. Use it to check a schedule does what is intended before deploying it.
        """
        try:
            zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ToolError(f"unknown time zone {timezone!r}") from exc
        try:
            begin = datetime.fromisoformat(start) if start else datetime.now(UTC)
        except ValueError as exc:
            raise ToolError(f"start {start!r} is not an ISO 8601 time") from exc
        begin = begin.replace(tzinfo=zone) if begin.tzinfo is None else begin.astimezone(zone)
        try:
            schedule = croniter(expression, begin)
        except (CroniterError, ValueError) as exc:
            raise ToolError(f"invalid cron expression {expression!r}: {exc}") from exc
        runs = [schedule.get_next(datetime).isoformat() for _ in range(count)]
        return table_result(["run"], [[r] for r in runs], title=f"next runs of {expression}", timezone=timezone)
