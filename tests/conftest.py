import os

import pytest
import torch


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@pytest.fixture
def kernel_device():
    """Where the Triton kernels run: the interpreter on CPU (CI), else a CUDA GPU."""
    if interpreting():
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    pytest.skip("kernel tests need TRITON_INTERPRET=1 or a CUDA GPU")


def pytest_collection_modifyitems(config, items):
    gpu_ok = torch.cuda.is_available() and not interpreting()
    skip = pytest.mark.skip(reason="needs a CUDA GPU without TRITON_INTERPRET")
    for item in items:
        if "gpu" in item.keywords and not gpu_ok:
            item.add_marker(skip)
