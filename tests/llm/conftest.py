from __future__ import annotations

import importlib.util

import pytest

from tests.llm.providers_server import _provider_server_module, provider_server

__all__ = ["_provider_server_module", "provider_server"]


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    """One torch thread for the bandit and router tests; the gateway tests do not need torch at all."""
    if importlib.util.find_spec("torch") is None:
        return
    import torch

    torch.set_num_threads(1)
