"""Device prefix sum (ti.func), for kernels that size lists by counting first."""

import taichi as ti

from . import SCAN_BLOCK, SCAN_CHUNK

#: Taichi's CPU architectures (the others are GPUs').
_CPU_ARCHS = ("x64", "arm64")
#: Scans compiled as a GPU's on any backend (a tool's switch: benchmarks/launches.py counts
#: a GPU's offloaded tasks on the CPU); the sums are the same either way (integers).
compiled_as_on_gpu = False


def on_gpu() -> bool:
    """Whether scans take a GPU's passes: Taichi's current backend is a GPU's, or
    compiled_as_on_gpu (compile-time: scans branch on it with ti.static)."""
    return compiled_as_on_gpu or ti.lang.impl.current_cfg().arch.name not in _CPU_ARCHS


@ti.func
def exclusive_scan(scan: ti.template(), data: ti.template(), n, serial: ti.template()):
    """Exclusive prefix sum of data[0:n] in place, with the total written to data[n].

    In parallel: three passes over blocks of SCAN_BLOCK (block sums, a serial scan of the
    sums, then each block's running sum); on a GPU the block sums are scanned a chunk of
    SCAN_CHUNK per thread, and only the chunks' totals serially (scan_block_sums: a
    GPU thread's serial loop is slow, a CPU's cheaper than another loop's launch). In a
    kernel whose loops run serially (`serial`,
    see device.SERIAL_SLOTS) the blocks would buy nothing: one loop instead, which also
    compiles to far less (a blocked scan added ~45 ms to a kernel's first launch with the
    offline cache warm, a single loop ~0; measured on the 2-core CPU). Integer-only, so
    both give the same result, deterministically.
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
    else:
        block = ti.static(SCAN_BLOCK)
        n_blocks = (n + block - 1) // block
        for blk in range(n_blocks):
            total = 0
            for i in range(blk * block, ti.min(n, (blk + 1) * block)):
                total += data[i]
            scan.blocks[blk] = total
        if ti.static(on_gpu()):
            n_chunks = (n_blocks + SCAN_CHUNK - 1) // SCAN_CHUNK
            for chunk in range(n_chunks):
                scan_chunk(scan, chunk, n_blocks)
            for _ in range(1):  # one thread: the chunks are few (n / 16,384)
                scan_chunk_totals(scan, n_chunks, n_blocks)
        else:
            for _ in range(1):  # one thread: the block sums are few
                running = 0
                for blk in range(n_blocks):
                    value = scan.blocks[blk]
                    scan.blocks[blk] = running
                    running += value
                scan.blocks[n_blocks] = running
        for blk in range(n_blocks):
            running = block_offset(scan, blk)
            for i in range(blk * block, ti.min(n, (blk + 1) * block)):
                count = data[i]
                data[i] = running
                running += count
        data[n] = scan.blocks[n_blocks]


@ti.func
def scan_chunk(scan: ti.template(), chunk, n_blocks):
    """The block sums of `chunk` (SCAN_CHUNK of them) replaced by their exclusive prefix sum
    inside the chunk, the chunk's total in scan.chunks[chunk]."""
    running = 0
    for blk in range(chunk * SCAN_CHUNK, ti.min(n_blocks, (chunk + 1) * SCAN_CHUNK)):
        value = scan.blocks[blk]
        scan.blocks[blk] = running
        running += value
    scan.chunks[chunk] = running


@ti.func
def scan_chunk_totals(scan: ti.template(), n_chunks, n_blocks):
    """The chunks' totals replaced by their exclusive prefix sum (one thread), the whole
    total in scan.blocks[n_blocks] (where the CPU's serial scan leaves it)."""
    running = 0
    for chunk in range(n_chunks):
        value = scan.chunks[chunk]
        scan.chunks[chunk] = running
        running += value
    scan.blocks[n_blocks] = running


@ti.func
def block_offset(scan: ti.template(), blk):
    """What the numbers before block `blk` sum to, once the block sums are scanned: on a GPU
    the block's offset in its chunk plus the chunk's."""
    offset = scan.blocks[blk]
    if ti.static(on_gpu()):
        offset += scan.chunks[blk // SCAN_CHUNK]
    return offset
