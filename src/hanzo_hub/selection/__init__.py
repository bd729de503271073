"""Tool selection: which of many tools to show a model for one request.

Independent of the hub: it takes tool dicts and returns ranked, budgeted selections. Heavy libraries stay in
``hanzo_hub.vectors`` adapters.
"""

from __future__ import annotations

from hanzo_hub.selection.hybrid import FusionParams
from hanzo_hub.selection.pipeline import Candidate, Selection, Stage2Filter, ToolSelector
from hanzo_hub.selection.text import TextOptions

__all__ = ("Candidate", "FusionParams", "Selection", "Stage2Filter", "TextOptions", "ToolSelector")
