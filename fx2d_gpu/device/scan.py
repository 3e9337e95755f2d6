"""Device prefix sum (ti.func), for kernels that size lists by counting first."""

import taichi as ti

from . import SCAN_BLOCK

#: Taichi's CPU architectures (the others are GPUs').
_CPU_ARCHS = ("x64", "arm64")
#: Scans compiled as a GPU's on any backend (a tool's switch: benchmarks/launches.py counts
#: a GPU's offloaded tasks on the CPU); the sums are the same either way (integers).
compiled_as_on_gpu = False


def on_gpu() -> bool:
    """Whether scans take a GPU's passes: Taichi's current backend is a GPU's, or
    compiled_as_on_gpu (compile-time: scans branch on it with ti.static)."""
    return compiled_as_on_gpu or ti.lang.impl.current_cfg().arch.name not in _CPU_ARCHS


def needs_items() -> bool:
    """Whether a pool's scans need ScanScratch.items (a sum a number): they take a GPU's
    passes, or Taichi has not started (a pool's size reckoned before: the larger)."""
    return ti.lang.impl.get_runtime().prog is None or on_gpu()


@ti.func
def exclusive_scan(scan: ti.template(), data: ti.template(), n, serial: ti.template()):
    """Exclusive prefix sum of data[0:n] in place, with the total written to data[n].

    On the CPU, three passes over blocks of SCAN_BLOCK: a thread sums a block, one thread
    scans the block sums (few), then a thread writes a block's running sums. In a kernel
    whose loops run serially (`serial`, see device.SERIAL_SLOTS) the blocks would buy
    nothing: one loop instead, which also compiles to far less (a blocked scan added ~45 ms
    to a kernel's first launch with the offline cache warm, a single loop ~0; measured on
    the 2-core CPU). On a GPU, a thread per number (_scan_on_gpu): no thread walks a block.
    Integer-only, so every way gives the same result, deterministically.
    Must be called at the top level of a kernel (its loops are the kernel's parallel loops);
    `scan`: the pool's ScanScratch.
    """
    if ti.static(serial):
        for _ in range(1):
            running = 0
            for i in range(n):
                count = data[i]
                data[i] = running
                running += count
            data[n] = running
    elif ti.static(on_gpu()):
        _scan_on_gpu(scan, data, n)
    else:
        block = ti.static(SCAN_BLOCK)
        n_blocks = (n + block - 1) // block
        for blk in range(n_blocks):
            total = 0
            for i in range(blk * block, ti.min(n, (blk + 1) * block)):
                total += data[i]
            scan.blocks[blk] = total
        for _ in range(1):  # one thread: the block sums are few
            running = 0
            for blk in range(n_blocks):
                value = scan.blocks[blk]
                scan.blocks[blk] = running
                running += value
            scan.blocks[n_blocks] = running
        for blk in range(n_blocks):
            running = scan.blocks[blk]
            for i in range(blk * block, ti.min(n, (blk + 1) * block)):
                count = data[i]
                data[i] = running
                running += count
        data[n] = scan.blocks[n_blocks]


@ti.func
def _scan_on_gpu(scan: ti.template(), data: ti.template(), n):
    """exclusive_scan on a GPU: a thread per number, per block sum and per chunk sum.

    A GPU thread that walks a block of SCAN_BLOCK numbers, loading one and storing its
    running sum before the next (the CPU's passes), waits for memory at each: ~256 trips
    to memory in a row, with a thread per 256 numbers (65,536 small worlds' pair counts:
    256 threads on the whole GPU), and the chunks' totals were a serial loop of their own.
    Here every thread sums the numbers before its own in its block (_sum_before: a warp's
    lanes read the same number at each turn, one load for all of them, from the L1 cache)
    into scan.items; the last of a block leaves the block's sum. The block sums are
    scanned the same way in chunks of SCAN_BLOCK blocks (SCAN_BLOCK**2 numbers), the
    chunks' sums by a thread per chunk over the chunks before it (n / 65,536 of them),
    and each number's sum is its three parts added. Four loops, each of a thread per item
    and none writing what another reads. More additions than the CPU's passes (SCAN_BLOCK
    / 2 a number): on a GPU a warp's are one load and add, and the turns are cheap."""
    block = ti.static(SCAN_BLOCK)
    n_blocks = (n + block - 1) // block
    n_chunks = (n_blocks + block - 1) // block
    for i in range(n):
        first = i - i % block
        before = _sum_before(data, first, i)
        scan.items[i] = before
        if i == ti.min(n, first + block) - 1:
            scan.blocks[i // block] = before + data[i]
    for blk in range(n_blocks):
        first = blk - blk % block
        before = _sum_before(scan.blocks, first, blk)
        scan.block_prefix[blk] = before
        if blk == ti.min(n_blocks, first + block) - 1:
            scan.chunks[blk // block] = before + scan.blocks[blk]
    for chunk in range(ti.max(n_chunks, 1)):  # (one where n is 0: data[0] = 0)
        before = _sum_before(scan.chunks, 0, chunk)
        scan.chunk_prefix[chunk] = before
        if chunk == n_chunks - 1:
            data[n] = before + scan.chunks[chunk]
        elif n_chunks == 0:
            data[n] = 0
    for i in range(n):
        blk = i // block
        data[i] = scan.items[i] + scan.block_prefix[blk] + scan.chunk_prefix[blk // block]


@ti.func
def _sum_before(values: ti.template(), first, end):
    """values[first] + ... + values[end - 1]."""
    total = 0
    for j in range(first, end):
        total += values[j]
    return total
