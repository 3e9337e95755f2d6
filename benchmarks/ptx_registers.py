"""Registers, stack and spills of each CUDA kernel a scene's steps compile: Taichi's PTX run
through NVIDIA's assembler.

    python -m benchmarks.ptx_registers [--scenes NAME ...] [--worlds W] [--solver NAME ...]
        [--ptxas PATH] [--results DIR]

Taichi 1.7.4 compiles a kernel to PTX with LLVM and hands it to the CUDA driver; it never
runs ptxas, so nothing says how many registers a thread of the small worlds' kernel takes or
whether it spills to local memory (issue 74's first item). Here Taichi starts with
`print_kernel_asm` (each compiled module's PTX written to the working directory as
taichi_kernel_nvptx_NNNN.ptx) and the offline cache off (a cached kernel is not compiled,
so nothing would be written), the scenes take two steps, and `ptxas -v` assembles each PTX
file for the architecture its `.target` line names. CUDA only, with ptxas (on PATH, a CUDA
toolkit's under /usr/local, or Triton's; --ptxas names another).

Saves benchmarks/results/<device>/ptx_registers.csv: per scene, solver and kernel entry
(Taichi's offloaded task), the registers a thread, the stack frame and the spill stores
and loads in bytes; prints the entries that spill or take the most registers. Kernels a
scene compiled for an earlier scene of this run are not written again.
"""

import argparse
import datetime
import glob
import gzip
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from fx2d_gpu.device import runtime

from .common import TAICHI_OPTIONS, device_name, save_csv, taichi_options
from .kernel_profile import build_scene

DT = 1.0 / 60.0
SCENES = ("batched_small", "large_pyramid")
SOLVERS = ("xpbd", "soft_step")
#: Lines of ptxas -v's report, per entry function.
_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")
_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.MULTILINE)


def parse_ptxas_report(text: str) -> list[dict]:
    """The entries of `ptxas -v`'s report (its stderr): [{entry, arch, registers,
    stack_frame_bytes, spill_store_bytes, spill_load_bytes}], in the report's order. An
    entry's lines follow its "Compiling entry function" line; an entry without a line of
    some kind keeps 0 there."""
    entries = []
    for line in text.splitlines():
        found = _ENTRY.search(line)
        if found:
            entries.append(
                {
                    "entry": found.group(1),
                    "arch": found.group(2),
                    "registers": 0,
                    "stack_frame_bytes": 0,
                    "spill_store_bytes": 0,
                    "spill_load_bytes": 0,
                }
            )
            continue
        if not entries:
            continue
        frame = _FRAME.search(line)
        if frame:
            entries[-1].update(
                stack_frame_bytes=int(frame.group(1)),
                spill_store_bytes=int(frame.group(2)),
                spill_load_bytes=int(frame.group(3)),
            )
        registers = _REGISTERS.search(line)
        if registers:
            entries[-1]["registers"] = int(registers.group(1))
    return entries


def assemble(ptx: Path, ptxas: str) -> tuple[list[dict], str]:
    """ptxas -v on one PTX file, for the architecture its .target names: (its entries, "")
    where it assembles, else ([], the first lines ptxas wrote). A failure is tried again
    as relocatable code (-c, where unresolved externals are allowed): on an H200 on
    2026-12-04 ptxas gave up on Taichi's first module with status 255, reason unread."""
    target = _TARGET.search(ptx.read_text())
    arch = target.group(1) if target else "sm_90"
    said = ""
    for extra in ([], ["-c"]):
        report = subprocess.run(
            [ptxas, "-v", *extra, f"-arch={arch}", str(ptx), "-o", os.devnull],
            capture_output=True,
            text=True,
        )
        if report.returncode == 0:
            return parse_ptxas_report(report.stderr + report.stdout), ""
        said = " | ".join((report.stderr + report.stdout).strip().splitlines()[:4])
        said = f"status {report.returncode}: {said}"
    return [], said


def find_ptxas() -> str | None:
    """ptxas on PATH, else a CUDA toolkit's under /usr/local, else the one Triton ships
    (PyTorch's machines have Triton); None where none is found."""
    found = shutil.which("ptxas") or next(
        iter(sorted(glob.glob("/usr/local/cuda*/bin/ptxas"))), None
    )
    if found:
        return found
    try:
        import triton
    except ImportError:
        return None
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    return str(bundled) if bundled.exists() else None


