from __future__ import annotations

from pathlib import Path
from typing import Any

from hanzo_hub.config import MemorySettings
from hanzo_hub.memory import MemoryFilter, MemoryScope, MemoryService
from hanzo_hub.memory.consolidate import Consolidator
from hanzo_hub.vectors.fake import HashEmbedder
from tests.memory.conftest import Clock


async def test_newer_duplicate_wins_and_older_is_kept_superseded(clock: Clock) -> None:
    async with MemoryService.open(
        MemorySettings(store="memory", duplicate_cosine=0.8), None, HashEmbedder(), clock
    ) as s:
        await _newer_wins(s, clock)


async def _newer_wins(service: MemoryService, clock: Clock) -> None:
    scope = MemoryScope("u", "p")
    (old,) = await service.remember(scope, ["the staging database runs on port 5432"])
    clock.advance(1)
    (new,) = await service.remember(scope, ["the staging database runs on port 5433"])
    report = await Consolidator(service).run(scope)
    assert report.superseded == [old.id]
    assert "generalize: no LLM configured" in report.skipped
    kept = {e.id: e for e in await service.entries(scope)}
    assert kept[old.id].superseded_by == new.id
    hits = await service.recall(scope, "staging database port")
    assert [h.entry.id for h in hits] == [new.id]


async def test_session_memory_read_often_is_promoted(service: MemoryService) -> None:
    scope = MemoryScope("u", "p", "s")
    (entry,) = await service.remember(scope, ["release train leaves on thursdays"], tier="session")
    for _ in range(4):
        await service.recall(scope, "release train thursdays", tiers=("session",))
    report = await Consolidator(service).run(scope)
    assert len(report.promoted) == 1
    project = await service.entries(scope)
    assert [e.tier for e in project] == ["project"]
    assert project[0].content == entry.content


async def test_relevance_decays_after_90_idle_days_and_entry_is_deleted_after_365(
    service: MemoryService, clock: Clock
) -> None:
    scope = MemoryScope("u", "p")
    (entry,) = await service.remember(scope, ["the office wifi is called hanzo-guest"])
    clock.advance(91)
    report = await Consolidator(service).run(scope)
    assert report.decayed == [entry.id]
    assert abs((await service.get(scope, entry.id)).relevance - 0.9) < 1e-9
    again = await Consolidator(service).run(scope)
    assert again.decayed == []
    clock.advance(275)
    final = await Consolidator(service).run(scope)
    assert final.deleted == [entry.id]
    assert await service.entries(scope) == []


async def test_retention_applies_as_a_persisted_scope_opens(clock: Clock, tmp_path: Path) -> None:
    # No consolidation runs while the scope is closed (the scheduled job visits open scopes only): opening it decays
    # and deletes what is due before anyone reads it.
    scope = MemoryScope("u", "p")

    def opened() -> Any:
        return MemoryService.open(MemorySettings(store="chroma"), tmp_path, HashEmbedder(), clock)

    async with opened() as service:
        (idle,) = await service.remember(scope, ["the office wifi is called hanzo-guest"])
    clock.advance(91)
    async with opened() as service:
        (seen,) = await service.entries(scope)
        assert seen.id == idle.id
        assert abs(seen.relevance - 0.9) < 1e-9
        hits = await service.recall(scope, "office wifi name")
        assert [h.entry.relevance for h in hits] == [seen.relevance]
    clock.advance(366)
    async with opened() as service:
        assert await service.entries(scope) == []
        assert await service.recall(scope, "office wifi name") == []


async def test_an_expiring_session_listed_within_its_idle_timeout_stays(clock: Clock) -> None:
    # A named (expiring) session ends once idle; a listing or a recall that finds nothing is use, even though no
    # memory's own time changes with it.
    settings = MemorySettings(store="memory", session_idle_timeout=86400)
    async with MemoryService.open(settings, None, HashEmbedder(), clock) as service:
        scope = MemoryScope("u", "p", "named:chat-1")
        await service.remember(scope, ["the user prefers metric units"], tier="session")
        consolidator = Consolidator(service, expiring="named:")
        clock.advance(0.9)
        assert [e.content for e in await service.entries(scope, MemoryFilter(tiers=("session",)))] == [
            "the user prefers metric units"
        ]
        clock.advance(0.5)  # 1.4 days after the write, 0.5 after the listing
        await consolidator.run()
        assert service.store.session_ids() == ["named:chat-1"]
        clock.advance(0.6)  # 1.1 days after the listing
        await consolidator.run()
        assert service.store.session_ids() == []
        assert service.store.session_last_used("named:chat-1") == 0.0  # forgotten with the session
