import os

import pytest

import fx2d_gpu.device.runtime as runtime

# Tests run on the CPU backend unless FX2D_TEST_ARCH says otherwise (e.g. "cuda" on a GPU box).
ARCH = os.environ.get("FX2D_TEST_ARCH", "cpu")
BACKEND = runtime.ensure_initialized(ARCH)


@pytest.fixture
def in_tmp_path(tmp_path):
    """The test's tmp_path as the working folder while it runs (the one before, after):
    for code that writes beside the process (ImGui's imgui.ini, a docs example's files)
    and for a check that nothing depends on the working folder. Returns tmp_path."""
    before = os.getcwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(before)


@pytest.fixture
def arch():
    # FX2D_TEST_ARCH=vulkan on a machine without the driver would test the CPU backend
    # again under another name.
    if ARCH not in ("cpu", "auto") and runtime.on_cpu():
        pytest.skip(
            f"FX2D_TEST_ARCH={ARCH}: that backend did not start here (Taichi runs on {BACKEND})"
        )
    return ARCH


def pytest_collection_modifyitems(config, items):
    """Tests that take the `arch` fixture run on FX2D_TEST_ARCH's backend: marked `backend`,
    so that a GPU run can select them (`-m backend`; the others name the CPU backend)."""
    for item in items:
        if "arch" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.backend)


#: The contact and joint solvers (Scene(solver=...)): a physics test that takes the `solver`
#: fixture runs for each, within bounds that hold for both or, where they differ, each
#: solver's own (derived in the test).
SOLVERS = ("xpbd", "soft_step")


@pytest.fixture(params=SOLVERS)
def solver(request):
    return request.param
