"""A systemd unit file checker: sections, known keys, value syntax and required keys (no systemd needed)."""

from __future__ import annotations

import difflib
import re
from typing import Any

__all__ = ["unit_problems"]

COMMON_UNIT = {"Description", "Documentation", "Requires", "Wants", "BindsTo", "PartOf", "Conflicts", "Before",
               "After", "OnFailure", "OnSuccess", "ConditionPathExists", "ConditionPathIsDirectory", "AssertPathExists",
               "StartLimitIntervalSec", "StartLimitBurst", "DefaultDependencies", "Requisite", "Upholds",
               "ConditionVirtualization", "ConditionHost", "ConditionKernelCommandLine", "RefuseManualStart",
               "RefuseManualStop", "StopWhenUnneeded", "JobTimeoutSec", "ConditionFileNotEmpty"}  # fmt: skip
EXEC_KEYS = {"WorkingDirectory", "RootDirectory", "User", "Group", "Environment", "EnvironmentFile", "UMask", "Nice",
             "LimitNOFILE", "LimitNPROC", "LimitCORE", "LimitMEMLOCK", "StandardOutput", "StandardError",
             "StandardInput", "SyslogIdentifier", "PrivateTmp", "ProtectSystem", "ProtectHome", "NoNewPrivileges",
             "ReadWritePaths", "ReadOnlyPaths", "CapabilityBoundingSet", "AmbientCapabilities", "DynamicUser",
             "PrivateDevices", "PrivateNetwork", "MemoryMax", "MemoryHigh", "CPUQuota", "TasksMax", "IOWeight",
             "SupplementaryGroups", "RuntimeDirectory", "StateDirectory", "CacheDirectory", "LogsDirectory",
             "ConfigurationDirectory", "KillMode", "KillSignal", "TimeoutStopSec", "SendSIGKILL"}  # fmt: skip
SECTIONS: dict[str, set[str]] = {
    "Unit": COMMON_UNIT,
    "Install": {"WantedBy", "RequiredBy", "Alias", "Also", "DefaultInstance", "UpheldBy"},
    "Service": EXEC_KEYS | {"Type", "ExecStart", "ExecStartPre", "ExecStartPost", "ExecReload", "ExecStop",
                            "ExecStopPost", "Restart", "RestartSec", "TimeoutStartSec", "TimeoutSec",
                            "RemainAfterExit", "PIDFile", "BusName", "NotifyAccess", "WatchdogSec",
                            "SuccessExitStatus", "RestartPreventExitStatus", "OOMScoreAdjust"},
    "Timer": {"OnCalendar", "OnActiveSec", "OnBootSec", "OnStartupSec", "OnUnitActiveSec", "OnUnitInactiveSec",
              "Persistent", "Unit", "AccuracySec", "RandomizedDelaySec", "WakeSystem", "RemainAfterElapse"},
    "Socket": EXEC_KEYS | {"ListenStream", "ListenDatagram", "ListenSequentialPacket", "Accept", "Service",
                           "SocketUser", "SocketGroup", "SocketMode", "Backlog", "BindIPv6Only", "MaxConnections"},
    "Mount": EXEC_KEYS | {"What", "Where", "Type", "Options", "TimeoutSec", "LazyUnmount"},
    "Path": {"PathExists", "PathExistsGlob", "PathChanged", "PathModified", "DirectoryNotEmpty", "Unit",
             "MakeDirectory", "DirectoryMode"},
}  # fmt: skip
BOOLEAN = {"yes", "no", "true", "false", "on", "off", "1", "0"}
BOOL_KEYS = {"PrivateTmp", "NoNewPrivileges", "RemainAfterExit", "Persistent", "Accept", "DynamicUser",
             "PrivateDevices", "PrivateNetwork", "DefaultDependencies", "WakeSystem", "SendSIGKILL"}  # fmt: skip
CHOICES = {
    "Type": {"simple", "exec", "forking", "oneshot", "dbus", "notify", "notify-reload", "idle"},
    "Restart": {"no", "always", "on-success", "on-failure", "on-abnormal", "on-abort", "on-watchdog"},
    "KillMode": {"control-group", "mixed", "process", "none"},
    "ProtectSystem": {"yes", "no", "true", "false", "full", "strict"},
}
TIMESPAN = re.compile(
    r"^(infinity|(\d+(\.\d+)?\s*(us|ms|s|sec|seconds?|m|min|minutes?|h|hr|hours?|d|days?|w|weeks?)?\s*)+)$"
)
TIME_KEYS = {"RestartSec", "TimeoutStartSec", "TimeoutStopSec", "TimeoutSec", "OnBootSec", "OnActiveSec",
             "OnStartupSec", "OnUnitActiveSec", "OnUnitInactiveSec", "AccuracySec", "RandomizedDelaySec",
             "StartLimitIntervalSec", "WatchdogSec", "JobTimeoutSec"}  # fmt: skip
