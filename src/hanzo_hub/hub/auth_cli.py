"""``hanzo-hub auth …``: OAuth logins to remote servers.

```
hanzo-hub auth login NAME [--no-browser] [--timeout S]   # authorize the hub; tokens go to the vault
hanzo-hub auth status [--json]                           # every remote server: logged in, expiry, refreshable
hanzo-hub auth logout NAME [--no-revoke]                 # revoke the grant at the server, forget the login
```

The flow is in ``hub/oauth_login.py``; the records and their use while serving in ``backends/oauth.py``. Exit 0
on success, 1 when a login failed or a logout's revocation failed (the login is forgotten all the same), 2 for a
usage or configuration error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import anyio

from hanzo_hub.backends.oauth import OAuthStore, VaultTokenStorage
from hanzo_hub.backends.oauth_revoke import Revocation, revoke
from hanzo_hub.config import HubSettings
from hanzo_hub.errors import ConfigError, HubError, VaultError
from hanzo_hub.hub.launch import load_secrets
from hanzo_hub.hub.oauth_login import browser_opener, login, remote_spec

__all__ = ["register", "run"]

SettingsFactory = Callable[[argparse.Namespace], HubSettings]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``auth`` command group to the top-level subparsers."""
    auth = commands.add_parser("auth", help="OAuth logins to remote servers")
    sub = auth.add_subparsers(dest="auth_command", required=True)
    log_in = sub.add_parser("login", parents=[common], help="authorize the hub with a remote server (OAuth 2.1)")
    log_in.add_argument("server", help="the server's name in the config")
    log_in.add_argument("--no-browser", action="store_true", help="only print the authorization URL")
    log_in.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the authorization")
    status = sub.add_parser("status", parents=[common], help="the OAuth state of every remote server")
    status.add_argument("--json", action="store_true")
    log_out = sub.add_parser(
        "logout", parents=[common], help="revoke a server's grant there (RFC 7009) and forget its tokens"
    )
    log_out.add_argument("server")
    log_out.add_argument("--no-revoke", action="store_true", help="only forget the login; do not contact the server")
    log_out.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the authorization server")


def run(args: argparse.Namespace, make_settings: SettingsFactory) -> int:
    """Run an ``auth`` subcommand; returns the exit status."""
    settings = make_settings(args)
    command = {"login": _login, "status": _status, "logout": _logout}[args.auth_command]
    try:
        return command(args, settings)
    except (ConfigError, VaultError) as exc:
        print(f"hanzo-hub: {exc}", file=sys.stderr)
        return 2


def _notify(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _login(args: argparse.Namespace, settings: HubSettings) -> int:
    async def noop(url: str) -> None:
        return None

    opener = noop if args.no_browser else browser_opener(_notify)
    try:
        result = anyio.run(lambda: login(settings, args.server, open_url=opener, notify=_notify, timeout=args.timeout))
    except ConfigError:
        raise
    except HubError as exc:
        print(f"hanzo-hub: login failed: {exc}", file=sys.stderr)
        return 1
    if result.record is None:
        print(f"server '{args.server}' did not ask for authorization ({result.tools} tools); nothing was stored")
        return 0
    print(f"logged in to '{args.server}': {result.tools} tools; {result.record.summary()}")
    return 0


def _status(args: argparse.Namespace, settings: HubSettings) -> int:
    store = OAuthStore(settings.vault_dir, settings.sandbox.keyring_service)
    rows = []
    now = time.time()
    for name, spec in sorted(settings.servers.items()):
        if spec.kind not in ("http", "sse"):
            continue
        spec = remote_spec(settings, name)
        record = store.load_sync(name)
        state = "none"
        if record is not None and record.url != spec.url:
            state = "other-url"
        elif record is not None and record.tokens is not None:
            state = "logged-in" if record.usable(spec.url, now) else "expired"
        rows.append(
            {
                "server": name,
                "url": spec.url,
                "state": state,
                "configured": spec.oauth is not None,
                "expires_in": round(record.expires_in(now) or 0.0, 1) if record and record.expires_at else None,
                "refreshable": bool(record and record.refreshable),
                "scope": record.tokens.scope if record and record.tokens else None,
                "detail": record.summary(now) if state == "logged-in" and record else _hint(state, name),
            }
        )
    if args.json:
        print(json.dumps({"servers": rows}, indent=2))
        return 0
    if not rows:
        print("no remote (http, sse) servers are configured")
    for row in rows:
        print(f"{row['state']:<10} {row['server']:<20} {row['detail']}")
    return 0


def _hint(state: str, name: str) -> str:
    return {
        "none": f"not logged in (needed only if the server asks: hanzo-hub auth login {name})",
        "other-url": f"the stored login is for another URL: hanzo-hub auth login {name}",
        "expired": f"expired and not refreshable: hanzo-hub auth login {name}",
    }[state]


def _logout(args: argparse.Namespace, settings: HubSettings) -> int:
    spec = remote_spec(settings, args.server)
    store = OAuthStore(settings.vault_dir, settings.sandbox.keyring_service)
    record = store.load_sync(args.server)
    revocation: Revocation | None = None
    if record is not None and record.tokens is not None and not args.no_revoke:
        tokens = record.tokens
        client = record.client
        if record.url == spec.url:  # a client registered by hand in the config wins, as it did at login
            storage = VaultTokenStorage(store, args.server, spec, load_secrets(settings))
            storage.record = record
            client = anyio.run(storage.get_client_info)
        revocation = anyio.run(lambda: revoke(record.url, tokens, client, timeout=args.timeout))
    if not store.delete_sync(args.server):
        print(f"server '{args.server}' had no stored login")
        return 0
    if revocation is not None and revocation.outcome == "revoked":
        kinds = " and ".join(kind.replace("_", " ") for kind in revocation.revoked)
        print(f"revoked the {kinds} at {revocation.endpoint}")
    elif revocation is not None:
        print(f"hanzo-hub: the grant was not revoked: {revocation.problem}", file=sys.stderr)
    print(
        f"forgot the login to '{args.server}' (tokens and client registration); a running hub keeps its connection "
        "until it reconnects"
        + (
            ""
            if revocation and revocation.outcome == "revoked"
            else ", and the grant stays valid at the server until it expires or is revoked there"
        )
    )
    return 1 if revocation is not None and revocation.outcome == "failed" else 0
