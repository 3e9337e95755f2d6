"""Indices listed by a small key, in index order, with no counter that every thread adds to
(ti.func; a counting sort).

A list built with an atomic cursor per key (`out[atomic_add(cursor[key], 1)] = i`) queues
every thread's atomic on a few addresses: on a GPU they are served one after the other at
the L2 cache (65,536 small worlds' half a million constraints in one colour: the count's
loop and the fill's took 0.22 ms each a step on an H200, two of the kernel profile's tasks
whose PTX holds one atomic add each; a 1M pile's ~2M constraints more), and the list's
order is the threads' race. Here each chunk of LIST_CHUNK indices is one thread's: it
counts its keys into counters of its own (`counts[key * n_chunks + chunk]`, key-major so
that neighbouring threads write neighbouring counters), a prefix sum over the counters
gives each chunk's place for each key, and the thread writes its indices there in order. So
each key's indices come in index order, the same list on every backend and for any number
of threads.

Three steps, each at a kernel's top level (their loops are the kernel's parallel loops):

    count_by_key(key, source, counts, n, n_keys, serial)
    exclusive_scan(scan, counts, n_keys * chunks_of(n), serial)
    ... key_start(counts, key, n) and the total counts[n_keys * chunks_of(n)] read here ...
    place_by_key(key, source, counts, out, n, serial)

A team's members share the chunks (count_chunk and place_chunk, solver/team_stages.py's
group_by_color), meeting between the steps.

`key(source, i)`: a ti.func giving index i's key in [0, n_keys), or -1 where i is not listed
(place_by_key may take another key function than count_by_key, listing fewer of the
counted, whose ranges then stay unwritten). `counts` holds at least n_keys * chunks_of(n) + 1
entries (device.list_counts_length for the colour lists' keys).
"""

import taichi as ti

from . import LIST_CHUNK


@ti.func
def chunks_of(n):
    """Chunks of LIST_CHUNK indices that [0, n) takes."""
    return (n + LIST_CHUNK - 1) // LIST_CHUNK


@ti.func
def count_by_key(
    key: ti.template(),
    source: ti.template(),
    counts: ti.template(),
    n,
    n_keys,
    serial: ti.template(),
):
    """counts[k * chunks_of(n) + chunk]: the indices of `chunk` whose key is k, for every k
    in [0, n_keys) (count_chunk, a chunk a thread)."""
    n_chunks = chunks_of(n)
    ti.loop_config(serialize=serial)
    for chunk in range(n_chunks):
        count_chunk(key, source, counts, chunk, n_chunks, n, n_keys)


@ti.func
def count_chunk(
    key: ti.template(), source: ti.template(), counts: ti.template(), chunk, n_chunks, n, n_keys
):
    """count_by_key's counts of one chunk. Its counters are its thread's alone: plain
    stores."""
    for k in range(n_keys):
        counts[k * n_chunks + chunk] = 0
    _walk_chunk(key, source, counts, counts, chunk, n_chunks, n, False)


@ti.func
def _walk_chunk(
    key: ti.template(),
    source: ti.template(),
    counts: ti.template(),
    out: ti.template(),
    chunk,
    n_chunks,
    n,
    place: ti.template(),
):
    """Each listed index of the chunk, in order, one more on its key's counter, after it is
    written to out at the counter where `place` (place_chunk; else counted only)."""
    for i in range(chunk * LIST_CHUNK, ti.min(n, (chunk + 1) * LIST_CHUNK)):
        k = key(source, i)
        if k >= 0:
            entry = k * n_chunks + chunk
            if ti.static(place):
                out[counts[entry]] = i
            counts[entry] = counts[entry] + 1  # not `+=`: an atomic in a parallel loop


@ti.func
def key_start(counts: ti.template(), k, n):
    """Where key k's indices start in the list (between the prefix sum and place_by_key)."""
    return counts[k * chunks_of(n)]


@ti.func
def place_by_key(
    key: ti.template(),
    source: ti.template(),
    counts: ti.template(),
    out: ti.template(),
    n,
    serial: ti.template(),
):
    """out[...] = i for each listed index i, each key's in index order, at the places the
    prefix sum gave counts (place_chunk, a chunk a thread)."""
    n_chunks = chunks_of(n)
    ti.loop_config(serialize=serial)
    for chunk in range(n_chunks):
        place_chunk(key, source, counts, out, chunk, n_chunks, n)


@ti.func
def place_chunk(
    key: ti.template(),
    source: ti.template(),
    counts: ti.template(),
    out: ti.template(),
    chunk,
    n_chunks,
    n,
):
    """place_by_key's indices of one chunk; its counters end as the chunk's end of each key's
    range."""
    _walk_chunk(key, source, counts, out, chunk, n_chunks, n, True)
