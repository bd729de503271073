"""The `ml` server through MCP: bundled scikit-learn datasets, real training, ONNX and the bundled MiniLM."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
import numpy as np
import pytest

from servers._roots import AllowedRoots
from servers.ml.server import build_server
from servers.ml.state import MLState
from tests.servers.conftest import Client, err, ok

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> MLState:
    base = tmp_path_factory.mktemp("ml")
    root = base / "project"
    root.mkdir()
    rng = np.random.default_rng(3)
    lines = ["size,colour,price"]
    for _ in range(80):
        size = float(rng.uniform(1, 10))
        colour = ["red", "blue"][int(rng.integers(0, 2))]
        lines.append(f"{size:.3f},{colour},{3 * size + (5 if colour == 'red' else 0) + rng.normal(0, 0.1):.3f}")
    (root / "prices.csv").write_text("\n".join(lines) + "\n")
    cloud = np.vstack([rng.normal(0, 1, (60, 2)), [[12.0, 12.0]]])
    (root / "points.csv").write_text("a,b\n" + "".join(f"{a:.4f},{b:.4f}\n" for a, b in cloud))
    (base / "outside.csv").write_text("a,b\n1,2\n")
    return MLState(base / "home" / "data" / "ml", AllowedRoots([root]))


@pytest.fixture
async def client(state: MLState) -> AsyncIterator[Client]:
    async with Client(build_server(state)) as c:
        yield c


async def _iris_split(client: Client) -> None:
    ok(await client.call_tool("ml_load_dataset", {"source": "iris", "name": "iris"}))
    ok(await client.call_tool("ml_split", {"name": "iris", "test_size": 0.3, "seed": 1}))


async def test_lists_and_loads_bundled_and_csv_datasets(client: Client) -> None:
    assert len((await client.list_tools()).tools) >= 22
    listed = ok(await client.call_tool("ml_list_datasets", {}))
    assert {"iris", "wine", "breast_cancer", "digits", "diabetes"} <= {r[0] for r in listed["rows"]}
    iris = ok(await client.call_tool("ml_load_dataset", {"source": "iris", "name": "iris"}))
    assert iris["rows"] == 150
    assert iris["classes"] == {"setosa": 50, "versicolor": 50, "virginica": 50}
    csv = ok(await client.call_tool("ml_load_dataset", {"source": "prices.csv", "name": "prices", "target": "price"}))
    assert csv["task"] == "regression"
    assert csv["featureNames"] == ["size", "colour_blue", "colour_red"]
    described = ok(await client.call_tool("ml_describe_dataset", {"name": "prices"}))
    assert described["rows"][0][0] == "size"
    assert 1 <= described["rows"][0][3] < described["rows"][0][4] <= 10
    refused = err(await client.call_tool("ml_load_dataset", {"source": "../outside.csv", "name": "x", "target": "a"}))
    assert "outside the allowed roots" in refused
    assert "no column 'nope'" in err(
        await client.call_tool("ml_load_dataset", {"source": "prices.csv", "name": "p", "target": "nope"})
    )


async def test_split_train_predict_and_evaluate_a_classifier(client: Client) -> None:
    await _iris_split(client)
    train = ok(await client.call_tool("ml_describe_dataset", {"name": "iris_train"}))
    assert train["datasetRows"] == 105
    assert set(train["classes"].values()) == {35}  # stratified
    fit = ok(
        await client.call_tool(
            "ml_train_classifier",
            {"dataset": "iris_train", "output": "lr", "algorithm": "logistic_regression", "params": {"C": 1.0}},
        )
    )
    assert fit["trainAccuracy"] > 0.9
    ev = ok(await client.call_tool("ml_eval_classification", {"model": "lr", "dataset": "iris_test"}))
    assert ev["accuracy"] > 0.85
    assert ev["rocAuc"] > 0.95
    assert ev["confusionMatrix"]["labels"] == ["setosa", "versicolor", "virginica"]
    assert sum(map(sum, ev["confusionMatrix"]["matrix"])) == 45
    pred = ok(
        await client.call_tool("ml_predict", {"model": "lr", "rows": [[5.1, 3.5, 1.4, 0.2], [7.7, 3.0, 6.1, 2.3]]})
    )
    assert pred["predictions"] == ["setosa", "virginica"]
    proba = ok(await client.call_tool("ml_predict_proba", {"model": "lr", "rows": [[5.1, 3.5, 1.4, 0.2]]}))
    assert proba["columns"] == ["row", "setosa", "versicolor", "virginica"]
    assert proba["rows"][0][1] > 0.8
    assert sum(proba["rows"][0][1:]) == pytest.approx(1.0, abs=1e-5)
    assert "needs 4 values" in err(await client.call_tool("ml_predict", {"model": "lr", "rows": [[1.0, 2.0]]}))
    bad = err(
        await client.call_tool(
            "ml_train_classifier",
            {"dataset": "iris_train", "output": "x", "algorithm": "random_forest", "params": {"nope": 1}},
        )
    )
    assert "valid parameters" in bad
    assert "regression" in err(await client.call_tool("ml_eval_regression", {"model": "lr", "dataset": "iris_test"}))
    models = ok(await client.call_tool("ml_list_models", {}))
    assert ["lr", "logistic_regression", "classification", 4, "iris_train"] in [r[:5] for r in models["rows"]]


async def test_regressor_cross_validation_and_importance(client: Client) -> None:
    ok(await client.call_tool("ml_load_dataset", {"source": "prices.csv", "name": "prices", "target": "price"}))
    ok(await client.call_tool("ml_split", {"name": "prices", "seed": 2}))
    fit = ok(
        await client.call_tool(
            "ml_train_regressor", {"dataset": "prices_train", "output": "lin", "algorithm": "linear"}
        )
    )
    assert fit["trainR2"] > 0.99
    ev = ok(await client.call_tool("ml_eval_regression", {"model": "lin", "dataset": "prices_test"}))
    assert ev["r2"] > 0.99
    assert ev["mae"] < 0.2
    cv = ok(await client.call_tool("ml_cross_validate", {"dataset": "prices", "algorithm": "ridge", "folds": 4}))
    assert len(cv["scores"]["r2"]["folds"]) == 4
    assert cv["scores"]["r2"]["mean"] > 0.9
    imp = ok(await client.call_tool("ml_feature_importance", {"model": "lin", "dataset": "prices_test", "repeats": 3}))
    assert imp["rows"][0][0] == "size"
    ok(await client.call_tool("ml_load_dataset", {"source": "wine", "name": "wine"}))
    cvc = ok(await client.call_tool("ml_cross_validate", {"dataset": "wine", "algorithm": "naive_bayes"}))
    assert cvc["scores"]["accuracy"]["mean"] > 0.9
    assert "unknown classification algorithm" in err(
        await client.call_tool("ml_cross_validate", {"dataset": "wine", "algorithm": "svr"})
    )


async def test_grid_and_random_search(client: Client) -> None:
    ok(await client.call_tool("ml_load_dataset", {"source": "breast_cancer", "name": "bc"}))
    grid = ok(
        await client.call_tool(
            "ml_grid_search",
            {
                "dataset": "bc",
                "algorithm": "decision_tree",
                "param_grid": {"max_depth": [1, 3, 5]},
                "folds": 3,
                "output": "tree",
            },
        )
    )
    assert grid["candidates"] == 3
    assert grid["bestParams"]["max_depth"] in (3, 5)
    assert grid["bestScore"] > 0.88
    rnd = ok(
        await client.call_tool(
            "ml_grid_search",
            {
                "dataset": "bc",
                "algorithm": "knn",
                "mode": "random",
                "n_iter": 2,
                "folds": 3,
                "output": "knn",
                "param_grid": {"n_neighbors": [3, 5, 7, 9]},
            },
        )
    )
    assert rnd["candidates"] == 2
    fi = ok(await client.call_tool("ml_feature_importance", {"model": "tree", "dataset": "bc", "repeats": 2}))
    assert fi["rows"][0][3] is not None  # the tree's own impurity importances
    assert "has no parameters" in err(
        await client.call_tool(
            "ml_grid_search", {"dataset": "bc", "algorithm": "knn", "param_grid": {"depth": [1]}, "output": "z"}
        )
    )


async def test_save_load_and_onnx_round_trip(client: Client, state: MLState) -> None:
    await _iris_split(client)
    ok(
        await client.call_tool(
            "ml_train_classifier", {"dataset": "iris_train", "output": "rf", "seed": 4, "params": {"n_estimators": 30}}
        )
    )
    saved = ok(await client.call_tool("ml_save_model", {"model": "rf", "overwrite": True}))
    meta = json.loads(await anyio.Path(saved["metadata"]).read_text())
    assert meta["algorithm"] == "random_forest"
    assert meta["features"][0] == "sepal length (cm)"
    assert "already saved" in err(await client.call_tool("ml_save_model", {"model": "rf"}))
    loaded = ok(await client.call_tool("ml_load_model", {"name": "rf", "output": "rf2"}))
    assert loaded["task"] == "classification"
    ev = ok(await client.call_tool("ml_eval_classification", {"model": "rf2", "dataset": "iris_test"}))
    assert ev["accuracy"] > 0.85
    exported = ok(await client.call_tool("ml_export_onnx", {"model": "rf"}))
    assert (await anyio.Path(exported["path"]).stat()).st_size > 1000
    assert exported["inputs"] == ["input"]
    inferred = ok(await client.call_tool("ml_onnx_infer", {"name": "rf", "dataset": "iris_test"}))
    assert inferred["rows"] == 45
    assert inferred["agreementWithSklearn"] == 1.0
    assert len(inferred["outputs"]["probabilities"][0]) == 3
    blob = state.home / "rf.joblib"
    blob.write_bytes(blob.read_bytes() + b"tampered")
    assert "does not match the digest" in err(await client.call_tool("ml_load_model", {"name": "rf"}))
    assert "no saved model" in err(await client.call_tool("ml_load_model", {"name": "ghost"}))
    assert "expects rows of 4" in err(await client.call_tool("ml_onnx_infer", {"name": "rf", "rows": [[1.0]]}))


async def test_regressor_onnx_matches_sklearn(client: Client) -> None:
    ok(await client.call_tool("ml_load_dataset", {"source": "diabetes", "name": "diab"}))
    ok(await client.call_tool("ml_train_regressor", {"dataset": "diab", "output": "ridge", "algorithm": "ridge"}))
    ok(await client.call_tool("ml_export_onnx", {"model": "ridge"}))
    inferred = ok(await client.call_tool("ml_onnx_infer", {"name": "ridge", "dataset": "diab"}))
    assert inferred["agreementWithSklearn"] == 1.0


async def test_unsupervised_cluster_reduce_anomalies(client: Client) -> None:
    ok(await client.call_tool("ml_load_dataset", {"source": "iris", "name": "iris"}))
    km = ok(await client.call_tool("ml_cluster", {"dataset": "iris", "n_clusters": 3, "output": "iris_km"}))
    assert km["clusters"] == 3
    assert km["silhouette"] > 0.3
    assert km["adjustedRandIndex"] > 0.5
    db = ok(await client.call_tool("ml_cluster", {"dataset": "iris", "algorithm": "dbscan", "eps": 0.8}))
    assert db["clusters"] >= 1
    pca = ok(await client.call_tool("ml_reduce_dims", {"dataset": "iris", "components": 2, "output": "iris2"}))
    assert pca["totalExplained"] > 0.9
    reduced = ok(await client.call_tool("ml_describe_dataset", {"name": "iris2"}))
    assert [r[0] for r in reduced["rows"]] == ["pca1", "pca2"]
    tsne = ok(await client.call_tool("ml_reduce_dims", {"dataset": "iris", "method": "tsne"}))
    assert len(tsne["preview"][0]) == 2
    points = ok(await client.call_tool("ml_load_dataset", {"source": "points.csv", "name": "points"}))
    assert points["task"] == "unsupervised"
    forest = ok(await client.call_tool("ml_detect_anomalies", {"dataset": "points", "contamination": 0.02}))
    assert forest["anomalies"][0]["row"] == 60
    lof = ok(
        await client.call_tool("ml_detect_anomalies", {"dataset": "points", "method": "lof", "contamination": 0.02})
    )
    assert lof["anomalies"][0]["row"] == 60
    assert "smaller than" in err(await client.call_tool("ml_cluster", {"dataset": "iris", "n_clusters": 150}))


@pytest.mark.model
async def test_embeddings_similarity_and_clusters_of_texts(client: Client) -> None:
    texts = [
        "The cat sat on the mat.",
        "A kitten is sleeping on the rug.",
        "Stock markets fell sharply today.",
        "Shares dropped as investors panicked.",
        "Bake the bread for forty minutes.",
        "Knead the dough well.",
    ]
    emb = ok(await client.call_tool("ml_embed_texts", {"texts": texts, "output": "emb", "include_vectors": True}))
    assert emb["dimension"] == 384
    assert np.linalg.norm(emb["vectors"][0]) == pytest.approx(1.0, abs=1e-4)
    sim = ok(
        await client.call_tool("ml_similarity", {"query": "a cat lying on a carpet", "candidates": texts, "top_k": 2})
    )
    assert {r[0] for r in sim["rows"]} == {0, 1}
    clusters = ok(await client.call_tool("ml_cluster", {"dataset": "emb", "n_clusters": 3, "scale": False}))
    labels = clusters["labels"]
    assert labels[0] == labels[1]
    assert labels[2] == labels[3]
    assert labels[4] == labels[5]
    assert len(set(labels)) == 3


async def test_text_classifier_pipeline(client: Client) -> None:
    texts = [
        "great movie, loved it",
        "wonderful acting and a great plot",
        "loved the soundtrack",
        "terrible film, boring",
        "awful plot and bad acting",
        "boring and too long, hated it",
    ]
    labels = ["pos", "pos", "pos", "neg", "neg", "neg"]
    fit = ok(
        await client.call_tool(
            "ml_text_classifier", {"texts": texts, "labels": labels, "output": "senti", "dataset": "reviews"}
        )
    )
    assert fit["classes"] == ["neg", "pos"]
    assert fit["trainAccuracy"] == 1.0
    pred = ok(await client.call_tool("ml_predict", {"model": "senti", "texts": ["loved it, great", "boring, awful"]}))
    assert pred["predictions"] == ["pos", "neg"]
    proba = ok(await client.call_tool("ml_predict_proba", {"model": "senti", "texts": ["great great great"]}))
    assert proba["rows"][0][2] > 0.5
    ev = ok(await client.call_tool("ml_eval_classification", {"model": "senti", "dataset": "reviews"}))
    assert ev["accuracy"] == 1.0
    assert "one label per text" in err(
        await client.call_tool("ml_text_classifier", {"texts": texts, "labels": ["a", "b"], "output": "x"})
    )
    assert "text classifier" in err(await client.call_tool("ml_predict", {"model": "senti", "rows": [[1.0]]}))
    assert "not exported" in err(await client.call_tool("ml_export_onnx", {"model": "senti"}))
