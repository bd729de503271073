"""Query categories from a light classifier on sentence embeddings.

A nearest-centroid classifier: each category has a few hand-written prototype queries; their normalised mean embedding
is the centroid, and a temperature softmax over cosine similarities gives category probabilities. It costs one
(n_categories x dim) matrix-vector product per query. :meth:`CategoryClassifier.fit` replaces the centroids with the
means of labelled examples when a user has some.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["CATEGORIES", "PROTOTYPES", "CategoryClassifier", "Embed"]

FloatArray = npt.NDArray[np.float32]
Embed = Callable[[Sequence[str]], FloatArray]
"""Texts -> (n, dim) L2-normalised embeddings (the shared embedder, called in a worker thread by async callers)."""

CATEGORIES: tuple[str, ...] = (
    "code",
    "math",
    "creative",
    "factual_qa",
    "multimodal",
    "summarization",
    "translation",
    "tool_use",
)

PROTOTYPES: Mapping[str, tuple[str, ...]] = {
    "code": (
        "Write a Python function that reverses a linked list.",
        "Fix this bug in my JavaScript code: TypeError undefined is not a function.",
        "Implement a binary search tree in C++ with insert and delete.",
        "Write a SQL query that returns the top five customers by revenue.",
        "Explain what this regular expression does and refactor the code.",
    ),
    "math": (
        "Solve for x: 3x + 7 = 22.",
        "A train travels 60 miles per hour for 3 hours. How far does it go?",
        "Compute the integral of x squared times sin x.",
        "Prove that the square root of 2 is irrational.",
        "If she buys 4 apples at $2 each and pays with a $20 bill, how much change does she get?",
    ),
    "creative": (
        "Write a short poem about the ocean at night.",
        "Compose an engaging travel blog post about a trip to Hawaii.",
        "Pretend to be a pirate captain and describe your ship.",
        "Write the opening scene of a mystery novel.",
        "Draft a persuasive speech for a school election.",
    ),
    "factual_qa": (
        "What is the capital of Australia?",
        "Which of the following best describes the function of the mitochondria?",
        "Who wrote the Declaration of Independence?",
        "What are the main causes of the First World War?",
        "Which statement about the law of contracts is correct? A. B. C. D.",
    ),
    "multimodal": (
        "Describe what is happening in this image.",
        "Read the chart in the attached picture and tell me the trend.",
        "What objects can you see in this photo?",
        "Transcribe the text in this screenshot.",
        "Generate an image of a cat wearing a hat.",
    ),
    "summarization": (
        "Summarize the following article in three sentences.",
        "Give me a TL;DR of this meeting transcript.",
        "Extract the key points from this report.",
        "Condense this email thread into a short summary.",
        "Extract all names and dates mentioned in the following text.",
    ),
    "translation": (
        "Translate this sentence into French.",
        "How do you say good morning in Japanese?",
        "Translate the following paragraph from German to English.",
        "What does this Spanish phrase mean in English?",
        "Render this text in Simplified Chinese.",
    ),
    "tool_use": (
        "Search the web for today's weather in Paris.",
        "Book a meeting on my calendar for tomorrow at 3pm.",
        "Send an email to Alice with the quarterly report attached.",
        "Look up the latest stock price of Apple using the API.",
        "Create a new issue in the GitHub repository and assign it to me.",
    ),
}

CLASSIFIER_TEMPERATURE = 0.05


class CategoryClassifier:
    """Nearest-centroid category classifier over L2-normalised embeddings."""

    def __init__(self, centroids: FloatArray, categories: Sequence[str] = CATEGORIES) -> None:
        if centroids.shape[0] != len(categories):
            raise ValueError("one centroid per category")
        norms = np.linalg.norm(centroids, axis=1, keepdims=True)
        self.centroids: FloatArray = (centroids / np.maximum(norms, 1e-12)).astype(np.float32)
        self.categories = tuple(categories)

    @classmethod
    def from_prototypes(cls, embed: Embed, prototypes: Mapping[str, Sequence[str]] = PROTOTYPES) -> CategoryClassifier:
        """Build centroids by embedding the prototype queries (one embedder call)."""
        categories = tuple(prototypes)
        texts = [t for c in categories for t in prototypes[c]]
        vectors = embed(texts)
        centroids, start = [], 0
        for c in categories:
            n = len(prototypes[c])
            centroids.append(vectors[start : start + n].mean(axis=0))
            start += n
        return cls(np.stack(centroids).astype(np.float32), categories)

    def fit(self, vectors: FloatArray, labels: Sequence[str]) -> None:
        """Replace the centroids of the labelled categories with the mean of their examples."""
        index = {c: i for i, c in enumerate(self.categories)}
        for c in set(labels):
            rows = vectors[[i for i, lab in enumerate(labels) if lab == c]]
            mean = rows.mean(axis=0)
            self.centroids[index[c]] = mean / max(float(np.linalg.norm(mean)), 1e-12)

    def probabilities(self, vector: FloatArray) -> FloatArray:
        """Softmax over cosine similarity to each centroid; ``vector`` is (dim,) or (n, dim)."""
        logits = (vector @ self.centroids.T) / CLASSIFIER_TEMPERATURE
        logits = logits - logits.max(axis=-1, keepdims=True)
        e = np.exp(logits)
        out: FloatArray = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
        return out

    def classify(self, vector: FloatArray) -> str:
        """The most likely category of one query."""
        return self.categories[int(np.argmax(self.probabilities(vector)))]
