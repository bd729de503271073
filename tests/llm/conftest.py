from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
