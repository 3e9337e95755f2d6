import os

import pytest

import fx2d_gpu.runtime as runtime

# Tests run on the CPU backend unless FX2D_TEST_ARCH says otherwise (e.g. "cuda" on a GPU box).
ARCH = os.environ.get("FX2D_TEST_ARCH", "cpu")
runtime.ensure_initialized(ARCH)


@pytest.fixture
def arch():
    return ARCH
