"""The physics guard for restructurings: the refactor-check scenes (benchmarks/
refactor_check.py: every example file, pyramids, small worlds, a pile, a joint grid, bullets,
each solver) stepped 90 steps on both CPU executors give bitwise the hashes stored for this
CPU model. A change that means to leave the physics alone must leave them; a change that
means to change it stores new ones (python -m benchmarks.refactor_check --update) with the
reason in its commit.

Hashes are stored per CPU model (Taichi compiles for the CPU it runs on): on a model with
none stored the two executors are still compared with each other, and the test says so.
"""

import warnings

import pytest

from benchmarks import refactor_check


# The slow tier (pytest -m slow; python -m benchmarks.refactor_check runs the same check
# alone): every refactor-check scene, 90 steps on each executor (~30-50 s).
@pytest.mark.slow
def test_refactor_check_scenes_step_to_the_stored_hashes_on_both_executors():
    from fx2d_gpu.device import runtime

    runtime.ensure_initialized("cpu")  # the hashes are the CPU backend's
    hashes = refactor_check.hashes()
    assert len(hashes) >= 15
    for name, (team_hash, per_stage_hash) in hashes.items():
        assert team_hash == per_stage_hash, f"{name}: the team and a launch per stage differ"
    stored = refactor_check.stored_hashes()
    if stored is None:
        warnings.warn(
            f"no refactor hashes stored for {refactor_check.machine_key()!r}: "
            "only the executors were compared (python -m benchmarks.refactor_check "
            "--update stores them)",
            stacklevel=1,
        )
        return
    changed = {
        name: (stored.get(name), team_hash)
        for name, (team_hash, _) in hashes.items()
        if stored.get(name) != team_hash
    }
    assert not changed, f"(stored, now) differ: {changed}"
    assert set(stored) == set(hashes), "a stored scene is no longer checked"
