"""``hanzo-hub secrets …`` and ``hanzo-hub policy …``: the vault and a dry run of the per-call policy.

```
hanzo-hub secrets set NAME            # the value from stdin (piped) or a prompt without echo; never from argv
hanzo-hub secrets list [--json]       # names only, never values
hanzo-hub secrets rm NAME
hanzo-hub policy show SERVER | SERVER__TOOL [--json]
hanzo-hub policy check TOOL --args JSON [--user U] [--turn T] [--json]   # exit 0 allowed, 1 denied
```

Nothing here starts a downstream server: tools and their schemas come from the snapshots the hub keeps (and the
catalog's packaged tool lists). ``cli.py`` registers both groups with :func:`register` and runs them with
:func:`run`.
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
import sys
from collections.abc import Callable
from typing import Any

import anyio

from hanzo_hub.config import HubSettings
from hanzo_hub.errors import ToolNotFound, VaultError
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.registry import Target
from hanzo_hub.sandbox.policy import ToolPolicy
from hanzo_hub.sandbox.vault import Vault

__all__ = ["register", "run"]

SettingsFactory = Callable[[argparse.Namespace], HubSettings]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``secrets`` and ``policy`` command groups to the top-level subparsers."""
    secrets = commands.add_parser("secrets", help="the encrypted secrets vault")
    sub = secrets.add_subparsers(dest="secrets_command", required=True)
    put = sub.add_parser("set", parents=[common], help="store a secret (value from stdin or a hidden prompt)")
    put.add_argument("name")
    listing = sub.add_parser("list", parents=[common], help="the names of the stored secrets (never values)")
    listing.add_argument("--json", action="store_true")
    remove = sub.add_parser("rm", parents=[common], help="delete a secret")
    remove.add_argument("name")

    policy = commands.add_parser("policy", help="per-call policies: show them, dry-run a call")
    psub = policy.add_subparsers(dest="policy_command", required=True)
    show = psub.add_parser("show", parents=[common], help="the effective policy of a server or one of its tools")
    show.add_argument("target", metavar="SERVER|SERVER__TOOL")
    show.add_argument("--json", action="store_true")
    check = psub.add_parser("check", parents=[common], help="what a call would be allowed to do, and why")
    check.add_argument("tool", help="the exposed tool name (as tools/list shows it)")
    check.add_argument("--args", dest="arguments", default="{}", help="the call's arguments, a JSON object")
    check.add_argument("--user", help="the calling user (default: the local user)")
    check.add_argument("--turn", help="a turn id, to see the per-turn budget apply")
    check.add_argument("--json", action="store_true")


def run(args: argparse.Namespace, make_settings: SettingsFactory) -> int:
    """Run a ``secrets`` or ``policy`` subcommand; returns the exit status."""
    settings = make_settings(args)
    try:
        if args.command == "secrets":
            return _SECRETS[args.secrets_command](args, settings)
        return _POLICY[args.policy_command](args, settings)
    except (VaultError, ToolNotFound) as exc:
        print(f"hanzo-hub: {exc}", file=sys.stderr)
        return 2


# -- secrets --------------------------------------------------------------------------------------------------------


def _vault(settings: HubSettings) -> Vault:
    return Vault(settings.vault_dir, keyring_service=settings.sandbox.keyring_service)


def _read_value(name: str) -> str:
    if sys.stdin.isatty():
        value = getpass.getpass(f"value of {name} (not echoed): ")
    else:
        value = sys.stdin.read()
        value = value[:-1] if value.endswith("\n") else value
        value = value[:-1] if value.endswith("\r") else value
    return value


def _secrets_set(args: argparse.Namespace, settings: HubSettings) -> int:
    vault = _vault(settings)
    value = _read_value(args.name)
    if not value:
        print("hanzo-hub: refusing to store an empty secret", file=sys.stderr)
        return 2
    vault.set(args.name, value)
    print(f"stored secret {args.name} ({len(value)} characters; key from the {vault.key_source})")
    print(f'use it in a server\'s env or headers as "${{vault:{args.name}}}"')
    return 0


