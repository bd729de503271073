"""The built-in catalog's exposed tools as the hub indexes them, and the writer behind scripts/build-tool-vectors."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio
import mcp_types as types

from hanzo_hub.catalog.loader import load_catalog
from hanzo_hub.catalog.tool_vectors import write_tool_vectors
from hanzo_hub.config import load_settings
from hanzo_hub.hub.core import Hub
from hanzo_hub.hub.search import ToolSearch, tool_describer


async def catalog_tools(home: Path) -> tuple[list[types.Tool], ToolSearch]:
    """Every tool of a hub that enables the whole built-in catalog (from packaged snapshots; nothing starts)."""
    settings = load_settings(None, home=home)
    ids = sorted(load_catalog(settings).entries)
    settings = settings.model_copy(update={"catalog": settings.catalog.model_copy(update={"enabled": ids})})
    hub = Hub(settings)
    search = ToolSearch(settings.exposure, home=home, describe=tool_describer(hub))
    return hub.snapshot_tools(), search


async def main() -> int:
    from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

    with tempfile.TemporaryDirectory() as tmp:
        tools, search = await catalog_tools(Path(tmp))
    embedder = SentenceTransformerEmbedder()
    texts = search.texts(tools)
    hashes = search.hashes(tools, embedder.model_id)
    vectors = await embedder.embed(texts)
    write_tool_vectors(embedder.model_id, hashes, vectors)
    print(f"{len(tools)} tools, model {embedder.model_id}")
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
