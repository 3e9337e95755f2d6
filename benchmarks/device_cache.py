"""A CUDA kernel cache made without a GPU, so that a lent GPU machine starts warm.

    python -m benchmarks.device_cache [--parts lease ...] [--scale 4]
        [--slim-wheels] [--cache DIR]

Why: a lent machine starts bare, and its 15 minutes of device time go first to Taichi
compiling the engine's kernels: each step option measured compiles the step's kernel anew
(the large pyramid's first step on the grid team took 51.9 s of a 60-s part on the H200,
2026-12-04). Taichi's offline cache keeps a kernel after Taichi's own passes, keyed by the
kernel, the sizes of its fields and the compile configuration, and a kernel found there
skips those passes: on the CUDA stub the large pyramid's first two steps (XPBD) took 58.3 s
with an empty cache and 30.1 s with that run's (LLVM's code generation still runs); the
H200's compile benchmark 10.35 s cold, 5.02 s warm (`NVIDIA_H200/compile.csv`).

The keys do not depend on the machine that compiles: Python 3.11 and 3.12 (the GPU
machine's, with its wheel of Taichi 1.7.4) give the same keys and the same cached kernels,
as do two checkouts at different paths (checked by hand, 2026-12-05). What Taichi reads of
the device when it starts enters them (its loops' grid: multiprocessors x blocks a
multiprocessor x 2), and the CUDA stand-in driver (cuda_stub.c) answers those queries as an
H100 or H200 does (sm_90, 132 multiprocessors, 32 blocks each: a grid of 8,448 blocks, as
the H200's kernel profile showed). So `benchmarks/device_run.sh`'s parts, run
here on the stub (Taichi compiles every kernel they launch; nothing runs, every answer is
zero), write the kernels the lent machine would compile, under its keys. Where the stub's
zeros lead the host elsewhere than the GPU's answers would, those kernels are simply not
in the cache.

It:

1. with --slim-wheels, takes Taichi's C API library out of the Taichi wheel in .whl/
   (device_run.sh's header says how it gets there; `taichi/_lib/c_api` is 20 MB of the
   wheel's 56, a library for C programs that Taichi's Python package never loads) and
   compresses its core library with LZMA (34.1 -> 22.9 MiB): the working tree, the wheels
   and the cache travel in 64 MiB together, and the wheel alone took 54 MiB;
2. runs the parts (default: PARTS, the lease) on the stub with FX2D_DEVICE_WARMING set
   (no checks: their answers would be zeros) and their caps times FX2D_DEVICE_CAP_SCALE
   (this machine compiles slower), Taichi's offline cache in a folder of its own;
3. packs that folder as .ticache/cuda-<hash of the engine's sources>.txz (xz), the older
   archives removed, and says how much of the 64 MiB is left.

Then carry [".whl", ".ticache"]: device_run.sh unpacks the archive where Taichi looks and
writes kernel_cache.txt (kernels at hand, kernels compiled there anew). A change to
fx2d_gpu changes the keys: make the archive again after one (device_run.sh names the
archive this tree's sources would have beside the one carried).
"""

import argparse
import hashlib
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

from .ptx_registers import stub_environment

ROOT = Path(__file__).resolve().parent.parent
#: What travels to a lent machine: the working tree and the carried paths (the device
#: tool's README, Limits).
CARRY_LIMIT_BYTES = 64 << 20
#: The folder device_run.sh unpacks an archive from (git-ignored).
CACHE_FOLDER = ".ticache"
#: Entries of Taichi's wheel that its Python package never loads: the C API's library.
SLIMMED_PREFIX = "taichi/_lib/c_api/"
#: Entries of a wheel larger than this are recompressed with LZMA (bytes).
LZMA_ENTRY_BYTES = 1 << 20
#: device_run.sh's parts whose kernels the cache holds: the lease's (129 kernels, 15 min
#: on the stub on the 2-core VM). With lease_more's, Taichi's cache had reached 642 MiB
#: (~40 MiB of xz: a kernel packs to ~1/16 alone and no better beside the others) when
#: stopped halfway, over what travels; lease_more runs on the machine the lease left
#: warm, with the cache the lease left there.
PARTS = ("lease",)
#: The lent GPUs' compute capability (H100, H200).
ARCH = "sm_90"


def engine_sources_hash(root: Path = ROOT) -> str:
    """12 hex digits of SHA-256 over fx2d_gpu's .py files, concatenated in byte order of
    their paths: the same as device_run.sh's `find fx2d_gpu -name '*.py' -print0 |
    LC_ALL=C sort -z | xargs -0 cat | sha256sum`."""
    paths = sorted(
        p.relative_to(root).as_posix() for p in (root / "fx2d_gpu").rglob("*.py") if p.is_file()
    )
    digest = hashlib.sha256()
    for path in paths:
        digest.update((root / path).read_bytes())
    return digest.hexdigest()[:12]


