"""The model registry: which models exist, what they cost, what they can do.

The packaged ``models.json`` holds list prices; user config adds models or overrides packaged ones by id. Costs are
in USD; prices are per million tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hanzo_hub.errors import ConfigError, ModelNotFound

__all__ = ["ModelRegistry", "ModelSpec", "Tier", "load_registry"]

Tier = Literal["fast", "mid", "best"]
TIER_ORDER: dict[str, int] = {"fast": 0, "mid": 1, "best": 2}
PACKAGED_MODELS = "models.json"


class ModelSpec(BaseModel):
    """One routable model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    provider: str
    api: str = Field(description="provider API family: a key of providers.PROVIDERS")
    price_in: float = Field(ge=0, description="USD per million input tokens")
    price_out: float = Field(ge=0, description="USD per million output tokens")
    context_window: int = Field(gt=0)
    capabilities: frozenset[str] = frozenset()
    tier: Tier = "mid"
    latency_ms: float = Field(default=1000.0, ge=0, description="typical time to a full answer, for latency limits")
    upstream: str | None = Field(default=None, description="the name the provider knows the model by; default: id")

    @property
    def wire_name(self) -> str:
        """The model name sent to the provider."""
        return self.upstream or self.id

    def cost(self, tokens_in: float, tokens_out: float) -> float:
        """USD cost of one call with these token counts."""
        return (tokens_in * self.price_in + tokens_out * self.price_out) / 1e6


class ModelRegistry:
    """An ordered, read-only mapping of model id to :class:`ModelSpec`."""

    def __init__(self, models: Iterable[ModelSpec]) -> None:
        self._models: dict[str, ModelSpec] = {}
        for spec in models:
            self._models[spec.id] = spec

    def __getitem__(self, model_id: str) -> ModelSpec:
        try:
            return self._models[model_id]
        except KeyError:
            raise ModelNotFound(f"model '{model_id}' is not in the registry") from None

    def __contains__(self, model_id: object) -> bool:
        return model_id in self._models

    def __iter__(self) -> Iterator[ModelSpec]:
        return iter(self._models.values())

    def __len__(self) -> int:
        return len(self._models)

    def ids(self) -> list[str]:
        """Model ids in registry order."""
        return list(self._models)

    def subset(self, model_ids: Iterable[str]) -> ModelRegistry:
        """A registry holding only ``model_ids``, in that order.

        Raises:
            ModelNotFound: an id is unknown.
        """
        return ModelRegistry(self[m] for m in model_ids)

    def by_tier(self) -> list[ModelSpec]:
        """Models from the fastest tier to the best, cheaper first within a tier."""
        return sorted(self, key=lambda m: (TIER_ORDER[m.tier], m.price_in + m.price_out))


def _parse(entries: Iterable[Mapping[str, Any]], where: str) -> list[ModelSpec]:
    try:
        return [ModelSpec.model_validate(e) for e in entries]
    except ValidationError as exc:
        raise ConfigError(f"invalid model entry in {where}: {exc.errors()[0]['msg']}") from exc


def load_registry(user_models: Iterable[Mapping[str, Any]] = ()) -> ModelRegistry:
    """The packaged models followed by ``user_models`` (a user entry replaces a packaged one with the same id).

    Raises:
        ConfigError: an entry is invalid.
    """
    text = resources.files("hanzo_hub.llm").joinpath(PACKAGED_MODELS).read_text(encoding="utf-8")
    packaged = _parse(json.loads(text)["models"], PACKAGED_MODELS)
    merged = {m.id: m for m in packaged}
    for spec in _parse(user_models, "user config"):
        merged[spec.id] = spec
    return ModelRegistry(merged.values())
