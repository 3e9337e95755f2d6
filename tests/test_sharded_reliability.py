"""ShardedScene where real processes matter, on a local Ray cluster (issue 76 findings 8, 17).

The driver's rules (interrupted calls, restore's checks, snapshots of another scene,
get_state(out=)'s checks, a closed scene) are tested without Ray in
tests/test_sharded_driver.py; here, what needs Ray's own behaviour: close() from another
thread while step() waits on real actors, and a builder that kills its actor's process.
Skipped where Ray is not installed.
"""

import os
import signal
import sys
import threading
import time

import pytest

ray = pytest.importorskip("ray")

#: The slow tier (pytest -m slow), and `ray`, as tests/test_distributed.py: a real Ray
#: cluster (.ci/run runs the tests marked ray one after another in a process of their own,
#: so that two local clusters never start side by side).
pytestmark = [pytest.mark.slow, pytest.mark.ray]

import fx2d_gpu as fx  # noqa: E402
from fx2d_gpu.distributed import ShardedScene, ShardLostError, sharded_scene  # noqa: E402

DT = 1.0 / 60.0

# The builders travel to the actors by value: the actors need not import the tests package.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module", autouse=True)
def local_cluster():
    """A local Ray cluster of 2 CPUs for this module."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=150 * 2**20
    )
    yield
    ray.shutdown()


def build(n_worlds: int) -> fx.Scene:
    """A box on a ground."""
    scene = fx.Scene(n_worlds=n_worlds, arch="cpu")
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0)
    scene.add_box((0.0, 0.5), (0.5, 0.5))
    return scene


def builder_that_kills_its_process(n_worlds: int) -> fx.Scene:
    """A builder whose process dies (as a segfault in user code, or the OOM killer)."""
    os.kill(os.getpid(), signal.SIGKILL)


def free_cpus_within(seconds: float) -> float:
    """Ray's free CPUs once they are back to 2 (no actor holds one), or when `seconds` end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        free = ray.available_resources().get("CPU", 0.0)
        if free == 2.0:
            return free
        time.sleep(0.25)
    return ray.available_resources().get("CPU", 0.0)


def test_close_from_another_thread_ends_a_waiting_step():
    """Finding 8: close() while step(n) waits on the shards: the call raises RuntimeError
    within seconds and starts no new actor (the cluster's CPUs come back)."""
    sharded = ShardedScene(4, build, n_shards=2, timeout=60)
    pids = [info["pid"] for info in sharded.shard_info()]
    longest = getattr(sharded_scene, "MAX_STEPS_PER_CALL", 100_000)
    outcome = []

    def stepping():
        try:
            sharded.step(DT, n=longest)
            outcome.append("returned")
        except BaseException as error:  # noqa: BLE001 (what the waiting call raised)
            outcome.append(error)

    worker = threading.Thread(target=stepping, daemon=True)
    worker.start()
    time.sleep(3.0)
    assert worker.is_alive()  # still stepping
    sharded.close()
    worker.join(30)
    assert not worker.is_alive(), "the waiting step() did not return after close()"
    assert isinstance(outcome[0], RuntimeError) and "closed" in str(outcome[0])
    assert [shard.pid for shard in sharded._shards] == pids  # no shard rebuilt
    assert free_cpus_within(20.0) == 2.0  # no actor started after close()


def test_builder_that_kills_its_process_is_reported_as_such():
    """Finding 17: the builder's process dies: ShardLostError saying so, at once, not a
    timeout blaming the cluster's resources."""
    start = time.monotonic()
    with pytest.raises(ShardLostError, match="process died while building its scene"):
        ShardedScene(4, builder_that_kills_its_process, n_shards=2, timeout=30)
    assert time.monotonic() - start < 25.0
    assert free_cpus_within(20.0) == 2.0  # its actors are gone
