from typing import Any

import pytest


def _tool(server: str, name: str, description: str, **params: str) -> dict[str, Any]:
    props = {p: {"type": "string", "description": d} for p, d in params.items()}
    return {
        "server": server,
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props},
    }


@pytest.fixture
def tools() -> list[dict[str, Any]]:
    return [
        _tool("weather", "get_forecast", "Get the weather forecast for a city", city="City name"),
        _tool("weather", "get_alerts", "Severe weather alerts for a US state", state="Two-letter state code"),
        _tool("fs", "read_file", "Read the contents of a file from disk", path="Path of the file"),
        _tool("fs", "write_file", "Write text to a file on disk", path="Path of the file", content="Text to write"),
        _tool("docs", "convert_to_pdf", "Convert a Word document to PDF", filename="Document file"),
        _tool("search", "web_search", "Search the web with a search engine", query="Search terms"),
    ]
