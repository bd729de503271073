from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from hanzo_hub.config import MemorySettings
from hanzo_hub.memory import MemoryScope, MemoryService, build_memory_server
from hanzo_hub.vectors.fake import HashEmbedder


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, days: float) -> None:
        self.now += days * 86400


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def service(clock: Clock, tmp_path: Path) -> AsyncIterator[MemoryService]:
    settings = MemorySettings(store="memory", embedder="fake")
    async with MemoryService.open(settings, tmp_path, HashEmbedder(), clock) as svc:
        yield svc


@pytest.fixture
def server_for(service: MemoryService) -> Callable[[MemoryScope], Any]:
    def make(scope: MemoryScope) -> Any:
        async def scope_of(ctx: Any) -> MemoryScope:
            return scope

        return build_memory_server(service, scope_of)

    return make
