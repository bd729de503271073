"""A real process that writes memories to a persistent store and acknowledges each one on stdout."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from hanzo_hub.config import MemorySettings
from hanzo_hub.memory import MemoryScope, MemoryService
from hanzo_hub.vectors.fake import HashEmbedder


async def main(root: Path, count: int) -> None:
    async with MemoryService.open(MemorySettings(store="chroma"), root, HashEmbedder()) as svc:
        scope = MemoryScope("u", "p")
        for i in range(count):
            (entry,) = await svc.remember(scope, [f"fact number {i} about the crash test"])
            print(f"ack {entry.id}", flush=True)
        await anyio.sleep(60)


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]), int(sys.argv[2]))
