import contextlib
import os
import weakref

import pytest
import taichi as ti

import fx2d_gpu.device.runtime as runtime
from fx2d_gpu.device import residency

try:
    import fcntl
except ImportError:  # Windows: no pytest-xdist turns to take (the suite runs as one process)
    fcntl = None


@contextlib.contextmanager
def offline_cache_turn():
    """One test process at a time reads or writes Taichi's offline cache.

    Why: the README's test command runs the suite in two processes (pytest-xdist, -n 2).
    Taichi reads its cache's index when it starts and writes it when it stops, each under a
    lock file that it tries once: two workers starting or ending together, one of them
    warned "Lock ... failed" and wrote none of the kernels it compiled (seen here), so the
    next run compiled them again. Taking turns (an flock on a file of our own beside the
    cache) leaves Taichi's lock free for whoever holds the turn."""
    folder = runtime.offline_cache_path()
    if fcntl is None:
        yield
        return
    os.makedirs(folder, exist_ok=True)
    # Not *.lock: runtime.clear_stale_cache_locks removes old ones of those.
    with open(os.path.join(folder, "fx2d_tests.turn"), "a") as turn:
        fcntl.flock(turn, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(turn, fcntl.LOCK_UN)


# Tests run on the CPU backend unless FX2D_TEST_ARCH says otherwise (e.g. "cuda" on a GPU box).
ARCH = os.environ.get("FX2D_TEST_ARCH", "cpu")
with offline_cache_turn():
    BACKEND = runtime.ensure_initialized(ARCH)


def pytest_sessionfinish(session, exitstatus):
    """Taichi writes the kernels this process compiled into its offline cache when it stops
    (ti.reset): here, in this process's turn (offline_cache_turn), rather than at exit
    beside another worker's."""
    with offline_cache_turn():
        ti.reset()


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
    so that a GPU run can select them (`-m backend`; the others name the CPU backend).

    Tests marked `grows_pool` run first (in their order): the device pool they grow stays
    for the rest of the process, and a field's size is compiled into every kernel, so each
    kernel the tests before them used compiled again after them (the slow tier's dense pile
    ran after the benchmark suite's quick runs, whose scenes' kernels all compiled twice).

    Tests marked `vulkan_scenes` join the slow tier where the only Vulkan device is a
    software one: there each compiles its shaders on the CPU for minutes (the README's test
    command on a clean clone took 33:54 with them on a 2-core machine with Mesa's lavapipe,
    9:09 without them); on a Vulkan GPU they stay in the default tier."""
    on_vulkan = [item for item in items if item.get_closest_marker("vulkan_scenes")]
    if on_vulkan and runtime.software_vulkan_only():
        for item in on_vulkan:
            item.add_marker(pytest.mark.slow)
    for item in items:
        if "arch" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.backend)
    items.sort(key=lambda item: item.get_closest_marker("grows_pool") is None)


#: The device pool after the last test (a weak reference: a grown pool's predecessor is
#: freed) and the tests not marked grows_pool in which it grew (pytest_terminal_summary).
_pool_seen = {"pool": None, "grown_by": []}


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Note a test not marked grows_pool that grew the device pool: every kernel compiled
    before it compiles again for the grown pool (in CI's run with an empty cache, the
    65,536-worlds test growing it mid-suite cost 5.5 of the main suite's 21 minutes)."""
    pool, seen = residency.current_pool(), _pool_seen["pool"]
    if pool is None or (seen is not None and seen() is pool):
        return
    if seen is not None and item.get_closest_marker("grows_pool") is None:  # (not the first)
        _pool_seen["grown_by"].append(item.nodeid)
    _pool_seen["pool"] = weakref.ref(pool)


def pytest_terminal_summary(terminalreporter):
    grown_by = _pool_seen["grown_by"]
    if grown_by:
        terminalreporter.write_line(
            "the device pool grew in these tests, not marked grows_pool (every kernel "
            "compiled before each compiled again; a test so marked runs first): "
            + ", ".join(grown_by)
        )


#: The contact and joint solvers (Scene(solver=...)): a physics test that takes the `solver`
#: fixture runs for each, within bounds that hold for both or, where they differ, each
#: solver's own (derived in the test).
SOLVERS = ("xpbd", "soft_step")


@pytest.fixture(params=SOLVERS)
def solver(request):
    return request.param
