"""Evaluation tools: classification and regression metrics on a held-out dataset, and permutation importance."""

from __future__ import annotations

from typing import Annotated, Any

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers._hints import READ_ONLY
from servers._toolset import Toolset, tool
from servers.ml.state import DatasetName, MLState, ModelName


def _r(value: Any) -> float:
    return round(float(value), 6)


class EvaluationTools(Toolset):
    """Scoring stored models on labelled datasets."""

    def __init__(self, state: MLState) -> None:
        self.state = state

    def _xy(self, model: str, dataset: str, *tasks: str) -> tuple[Any, Any, Any]:
        entry = self.state.model_for(model)
        if entry.task not in tasks:
            raise ToolError(f"model {model!r} is a {entry.task} model; this tool needs {' or '.join(tasks)}")
        data = self.state.datasets.get(dataset)
        return entry, self.state.features_of(entry, data, dataset), data.target()

    @tool(
        name="ml_eval_classification",
        description=(
            "Evaluate a classifier on a labelled dataset (ideally the test split): accuracy, balanced accuracy, "
            "macro and weighted precision/recall/F1, ROC-AUC (when the model gives probabilities), the confusion "
            "matrix and a per-class report. Returns all of them."
        ),
        annotations=READ_ONLY,
    )
    def ml_eval_classification(self, model: ModelName, dataset: DatasetName) -> CallToolResult:
        from sklearn import metrics

        entry, x, y = self._xy(model, dataset, "classification", "text-classification")
        predicted = entry.estimator.predict(x)
        labels = list(entry.estimator.classes_)
        names = [entry.target_names[int(c)] if entry.target_names else str(c) for c in labels]
        body: dict[str, Any] = {
            "accuracy": _r(metrics.accuracy_score(y, predicted)),
            "balancedAccuracy": _r(metrics.balanced_accuracy_score(y, predicted)),
            "rows": len(y),
        }
        for avg in ("macro", "weighted"):
            p, r, f, _ = metrics.precision_recall_fscore_support(y, predicted, average=avg, zero_division=0)
            body[avg] = {"precision": _r(p), "recall": _r(r), "f1": _r(f)}
        if hasattr(entry.estimator, "predict_proba") and len(set(y)) > 1:
            proba = entry.estimator.predict_proba(x)
            try:
                if len(labels) == 2:
                    body["rocAuc"] = _r(metrics.roc_auc_score(y, proba[:, 1]))
                else:
                    body["rocAuc"] = _r(metrics.roc_auc_score(y, proba, multi_class="ovr", labels=labels))
            except ValueError:
                body["rocAuc"] = None  # a class absent from this dataset
        matrix = metrics.confusion_matrix(y, predicted, labels=labels)
        body["confusionMatrix"] = {"labels": names, "matrix": matrix.tolist()}
        report = metrics.classification_report(
            y, predicted, labels=labels, target_names=names, output_dict=True, zero_division=0
        )
        body["perClass"] = {n: {k: _r(v) for k, v in report[n].items()} for n in names}
        return json_result(body)

    @tool(
        name="ml_eval_regression",
        description=(
            "Evaluate a regressor on a dataset with a numeric target (ideally the test split): MAE, RMSE, median "
            "absolute error, R², explained variance and MAPE. Returns the metrics."
        ),
        annotations=READ_ONLY,
    )
    def ml_eval_regression(self, model: ModelName, dataset: DatasetName) -> CallToolResult:
        from sklearn import metrics

        entry, x, y = self._xy(model, dataset, "regression")
        predicted = entry.estimator.predict(x)
        return json_result(
            {
                "rows": len(y),
                "mae": _r(metrics.mean_absolute_error(y, predicted)),
                "rmse": _r(metrics.root_mean_squared_error(y, predicted)),
                "medianAe": _r(metrics.median_absolute_error(y, predicted)),
                "r2": _r(metrics.r2_score(y, predicted)),
                "explainedVariance": _r(metrics.explained_variance_score(y, predicted)),
                "mape": _r(metrics.mean_absolute_percentage_error(y, predicted)),
            }
        )

    @tool(
        name="ml_feature_importance",
        description=(
            "Rank a model's features by permutation importance on a labelled dataset: how much the score drops "
            "when one feature is shuffled (works for any model), plus the model's own impurity importances when it "
            "has them. Use to explain which inputs drive predictions. Returns a ranked table."
        ),
        annotations=READ_ONLY,
    )
    def ml_feature_importance(
        self,
        model: ModelName,
        dataset: DatasetName,
        repeats: Annotated[int, Field(ge=1, le=50, description="shuffles per feature")] = 5,
        top: Annotated[int, Field(ge=1, le=1000, description="features returned")] = 20,
        seed: Annotated[int, Field(ge=0, description="random seed")] = 0,
    ) -> CallToolResult:
        from sklearn.inspection import permutation_importance

        entry, x, y = self._xy(model, dataset, "classification", "regression")
        result = permutation_importance(entry.estimator, x, y, n_repeats=repeats, random_state=seed)
        step = entry.estimator.named_steps["model"] if hasattr(entry.estimator, "named_steps") else entry.estimator
        own = getattr(step, "feature_importances_", None)
        rows = [
            [f, _r(result.importances_mean[i]), _r(result.importances_std[i]), None if own is None else _r(own[i])]
            for i, f in enumerate(entry.features)
        ]
        rows.sort(key=lambda r: -float(r[1] or 0.0))
        return table_result(
            ["feature", "importance", "std", "modelImportance"],
            rows[:top],
            title=f"permutation importance of {model} on {dataset}",
        )