def _secrets_list(args: argparse.Namespace, settings: HubSettings) -> int:
    names = _vault(settings).list() if (settings.vault_dir / "secrets.json").is_file() else []
    if args.json:
        print(json.dumps({"secrets": names}))
    elif not names:
        print("no secrets stored")
    else:
        print("\n".join(names))
    return 0


def _secrets_rm(args: argparse.Namespace, settings: HubSettings) -> int:
    if not (settings.vault_dir / "secrets.json").is_file() or not _vault(settings).delete(args.name):
        print(f"hanzo-hub: no secret named {args.name}", file=sys.stderr)
        return 1
    print(f"removed secret {args.name}")
    return 0


# -- policy ---------------------------------------------------------------------------------------------------------


def _hub(settings: HubSettings) -> Hub:
    hub = Hub(settings)
    hub.snapshot_tools()  # registry from snapshots and catalog seeds; nothing starts
    return hub


def _servers(hub: Hub) -> list[str]:
    return sorted({*hub.settings.servers, *hub.guard.catalog})


def _resolve(hub: Hub, name: str) -> tuple[Target, str | None]:
    """The tool an exposed name stands for, and a note when it is not known from a snapshot.

    Without a snapshot (the server never ran), ``SERVER__TOOL`` is split by the server's alias and the tool's
    arguments are recognised by their names only.

    Raises:
        ToolNotFound: neither a snapshot tool nor ``SERVER__TOOL`` of a configured server.
    """
    try:
        return hub.registry.resolve_tool(name), None
    except ToolNotFound:
        servers = _servers(hub)
        for server in servers:
            prefix = f"{hub.registry.alias(server)}__" if hub.registry.prefixed(server) else ""
            if name.startswith(prefix) and len(name) > len(prefix) and (prefix or len(servers) == 1):
                note = f"no snapshot of {server}'s tools yet: arguments are recognised by their names only"
                return Target(server, name[len(prefix) :]), note
        raise ToolNotFound(
            f"unknown tool {name!r}: not in any snapshot and not SERVER__TOOL of a configured server "
            f"({', '.join(servers) or 'none configured'})"
        ) from None


def _policy_json(policy: ToolPolicy) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(policy).items()}


