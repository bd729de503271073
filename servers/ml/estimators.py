"""The estimator table: algorithm name -> scikit-learn class (imported on demand) and whether inputs are scaled."""

from __future__ import annotations

import importlib
from typing import Any, Literal

from servers._common import ToolError

Classifier = Literal[
    "logistic_regression", "random_forest", "gradient_boosting", "decision_tree", "svm", "knn", "naive_bayes"
]
Regressor = Literal["linear", "ridge", "lasso", "random_forest", "gradient_boosting", "decision_tree", "svr", "knn"]
Param = str | int | float | bool | None

# (import path, scale inputs first, default parameters)
CLASSIFIERS: dict[str, tuple[str, bool, dict[str, Any]]] = {
    "logistic_regression": ("sklearn.linear_model:LogisticRegression", True, {"max_iter": 2000}),
    "random_forest": ("sklearn.ensemble:RandomForestClassifier", False, {"n_estimators": 100}),
    "gradient_boosting": ("sklearn.ensemble:GradientBoostingClassifier", False, {}),
    "decision_tree": ("sklearn.tree:DecisionTreeClassifier", False, {}),
    "svm": ("sklearn.svm:SVC", True, {"probability": True}),
    "knn": ("sklearn.neighbors:KNeighborsClassifier", True, {}),
    "naive_bayes": ("sklearn.naive_bayes:GaussianNB", False, {}),
}
REGRESSORS: dict[str, tuple[str, bool, dict[str, Any]]] = {
    "linear": ("sklearn.linear_model:LinearRegression", False, {}),
    "ridge": ("sklearn.linear_model:Ridge", True, {}),
    "lasso": ("sklearn.linear_model:Lasso", True, {"max_iter": 10000}),
    "random_forest": ("sklearn.ensemble:RandomForestRegressor", False, {"n_estimators": 100}),
    "gradient_boosting": ("sklearn.ensemble:GradientBoostingRegressor", False, {}),
    "decision_tree": ("sklearn.tree:DecisionTreeRegressor", False, {}),
    "svr": ("sklearn.svm:SVR", True, {}),
    "knn": ("sklearn.neighbors:KNeighborsRegressor", True, {}),
}


def _class(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def build(task: Literal["classification", "regression"], algorithm: str, params: dict[str, Param], seed: int) -> Any:
    """An unfitted ``Pipeline`` (optional StandardScaler, then the estimator as step ``model``)."""
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    table = CLASSIFIERS if task == "classification" else REGRESSORS
    if algorithm not in table:
        raise ToolError(f"unknown {task} algorithm {algorithm!r}; choose one of {sorted(table)}")
    path, scaled, defaults = table[algorithm]
    cls = _class(path)
    kwargs = {**defaults, **params}
    if "random_state" in cls().get_params() and "random_state" not in kwargs:
        kwargs["random_state"] = seed
    try:
        estimator = cls(**kwargs)
    except TypeError as exc:
        valid = sorted(cls().get_params())
        raise ToolError(f"bad parameter for {algorithm}: {exc}; valid parameters: {valid}") from None
    steps: list[tuple[str, Any]] = [("scale", StandardScaler())] if scaled else []
    return Pipeline([*steps, ("model", estimator)])


def fit(pipeline: Any, x: Any, y: Any, what: str) -> Any:
    """Fit, turning scikit-learn's validation errors (bad parameter values, bad data) into ToolErrors."""
    try:
        return pipeline.fit(x, y)
    except (ValueError, TypeError) as exc:
        raise ToolError(f"training {what} failed: {exc}") from None


def model_params(pipeline: Any) -> dict[str, Any]:
    """The estimator's parameters as JSON-safe values."""
    step = pipeline.named_steps["model"] if hasattr(pipeline, "named_steps") else pipeline
    return {
        k: v if isinstance(v, str | int | float | bool | type(None)) else repr(v) for k, v in step.get_params().items()
    }
