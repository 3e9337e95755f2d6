"""Device prefix sum (ti.func), for kernels that size lists by counting first."""

import taichi as ti

from . import SCAN_BLOCK


@ti.func
def exclusive_scan(scan: ti.template(), data: ti.template(), n, serial: ti.template()):
    """Exclusive prefix sum of data[0:n] in place, with the total written to data[n].

    In parallel: three passes over blocks of SCAN_BLOCK (block sums, a serial scan of the
    sums, then each block's running sum). In a kernel whose loops run serially (`serial`,
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
