"""Probe: MiniLM query embedding through ONNX Runtime against the two torch paths (the embedder's own ONNX path,
``vectors/onnx_runtime.py``, grew from it; ``memory.py --latency-only`` now times it end to end).

Exports the shipped all-MiniLM-L6-v2 transformer to ONNX (opset 17, dynamic batch and sequence axes) under
``bench/.cache/memory``, then times single-query embedding: ``SentenceTransformer.encode``, the embedder's direct
torch path, and ONNX Runtime (2 intra-op threads) with the same tokenizer, mean pooling and normalisation, and checks
that ONNX Runtime's vectors equal ``encode``'s.

``HF_HUB_OFFLINE=1 .venv/bin/python bench/_memory_onnx.py``
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hanzo_hub.vectors.st_embedder import SentenceTransformerEmbedder

PATH = Path(__file__).resolve().parent / ".cache" / "memory" / "minilm.onnx"
INPUTS = ["input_ids", "attention_mask", "token_type_ids"]


def export(model: Any) -> None:
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return out.last_hidden_state

    batch = model[0].tokenizer(["hello world"], return_tensors="pt")
    PATH.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(
        Hidden(model[0].auto_model), tuple(batch[k] for k in INPUTS), str(PATH), input_names=INPUTS,
        output_names=["hidden"], dynamic_axes={k: {0: "b", 1: "s"} for k in [*INPUTS, "hidden"]}, opset_version=17,
        dynamo=False,
    )  # fmt: skip


def main() -> None:
    import onnxruntime as ort

    embedder = SentenceTransformerEmbedder()
    embedder.embed_array_sync(["warm up"])
    model = embedder._model
    if not PATH.exists():
        export(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(str(PATH), options, providers=["CPUExecutionProvider"])
    tokenizer = model[0].tokenizer

    def onnx(texts: list[str]) -> Any:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="np")
        hidden = session.run(None, {k: batch[k].astype(np.int64) for k in INPUTS})[0]
        mask = batch["attention_mask"][..., None].astype(np.float32)
        pooled = (hidden * mask).sum(1) / mask.sum(1)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    queries = [f"How many doctor's appointments did I go to in month {i}?" for i in range(60)]
    diff = float(np.abs(onnx(queries[:4]) - embedder.encode_array_sync(queries[:4])).max())
    print(f"max |onnx - encode| = {diff:.2e}")
    paths: dict[str, Callable[[list[str]], Any]] = {
        "encode": embedder.encode_array_sync, "direct torch": embedder.embed_array_sync, "onnx runtime": onnx,
    }  # fmt: skip
    for name, fn in paths.items():
        fn(["warm up"])
        ms = []
        for q in queries:
            started = time.perf_counter()
            fn([q])
            ms.append((time.perf_counter() - started) * 1000)
        ms.sort()
        print(f"{name}: p50 {statistics.median(ms):.2f} ms, p95 {ms[int(0.95 * len(ms))]:.2f} ms")


if __name__ == "__main__":
    main()
