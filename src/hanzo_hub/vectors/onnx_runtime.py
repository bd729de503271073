"""ONNX Runtime for the embedder's query path: a cached export of the local transformer, run with numpy pooling.

The transformer of a local sentence-transformers model (tokenizer → transformer → mean pooling → L2 normalisation)
is exported once to ONNX by a callable the caller passes (``st_embedder.export_onnx``: this module never imports
torch), into ``<cache>/<model>-<key>.onnx`` where the key hashes the model's weight and config files and the
versions of the exporting libraries, so a changed model or exporter writes a new file. The export goes to a
temporary file in the same folder and is renamed into place, so concurrent hubs never load a half-written graph.
A cached file that does not load, or whose vectors disagree with the reference (torch) path on probe texts, is
exported again once; any further failure is the caller's to fall back from.

Once a graph has passed that check, the reference path's probe vectors are kept next to it
(``<graph>.probe.npz``). A later process opens the graph with ``open_stored_encoder``, checked against those
vectors instead of torch: the model then serves without importing torch or sentence-transformers at all (seconds
and hundreds of megabytes less on the first use after a start). Tokenization uses the model folder's
``tokenizer.json`` through the ``tokenizers`` library, configured once (truncation at the sequence length, no
padding), so one tokenizer is safe to share between threads.

Tool-search queries can run through an int8 copy of that graph (``open_quantized_encoder``): ONNX Runtime's dynamic
quantization with per-channel int8 weights, written once next to the fp32 file (keyed by it and by the onnxruntime
version) and checked against the reference path with a looser bound, since int8 vectors differ a little by design.

Everything here blocks (hashing, export, session creation, inference): callers run it in the embedder's worker
thread, never on the event loop.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import logging
import os
import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from hanzo_hub.errors import EmbeddingError

logger = logging.getLogger(__name__)

OPSET = 17
"""ONNX opset of the export; part of the cache key."""
KEY_LIBRARIES = ("torch", "onnx", "transformers")
"""Libraries whose versions shape the exported graph; part of the cache key."""
MODEL_FILES = ("*.safetensors", "*.bin", "config.json")
"""Files of the model folder whose bytes are part of the cache key (weights and architecture)."""
PROBE_TEXTS = ("hello world", "How many doctor's appointments did I go to in March, and which clinic was it?")
PROBE_MIN_COSINE = 0.9999
"""A loaded graph whose probe vectors are less similar than this to the reference path's is not used."""

QUANTIZED_MIN_COSINE = 0.97
"""The same check for an int8 graph (measured 0.98 worst, 0.99 mean over the LiveMCPBench tasks and sub-queries)."""
QUANTIZE_LIBRARIES = ("onnxruntime", "onnx")
"""Libraries whose versions shape the quantized graph; part of its file name."""

ONNX_INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
"""What a BERT-style graph may take; each session is fed the ones it declares."""
GROUP_MAX_RATIO = 2.0
"""``grouped`` batches together texts whose token counts are within this factor of each other."""
PROBE_SUFFIX = ".probe.npz"
"""Next to a checked graph: the reference path's vectors of ``PROBE_TEXTS`` (what a torch-free load checks)."""

Export = Callable[[Path], None]
Reference = Callable[[list[str]], Any]