def slim_wheel(wheel: Path) -> int:
    """Rewrite `wheel` without the entries under SLIMMED_PREFIX (and their lines in its
    RECORD), its entries over LZMA_ENTRY_BYTES compressed with LZMA (a zip method that
    pip's installer reads, as Python's zipfile does: Taichi's core library 34.1 -> 22.9
    MiB); the bytes it saved (0 where there was nothing to do). The files installed are
    the same, byte for byte."""
    before = wheel.stat().st_size
    with zipfile.ZipFile(wheel) as source:
        entries = source.infolist()
        dropped = {e.filename for e in entries if e.filename.startswith(SLIMMED_PREFIX)}
        recompressed = {
            e.filename
            for e in entries
            if e.file_size > LZMA_ENTRY_BYTES and e.compress_type != zipfile.ZIP_LZMA
        }
        if not dropped and not (recompressed - dropped):
            return 0
        slim = wheel.with_suffix(".slim")
        with zipfile.ZipFile(slim, "w") as target:
            for entry in entries:
                if entry.filename in dropped:
                    continue
                data = source.read(entry)
                if entry.filename.endswith(".dist-info/RECORD"):
                    lines = data.decode().splitlines(keepends=True)
                    data = "".join(
                        line for line in lines if line.split(",", 1)[0] not in dropped
                    ).encode()
                method = entry.compress_type
                if entry.filename in recompressed:
                    method = zipfile.ZIP_LZMA
                target.writestr(entry, data, compress_type=method)
    slim.replace(wheel)
    return before - wheel.stat().st_size


def travelling_bytes(root: Path = ROOT, carried=(".whl", CACHE_FOLDER)) -> int:
    """Bytes that travel to a lent machine: tracked and untracked-not-ignored files, and
    the carried folders."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    total = sum((root / name.decode()).stat().st_size for name in listed if name)
    for folder in carried:
        total += sum(p.stat().st_size for p in (root / folder).rglob("*") if p.is_file())
    return total


def warm(parts, scale: int, cache: Path, root: Path = ROOT) -> None:
    """device_run.sh's `parts` on the CUDA stub, Taichi's offline cache in `cache`."""
    out = Path(tempfile.mkdtemp(prefix="fx2d_warm_out_"))
    env = {
        **stub_environment(ARCH),
        "TI_OFFLINE_CACHE_FILE_PATH": str(cache),
        "FX2D_DEVICE_WARMING": "1",
        "FX2D_DEVICE_CAP_SCALE": str(scale),
        "FX2D_DEVICE_ARCH": "cuda",
        "LEASE_S": "100000",  # only the parts' own (scaled) caps
        "OUT": str(out),
        "PYTHON": sys.executable,
    }
    for part in parts:
        start = time.perf_counter()
        print(f"== {part} on the CUDA stub (caps x{scale})", flush=True)
        subprocess.run(
            ["bash", str(root / "benchmarks" / "device_run.sh"), part],
            env=env,
            cwd=root,
            stdout=subprocess.DEVNULL,
            check=False,
        )
        kernels = len(list(cache.glob("*.tic")))
        print(
            f"   {time.perf_counter() - start:.0f} s; {kernels} kernels cached so far "
            f"(its log: {out / (part + '.log')})",
            flush=True,
        )


def pack(cache: Path, root: Path = ROOT) -> Path:
    """`cache` as root/.ticache/cuda-<engine_sources_hash>.txz, the older archives
    removed."""
    folder = root / CACHE_FOLDER
    folder.mkdir(exist_ok=True)
    for old in folder.glob("cuda-*.txz"):
        old.unlink()
    archive = folder / f"cuda-{engine_sources_hash(root)}.txz"
    with tarfile.open(archive, "w:xz") as tar:
        for path in sorted(cache.iterdir()):
            if path.suffix in (".tic", ".tcb"):
                tar.add(path, arcname=path.name)
    return archive


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.device_cache", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--parts", nargs="*", default=list(PARTS))
    parser.add_argument(
        "--scale", type=int, default=4, help="caps times this (default 4: a 2-core CPU)"
    )
    parser.add_argument(
        "--slim-wheels", action="store_true", help="drop Taichi's C API from .whl/taichi-*"
    )
    parser.add_argument(
        "--cache", default=None, help="Taichi's offline cache folder (default: a new one)"
    )
    args = parser.parse_args(argv)
    if args.slim_wheels:
        for wheel in sorted((ROOT / ".whl").glob("taichi-*.whl")):
            print(f"  {wheel.name}: {slim_wheel(wheel) / 2**20:.1f} MiB less", flush=True)
    cache = Path(args.cache) if args.cache else Path(tempfile.mkdtemp(prefix="fx2d_ticache_"))
    cache.mkdir(parents=True, exist_ok=True)
    if args.parts:
        warm(args.parts, args.scale, cache)
    archive = pack(cache)
    left = CARRY_LIMIT_BYTES - travelling_bytes()
    print(
        f"  saved {archive.relative_to(ROOT)} ({archive.stat().st_size / 2**20:.1f} MiB, "
        f"{len(list(cache.glob('*.tic')))} kernels); with the working tree and .whl, "
        f"{left / 2**20:.1f} MiB of the carry's 64 left",
        flush=True,
    )
    if left < 0:
        raise SystemExit("over the carry's 64 MiB: --slim-wheels, or warm fewer parts")


if __name__ == "__main__":
    main()
