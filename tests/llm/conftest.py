from __future__ import annotations

import pytest

from tests.llm.providers_server import _provider_server_module, provider_server

__all__ = ["_provider_server_module", "provider_server"]


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
