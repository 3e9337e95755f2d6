"""store_log: which worlds' rows changed since a cache was made, and which columns of
per-world values are uneven (some world differs from world 0), answered from the stores
since the last answer, checked against comparing every column whole."""

import numpy as np
import pytest

from fx2d_gpu.model import store_log


class _Owner:
    """Per-world values of 3 bodies in 8 worlds, as WorldShapes and WorldParams keep
    theirs (a version, a store log)."""

    def __init__(self):
        self.version = next(store_log.VERSIONS)
        self.values = np.zeros((8, 3, 2))


def test_uneven_columns_follow_the_stores_as_a_whole_comparison_does():
    rng = np.random.default_rng(3)
    owner = _Owner()
    columns = {body: (lambda b=body: (owner.values[:, b],)) for body in range(3)}
    columns[None] = lambda: (owner.values,)
    for step in range(300):
        if rng.random() < 0.05:
            owner.values[:] = rng.integers(0, 2)  # changed otherwise: every world even
            store_log.note_change(owner)
        else:
            bodies = np.sort(rng.choice(3, int(rng.integers(1, 3)), replace=False))
            worlds = np.sort(rng.choice(8, int(rng.integers(1, 4)), replace=False))
            # Few values, so that columns often turn even again.
            owner.values[np.ix_(worlds, bodies)] = rng.integers(0, 2, (len(worlds), len(bodies), 1))
            store_log.note_store(owner, bodies, worlds)
        if rng.random() < 0.7:  # asked after some stores, not every one
            found = store_log.uneven_since(owner, "_kept", columns)
            for key, arrays in columns.items():
                (values,) = arrays()
                expected = np.flatnonzero((values != values[:1]).reshape(8, -1).any(axis=1))
                if len(expected):
                    # Some world that differs from world 0 (not necessarily the first).
                    assert found[key] is not None and (values[found[key]] != values[0]).any()
                else:
                    assert found[key] is None, (step, key)


@pytest.mark.parametrize("size", [1000, 1_000_000])  # (a mask of flags; np.unique)
def test_distinct_is_np_unique(size):
    rng = np.random.default_rng(0)
    for count in (0, 50):
        parts = [rng.integers(0, size, int(rng.integers(0, count + 1))) for _ in range(5)]
        found = store_log.distinct(parts, size)
        assert found.dtype == np.int64
        assert np.array_equal(found, np.unique(np.concatenate(parts)).astype(np.int64))
    assert np.array_equal(store_log.distinct([], size), np.zeros(0, np.int64))