def batch_workers(threads: int | None) -> int:
    """Runs of one session at a time for a batch of many texts: the cores its runs' threads leave idle, 1 to 4
    (ONNX Runtime sessions take concurrent runs; 2 on a 2-core machine: 734 tool texts in 0.56x the time of one)."""
    return max(1, min(4, (os.cpu_count() or 1) // (threads or default_threads())))


def default_threads() -> int:
    """Intra-op threads when none are configured: half the CPUs, 1 to 4 (a query is small, and the rest of the hub,
    Chroma's query included, needs cores too; on a loaded 2-core machine 1 thread measured as fast as 2)."""
    return max(1, min(4, (os.cpu_count() or 1) // 2))


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def cache_key(model_dir: Path) -> str:
    """A hash of the model's weight and config files and of the exporting libraries' versions (hashed once per
    process while the files keep their size and modification time)."""
    files = sorted({p for pattern in MODEL_FILES for p in model_dir.glob(pattern) if p.is_file()})
    if not files:
        raise EmbeddingError(f"no model weights under {model_dir}")
    stats = [(path, path.stat()) for path in files]
    return _hashed(tuple((path, st.st_size, st.st_mtime_ns) for path, st in stats))


@functools.lru_cache(maxsize=8)
def _hashed(files: tuple[tuple[Path, int, int], ...]) -> str:
    digest = hashlib.sha256(f"opset={OPSET}".encode())
    for path, _size, _mtime in files:
        digest.update(path.name.encode())
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    for dist in KEY_LIBRARIES:
        digest.update(f"{dist}={_version(dist)}".encode())
    return digest.hexdigest()[:20]


def cached_path(cache_dir: Path, model_dir: Path) -> Path:
    """Where the ONNX export of the model in ``model_dir`` lives under ``cache_dir``."""
    return cache_dir / f"{model_dir.name}-{cache_key(model_dir)}.onnx"


def export_atomically(path: Path, export: Export) -> None:
    """Run ``export`` into a temporary file next to ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        export(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def length_groups(lengths: Sequence[int], max_ratio: float, max_size: int | None = None) -> list[list[int]]:
    """Indices grouped longest first, each group's longest at most ``max_ratio`` times its shortest (and at most
    ``max_size`` indices in a group, when given)."""
    groups: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda j: (-lengths[j], j)):
        full = max_size is not None and groups and len(groups[-1]) >= max_size
        if groups and not full and lengths[groups[-1][0]] <= max_ratio * lengths[i]:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def fast_tokenizer(model_dir: Path | None, fallback: Any, max_seq_length: int) -> Any:
    """A ``tokenizers.Tokenizer`` of the model, truncating at ``max_seq_length`` and never padding: the model
    folder's ``tokenizer.json``, else a copy of ``fallback``'s (a Hugging Face fast tokenizer's) backend."""
    from tokenizers import Tokenizer

    file = model_dir / "tokenizer.json" if model_dir is not None else None
    if file is not None and file.is_file():
        tokenizer = Tokenizer.from_file(str(file))
    elif fallback is not None:
        tokenizer = Tokenizer.from_str(fallback.backend_tokenizer.to_str())
    else:
        raise EmbeddingError(f"no tokenizer.json under {model_dir}")
    tokenizer.enable_truncation(max_seq_length)
    tokenizer.no_padding()
    return tokenizer


class OnnxQueryEncoder:
    """Tokenizer → ONNX Runtime transformer → mean pooling → L2 normalisation, as sentence-transformers does."""

    def __init__(self, session: Any, tokenizer: Any, max_seq_length: int, path: Path) -> None:
        self._session = session
        self.tokenizer = tokenizer
        """A ``tokenizers.Tokenizer`` (``fast_tokenizer``): truncates at the sequence length, never pads."""
        self._max_seq_length = max_seq_length
        self._inputs = [i.name for i in session.get_inputs()]
        self.path = path

    def __call__(self, texts: Sequence[str]) -> Any:
        return self.grouped(texts, max_ratio=float("inf"))

    def grouped(
        self, texts: Sequence[str], max_ratio: float = GROUP_MAX_RATIO, max_size: int | None = None, workers: int = 1
    ) -> Any:
        """Like calling the encoder, but texts of very different token counts run in separate batches (each padded to
        its own longest), rows in input order: a long query no longer makes its short sub-queries pay for padding.
        ``max_size`` caps a batch and ``workers`` runs that many batches at once (many stored texts at once)."""
        encodings = self.tokenizer.encode_batch(list(texts))
        groups = length_groups([len(e.ids) for e in encodings], max_ratio, max_size)

        def run(group: list[int]) -> tuple[list[int], Any]:
            return group, self._run(_padded([encodings[i] for i in group]))

        out: Any = None
        if workers > 1 and len(groups) > 1:
            with ThreadPoolExecutor(min(workers, len(groups)), thread_name_prefix="onnx-batch") as pool:
                done = list(pool.map(run, groups))
        else:
            done = [run(group) for group in groups]
        for group, vectors in done:
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[group] = vectors
        return out

    def _run(self, batch: dict[str, Any]) -> Any:
        feed = {name: batch[name] for name in self._inputs}
        hidden = self._session.run(None, feed)[0]
        mask = batch["attention_mask"].astype(np.float32)[..., None]
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return (pooled / norms).astype(np.float32)


def _padded(encodings: Sequence[Any]) -> dict[str, Any]:
    """One batch's ``input_ids``, ``attention_mask`` and ``token_type_ids``, right-padded with zeros."""
    width = max((len(e.ids) for e in encodings), default=0)
    batch = {name: np.zeros((len(encodings), width), dtype=np.int64) for name in ONNX_INPUT_NAMES}
    for row, e in enumerate(encodings):
        n = len(e.ids)
        batch["input_ids"][row, :n] = e.ids
        batch["attention_mask"][row, :n] = e.attention_mask
        batch["token_type_ids"][row, :n] = e.type_ids
    return batch


def _session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only; a corrupt file is reported through our warning
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy-waiting between queries
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _load_checked(
    path: Path, tokenizer: Any, max_seq_length: int, threads: int, reference: Reference, min_cosine: float | None = None
) -> Any:
    encoder = OnnxQueryEncoder(_session(path, threads), tokenizer, max_seq_length, path)
    probe = list(PROBE_TEXTS)
    got, want = encoder(probe), np.asarray(reference(probe), dtype=np.float32)
    cosine = float((got * want).sum(axis=1).min()) if got.shape == want.shape else float("nan")
    if not cosine >= (PROBE_MIN_COSINE if min_cosine is None else min_cosine):
        raise EmbeddingError(f"ONNX vectors differ from the reference path (cosine {cosine:.6f})")
    return encoder


def probe_path(graph: Path) -> Path:
    """Where the reference vectors that ``graph`` was checked against are kept."""
    return graph.with_name(graph.name + PROBE_SUFFIX)


def keep_probe(graph: Path, reference: Reference) -> None:
    """Write the reference path's probe vectors next to a graph that passed its check (atomically; kept vectors that
    already agree with them are left alone)."""
    target = probe_path(graph)
    vectors = np.asarray(reference(list(PROBE_TEXTS)), dtype=np.float32)
    kept = stored_reference(graph) if target.is_file() else None
    if kept is not None and np.allclose(kept(list(PROBE_TEXTS)), vectors, atol=1e-6):
        return

    def write(tmp: Path) -> None:
        with tmp.open("wb") as fh:
            np.savez(fh, texts=np.array(PROBE_TEXTS), vectors=vectors)

    export_atomically(target, write)


def stored_reference(graph: Path) -> Reference | None:
    """The probe vectors kept next to ``graph`` as a reference path (for ``PROBE_TEXTS`` only), or None when there
    are none or they are unreadable or were taken on other texts."""
    try:
        with np.load(probe_path(graph), allow_pickle=False) as data:
            texts, vectors = tuple(data["texts"].tolist()), np.asarray(data["vectors"], dtype=np.float32)
    except (OSError, ValueError, KeyError) as exc:
        if not isinstance(exc, FileNotFoundError):
            logger.warning("probe vectors next to %s are unreadable (%s)", graph, exc)
        return None
    if texts != PROBE_TEXTS or vectors.ndim != 2 or vectors.shape[0] != len(texts):
        return None

    def reference(probe: list[str]) -> Any:
        if tuple(probe) != texts:
            raise EmbeddingError("stored probe vectors answer only the probe texts")
        return vectors

    return reference


def open_stored_encoder(
    model_dir: Path, cache_dir: Path, *, max_seq_length: int, threads: int | None = None
) -> tuple[OnnxQueryEncoder, Reference] | None:
    """The fp32 encoder of ``model_dir`` from the cache without torch: only a graph that passed its check against
    torch before (its probe vectors are kept) and passes it again against them. Returns it with that stored
    reference (for checking an int8 copy), or None (not cached yet, or rejected: the torch path takes over).

    Raises:
        Exception: onnxruntime or tokenizers is missing (the caller falls back).
    """
    import onnxruntime  # noqa: F401

    graph = cached_path(cache_dir, model_dir)
    reference = stored_reference(graph) if graph.is_file() else None
    if reference is None:
        return None
    tokenizer = fast_tokenizer(model_dir, None, max_seq_length)
    try:
        encoder = _load_checked(graph, tokenizer, max_seq_length, threads or default_threads(), reference)
    except Exception as exc:
        logger.warning("cached ONNX graph %s failed its check without torch (%s); loading torch", graph, exc)
        return None
    return encoder, reference


def quantized_path(fp32_path: Path) -> Path:
    """Where the int8 copy of the fp32 graph at ``fp32_path`` lives (keyed by it and the quantizer's versions)."""
    versions = ",".join(f"{dist}={_version(dist)}" for dist in QUANTIZE_LIBRARIES)
    digest = hashlib.sha256(f"{fp32_path.name}|{versions}|int8-per-channel".encode()).hexdigest()[:12]
    return fp32_path.with_name(f"{fp32_path.stem}-int8-{digest}.onnx")


class _DropRootWarnings(logging.Filter):
    """The quantizer logs advice ("consider pre-processing") on the root logger; it is not ours to print."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.WARNING


def quantize_int8(source: Path, target: Path) -> None:
    """Write the dynamically quantized (int8 weights, per output channel) copy of ``source`` to ``target``."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    quiet = _DropRootWarnings()
    root.addFilter(quiet)
    try:
        quantize_dynamic(str(source), str(target), per_channel=True, weight_type=QuantType.QInt8)
    finally:
        root.removeFilter(quiet)


def _open_cached(path: Path, write: Export, load: Callable[[Path], OnnxQueryEncoder], what: str) -> tuple[Any, bool]:
    """Load the graph at ``path``, writing it first with ``write`` when missing and once more when the cached file
    does not load; returns the encoder and whether it was written."""
    written = False
    if not path.is_file():
        logger.info("writing the %s to %s", what, path)
        export_atomically(path, write)
        written = True
    try:
        return load(path), written
    except Exception as exc:
        if written:
            raise
        logger.warning("cached %s %s is unusable (%s); writing it again", what, path, exc)
    export_atomically(path, write)
    return load(path), True


def open_quantized_encoder(
    fp32_path: Path,
    *,
    tokenizer: Any,
    max_seq_length: int,
    reference: Reference,
    threads: int | None = None,
) -> tuple[OnnxQueryEncoder, bool]:
    """Load (quantizing ``fp32_path`` first if needed) the int8 query encoder; returns it and whether it quantized.

    Raises:
        Exception: the quantizer is missing, or quantizing or loading failed (the caller keeps the fp32 encoder).
    """
    n = threads or default_threads()
    return _open_cached(
        quantized_path(fp32_path),
        lambda target: quantize_int8(fp32_path, target),
        lambda path: _load_checked(path, tokenizer, max_seq_length, n, reference, QUANTIZED_MIN_COSINE),
        "int8 query encoder",
    )


def open_encoder(
    model_dir: Path,
    cache_dir: Path,
    *,
    export: Export,
    tokenizer: Any,
    max_seq_length: int,
    reference: Reference,
    threads: int | None = None,
) -> tuple[OnnxQueryEncoder, bool]:
    """Load (exporting first if needed) the ONNX query encoder of ``model_dir``; returns it and whether it exported.

    Raises:
        Exception: onnxruntime is missing, or the export or a fresh export's load failed (the caller falls back).
    """
    import onnxruntime  # noqa: F401  (fail before a pointless export when the runtime is missing)

    n = threads or default_threads()
    encoder, exported = _open_cached(
        cached_path(cache_dir, model_dir),
        export,
        lambda path: _load_checked(path, tokenizer, max_seq_length, n, reference),
        "ONNX export of the embedding model",
    )
    try:
        keep_probe(encoder.path, reference)
    except OSError as exc:  # the next start loads torch again; nothing else is lost
        logger.warning("could not keep probe vectors next to %s (%s)", encoder.path, exc)
    return encoder, exported
