"""Persistence tools: save and load models (joblib + a JSON sidecar with a SHA-256), ONNX export and inference.

Models are written only to the server's model folder (``ML_HOME``, by default ``<home>/data/ml``) under their
validated name. Loading checks the joblib file against the digest recorded when it was saved, so only files this
server wrote are unpickled.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result
from servers._hints import CREATES, READ_ONLY, REPLACES
from servers._toolset import Toolset, tool
from servers.ml.state import NAME_PATTERN, MLState, Model, ModelName

Rows = Annotated[list[list[float]] | None, Field(max_length=10_000, description="feature rows")]
InputDataset = Annotated[str | None, Field(pattern=NAME_PATTERN, description="dataset to run the model on")]


def _sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


class PersistTools(Toolset):
    """Saving, loading and exporting models."""

    def __init__(self, state: MLState) -> None:
        self.state = state

    def _saved(self) -> list[str]:
        return sorted(p.stem for p in self.state.home.glob("*.json")) if self.state.home.is_dir() else []

    @tool(
        name="ml_save_model",
        description=(
            "Save a stored model to the server's model folder as <name>.joblib plus <name>.json (task, algorithm, "
            "features, classes, parameters, library versions, SHA-256), so it survives restarts. Returns the paths."
        ),
        annotations=REPLACES,
    )
    def ml_save_model(
        self,
        model: ModelName,
        overwrite: Annotated[bool, Field(description="replace a saved model of the same name")] = False,
    ) -> CallToolResult:
        import joblib
        import sklearn

        entry = self.state.model_for(model)
        folder = self.state.model_dir()
        blob, meta_path = folder / f"{model}.joblib", folder / f"{model}.json"
        if meta_path.exists() and not overwrite:
            raise ToolError(f"a model named {model!r} is already saved; pass overwrite=true to replace it")
        joblib.dump(entry.estimator, blob, compress=3)
        meta = {**entry.metadata(), "name": model, "sha256": _sha256(blob), "sklearnVersion": sklearn.__version__}
        meta_path.write_text(json.dumps(meta, indent=1, default=str))
        return json_result(
            {"model": model, "path": str(blob), "metadata": str(meta_path), "bytes": blob.stat().st_size}
        )

    @tool(
        name="ml_load_model",
        description=(
            "Load a model saved with ml_save_model back into the session (under its name or `output`); the joblib "
            "file must match the SHA-256 recorded at save time. Returns its metadata; lists saved models when the "
            "name is unknown."
        ),
        annotations=CREATES,
    )
    def ml_load_model(
        self,
        name: ModelName,
        output: Annotated[str | None, Field(pattern=NAME_PATTERN, description="load under this name instead")] = None,
    ) -> CallToolResult:
        import joblib

        meta_path, blob = self.state.home / f"{name}.json", self.state.home / f"{name}.joblib"
        if not meta_path.is_file() or not blob.is_file():
            raise ToolError(f"no saved model {name!r}; saved: {', '.join(self._saved()) or 'none'}")
        meta = json.loads(meta_path.read_text())
        if _sha256(blob) != meta.get("sha256"):
            raise ToolError(f"{blob.name} does not match the digest saved with it; refusing to unpickle it")
        estimator = joblib.load(blob)
        model = Model(
            estimator,
            meta["task"],
            meta["algorithm"],
            list(meta["features"]),
            list(meta["targetNames"]),
            meta.get("trainedOn", ""),
            dict(meta.get("params", {})),
            meta.get("created", ""),
        )
        self.state.models.put(output or name, model)
        return json_result({"model": output or name, **meta})

    @tool(
        name="ml_export_onnx",
        description=(
            "Convert a stored scikit-learn model (numeric features) to ONNX with skl2onnx and write <name>.onnx to "
            "the model folder, for serving without Python/scikit-learn. Returns the path, size, opset and the "
            "graph's input and output names."
        ),
        annotations=REPLACES,
    )
    def ml_export_onnx(
        self,
        model: ModelName,
        output: Annotated[
            str | None, Field(pattern=NAME_PATTERN, description="file name (default: the model name)")
        ] = None,
        opset: Annotated[int | None, Field(ge=9, le=21, description="target ONNX opset (default: latest)")] = None,
    ) -> CallToolResult:
        from skl2onnx import convert_sklearn
        from skl2onnx.common.data_types import FloatTensorType

        entry = self.state.model_for(model)
        if entry.task == "text-classification":
            raise ToolError("text pipelines are not exported; export a model trained on numeric features")
        options = {"zipmap": False} if entry.task == "classification" else None
        try:
            onx = convert_sklearn(
                entry.estimator,
                initial_types=[("input", FloatTensorType([None, len(entry.features)]))],
                target_opset=opset,
                options={id(entry.estimator): options} if options else None,
            )
        except Exception as exc:  # skl2onnx raises RuntimeError/NotImplementedError/... for unsupported models
            raise ToolError(f"cannot convert {entry.algorithm} to ONNX: {type(exc).__name__}: {exc}") from None
        path = self.state.model_dir() / f"{output or model}.onnx"
        path.write_bytes(onx.SerializeToString())
        return json_result(
            {
                "path": str(path),
                "bytes": path.stat().st_size,
                "opset": max(o.version for o in onx.opset_import),
                "inputs": [i.name for i in onx.graph.input],
                "outputs": [o.name for o in onx.graph.output],
            }
        )

    @tool(
        name="ml_onnx_infer",
        description=(
            "Run an exported ONNX model (<name>.onnx in the model folder) with onnxruntime on a dataset or on "
            "feature rows. Returns every graph output (labels, probabilities or values) and, when the scikit-learn "
            "model of the same name is loaded, the share of predictions that agree with it."
        ),
        annotations=READ_ONLY,
    )
    def ml_onnx_infer(self, name: ModelName, dataset: InputDataset = None, rows: Rows = None) -> CallToolResult:
        import numpy as np
        import onnxruntime as ort

        path = self.state.home / f"{name}.onnx"
        if not path.is_file():
            raise ToolError(f"no exported model {name}.onnx; run ml_export_onnx first")
        if (dataset is None) == (rows is None):
            raise ToolError("give exactly one of dataset or rows")
        x = np.asarray(self.state.datasets.get(dataset).x if dataset else rows, dtype=np.float32)
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        expected = session.get_inputs()[0].shape[1]
        if x.ndim != 2 or (isinstance(expected, int) and x.shape[1] != expected):
            raise ToolError(f"the ONNX model expects rows of {expected} features, got shape {list(x.shape)}")
        outputs = session.run(None, {session.get_inputs()[0].name: x})
        body: dict[str, Any] = {o.name: v.tolist() for o, v in zip(session.get_outputs(), outputs, strict=True)}
        body = {"rows": len(x), "outputs": body}
        try:
            reference = self.state.models.get(name).estimator.predict(x)
            first = np.asarray(outputs[0]).reshape(len(x), -1)[:, 0]
            agree = (
                np.isclose(first, reference, rtol=1e-3, atol=1e-3)
                if reference.dtype.kind == "f"
                else first == reference
            )
            body["agreementWithSklearn"] = float(np.mean(agree))
        except ToolError:
            pass
        return json_result(body)
