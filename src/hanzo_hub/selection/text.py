"""The text that represents a tool for retrieval, and the tokenizer the lexical index uses.

A tool is a plain dict as MCP lists it (``name``, ``description``, ``inputSchema``) plus the hub's ``server`` and
optional ``category`` / ``server_description``. The embedded text puts the most discriminative parts first, because
the dense model truncates long inputs: the name split into words, the server, the category, the description, then
the parameters (name words and description). Identifiers are split (``get_weread-rank`` → ``get weread rank``,
``listDirectory`` → ``list directory``) so both the model and BM25 see words.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Tool = Mapping[str, Any]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[_\-./:]+")
_SPACE = re.compile(r"\s+")
_TOKEN = re.compile(r"[a-z0-9]+|[\u4e00-\u9fff]")

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "by",
        "from",
        "at",
        "as",
        "is",
        "are",
        "be",
        "been",
        "was",
        "were",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "they",
        "them",
        "their",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "do",
        "does",
        "did",
        "please",
        "want",
        "need",
        "like",
        "some",
        "any",
        "all",
        "so",
        "if",
        "then",
        "than",
        "into",
        "about",
        "over",
        "also",
        "just",
        "via",
        "use",
        "using",
        "used",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "when",
        "where",
        "why",
        "there",
        "here",
        "not",
        "no",
        "yes",
        "get",
    ]
)


def split_identifier(name: str) -> str:
    """Split an identifier into lower-case words: ``maps_directionBicycling`` → ``maps direction bicycling``."""
    spaced = _SEPARATORS.sub(" ", _CAMEL.sub(" ", name))
    return _SPACE.sub(" ", spaced).strip().lower()


def _stem(word: str) -> str:
    """A deliberately light suffix stripper (plural, -ing, -ed); enough to join ``documents``/``document``."""
    if len(word) <= 4 or word.isdigit():
        return word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", "e"), ("s", "")):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + keep
    return word


def tokenize(text: str) -> list[str]:
    """Lower-case, split identifiers, drop stop words and stem; CJK characters become single tokens."""
    words = _TOKEN.findall(split_identifier(text))
    return [_stem(w) for w in words if w not in STOPWORDS]


def parameters(tool: Tool) -> list[tuple[str, str]]:
    """Return ``(name, description)`` for each top-level property of the tool's input schema."""
    schema = tool.get("inputSchema") or {}
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return []
    out = []
    for pname, spec in props.items():
        desc = spec.get("description", "") if isinstance(spec, Mapping) else ""
        out.append((str(pname), str(desc or "")))
    return out


@dataclass(frozen=True, slots=True)
class TextOptions:
    """Which parts of a tool go into its text, and how long the description may be."""

    server: bool = True
    category: bool = True
    server_description: bool = False
    params: bool = True
    param_descriptions: bool = True
    max_description_chars: int = 1200
    name_repeat: int = 1


def _clean(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def tool_text(tool: Tool, options: TextOptions = TextOptions()) -> str:
    """Build the text embedded and indexed for one tool."""
    name_words = split_identifier(str(tool.get("name", "")))
    parts = [name_words + "." if name_words else ""]
    parts.extend([name_words + "."] * (options.name_repeat - 1))
    if options.server and tool.get("server"):
        parts.append(f"Server: {split_identifier(str(tool['server']))}.")
    if options.category and tool.get("category"):
        parts.append(f"Category: {tool['category']}.")
    description = _clean(str(tool.get("description") or ""))[: options.max_description_chars]
    if description:
        parts.append(description)
    if options.server_description and tool.get("server_description"):
        parts.append(_clean(str(tool["server_description"]))[:300])
    if options.params:
        params = parameters(tool)
        if params:
            rendered = [
                f"{split_identifier(p)}: {_clean(d)[:160]}" if options.param_descriptions and d else split_identifier(p)
                for p, d in params
            ]
            parts.append("Parameters: " + "; ".join(rendered) + ".")
    return " ".join(p for p in parts if p)


def tool_id(tool: Tool) -> str:
    """The key of a tool in an index: ``tool_id`` when given, else ``<server>::<name>``."""
    if tool.get("tool_id"):
        return str(tool["tool_id"])
    return f"{tool.get('server', '')}::{tool.get('name', '')}"


def definition(tool: Tool) -> dict[str, Any]:
    """The tool definition exactly as it is sent to a model: name, description and input schema."""
    return {
        "name": tool.get("name", ""),
        "description": tool.get("description") or "",
        "inputSchema": tool.get("inputSchema") or {"type": "object"},
    }


def content_hash(text: str, model_id: str) -> str:
    """Hash of the embedded text and the model, so that a change of either re-embeds the tool."""
    return hashlib.sha256(json.dumps([model_id, text]).encode()).hexdigest()[:32]
