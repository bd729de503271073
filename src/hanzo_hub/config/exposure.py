"""Settings of how tools are exposed to clients (section ``exposure``): mode, tool search, profiles, per client."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from hanzo_hub.config._base import _Model

__all__ = ["ClientExposureSettings", "ExposureSettings", "ProfileSettings"]

ExposureMode = Literal["all", "search", "auto"]


class ProfileSettings(_Model):
    """A pinned profile: a named set of servers and tools; a client on it sees and calls only these."""

    servers: tuple[str, ...] = Field(default=(), description="Server names (aliases) whose every tool is in.")
    tools: tuple[str, ...] = Field(default=(), description="Exposed tool names (``server__tool``) also in.")


class ClientExposureSettings(_Model):
    """What one client (by the name it gives in ``initialize``' clientInfo) gets instead of the deployment's."""

    mode: ExposureMode | None = Field(default=None, description="Unset: the deployment's mode.")
    profile: str | None = Field(default=None, description="Unset: the deployment's profile.")


class ExposureSettings(_Model):
    """How downstream names appear to clients, and which tools each client sees."""

    prefix: bool | Literal["auto"] = Field(default="auto", description="'auto': no prefix with a single server.")
    separator: Literal["__"] = "__"
    mode: ExposureMode = Field(
        default="auto",
        description="'all': every tool in tools/list; 'search': find_tools + call_tool + core tools; 'auto': "
        "'all' while the tools' definitions take at most auto_search_tokens tokens, 'search' above.",
    )
    auto_search_tokens: int = Field(
        default=20_000,
        ge=0,
        description="Mode 'auto': the tokens of tool definitions (name, description, input schema) a client's "
        "tools/list may take before it lists find_tools and call_tool instead.",
    )
    core_tools: tuple[str, ...] = Field(default=(), description="Exposed tool names always listed in search mode.")
    embedder: Literal["sentence-transformers", "fake", "none"] = Field(
        default="sentence-transformers", description="Dense half of tool search ('none': BM25 only)."
    )
    model_path: Path | None = Field(
        default=None, description="A local sentence-transformers model folder (default: the bundled MiniLM)."
    )
    query_adapter: str = Field(
        default="bundled",
        description="Map applied to tool-search query vectors before the dense search: 'bundled' (trained on "
        "MetaTool's queries for the bundled MiniLM; used only when the embedder reproduces that model's probe "
        "vectors), 'none', or the path of an .npz written by bench/train_query_adapter.py.",
    )
    index_store: Literal["chroma", "memory"] = Field(
        default="chroma", description="Where tool vectors persist, keyed by content hash ('memory': not kept)."
    )
    index_path: Path | None = Field(default=None, description="Embedded Chroma folder; default <home>/tool-index.")
    warm_index: bool = Field(
        default=True,
        description="Search mode (and 'auto' when it lists search's tools at start): load the model and build the "
        "tool index in the background at start.",
    )
    warm_index_timeout: float = Field(default=600.0, gt=0, description="Seconds the background warm-up may take.")
    chroma_host: str | None = Field(default=None, description="Chroma server mode: host (default: embedded).")
    chroma_port: int = Field(default=8000, gt=0)
    max_tools: int = Field(default=15, ge=1, le=50, description="Most tools one find_tools answer returns.")
    token_budget: int = Field(default=4000, ge=200, description="Tokens the selected definitions may take.")
    stage1_candidates: int | None = Field(
        default=None,
        ge=1,
        le=200,
        description="Tools stage 1 ranks for each find_tools query: the list the LLM filter reads and keeps at "
        "most max_tools of (without a filter, the first that fit the budget are returned). Unset: 40 when a filter "
        "reads them, 20 without one, or max_tools when that is larger. A deeper list lets the filter recover tools "
        "ranked low, for a longer prompt.",
    )
    llm_filter: Literal["auto", "sampling", "router", "off"] = Field(
        default="auto",
        description="Stage 2 of find_tools: 'sampling' asks the client's own model, 'router' the hub's routing "
        "layer, 'auto' the router when one is configured, else the client when it offers sampling; 'off' skips it.",
    )
    llm_filter_timeout: float = Field(default=20.0, gt=0, description="Seconds stage 2 may take before it is skipped.")
    profiles: dict[str, ProfileSettings] = Field(default_factory=dict, description="Pinned profiles by name.")
    profile: str | None = Field(default=None, description="The deployment's profile (unset: every tool).")
    clients: dict[str, ClientExposureSettings] = Field(
        default_factory=dict, description="Per-client mode and profile, keyed by clientInfo.name."
    )
    profile_header: str = Field(
        default="x-hanzo-profile", description="HTTP header (or query parameter 'profile') that picks a profile."
    )

    @model_validator(mode="after")
    def _candidates_cover_max_tools(self) -> ExposureSettings:
        if self.stage1_candidates is not None and self.stage1_candidates < self.max_tools:
            raise ValueError(
                f"exposure: stage1_candidates ({self.stage1_candidates}) is below max_tools ({self.max_tools}), "
                "so find_tools could never return max_tools tools; raise it or leave it unset"
            )
        return self

    @model_validator(mode="after")
    def _known_profiles(self) -> ExposureSettings:
        named = [self.profile, *(c.profile for c in self.clients.values())]
        unknown = sorted({p for p in named if p is not None and p not in self.profiles})
        if unknown:
            raise ValueError(f"exposure: unknown profile(s) {unknown}; define them under exposure.profiles")
        return self
