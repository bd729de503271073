"""Training tools: fit classifiers and regressors, cross-validate, search hyper-parameters, predict, list models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers._hints import CREATES, READ_ONLY
from servers._toolset import Toolset, tool
from servers.ml import estimators
from servers.ml.estimators import Classifier, Param, Regressor
from servers.ml.state import NAME_PATTERN, Dataset, DatasetName, MLState, Model, ModelName, NewName

Params = Annotated[dict[str, Param], Field(description="estimator parameters, e.g. {'n_estimators': 200}")]
OptionalParams = Annotated[
    dict[str, Param] | None, Field(description="estimator parameters, e.g. {'n_estimators': 200}")
]
InputDataset = Annotated[str | None, Field(pattern=NAME_PATTERN, description="dataset to predict for")]
Folds = Annotated[int, Field(ge=2, le=20, description="number of cross-validation folds")]
Seed = Annotated[int, Field(ge=0, description="random seed")]
Rows = Annotated[list[list[float]] | None, Field(max_length=10_000, description="feature rows, in the model's order")]
Texts = Annotated[list[str] | None, Field(max_length=10_000, description="texts (for a text classifier)")]
MAX_PREDICTIONS_SHOWN = 200


def _supervised(data: Dataset, name: str, task: str) -> tuple[Any, Any]:
    if data.task != task:
        raise ToolError(f"dataset {name!r} is a {data.task} dataset; this tool needs {task} data")
    return data.x, data.target()


class TrainingTools(Toolset):
    """Fitting, validating and applying models."""

    def __init__(self, state: MLState) -> None:
        self.state = state

    def _train(
        self,
        task: Literal["classification", "regression"],
        algorithm: str,
        dataset: str,
        output: str,
        params: dict[str, Param],
        seed: int,
    ) -> CallToolResult:
        data = self.state.datasets.get(dataset)
        x, y = _supervised(data, dataset, task)
        pipeline = estimators.fit(estimators.build(task, algorithm, params, seed), x, y, algorithm)
        model = Model(
            pipeline, task, algorithm, data.features, data.target_names, dataset, estimators.model_params(pipeline)
        )
        self.state.models.put(output, model)
        score = float(pipeline.score(x, y))
        metric = "trainAccuracy" if task == "classification" else "trainR2"
        return json_result(
            {"model": output, "algorithm": algorithm, "rows": data.rows, metric: round(score, 6), "params": params}
        )

    @tool(
        name="ml_train_classifier",
        description=(
            "Train a classifier on a dataset with a target (logistic_regression, random_forest, gradient_boosting, "
            "decision_tree, svm, knn, naive_bayes; inputs are standardised where the algorithm needs it) and store it "
            "under a model name. Returns the training accuracy; evaluate on a held-out set with "
            "ml_eval_classification."
        ),
        annotations=CREATES,
    )
    def ml_train_classifier(
        self,
        dataset: DatasetName,
        output: NewName,
        algorithm: Annotated[Classifier, Field(description="classification algorithm")] = "random_forest",
        params: OptionalParams = None,
        seed: Seed = 0,
    ) -> CallToolResult:
        return self._train("classification", algorithm, dataset, output, params or {}, seed)

    @tool(
        name="ml_train_regressor",
        description=(
            "Train a regressor on a dataset with a numeric target (linear, ridge, lasso, random_forest, "
            "gradient_boosting, decision_tree, svr, knn) and store it under a model name. Returns the training R²; "
            "evaluate on a held-out set with ml_eval_regression."
        ),
        annotations=CREATES,
    )
    def ml_train_regressor(
        self,
        dataset: DatasetName,
        output: NewName,
        algorithm: Annotated[Regressor, Field(description="regression algorithm")] = "random_forest",
        params: OptionalParams = None,
        seed: Seed = 0,
    ) -> CallToolResult:
        return self._train("regression", algorithm, dataset, output, params or {}, seed)

    @tool(
        name="ml_cross_validate",
        description=(
            "Estimate how well an algorithm generalises with k-fold cross-validation (stratified for "
            "classification) on a dataset, without storing a model. Returns per-fold and mean/std scores for "
            "accuracy and macro F1 (classification) or R², MAE and RMSE (regression)."
        ),
        annotations=READ_ONLY,
    )
    def ml_cross_validate(
        self,
        dataset: DatasetName,
        algorithm: Annotated[str, Field(min_length=1, description="as in ml_train_*")],
        folds: Folds = 5,
        params: OptionalParams = None,
        seed: Seed = 0,
    ) -> CallToolResult:
        from sklearn.model_selection import KFold, StratifiedKFold, cross_validate

        data = self.state.datasets.get(dataset)
        if data.task not in ("classification", "regression"):
            raise ToolError(f"dataset {dataset!r} has no target for cross-validation")
        task: Literal["classification", "regression"] = (
            "classification" if data.task == "classification" else "regression"
        )
        pipeline = estimators.build(task, algorithm, params or {}, seed)
        if task == "classification":
            cv: Any = StratifiedKFold(folds, shuffle=True, random_state=seed)
            scoring = {"accuracy": "accuracy", "f1_macro": "f1_macro"}
        else:
            cv = KFold(folds, shuffle=True, random_state=seed)
            scoring = {"r2": "r2", "mae": "neg_mean_absolute_error", "rmse": "neg_root_mean_squared_error"}
        try:
            scores = cross_validate(pipeline, data.x, data.y, cv=cv, scoring=scoring, error_score="raise")
        except ValueError as exc:
            raise ToolError(f"cross-validation failed: {exc}") from None
        result = {}
        for metric in scoring:
            values = [abs(float(v)) if metric in ("mae", "rmse") else float(v) for v in scores[f"test_{metric}"]]
            result[metric] = {"mean": sum(values) / len(values), "std": float(_std(values)), "folds": values}
        return json_result({"algorithm": algorithm, "folds": folds, "scores": result})

    @tool(
        name="ml_grid_search",
        description=(
            "Tune an algorithm's hyper-parameters by cross-validated grid search (every combination) or random "
            "search (n_iter samples), e.g. param_grid={'max_depth': [2, 4, None]}; stores the best model refitted "
            "on the whole dataset under `output`. Returns the best parameters, best score and the top candidates."
        ),
        annotations=CREATES,
    )
    def ml_grid_search(
        self,
        dataset: DatasetName,
        algorithm: Annotated[str, Field(min_length=1, description="as in ml_train_*")],
        param_grid: Annotated[dict[str, list[Param]], Field(min_length=1, description="parameter -> candidates")],
        output: NewName,
        mode: Annotated[Literal["grid", "random"], Field(description="every combination or n_iter samples")] = "grid",
        n_iter: Annotated[int, Field(ge=1, le=200, description="candidates tried by random search")] = 10,
        folds: Folds = 5,
        scoring: Annotated[str | None, Field(description="sklearn scorer name; default accuracy / r2")] = None,
        seed: Seed = 0,
    ) -> CallToolResult:
        from sklearn.model_selection import GridSearchCV, RandomizedSearchCV

        data = self.state.datasets.get(dataset)
        if data.task not in ("classification", "regression"):
            raise ToolError(f"dataset {dataset!r} has no target to tune against")
        task: Literal["classification", "regression"] = (
            "classification" if data.task == "classification" else "regression"
        )
        pipeline = estimators.build(task, algorithm, {}, seed)
        grid = {f"model__{k}": v for k, v in param_grid.items()}
        unknown = sorted(set(param_grid) - set(pipeline.named_steps["model"].get_params()))
        if unknown:
            raise ToolError(f"{algorithm} has no parameters {unknown}")
        search: Any = (
            GridSearchCV(pipeline, grid, cv=folds, scoring=scoring)
            if mode == "grid"
            else RandomizedSearchCV(pipeline, grid, n_iter=n_iter, cv=folds, scoring=scoring, random_state=seed)
        )
        estimators.fit(search, data.x, data.y, f"{mode} search")
        best = search.best_estimator_
        self.state.models.put(
            output,
            Model(best, task, algorithm, data.features, data.target_names, dataset, estimators.model_params(best)),
        )
        res = search.cv_results_
        order = sorted(range(len(res["params"])), key=lambda i: int(res["rank_test_score"][i]))[:10]
        rows = [
            [
                int(res["rank_test_score"][i]),
                float(res["mean_test_score"][i]),
                float(res["std_test_score"][i]),
                {k.removeprefix("model__"): v for k, v in res["params"][i].items()},
            ]
            for i in order
        ]
        best_params = {k.removeprefix("model__"): v for k, v in search.best_params_.items()}
        return table_result(
            ["rank", "meanScore", "stdScore", "params"],
            rows,
            title=f"best {best_params}",
            model=output,
            bestParams=best_params,
            bestScore=float(search.best_score_),
            candidates=len(res["params"]),
        )

    def _inputs(
        self, model: Model, dataset: str | None, rows: list[list[float]] | None, texts: list[str] | None
    ) -> Any:
        import numpy as np

        given = [v for v in (dataset, rows, texts) if v is not None]
        if len(given) != 1:
            raise ToolError("give exactly one of dataset, rows or texts")
        if dataset is not None:
            return self.state.features_of(model, self.state.datasets.get(dataset), dataset)
        if texts is not None:
            if model.task != "text-classification":
                raise ToolError("texts can only be given to a text classifier (ml_text_classifier)")
            return texts
        if model.task == "text-classification":
            raise ToolError("a text classifier needs texts, not feature rows")
        x = np.asarray(rows, dtype=float)
        if x.ndim != 2 or x.shape[1] != len(model.features):
            raise ToolError(f"each row needs {len(model.features)} values, in order: {model.features}")
        return x

    @tool(
        name="ml_predict",
        description=(
            "Predict with a stored model for a dataset, for feature rows, or for raw texts (text classifiers). "
            "Returns the predicted class labels (classification) or values (regression)."
        ),
        annotations=READ_ONLY,
    )
    def ml_predict(
        self, model: ModelName, dataset: InputDataset = None, rows: Rows = None, texts: Texts = None
    ) -> CallToolResult:
        entry = self.state.model_for(model)
        if entry.task == "unsupervised":
            raise ToolError(f"model {model!r} is unsupervised and does not predict")
        x = self._inputs(entry, dataset, rows, texts)
        predicted = entry.estimator.predict(x)
        labels = [_label(entry, v) for v in predicted]
        return json_result(
            {"model": model, "count": len(labels), "predictions": labels},
            text=f"{len(labels)} predictions: {labels[:MAX_PREDICTIONS_SHOWN]}",
        )

    @tool(
        name="ml_predict_proba",
        description=(
            "Class probabilities from a stored classifier for a dataset, feature rows or texts. Use when the "
            "confidence matters, not just the label. Returns one row per input with a probability per class."
        ),
        annotations=READ_ONLY,
    )
    def ml_predict_proba(
        self, model: ModelName, dataset: InputDataset = None, rows: Rows = None, texts: Texts = None
    ) -> CallToolResult:
        entry = self.state.model_for(model)
        if entry.task not in ("classification", "text-classification") or not hasattr(entry.estimator, "predict_proba"):
            raise ToolError(f"model {model!r} ({entry.algorithm}, {entry.task}) gives no probabilities")
        x = self._inputs(entry, dataset, rows, texts)
        proba = entry.estimator.predict_proba(x)
        classes = [str(_label(entry, c)) for c in entry.estimator.classes_]
        table = [[i, *[round(float(p), 6) for p in row]] for i, row in enumerate(proba)]
        return table_result(["row", *classes], table, classes=classes)

    @tool(
        name="ml_list_models",
        description="List the models held in this session: algorithm, task, features, training dataset, creation time.",
        annotations=READ_ONLY,
    )
    def ml_list_models(self) -> CallToolResult:
        rows = [
            [n, m.algorithm, m.task, len(m.features), m.trained_on, m.created] for n, m in self.state.models.items()
        ]
        return table_result(["name", "algorithm", "task", "features", "trainedOn", "created"], rows)


def _label(model: Model, value: Any) -> Any:
    if model.target_names and model.task in ("classification", "text-classification"):
        return model.target_names[int(value)]
    if hasattr(value, "item"):
        return value.item()
    return value


def _std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return float((sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5)
