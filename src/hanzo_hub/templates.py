"""Launch templates of catalog servers (manifests and ``catalog.overrides``): their placeholders and their check."""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

LAUNCH_PLACEHOLDERS = frozenset({"env", "bin", "home", "project", "site", "python"})
"""The placeholders of catalog launch templates."""


VAULT_REF = re.compile(r"\$\{vault:[A-Za-z_][A-Za-z0-9_.-]{0,127}\}")
"""A vault reference, ``${vault:NAME}``: no placeholder; it stays as written, and the secret replaces it at launch."""


def protect_vault_refs(text: str) -> str:
    """``text`` with each vault reference's braces doubled, so that filling the template leaves the reference."""
    return VAULT_REF.sub(lambda m: m.group(0).replace("{", "{{").replace("}", "}}"), text)


def template_fields(text: str) -> set[str]:
    """The placeholder names used in a launch template (``{env}/bin/x`` -> ``{"env"}``); vault references are none.

    Raises:
        ValueError: bad ``{}`` syntax.
    """
    return {name for _, name, _, _ in string.Formatter().parse(protect_vault_refs(text)) if name is not None}


def check_launch_templates(values: Iterable[str]) -> None:
    """Reject a template with bad ``{}`` syntax or an unknown placeholder (write ``{{``/``}}`` for literal braces).

    Raises:
        ValueError: naming the template and the placeholders allowed.
    """
    for value in values:
        try:
            names = template_fields(value)
        except ValueError as exc:
            raise ValueError(f"bad template {value!r}: {exc}") from None
        unknown = names - LAUNCH_PLACEHOLDERS
        if unknown:
            allowed = sorted(LAUNCH_PLACEHOLDERS)
            raise ValueError(f"unknown placeholder {{{sorted(unknown)[0]}}} in {value!r}; use {allowed}")
