"""Dataset tools: scikit-learn's bundled toy datasets (no downloads) or CSV files, description and train/test split."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers._hints import CREATES, READ_ONLY
from servers._toolset import Toolset, tool
from servers.ml.state import NAME_PATTERN, Dataset, DatasetName, MLState, NewName, Task

# name -> (sklearn loader, task, what it is); all ship inside scikit-learn, none is fetched.
BUNDLED: dict[str, tuple[str, Task, str]] = {
    "iris": ("load_iris", "classification", "150 iris flowers, 4 measurements, 3 species"),
    "wine": ("load_wine", "classification", "178 wines, 13 chemical features, 3 cultivars"),
    "breast_cancer": ("load_breast_cancer", "classification", "569 tumours, 30 features, malignant/benign"),
    "digits": ("load_digits", "classification", "1797 8x8 handwritten digits, 64 pixel features, 10 classes"),
    "diabetes": ("load_diabetes", "regression", "442 patients, 10 baseline features, disease progression"),
    "linnerud": ("load_linnerud", "regression", "20 athletes, 3 exercises, weight (first physiological target)"),
}


def load_bundled(name: str) -> Dataset:
    import numpy as np
    import sklearn.datasets as skd

    loader, task, _ = BUNDLED[name]
    bunch = getattr(skd, loader)()
    y = np.asarray(bunch.target)
    if y.ndim == 2:
        y = y[:, 0]
    names = [str(t) for t in getattr(bunch, "target_names", [])] if task == "classification" else []
    return Dataset(np.asarray(bunch.data, dtype=float), y, [str(f) for f in bunch.feature_names], task, names, name)


def _from_csv(state: MLState, path: str, target: str | None, task: Task | None) -> Dataset:
    import pandas as pd

    real = state.roots.existing_file(path)
    try:
        frame = pd.read_csv(real)
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise ToolError(f"could not read {path} as CSV: {exc}") from None
    y = None
    names: list[str] = []
    if target is not None:
        if target not in frame.columns:
            raise ToolError(f"{path} has no column {target!r}; columns: {list(frame.columns)}")
        col = frame.pop(target)
        guessed: Task = (
            "classification" if not pd.api.types.is_float_dtype(col) or col.nunique() <= 10 else "regression"
        )
        task = task or guessed
        if task == "classification":
            codes, uniques = pd.factorize(col, sort=True)
            y, names = codes, [str(u) for u in uniques]
        else:
            y = col.to_numpy(float)
    features = pd.get_dummies(frame, drop_first=False, dtype=float)
    if features.isna().any().any():
        raise ToolError(f"{path} has missing feature values; fill them first (for example with the data server)")
    return Dataset(
        features.to_numpy(float), y, [str(c) for c in features.columns], task or "unsupervised", names, str(real)
    )


class DatasetTools(Toolset):
    """Loading, describing and splitting datasets."""

    def __init__(self, state: MLState) -> None:
        self.state = state

    @tool(
        name="ml_list_datasets",
        description=(
            "List the toy datasets bundled with scikit-learn (iris, wine, breast_cancer, digits, diabetes, "
            "linnerud; available offline) and the datasets loaded in this session. Returns name, task, rows, "
            "features and a description."
        ),
        annotations=READ_ONLY,
    )
    def ml_list_datasets(self) -> CallToolResult:
        rows: list[list[Any]] = [[n, t, None, None, d, "bundled"] for n, (_, t, d) in BUNDLED.items()]
        rows += [[n, d.task, d.rows, len(d.features), d.source, "loaded"] for n, d in self.state.datasets.items()]
        return table_result(["name", "task", "rows", "features", "description", "status"], rows)

    @tool(
        name="ml_load_dataset",
        description=(
            "Load a dataset under a name: a bundled scikit-learn set (source='iris', 'wine', 'diabetes'...) or a "
            "CSV file inside the allowed roots with a `target` column (other columns become features; text columns "
            "are one-hot encoded). Start here before training. Returns rows, features, task and class balance."
        ),
        annotations=CREATES,
    )
    def ml_load_dataset(
        self,
        source: Annotated[str, Field(min_length=1, description="bundled dataset name or CSV path")],
        name: NewName,
        target: Annotated[str | None, Field(description="target column of a CSV (omit for unsupervised data)")] = None,
        task: Annotated[Literal["classification", "regression"] | None, Field(description="default: guessed")] = None,
    ) -> CallToolResult:
        data = load_bundled(source) if source in BUNDLED else _from_csv(self.state, source, target, task)
        self.state.datasets.put(name, data)
        return json_result({"name": name, **_summary(data)})

    @tool(
        name="ml_describe_dataset",
        description=(
            "Describe a loaded dataset: rows, task, per-feature mean/std/min/max, and the class balance (or target "
            "range for regression). Use to check the data before training. Returns a feature table."
        ),
        annotations=READ_ONLY,
    )
    def ml_describe_dataset(self, name: DatasetName) -> CallToolResult:
        import numpy as np

        data = self.state.datasets.get(name)
        if data.task == "text-classification":
            lengths = [len(t) for t in data.x]
            return json_result({"name": name, **_summary(data), "meanTextLength": float(np.mean(lengths))})
        x = np.asarray(data.x, dtype=float)
        rows = [
            [f, float(x[:, i].mean()), float(x[:, i].std()), float(x[:, i].min()), float(x[:, i].max())]
            for i, f in enumerate(data.features)
        ]
        summary = _summary(data)
        summary["datasetRows"] = summary.pop("rows")
        return table_result(["feature", "mean", "std", "min", "max"], rows, title=name, **summary)

    @tool(
        name="ml_split",
        description=(
            "Split a dataset into train and test datasets (stored as <name>_train and <name>_test unless named), "
            "shuffled with a seed, stratified by class for classification. Use before training to keep an honest "
            "test set. Returns the sizes of both parts."
        ),
        annotations=CREATES,
    )
    def ml_split(
        self,
        name: DatasetName,
        test_size: Annotated[float, Field(gt=0, lt=1, description="fraction held out for testing")] = 0.25,
        stratify: Annotated[bool, Field(description="keep class proportions (classification)")] = True,
        seed: Annotated[int, Field(ge=0, description="random seed")] = 0,
        train_name: Annotated[str | None, Field(pattern=NAME_PATTERN, description="default <name>_train")] = None,
        test_name: Annotated[str | None, Field(pattern=NAME_PATTERN, description="default <name>_test")] = None,
    ) -> CallToolResult:
        import numpy as np
        from sklearn.model_selection import train_test_split

        data = self.state.datasets.get(name)
        idx = np.arange(data.rows)
        strat = data.y if stratify and data.y is not None and data.task != "regression" else None
        try:
            train, test = train_test_split(idx, test_size=test_size, random_state=seed, stratify=strat)
        except ValueError as exc:
            raise ToolError(f"cannot split {name}: {exc}") from None
        names = (train_name or f"{name}_train", test_name or f"{name}_test")
        for part_name, part in zip(names, (train, test), strict=True):
            self.state.datasets.put(part_name, _subset(data, part, f"{name}[{part_name}]"))
        return json_result(
            {
                "train": names[0],
                "test": names[1],
                "trainRows": len(train),
                "testRows": len(test),
                "stratified": strat is not None,
            }
        )


def _subset(data: Dataset, idx: Any, source: str) -> Dataset:
    x = [data.x[i] for i in idx] if isinstance(data.x, list) else data.x[idx]
    y = None if data.y is None else data.y[idx]
    return Dataset(x, y, data.features, data.task, data.target_names, source)


def _summary(data: Dataset) -> dict[str, Any]:
    import numpy as np

    body: dict[str, Any] = {
        "rows": data.rows,
        "features": len(data.features),
        "task": data.task,
        "featureNames": data.features[:50],
        "source": data.source,
    }
    if data.y is not None and data.task in ("classification", "text-classification"):
        values, counts = np.unique(data.y, return_counts=True)
        labels = data.target_names or [str(v) for v in values]
        body["classes"] = {
            labels[int(v)] if data.target_names else str(v): int(c) for v, c in zip(values, counts, strict=True)
        }
    elif data.y is not None:
        body["targetRange"] = [float(np.min(data.y)), float(np.max(data.y))]
    return body
