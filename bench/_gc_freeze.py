"""Prototype of a proposed fix: ``hanzo_hub`` as shipped, plus ``gc.freeze()`` once the hub has started.

``python bench/_gc_freeze.py serve ...`` takes the arguments of ``python -m hanzo_hub``. The heavy imports (the SDK
and its thousands of pydantic models) are done first and frozen, so loading snapshots does not pay for repeated full
collections of them; ``Hub.run`` is wrapped so that, right after the snapshots are loaded and the pool is up,
everything allocated so far (the registry too) moves to the permanent generation as well. Without this a full
(generation 2) collection of the ~100k start-up objects costs tens of milliseconds and lands on whichever request
happens to allocate at that moment.
"""

from __future__ import annotations

import gc
import os
import runpy
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from hanzo_hub.hub import core


def install() -> None:
    import hanzo_hub.cli
    import hanzo_hub.transports.stdio  # noqa: F401  (the SDK's server side, with its models)

    gc.collect()
    gc.freeze()
    shipped = core.Hub.run

    @asynccontextmanager
    async def run(self: Any) -> AsyncIterator[None]:
        async with shipped(self):
            gc.collect()
            gc.freeze()
            yield

    core.Hub.run = run  # type: ignore[method-assign]


if __name__ == "__main__":
    install()
    sys.argv = ["hanzo_hub", *sys.argv[1:]]
    sys.path[0] = os.getcwd()  # as ``python -m`` does
    runpy.run_module("hanzo_hub", run_name="__main__", alter_sys=True)
