"""``hanzo-hub doctor``: what this machine and configuration let the hub do, checked before serving.

```
hanzo-hub doctor [--probe] [--timeout S] [--json]    # exit 0: nothing failed, 1: a check failed, 2: bad config
```

It checks the interpreter, the home folder (writable, free space), the HTTP bind, each sandbox backend the
configuration uses (a real process in bubblewrap, a ping of the Docker engine), the vault, the embedding model and
vector stores, the LLM providers' keys, every downstream server (command, catalog install, required binaries,
secrets, snapshot), and what clients' ``tools/list`` will hold (every tool, or search's tools in ``auto`` once
the tools known from snapshots take more than ``exposure.auto_search_tokens``). ``--probe`` also starts each
server the way serving does and lists it live. Nothing is printed from the vault but names. ``doctor/cli.py`` is
the command; this module is what it runs.
"""

from __future__ import annotations

from hanzo_hub.config import HubSettings
from hanzo_hub.doctor.machine import (
    check_embedding,
    check_home,
    check_http,
    check_llm,
    check_python,
    check_sandboxes,
    check_vault,
)
from hanzo_hub.doctor.report import Check
from hanzo_hub.doctor.servers import check_servers, probe_servers
from hanzo_hub.hub.auto_exposure import AutoListing, listing_for
from hanzo_hub.hub.core import Hub

__all__ = ["Check", "diagnose"]


def _catalog(hub: Hub) -> list[Check]:
    checks = [Check("catalog", "ok", f"{len(hub.catalog.entries)} manifests")]
    checks += [Check("catalog", "fail", str(error), "fix or remove that manifest") for error in hub.catalog.errors]
    checks += [
        Check(
            "catalog",
            "fail",
            f"instance {name!r}: no catalog entry {instance.entry!r}, so it is not served",
            "hanzo-hub catalog list shows the ids",
        )
        for name, instance in hub.settings.catalog.instances.items()
        if instance.entry not in hub.catalog.entries
    ]
    return checks


async def _exposure(hub: Hub) -> Check:
    """What a client's ``tools/list`` holds, by the exposure mode and the tools known without starting anything."""
    exposure = hub.settings.exposure
    tools = hub.snapshot_tools()
    auto = AutoListing(exposure.auto_search_tokens)
    listing = await listing_for(exposure.mode, tools, auto)
    listed = "every tool" if listing == "all" else "find_tools, call_tool and the core tools"
    if exposure.mode != "auto":
        return Check("exposure", "ok", f"mode {exposure.mode}: clients see {listed}")
    tokens = await auto.tokens.total(tools)  # counted already when the bytes bound did not decide
    within = "over" if listing == "search" else "within"
    detail = (
        f"mode auto: {len(tools)} tools known from snapshots take {tokens} tokens "
        f"({within} auto_search_tokens {exposure.auto_search_tokens}): clients see {listed}"
    )
    return Check("exposure", "ok", detail)


async def diagnose(settings: HubSettings, *, probe: bool = False, timeout: float | None = None) -> list[Check]:
    """Every check, in the order they are printed; with ``probe`` each server is also started and listed."""
    config = settings.config_file
    checks = check_python()
    checks.append(Check("config", "ok", f"{config}" if config is not None else "no config file (defaults)"))
    checks += check_home(settings)
    checks += check_http(settings)
    vault_checks, secrets = check_vault(settings)
    hub = Hub(settings)
    checks += _catalog(hub)
    checks += await check_sandboxes(settings, {s.kind for s in hub.launches.values()})
    checks += vault_checks
    checks += check_embedding(settings)
    checks += check_llm(settings, secrets)
    checks += check_servers(hub, secrets)
    checks.append(await _exposure(hub))
    if probe and hub.servers:
        checks += await probe_servers(hub, timeout or settings.backends.connect_timeout)
    return checks
