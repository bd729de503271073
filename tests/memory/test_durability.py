from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hanzo_hub.config import MemorySettings
from hanzo_hub.errors import MemoryStoreError
from hanzo_hub.memory import MemoryScope, MemoryService
from hanzo_hub.vectors.fake import HashEmbedder

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _write_then_kill(root: Path, acks_wanted: int) -> list[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.memory._writer", str(root), "1000"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    acked: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        acked.append(line.split()[1])
        if len(acked) >= acks_wanted:
            os.kill(proc.pid, signal.SIGKILL)  # right after the reply, mid-stream of further writes
            break
    proc.wait(timeout=30)
    return acked


async def test_acknowledged_writes_survive_kill_9(tmp_path: Path) -> None:
    acked = _write_then_kill(tmp_path, 25)
    with (tmp_path / "wal").glob("*.jsonl").__next__().open("ab") as fh:
        fh.write(b'{"op":"put","entry":{"id":"torn')  # an interrupted write: never acknowledged
    async with MemoryService.open(MemorySettings(store="chroma"), tmp_path, HashEmbedder()) as svc:
        stored = {e.id for e in await svc.entries(MemoryScope("u", "p"))}
        hits = await svc.recall(MemoryScope("u", "p"), "fact number 3 crash test")
    assert set(acked) <= stored
    assert hits


async def test_second_process_cannot_open_a_held_store(tmp_path: Path) -> None:
    async with MemoryService.open(MemorySettings(store="chroma"), tmp_path, HashEmbedder()):
        with pytest.raises(MemoryStoreError):
            async with MemoryService.open(MemorySettings(store="chroma"), tmp_path, HashEmbedder()):
                pass
