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
    sorted: np.unique's answer, through a mask of `size` flags where they are many (~1 ms
    where np.unique sorted the 262,144 rows of a store of 4 bodies in 65,536 worlds for
    ~50), by np.unique where they are few against `size` (a restart of a few worlds: the
    mask of 65,536 worlds' 18 body slots took ~1 ms for ~500 rows)."""
    if sum(len(values) for values in indices) * 64 < size:
        return np.unique(np.concatenate([np.zeros(0, np.int64), *indices]).astype(np.int64))
    mask = np.zeros(size, bool)
    for values in indices:
        mask[values] = True
    return np.flatnonzero(mask)


def differing_row(arrays) -> int | None:
    """The first row (world) where one of `arrays` (each (n_worlds, ...)) differs from its
    row 0, or None where every row equals row 0 in all of them (NaN differs)."""
    differs = None
    for values in arrays:
        row = (values != values[:1]).reshape(len(values), -1).any(axis=1)
        differs = row if differs is None else differs | row
    found = np.flatnonzero(differs) if differs is not None else ()
    return int(found[0]) if len(found) else None


def wrote(stores: list[tuple[np.ndarray, np.ndarray]], body: int | None, worlds=None) -> bool:
    """Whether a store of `stores` (stored_since's) wrote `body` (None: any body) in one of
    `worlds` (a few world indices: uneven_since's two rows; None: in any world)."""
    for bodies, stored in stores:
        if body is not None and not (bodies == body).any():
            continue
        # (a comparison a world: np.isin sorts, ~20x the time for a few worlds)
        if worlds is None or any((stored == world).any() for world in worlds):
            return True
    return False


def uneven_since(owner, cache: str, columns: dict) -> dict:
    """Each of `columns`' first row that differs from row 0 (differing_row of the arrays
    that `columns[key]()` returns, each (n_worlds, ...); None: even), `key` a body (None:
    every body), kept in `owner`'s attribute `cache` by version:
    a key no store wrote since keeps its answer, and one whose two rows (0 and the one
    that differed) no store wrote keeps it too, so that a vector env's restarts of a few
    worlds compare no whole columns (65,536 worlds: ~10 ms a restart)."""
    kept = owner.__dict__.get(cache)
    if kept is not None and kept[0] == owner.version:
        return kept[1]
    stores = None if kept is None else stored_since(owner, kept[0])
    found = {}
    for key, arrays in columns.items():
        row = -1 if stores is None else kept[1].get(key, -1)  # (-1: to be compared)
        if row != -1 and wrote(stores, key, None if row is None else (0, row)):
            row = -1
        found[key] = differing_row(arrays()) if row == -1 else row
    owner.__dict__[cache] = (owner.version, found)
    return found
