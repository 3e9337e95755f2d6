"""Which few worlds changed: the log of stores that the per-world values' caches follow.

WorldShapes and WorldParams each hold a `version` that changes with every edit, and a log of
their last LOG_LENGTH stores (the bodies and worlds each wrote). A cache made at some
version (a world's grid cell, the device's shape or material rows) redoes the rows of the
worlds stored since, where stores alone changed the values since then: a vector env's
restarts write a few worlds of thousands at each step, and the rest stay as they were, on
the host and on the device. Anything else (a new gravity, a load from a snapshot, too many
stores) leaves no such answer, and the cache is made whole again.
"""

import itertools

import numpy as np

#: Every version of every owner: unique, so that a copy's caches never match another's.
VERSIONS = itertools.count()
#: The stores an owner remembers: enough for the restarts of one vector env step (the
#: Levels' four set_shape_params and one set_body_params) several times over.
LOG_LENGTH = 32
#: The attribute the log is kept in (left out of pickles and copies with the caches).
LOG = "_store_log"


def note_store(owner, bodies: np.ndarray, worlds: np.ndarray) -> None:
    """`owner` stored values of `bodies` in `worlds` ((k,) indices): a new version, logged."""
    before, owner.version = owner.version, next(VERSIONS)
    log = owner.__dict__.setdefault(LOG, [])
    log.append((before, owner.version, np.array(bodies), np.array(worlds)))
    del log[:-LOG_LENGTH]


def note_change(owner) -> None:
    """`owner` changed otherwise: a new version that no store leads to (caches made before
    it are made whole again)."""
    owner.version = next(VERSIONS)


def stored_since(owner, version: int) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """The (bodies, worlds) of each store since `version`, where stores alone changed
    `owner` since (an empty list: nothing changed); None where something else did, or too
    long ago."""
    stores, at = [], owner.version
    for before, after, bodies, worlds in reversed(owner.__dict__.get(LOG, ())):
        if at == version:
            break
        if after != at:
            return None
        stores.append((bodies, worlds))
        at = before
    return stores if at == version else None


def distinct(indices: list[np.ndarray], size: int) -> np.ndarray:
    """(k,) int64: the distinct values of the index arrays `indices` (each in [0, size)),
    sorted: np.unique's answer through a mask of `size` flags, which takes ~1 ms where
    np.unique hashed the 262,144 rows of a store of 4 bodies in 65,536 worlds for ~50."""
    mask = np.zeros(size, bool)
    for values in indices:
        mask[values] = True
    return np.flatnonzero(mask)