def _tool_policy(hub: Hub, target: Target, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    facts = hub.guard.policies.get(target.server)
    engine = hub.guard.engine
    category = facts.category if facts is not None else None
    declared = facts.declared if facts is not None else None
    schema = hub.guard.schema(target) if facts is not None else None
    if schema is None and arguments:
        schema = {"type": "object", "properties": {name: {} for name in arguments}}
    paths = engine.path_arguments(target.server, target.original, schema, category=category, declared=declared)
    urls = engine.url_arguments(target.server, target.original, schema, category=category, declared=declared)
    return {
        "server": target.server,
        "tool": target.original,
        "policed": facts is not None,
        "policy": _policy_json(engine.policy_for(target.server, target.original, category=category, declared=declared)),
        "path_arguments": sorted(paths) if facts is not None else [],
        "url_arguments": sorted(urls) if facts is not None else [],
    }


def _category(hub: Hub, server: str) -> str:
    """The category whose defaults apply: config's, else the manifest's, else ``default``."""
    spec = hub.settings.sandbox.servers.get(server)
    facts = hub.guard.policies.get(server)
    return (spec.category if spec is not None else None) or (facts.category if facts else None) or "default"


def _server_view(hub: Hub, server: str) -> dict[str, Any]:
    facts = hub.guard.policies.get(server)
    launch = hub.launches.get(server)
    tools = hub.registry.listings.get(server)
    sandbox: dict[str, Any] | None = None
    if launch is not None:
        sandbox = {
            "backend": launch.kind,
            "limits": dataclasses.asdict(launch.limits),
            "writable": [str(p) for p in launch.grants.writable],
            "readable": [str(p) for p in launch.grants.readable],
        }
    return {
        "server": server,
        "policed": facts is not None,
        "category": _category(hub, server),
        "sandbox": sandbox,
        "tools": [_tool_policy(hub, Target(server, t.name)) for t in (tools.tools if tools is not None else [])],
        "budgets": {
            "calls_per_turn": hub.settings.sandbox.calls_per_turn,
            "calls_per_session": hub.settings.sandbox.calls_per_session if facts is not None else None,
        },
    }


def _print_policy(policy: dict[str, Any], indent: str = "  ") -> None:
    for key, value in policy.items():
        if value not in (None, [], ()):
            print(f"{indent}{key}: {value}")


def _policy_show(args: argparse.Namespace, settings: HubSettings) -> int:
    hub = _hub(settings)
    if args.target in _servers(hub) or args.target in hub.registry.listings:
        view = _server_view(hub, args.target)
        if args.json:
            print(json.dumps(view, indent=2))
            return 0
        print(f"server {view['server']}: {'policed' if view['policed'] else 'no policy (bounded defaults)'}")
        print(f"  category: {view['category']}")
        if view["sandbox"] is None:
            print("  sandbox: none (launched unconfined)")
        else:
            print(f"  sandbox: {view['sandbox']['backend']}")
            _print_policy(view["sandbox"], indent="    ")
        print(f"  budgets: {view['budgets']}")
        for tool in view["tools"]:
            print(f"  tool {tool['tool']}:")
            _print_policy(tool["policy"], indent="    ")
            _print_policy({"path arguments": tool["path_arguments"], "url arguments": tool["url_arguments"]}, "    ")
        return 0
    target, note = _resolve(hub, args.target)
    view = _tool_policy(hub, target)
    if args.json:
        print(json.dumps({**view, "note": note}, indent=2))
        return 0
    if note:
        print(f"note: {note}")
    print(f"tool {args.target} (server {target.server}, tool {target.original}): ", end="")
    print("policed" if view["policed"] else "no policy (bounded defaults)")
    _print_policy(view["policy"])
    _print_policy({"path arguments": view["path_arguments"], "url arguments": view["url_arguments"]})
    return 0


def _policy_check(args: argparse.Namespace, settings: HubSettings) -> int:
    try:
        arguments = json.loads(args.arguments)
    except json.JSONDecodeError as exc:
        print(f"hanzo-hub: --args is not JSON: {exc.msg}", file=sys.stderr)
        return 2
    if not isinstance(arguments, dict):
        print("hanzo-hub: --args must be a JSON object", file=sys.stderr)
        return 2
    hub = _hub(settings)
    target, note = _resolve(hub, args.tool)
    user = args.user or settings.user
    schema = None if note is None else {"type": "object", "properties": {name: {} for name in arguments}}

    async def decide() -> Any:
        return await hub.guard.dry_run(target, arguments, user=user, turn=args.turn, schema=schema)

    decision = anyio.run(decide)
    view = _tool_policy(hub, target, arguments if note else None)
    body = {
        "tool": args.tool,
        "server": target.server,
        "user": user,
        "allowed": decision.allowed,
        "reason": decision.reason,
        "limit": decision.limit,
        "timeout": decision.timeout,
        "max_result_bytes": decision.max_result_bytes,
        "path_arguments": view["path_arguments"],
        "url_arguments": view["url_arguments"],
        "roots": [str(r) for r in hub.guard.engine.roots_for(user)] if view["policed"] else [],
        "note": note,
    }
    if args.json:
        print(json.dumps(body, indent=2))
    else:
        if note:
            print(f"note: {note}")
        verdict = "ALLOWED" if decision.allowed else f"DENIED by {decision.limit}"
        print(f"{verdict}: {args.tool} by {user}: {decision.reason}")
        if decision.allowed:
            print(f"  timeout {decision.timeout:g} s, result capped at {decision.max_result_bytes} bytes")
        _print_policy({k: body[k] for k in ("path_arguments", "url_arguments", "roots")})
        if not view["policed"]:
            print("  (server without policy: no path, URL or rate checks; timeout, result cap and turn budget apply)")
    return 0 if decision.allowed else 1


_SECRETS: dict[str, Callable[[argparse.Namespace, HubSettings], int]] = {
    "set": _secrets_set,
    "list": _secrets_list,
    "rm": _secrets_rm,
}
_POLICY: dict[str, Callable[[argparse.Namespace, HubSettings], int]] = {"show": _policy_show, "check": _policy_check}
