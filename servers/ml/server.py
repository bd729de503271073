"""The `ml` server: scikit-learn training and evaluation, ONNX export, bundled MiniLM embeddings, clustering.

Datasets and models live in this process's registries; ``ml_save_model`` writes to ``ML_HOME`` (the manifest points it
at ``<home>/data/ml``; ``./.ml-models`` when unset). CSV files are read only inside ``ML_ROOTS``. scikit-learn, torch
and sentence-transformers are imported inside the tools, so the server lists its tools in well under a second.
"""

from __future__ import annotations

from pathlib import Path

from mcp.server import MCPServer

from servers._roots import AllowedRoots, env_path
from servers.ml.datasets import DatasetTools
from servers.ml.evaluation import EvaluationTools
from servers.ml.persist import PersistTools
from servers.ml.state import MLState
from servers.ml.text import TextTools
from servers.ml.training import TrainingTools
from servers.ml.unsupervised import UnsupervisedTools

ROOTS_ENV = "ML_ROOTS"
HOME_ENV = "ML_HOME"

__all__ = ["HOME_ENV", "ROOTS_ENV", "build_server", "mcp"]


def build_server(state: MLState) -> MCPServer:
    """An `ml` server around ``state`` (its registries, model folder and allowed roots)."""
    server = MCPServer(
        "ml",
        title="Machine learning",
        description="scikit-learn models, ONNX export, offline sentence embeddings, clustering and anomaly detection",
        instructions=(
            "Load data with ml_load_dataset (bundled sets or CSV), ml_split it, train with ml_train_classifier / "
            "ml_train_regressor, evaluate on the test split, then save or export. Text: ml_embed_texts, "
            "ml_similarity, ml_text_classifier."
        ),
    )
    toolsets = (DatasetTools, TrainingTools, EvaluationTools, PersistTools, TextTools, UnsupervisedTools)
    for toolset in toolsets:
        toolset(state).register(server)
    return server


mcp = build_server(MLState(env_path(HOME_ENV, Path.cwd() / ".ml-models"), AllowedRoots.from_env(ROOTS_ENV)))
