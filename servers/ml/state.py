"""The registries of one `ml` server: named datasets (feature matrix + optional target) and named fitted models.

Both are guarded by a lock (the SDK runs synchronous tools on worker threads). numpy and scikit-learn are imported
only by the tools, so building the server stays fast.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import Field

from servers._common import ToolError
from servers._roots import AllowedRoots

NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"
DatasetName = Annotated[str, Field(pattern=NAME_PATTERN, description="name of a loaded dataset")]
ModelName = Annotated[str, Field(pattern=NAME_PATTERN, description="name of a trained or loaded model")]
NewName = Annotated[str, Field(pattern=NAME_PATTERN, description="name to store the result under")]
Task = Literal["classification", "regression", "unsupervised", "text-classification"]
MAX_ENTRIES = 64
T = TypeVar("T")


@dataclass
class Dataset:
    """A feature matrix ``x`` (n x d float array, or a list of strings for text) and an optional target ``y``."""

    x: Any
    y: Any | None
    features: list[str]
    task: Task
    target_names: list[str] = field(default_factory=list)
    source: str = ""

    @property
    def rows(self) -> int:
        return len(self.x)

    def target(self) -> Any:
        if self.y is None:
            raise ToolError(f"dataset from {self.source or 'this source'} has no target column")
        return self.y


@dataclass
class Model:
    """A fitted estimator with what is needed to use it again: its features, task and training metadata."""

    estimator: Any
    task: Task
    algorithm: str
    features: list[str]
    target_names: list[str] = field(default_factory=list)
    trained_on: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    def metadata(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "algorithm": self.algorithm,
            "features": self.features,
            "targetNames": self.target_names,
            "trainedOn": self.trained_on,
            "params": self.params,
            "created": self.created,
        }


class _Registry(Generic[T]):
    def __init__(self, kind: str, hint: str) -> None:
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()
        self._kind, self._hint = kind, hint

    def get(self, name: str) -> T:
        with self._lock:
            item = self._items.get(name)
            known = sorted(self._items)
        if item is None:
            raise ToolError(f"no {self._kind} named {name!r}; known: {', '.join(known) or f'none ({self._hint})'}")
        return item

    def put(self, name: str, item: T) -> None:
        with self._lock:
            if name not in self._items and len(self._items) >= MAX_ENTRIES:
                raise ToolError(f"{MAX_ENTRIES} {self._kind}s are held; this server keeps no more")
            self._items[name] = item

    def items(self) -> list[tuple[str, T]]:
        with self._lock:
            return sorted(self._items.items())


class MLState:
    """Datasets, models, the folder models are saved in and the roots CSV files are read from."""

    def __init__(self, home: Path, roots: AllowedRoots) -> None:
        self.home = home
        self.roots = roots
        self.datasets: _Registry[Dataset] = _Registry("dataset", "use ml_load_dataset")
        self.models: _Registry[Model] = _Registry("model", "train one or use ml_load_model")

    def model_dir(self) -> Path:
        self.home.mkdir(parents=True, exist_ok=True)
        return self.home

    def model_for(self, name: str, task: Task | None = None) -> Model:
        model = self.models.get(name)
        if task is not None and model.task != task:
            raise ToolError(f"model {name!r} is a {model.task} model, not {task}")
        return model

    def features_of(self, model: Model, data: Dataset, dataset_name: str) -> Any:
        """The dataset's x, checked to have the features the model was trained on."""
        if model.task == "text-classification" or data.task == "text-classification":
            if model.task != data.task:
                raise ToolError(f"dataset {dataset_name!r} and the model do not both hold texts")
            return data.x
        if data.features != model.features:
            raise ToolError(
                f"dataset {dataset_name!r} has features {data.features[:8]}..., "
                f"the model expects {model.features[:8]}..."
            )
        return data.x