def run(
    names=None, solvers=SOLVERS, worlds=65_536, ptxas=None, results=None, compile_options=None
) -> list[dict]:
    """ptxas -v on every module the scenes' first two steps compile; compile_options: Taichi
    options over the engine's (common.TAICHI_OPTIONS, e.g. {"gpu_max_reg": 128}), named in
    the rows' taichi_options column."""
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise SystemExit("ptxas not found: put the CUDA toolkit's bin on PATH or give --ptxas")
    folder = Path(tempfile.mkdtemp(prefix="fx2d_ptx_"))
    os.chdir(folder)  # where Taichi writes the PTX
    # Each module's PTX written to the working directory; nothing taken from the cache.
    compile_options = compile_options or {}
    backend = runtime.ensure_initialized(
        "cuda", taichi_options={**compile_options, "offline_cache": False, "print_kernel_asm": True}
    )
    tag = ",".join(f"{key}={value}" for key, value in compile_options.items())
    if backend != "cuda":
        raise SystemExit(f"Taichi started on {backend!r}, not CUDA: no PTX to read")
    date, seen, rows, failed = datetime.date.today().isoformat(), set(), [], []
    for name in names or SCENES:
        for solver in solvers:
            scene = build_scene(name, "cuda", solver, worlds=worlds)
            for _ in range(2):
                scene.step(DT)
            scene.get_state()  # the steps' answers read: every launch has run
            new = sorted(p for p in folder.glob("taichi_kernel_nvptx_*.ptx") if p not in seen)
            seen.update(new)
            for ptx in new:
                entries, failure = assemble(ptx, ptxas)
                if failure:
                    failed.append(ptx)
                    print(f"  ptxas failed on {ptx.name} ({name}/{solver}): {failure}")
                for entry in entries:
                    rows.append(
                        {
                            "date": date,
                            "device": device_name(backend),
                            "scene": name,
                            "solver": solver,
                            "worlds": scene.n_worlds,
                            "bodies": scene.n_bodies * scene.n_worlds,
                            "ptx": ptx.name,
                            "taichi_options": tag,
                            **entry,
                        }
                    )
            del scene
    if failed and results:
        # The first two that failed, compressed, beside the CSV: read on any machine with
        # a ptxas (it needs no GPU).
        kept = Path(results) / "ptx_failed"
        kept.mkdir(parents=True, exist_ok=True)
        for ptx in failed[:2]:
            with open(ptx, "rb") as source, gzip.open(kept / f"{ptx.name}.gz", "wb") as sink:
                shutil.copyfileobj(source, sink)
        print(f"  {len(failed)} PTX files failed; the first kept in {kept}")
    if not rows:
        raise SystemExit(f"no PTX assembled in {folder}: was the kernel cache bypassed?")
    for row in sorted(rows, key=lambda r: (-r["spill_store_bytes"], -r["registers"]))[:15]:
        print(
            f"  {row['registers']:4d} regs  stack {row['stack_frame_bytes']:6d} B  spills "
            f"{row['spill_store_bytes']:6d}/{row['spill_load_bytes']:6d} B  "
            f"{row['scene']}/{row['solver']}  {row['entry']}",
            flush=True,
        )
    name = "ptx_registers" + "".join(f"_{k}-{v}" for k, v in compile_options.items())
    print("  saved", save_csv(backend, name, rows, results))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ptx_registers", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--scenes", nargs="*", choices=SCENES, default=None)
    parser.add_argument("--solver", nargs="*", choices=SOLVERS, default=list(SOLVERS))
    parser.add_argument("--worlds", type=int, default=65_536, help="small worlds (65,536)")
    parser.add_argument("--ptxas", default=None, help="ptxas to run (default: on PATH)")
    parser.add_argument("--results", default=None, help="results folder")
    parser.add_argument(
        "--taichi-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"a Taichi compile option, one of {', '.join(sorted(TAICHI_OPTIONS))}",
    )
    args = parser.parse_args(argv)
    try:
        compile_options = taichi_options(args.taichi_option)
    except ValueError as error:
        parser.error(f"--taichi-option: {error}")
    if args.worlds < 1:
        parser.error("--worlds must be positive")
    results = str(Path(args.results).resolve()) if args.results else None
    run(args.scenes, args.solver, args.worlds, args.ptxas, results, compile_options)


if __name__ == "__main__":
    main()
