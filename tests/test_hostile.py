"""Property-based: random valid and invalid scenes and calls (tests/hostile_calls.py, with
hypothesis) give a clear exception or a finite, usable scene, never a crash."""

import os
import subprocess
import sys
from pathlib import Path


def test_random_scenes_and_calls_never_crash():
    script = Path(__file__).with_name("hostile_calls.py")
    run = subprocess.run(
        [sys.executable, str(script), "150"],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=os.getcwd()),
    )
    assert run.returncode == 0, (run.returncode, run.stdout[-3000:], run.stderr[-5000:])
    stepped, steps = map(int, run.stdout.split("hostile: ok")[-1].split())
    assert stepped >= 20 and steps >= 5  # the examples were not all refused early
