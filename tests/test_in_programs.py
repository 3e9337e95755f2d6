"""fx2d_gpu inside a user's program (issue 18): threads, copies and pickling.

References are the same scenes run alone, one after the other: every comparison is bitwise.
"""

import copy
import pickle
import subprocess
import sys
import textwrap

import numpy as np

from fx2d_gpu.demos import demo_rain

from .helpers import DT, assert_bitwise_equal, fingerprint, rig


def test_deepcopy_and_pickle_give_independent_scenes_that_continue_bitwise(arch):
    original = rig(arch)
    for _ in range(40):
        original.step(DT)
    original.set_joint_target(0, 5.0)
    original.apply_force(3, (0.0, 20.0))  # pending: travels with the copies
    copied = copy.deepcopy(original)
    unpickled = pickle.loads(pickle.dumps(original))
    assert copied.step_count == unpickled.step_count == 40
    for scene in (original, copied, unpickled):
        for _ in range(40):
            scene.step(DT)
    expected = fingerprint(original)
    assert_bitwise_equal(fingerprint(copied), expected, "deepcopy")
    assert_bitwise_equal(fingerprint(unpickled), expected, "pickle")
    copied.step(DT)  # independent: stepping the copy leaves the original alone
    assert_bitwise_equal(fingerprint(original), expected, "original after the copy stepped")
    fresh = copy.deepcopy(demo_rain(arch=arch, bodies=10))  # never stepped: no snapshot yet
    fresh.step(DT)
    assert np.isfinite(fresh.get_state().position).all()


_THREADS = textwrap.dedent("""
    import threading
    import numpy as np
    import fx2d_gpu as fx
    from fx2d_gpu.demos import demo_rain

    def build(kind):
        if kind == "rain":
            return demo_rain(arch="{arch}", bodies=30)
        scene = fx.Scene(arch="{arch}", n_worlds=3)
        scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0)
        for i in range(8):
            scene.add_circle((0.3 * i - 1.0, 1.0 + 0.6 * i), 0.25)
        return scene

    def run(scene, out, key):
        for _ in range(80):
            scene.step(1 / 60)
            scene.contacts(None)
        out[key] = scene.get_state().position

    kinds = ["rain", "balls", "rain", "balls"]
    alone = {{}}
    for i, kind in enumerate(kinds):
        run(build(kind), alone, i)
    together = {{}}
    threads = [threading.Thread(target=run, args=(build(kind), together, i))
               for i, kind in enumerate(kinds)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("same", all(np.array_equal(together[i], alone[i]) for i in range(len(kinds))))
""")


def test_scenes_stepped_from_several_threads_equal_each_alone(arch):
    """Calls take turns on one process-wide lock (Taichi is not thread-safe); in a child
    process with a time limit, so a deadlock or crash fails the test."""
    out = subprocess.run(
        [sys.executable, "-c", _THREADS.format(arch=arch)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "same True" in out.stdout, out.stdout
