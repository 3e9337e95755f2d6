"""Device prefix sum (ti.func), for kernels that size lists by counting first."""

import taichi as ti

from . import SCAN_BLOCK, scans_on_gpu


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
    # The one-thread parts are loops of one item (a loop inside scan_serially at the
    # kernel's top level would be a parallel one), serialized: a serial task runs on the
    # launching thread, where a parallel loop, even of one item, is handed to Taichi's CPU
    # thread pool and waited for (~0.1 ms a loop on the 2-core VM).
    if ti.static(serial):
        ti.loop_config(serialize=True)
        for _ in range(1):
            data[n] = scan_serially(data, 0, n)
    elif ti.static(scans_on_gpu()):
        _scan_on_gpu(scan, data, n)
    else:
        block = ti.static(SCAN_BLOCK)
        n_blocks = (n + block - 1) // block
        for blk in range(n_blocks):
            total = 0
            for i in range(blk * block, ti.min(n, (blk + 1) * block)):
                total += data[i]
            scan.blocks[blk] = total
        ti.loop_config(serialize=True)
        for _ in range(1):  # one thread: the block sums are few
            scan.blocks[n_blocks] = scan_serially(scan.blocks, 0, n_blocks)
        for blk in range(n_blocks):
            running = scan.blocks[blk]
            for i in range(blk * block, ti.min(n, (blk + 1) * block)):
                count = data[i]
                data[i] = running
                running += count
        data[n] = scan.blocks[n_blocks]


@ti.func
def scan_serially(values: ti.template(), first, end):
    """values[first:end] replaced by their exclusive prefix sum on this thread, in order;
    returns their total."""
    running = 0
    for i in range(first, end):
        value = values[i]
        values[i] = running
        running += value
    return running


@ti.func
def _scan_on_gpu(scan: ti.template(), data: ti.template(), n):
    """exclusive_scan on a GPU: a thread a number, then a thread a block sum.

    A GPU thread that walks a block of SCAN_BLOCK numbers, loading one and storing its
    running sum before the next (the CPU's passes), waits for memory at each: ~256 trips
    to memory in a row, with a thread per 256 numbers (65,536 small worlds' pair counts:
    256 threads on the whole GPU), and the chunks' totals were a serial loop of their own.
    Here every thread sums the numbers before its own in its block (number_pass), the
    block sums are summed the same way in chunks of SCAN_BLOCK blocks (block_pass), and
    each number's sum is its part and its block's (number_sum). Three loops, each of a
    thread an item and none writing what another of its loop reads. More additions than
    the CPU's passes (SCAN_BLOCK / 2 a number): a warp's are one load and one add a turn.
    solver/team_stages.py's team scan on a GPU takes the same passes."""
    n_blocks = (n + SCAN_BLOCK - 1) // SCAN_BLOCK
    for i in range(n):
        number_pass(scan, data, i, n, 0)
    for blk in range(n_blocks):
        block_pass(scan, blk, n_blocks)
    for i in range(ti.max(n, 1)):  # (one where n is 0: data[0] = 0)
        if i < n:
            data[i] = number_sum(scan, i, 0)
        if i == ti.max(n, 1) - 1:
            data[n] = blocks_total(scan, n_blocks)


@ti.func
def number_pass(scan: ti.template(), values: ti.template(), i, n, first_block):
    """A GPU scan's first pass, for number i of values[0:n], whose blocks are the scan's
    from first_block on (a team scans two arrays at once): the numbers before it in its
    block summed into scan.items (_sum_before: a warp's lanes, on neighbouring numbers,
    read the same number at each turn, one load for all of them, from the L1 cache), and
    the last of a block leaves the block's sum in scan.blocks."""
    first = i - i % SCAN_BLOCK
    blk = first_block + i // SCAN_BLOCK
    before = _sum_before(values, first, i)
    scan.items[blk * SCAN_BLOCK + i % SCAN_BLOCK] = before
    if i == ti.min(n, first + SCAN_BLOCK) - 1:
        scan.blocks[blk] = before + values[i]


@ti.func
def block_pass(scan: ti.template(), blk, n_blocks):
    """A GPU scan's second pass, for block sum blk of n_blocks: the block sums before it in
    its chunk of SCAN_BLOCK blocks summed into scan.block_prefix, and the last of a chunk
    leaves the chunk's sum in scan.chunks."""
    first = blk - blk % SCAN_BLOCK
    before = _sum_before(scan.blocks, first, blk)
    scan.block_prefix[blk] = before
    if blk == ti.min(n_blocks, first + SCAN_BLOCK) - 1:
        scan.chunks[blk // SCAN_BLOCK] = before + scan.blocks[blk]


@ti.func
def block_start(scan: ti.template(), blk):
    """After block_pass: what the numbers before block blk sum to (its chunk's part, and
    the chunks' before it: n / 65,536 of them, few)."""
    return scan.block_prefix[blk] + _sum_before(scan.chunks, 0, blk // SCAN_BLOCK)


@ti.func
def number_sum(scan: ti.template(), i, first_block):
    """After block_pass: the exclusive prefix sum at number i of the array whose blocks
    start at first_block (number_pass)."""
    blk = first_block + i // SCAN_BLOCK
    return scan.items[blk * SCAN_BLOCK + i % SCAN_BLOCK] + block_start(scan, blk)


@ti.func
def blocks_total(scan: ti.template(), n_blocks):
    """After block_pass: what all n_blocks blocks sum to."""
    return _sum_before(scan.chunks, 0, (n_blocks + SCAN_BLOCK - 1) // SCAN_BLOCK)


@ti.func
def _sum_before(values: ti.template(), first, end):
    """values[first] + ... + values[end - 1]."""
    total = 0
    for j in range(first, end):
        total += values[j]
    return total