TYPE_SECTION = {"service": "Service", "timer": "Timer", "socket": "Socket", "mount": "Mount", "path": "Path"}


def _parse(text: str, errors: list[str]) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current: str | None = None
    for number, raw in enumerate(text.replace("\\\n", " ").splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                errors.append(f"line {number}: malformed section header {line!r}")
                continue
            current = line[1:-1]
            sections.setdefault(current, {})
            continue
        key, sep, value = line.partition("=")
        if not sep:
            errors.append(f"line {number}: expected Key=Value, got {line[:60]!r}")
        elif current is None:
            errors.append(f"line {number}: {key.strip()} is outside any [Section]")
        else:
            sections[current].setdefault(key.strip(), []).append(value.strip())
    return sections


def _check_values(section: str, key: str, values: list[str], errors: list[str]) -> None:
    for value in values:
        if key in BOOL_KEYS and value.lower() not in BOOLEAN:
            errors.append(f"[{section}] {key}={value}: expected a boolean (yes/no)")
        if key in CHOICES and section in ("Service", "Socket") and value and value not in CHOICES[key]:
            errors.append(f"[{section}] {key}={value}: expected one of {sorted(CHOICES[key])}")
        if key in TIME_KEYS and value and not TIMESPAN.match(value):
            errors.append(f"[{section}] {key}={value}: not a time span (e.g. 5s, 1min 30s, infinity)")
        if key.startswith("Exec") and value:
            command = value.lstrip("@-:+!")
            if not command.startswith("/") and not re.match(r"^[A-Za-z0-9_.-]+(\s|$)", command):
                errors.append(f"[{section}] {key}: {value!r} is not a command line")


def _check_section(section: str, keys: dict[str, list[str]], errors: list[str]) -> None:
    known = SECTIONS.get(section)
    if known is None:
        if not section.startswith("X-"):
            errors.append(f"unknown section [{section}]")
        return
    for key, values in keys.items():
        if key not in known and not key.startswith("X-"):
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            errors.append(f"[{section}] unknown key {key}{hint}")
        _check_values(section, key, values, errors)


def _warnings(sections: dict[str, dict[str, list[str]]], kind: str) -> list[str]:
    service = sections.get("Service", {})
    warnings = [f"ExecStart {v.split()[0]!r} is not an absolute path (needs systemd 239+ PATH lookup)"
                for v in service.get("ExecStart", []) if v and not v.lstrip("@-:+!").startswith("/")]  # fmt: skip
    if "Description" not in sections.get("Unit", {}):
        warnings.append("[Unit] has no Description=")
    if kind in ("service", "socket", "timer") and "WantedBy" not in sections.get("Install", {}):
        warnings.append("no [Install] WantedBy=: `systemctl enable` will not start it at boot")
    if service.get("Restart", ["no"])[-1] != "no" and "RestartSec" not in service:
        warnings.append("Restart= without RestartSec= restarts after 100 ms")
    return warnings


def unit_problems(text: str, kind: str | None) -> dict[str, Any]:
    """Errors and warnings of a unit file; ``kind`` (service, timer...) is guessed from its sections if not given."""
    errors: list[str] = []
    sections = _parse(text, errors)
    if kind is None:
        kind = next((k for k, s in TYPE_SECTION.items() if s in sections), "target")
    for section, keys in sections.items():
        _check_section(section, keys, errors)
    main = TYPE_SECTION.get(kind)
    if main and main not in sections:
        errors.append(f"a .{kind} unit needs a [{main}] section")
    service = sections.get("Service", {})
    if kind == "service" and "ExecStart" not in service and service.get("Type", [""])[-1] != "oneshot":
        errors.append("[Service] needs ExecStart=")
    timer = sections.get("Timer", {})
    if kind == "timer" and not any(k.startswith("On") for k in timer):
        errors.append("[Timer] needs OnCalendar= or an On*Sec= trigger")
    warnings = _warnings(sections, kind)
    parsed = {s: {k: v[-1] if len(v) == 1 else v for k, v in keys.items()} for s, keys in sections.items()}
    return {"valid": not errors, "unit_type": kind, "errors": errors, "warnings": warnings, "sections": parsed}
