"""The ``doctor`` command: parse, run :func:`hanzo_hub.doctor.diagnose`, print, and set the exit status."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import anyio

from hanzo_hub.config import HubSettings
from hanzo_hub.doctor import diagnose
from hanzo_hub.doctor.report import Check, exit_status, render_json, render_text
from hanzo_hub.errors import ConfigError

__all__ = ["register", "run"]

SettingsFactory = Callable[[argparse.Namespace], HubSettings]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``doctor`` command to the top-level subparsers."""
    doctor = commands.add_parser("doctor", parents=[common], help="check this machine and configuration")
    doctor.add_argument("--probe", action="store_true", help="also start every server and list it live")
    doctor.add_argument("--timeout", type=float, help="seconds each probed server may take (default: connect)")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace, make_settings: SettingsFactory) -> int:
    """Run ``doctor``; returns 0 when nothing failed, 1 when a check failed, 2 when the config does not load."""
    try:
        settings = make_settings(args)
    except ConfigError as exc:
        check = Check("config", "fail", str(exc), "fix the config file (README: Configure downstream servers)")
        print(render_json([check]) if args.json else render_text([check]))
        return 2
    checks = anyio.run(lambda: diagnose(settings, probe=args.probe, timeout=args.timeout))
    print(render_json(checks) if args.json else render_text(checks))
    return exit_status(checks)
