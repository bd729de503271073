"""Length grouping of the ONNX query path: which texts share a padded batch."""

from __future__ import annotations

import pytest

from hanzo_hub.vectors.onnx_runtime import length_groups


def test_a_long_query_runs_apart_from_its_short_sub_queries() -> None:
    assert length_groups([60, 12, 9, 20, 11], 2.0) == [[0], [3, 1, 4], [2]]


def test_similar_lengths_share_one_batch_and_every_index_appears_once() -> None:
    lengths = [17, 30, 16, 29, 31, 8, 8, 200, 5]
    groups = length_groups(lengths, 2.0)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for group in groups:
        assert max(lengths[i] for i in group) <= 2.0 * min(lengths[i] for i in group)
    assert [4, 1, 3, 0, 2] in groups  # 31..16: within a factor of 2
    assert length_groups([10, 10, 10], 2.0) == [[0, 1, 2]]
    assert length_groups([], 2.0) == []


@pytest.mark.parametrize("ratio", [1.0, 1.5, 3.0])
def test_groups_go_longest_first(ratio: float) -> None:
    lengths = [3, 9, 27, 81, 5, 50]
    groups = length_groups(lengths, ratio)
    heads = [lengths[g[0]] for g in groups]
    assert heads == sorted(heads, reverse=True)
