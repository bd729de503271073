"""Unsupervised tools: clustering with silhouette scores, dimensionality reduction and anomaly detection."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result
from servers._hints import CREATES, READ_ONLY
from servers._toolset import Toolset, tool
from servers.ml.state import Dataset, DatasetName, MLState

OptionalOutput = Annotated[
    str | None, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$", description="store the result as a dataset")
]


def _matrix(data: Dataset, name: str, scale: bool) -> Any:
    import numpy as np
    from sklearn.preprocessing import StandardScaler

    if data.task == "text-classification":
        raise ToolError(f"dataset {name!r} holds raw texts; embed them first with ml_embed_texts(output=...)")
    x = np.asarray(data.x, dtype=float)
    if len(x) < 3:
        raise ToolError(f"dataset {name!r} has {len(x)} rows; at least 3 are needed")
    return StandardScaler().fit_transform(x) if scale else x


class UnsupervisedTools(Toolset):
    """Clusters, projections and outliers of a dataset's features."""

    def __init__(self, state: MLState) -> None:
        self.state = state

    @tool(
        name="ml_cluster",
        description=(
            "Cluster a dataset's rows (features or stored text embeddings) with KMeans, agglomerative clustering "
            "or DBSCAN, scoring the result by silhouette. Use to discover groups without labels. Returns cluster "
            "sizes, the silhouette score, each row's cluster, and, with `output`, a dataset labelled by cluster."
        ),
        annotations=CREATES,
    )
    def ml_cluster(
        self,
        dataset: DatasetName,
        algorithm: Annotated[
            Literal["kmeans", "agglomerative", "dbscan"], Field(description="clustering algorithm")
        ] = "kmeans",
        n_clusters: Annotated[int, Field(ge=2, le=200, description="clusters (kmeans, agglomerative)")] = 3,
        eps: Annotated[float, Field(gt=0, description="neighbourhood radius (dbscan)")] = 0.5,
        min_samples: Annotated[int, Field(ge=1, le=1000, description="core point size (dbscan)")] = 5,
        scale: Annotated[bool, Field(description="standardise features first")] = True,
        seed: Annotated[int, Field(ge=0, description="random seed")] = 0,
        output: OptionalOutput = None,
    ) -> CallToolResult:
        from sklearn.cluster import DBSCAN, AgglomerativeClustering, KMeans
        from sklearn.metrics import adjusted_rand_score, silhouette_score

        data = self.state.datasets.get(dataset)
        x = _matrix(data, dataset, scale)
        if algorithm != "dbscan" and n_clusters >= len(x):
            raise ToolError(f"n_clusters={n_clusters} must be smaller than the {len(x)} rows")
        est: Any = {
            "kmeans": lambda: KMeans(n_clusters, n_init=10, random_state=seed),
            "agglomerative": lambda: AgglomerativeClustering(n_clusters),
            "dbscan": lambda: DBSCAN(eps=eps, min_samples=min_samples),
        }[algorithm]()
        labels = est.fit_predict(x)
        found = sorted(set(labels) - {-1})
        score = float(silhouette_score(x, labels)) if 1 < len(set(labels)) < len(x) else None
        body: dict[str, Any] = {
            "algorithm": algorithm,
            "clusters": len(found),
            "sizes": {str(k): v for k, v in sorted(Counter(int(v) for v in labels).items())},
            "silhouette": score,
            "noise": int((labels == -1).sum()),
            "labels": [int(v) for v in labels],
        }
        if data.y is not None and data.task == "classification":
            body["adjustedRandIndex"] = float(adjusted_rand_score(data.y, labels))
        if output:
            self.state.datasets.put(
                output,
                Dataset(data.x, labels, data.features, "classification", [], f"{dataset} clustered by {algorithm}"),
            )
        return json_result(body, text=f"{len(found)} clusters, silhouette {score}, sizes {body['sizes']}")

    @tool(
        name="ml_reduce_dims",
        description=(
            "Project a dataset onto fewer dimensions with PCA (explained variance reported), truncated SVD or "
            "t-SNE (for visualisation). Use to compress features or to plot high-dimensional data in 2-D. Returns "
            "the projected coordinates (first rows) and stores the projection as a dataset under `output`."
        ),
        annotations=CREATES,
    )
    def ml_reduce_dims(
        self,
        dataset: DatasetName,
        method: Annotated[Literal["pca", "svd", "tsne"], Field(description="projection method")] = "pca",
        components: Annotated[int, Field(ge=1, le=100, description="output dimensions")] = 2,
        scale: Annotated[bool, Field(description="standardise features first")] = True,
        seed: Annotated[int, Field(ge=0, description="random seed")] = 0,
        output: OptionalOutput = None,
    ) -> CallToolResult:
        from sklearn.decomposition import PCA, TruncatedSVD
        from sklearn.manifold import TSNE

        data = self.state.datasets.get(dataset)
        x = _matrix(data, dataset, scale)
        if components >= x.shape[1] and method != "tsne":
            raise ToolError(f"components={components} must be below the {x.shape[1]} features")
        if method == "tsne" and components > 3:
            raise ToolError("t-SNE supports at most 3 components")
        est: Any = {
            "pca": lambda: PCA(components, random_state=seed),
            "svd": lambda: TruncatedSVD(components, random_state=seed),
            "tsne": lambda: TSNE(components, random_state=seed, perplexity=min(30.0, (len(x) - 1) / 3)),
        }[method]()
        projected = est.fit_transform(x)
        body: dict[str, Any] = {
            "method": method,
            "components": components,
            "rows": len(projected),
            "preview": [[round(float(v), 6) for v in row] for row in projected[:20]],
        }
        if hasattr(est, "explained_variance_ratio_"):
            ratios = [float(v) for v in est.explained_variance_ratio_]
            body |= {"explainedVarianceRatio": ratios, "totalExplained": sum(ratios)}
        if output:
            self.state.datasets.put(
                output,
                Dataset(
                    projected,
                    data.y,
                    [f"{method}{i + 1}" for i in range(components)],
                    data.task if data.task != "text-classification" else "unsupervised",
                    data.target_names,
                    f"{dataset} reduced by {method}",
                ),
            )
            body["stored"] = output
        return json_result(body)

    @tool(
        name="ml_detect_anomalies",
        description=(
            "Find outlying rows of a dataset with Isolation Forest or Local Outlier Factor, given the expected "
            "share of anomalies (contamination). Use for fraud, faults or data-quality checks. Returns the indices "
            "of the anomalies, most anomalous first, with their scores."
        ),
        annotations=READ_ONLY,
    )
    def ml_detect_anomalies(
        self,
        dataset: DatasetName,
        method: Annotated[Literal["isolation_forest", "lof"], Field(description="detector")] = "isolation_forest",
        contamination: Annotated[float, Field(gt=0, le=0.5, description="expected share of anomalies")] = 0.05,
        scale: Annotated[bool, Field(description="standardise features first")] = True,
        seed: Annotated[int, Field(ge=0, description="random seed")] = 0,
    ) -> CallToolResult:
        import numpy as np
        from sklearn.ensemble import IsolationForest
        from sklearn.neighbors import LocalOutlierFactor

        x = _matrix(self.state.datasets.get(dataset), dataset, scale)
        if method == "isolation_forest":
            est = IsolationForest(contamination=contamination, random_state=seed)
            flags = est.fit_predict(x)
            scores = -est.score_samples(x)
        else:
            lof = LocalOutlierFactor(n_neighbors=min(20, len(x) - 1), contamination=contamination)
            flags = lof.fit_predict(x)
            scores = -lof.negative_outlier_factor_
        idx = np.where(flags == -1)[0]
        idx = idx[np.argsort(-scores[idx])]
        anomalies = [{"row": int(i), "score": round(float(scores[i]), 6)} for i in idx]
        return json_result(
            {"method": method, "rows": len(x), "anomalies": anomalies, "count": len(anomalies)},
            text=f"{len(anomalies)} anomalies: rows {[a['row'] for a in anomalies[:50]]}",
        )
