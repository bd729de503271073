"""Hierarchical memory (session, project, global) served as MCP tools and resources."""

from hanzo_hub.memory.models import MemoryEntry, MemoryScope, ScopeKey, Tier
from hanzo_hub.memory.service import MemoryFilter, MemoryService
from hanzo_hub.memory.surface import ScopeProvider, build_memory_server

__all__ = (
    "MemoryEntry",
    "MemoryFilter",
    "MemoryScope",
    "MemoryService",
    "ScopeKey",
    "ScopeProvider",
    "Tier",
    "build_memory_server",
)
