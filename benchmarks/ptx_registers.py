"""Registers, stack and spills of each CUDA kernel a scene's steps compile: Taichi's PTX run
through NVIDIA's assembler.

    python -m benchmarks.ptx_registers [--scenes NAME ...] [--worlds W] [--solver NAME ...]
        [--no-gpu] [--arch sm_NN] [--ptxas PATH] [--results DIR]

Taichi 1.7.4 compiles a kernel to PTX with LLVM and hands it to the CUDA driver; it never
runs ptxas, so nothing says how many registers a thread of the small worlds' kernel takes or
whether it spills to local memory (issue 74's first item). Here Taichi starts with
`print_kernel_asm` (each compiled module's PTX written to the working directory as
taichi_kernel_nvptx_NNNN.ptx) and the offline cache off (a cached kernel is not compiled,
so nothing would be written), the scenes take two steps, and `ptxas -v` assembles each PTX
file for the GPU's architecture (--arch; by default the device's compute capability, as
its driver JIT-compiles Taichi's PTX, whose .target line says sm_86 on an sm_90 GPU). CUDA
only, with ptxas (on PATH, a CUDA toolkit's under /usr/local, or Triton's; --ptxas names
another).

--no-gpu: on a machine without a GPU. Registers and spills are properties of the compiled
code, not of the device, so Taichi runs on a stand-in CUDA driver (benchmarks/cuda_stub.c,
built with the C compiler into a temporary folder, the tool run again with it on the
library path): it describes a compute capability 9.0 GPU of 132 multiprocessors (an H200;
FX2D_STUB_CC_MAJOR, _MINOR, _MULTIPROCESSORS change it), launches nothing and reads back
zeros, so each scene compiles the kernels its host logic reaches with those answers (the
step's own kernels, the ones that matter, always). Checked against the H200 on 2026-12-04:
the small worlds' substeps kernel, 168 registers in Taichi's kernel profile there, is 168
here. Results go to benchmarks/results/CUDA_stub-<arch>/.

Saves benchmarks/results/<device>/ptx_registers.csv: per scene, solver and kernel entry
(Taichi's offloaded task), the registers a thread, the stack frame and the spill stores
and loads in bytes, the block's threads the PTX bounds it to (.maxntid: Taichi's block_dim;
with Taichi's .minnctapersm 2, a thread gets at most 65,536 / (2 * block) registers);
prints the entries that spill or take the most registers. Kernels a scene compiled for an
earlier scene of this run are not written again.
"""

import argparse
import datetime
import glob
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from fx2d_gpu.device import runtime

from .common import add_option_arguments, device_name, parsed_options, save_csv
from .kernel_profile import build_scene

DT = 1.0 / 60.0
SCENES = ("batched_small", "cart_poles", "large_pyramid")
SOLVERS = ("xpbd", "soft_step")
#: Lines of ptxas -v's report, per entry function.
_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)", re.MULTILINE)
#: An entry's launch bound in the PTX: `.visible .entry NAME(...)` then `.maxntid X, 1, 1`.
_MAX_THREADS = re.compile(r"\.entry\s+(\w+)\([^)]*\)\s*\.maxntid\s+(\d+)", re.DOTALL)
#: Set (to the architecture) in the tool's second run on the stand-in driver (--no-gpu).
_STUB_ENV = "FX2D_CUDA_STUB"
#: The stand-in CUDA driver's source (--no-gpu).
STUB_SOURCE = Path(__file__).with_name("cuda_stub.c")


def parse_ptxas_report(text: str) -> list[dict]:
    """The entries of `ptxas -v`'s report (its stderr): [{entry, arch, registers,
    stack_frame_bytes, spill_store_bytes, spill_load_bytes}], in the report's order. An
    entry's lines follow its "Compiling entry function" line; its frame line is the one
    after "Function properties for" the entry's own name (ptxas also reports the module's
    device functions, such as Taichi's taichi_assert_format, after an entry's lines); an
    entry without a line of some kind keeps 0 there."""
    entries, properties_of = [], None
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
        properties = _PROPERTIES.search(line)
        if properties:
            properties_of = properties.group(1)
            continue
        if not entries:
            continue
        frame = _FRAME.search(line)
        if frame and properties_of == entries[-1]["entry"]:
            entries[-1].update(
                stack_frame_bytes=int(frame.group(1)),
                spill_store_bytes=int(frame.group(2)),
                spill_load_bytes=int(frame.group(3)),
            )
        registers = _REGISTERS.search(line)
        if registers:
            entries[-1]["registers"] = int(registers.group(1))
    return entries


def assemble(ptx: Path, ptxas: str, arch: str | None = None) -> tuple[list[dict], str]:
    """ptxas -v on one PTX file, for the architecture its .target names: (its entries, "")
    where it assembles, else ([], the first lines ptxas wrote). A failure is tried again
    as relocatable code (-c, where unresolved externals are allowed): on an H200 on
    2026-12-04 ptxas gave up on Taichi's first module with status 255, reason unread."""
    text = ptx.read_bytes()
    if text.endswith(b"\0"):
        # Taichi writes the module's C string with its terminating NUL, which ptxas reads
        # as text and rejects ("Unexpected EOF", status 255: the H200 run of 2026-12-04).
        ptx.write_bytes(text.rstrip(b"\0"))
    target = _TARGET.search(ptx.read_text())
    arch = arch or (target.group(1) if target else "sm_90")
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


def launch_bounds(ptx_text: str) -> dict[str, int]:
    """Each entry's .maxntid (the block's threads Taichi compiled it for) in a PTX module."""
    return {name: int(threads) for name, threads in _MAX_THREADS.findall(ptx_text)}


def device_arch() -> str | None:
    """The CUDA device's architecture ("sm_90") from its driver's compute capability, or
    None where the driver cannot say."""
    major = runtime.cuda_device_attribute(runtime.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    minor = runtime.cuda_device_attribute(runtime.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    return f"sm_{major}{minor}" if major and minor is not None else None


def build_stub(folder: Path) -> Path:
    """The stand-in CUDA driver (cuda_stub.c) compiled into `folder` as libcuda.so.1 (and
    libcuda.so), with the C compiler on PATH (cc, gcc or clang)."""
    compiler = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if compiler is None:
        raise SystemExit("--no-gpu needs a C compiler (cc, gcc or clang) to build cuda_stub.c")
    library = folder / "libcuda.so.1"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(library), str(STUB_SOURCE)], check=True
    )
    (folder / "libcuda.so").symlink_to(library.name)
    return library


def stub_environment(arch: str) -> dict:
    """os.environ for a process that starts Taichi on the stand-in driver (cuda_stub.c,
    built into a new folder) describing a GPU of compute capability `arch` ("sm_90"), with
    the repository importable from any working directory."""
    folder = Path(tempfile.mkdtemp(prefix="fx2d_cuda_stub_"))
    build_stub(folder)
    major, minor = arch.removeprefix("sm_")[:-1], arch.removeprefix("sm_")[-1]
    return {
        **os.environ,
        "FX2D_STUB_CC_MAJOR": major,
        "FX2D_STUB_CC_MINOR": minor,
        "LD_LIBRARY_PATH": os.pathsep.join(
            p for p in (str(folder), os.environ.get("LD_LIBRARY_PATH", "")) if p
        ),
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(Path(__file__).parent.parent), os.environ.get("PYTHONPATH", "")) if p
        ),
    }


def run_without_gpu(argv: list[str], arch: str) -> int:
    """This tool run again on the stand-in driver (--no-gpu): its exit status."""
    env = {**stub_environment(arch), _STUB_ENV: arch}
    again = [sys.executable, "-m", "benchmarks.ptx_registers", *argv]
    return subprocess.run(again, env=env).returncode


def run(
    names=None,
    solvers=SOLVERS,
    worlds=65_536,
    ptxas=None,
    results=None,
    compile_options=None,
    arch=None,
    step_options=None,
) -> list[dict]:
    """ptxas -v on every module the scenes' first two steps compile, for `arch` (default:
    the device's, device_arch); compile_options: Taichi options over the engine's
    (common.TAICHI_OPTIONS, e.g. {"gpu_max_reg": 128}), named in the rows' taichi_options
    column; step_options: {StepOptions attribute: value} of the scenes (e.g.
    {"gpu_world_block": 128}), named in the step_options column."""
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
    step_options = step_options or {}
    options_tag = ",".join(f"{key}={value}" for key, value in step_options.items())
    if backend != "cuda":
        raise SystemExit(f"Taichi started on {backend!r}, not CUDA: no PTX to read")
    stub = os.environ.get(_STUB_ENV)
    arch = arch or stub or device_arch()
    device = f"CUDA_stub-{stub}" if stub else device_name(backend)
    date, seen, rows, failed = datetime.date.today().isoformat(), set(), [], []
    for name in names or SCENES:
        for solver in solvers:
            scene = build_scene(name, "cuda", solver, worlds=worlds, step_options=step_options)
            for _ in range(2):
                scene.step(DT)
            scene.get_state()  # the steps' answers read: every launch has run
            new = sorted(p for p in folder.glob("taichi_kernel_nvptx_*.ptx") if p not in seen)
            seen.update(new)
            for ptx in new:
                entries, failure = assemble(ptx, ptxas, arch)
                if failure:
                    failed.append(ptx)
                    print(f"  ptxas failed on {ptx.name} ({name}/{solver}): {failure}")
                bounds = launch_bounds(ptx.read_text())
                for entry in entries:
                    rows.append(
                        {
                            "date": date,
                            "device": device,
                            "scene": name,
                            "solver": solver,
                            "worlds": scene.n_worlds,
                            "bodies": scene.n_bodies * scene.n_worlds,
                            "ptx": ptx.name,
                            "taichi_options": tag,
                            "step_options": options_tag,
                            **entry,
                            "block_threads": bounds.get(entry["entry"], 0),
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
            f"  {row['registers']:4d} regs  block {row['block_threads']:4d}  stack "
            f"{row['stack_frame_bytes']:6d} B  spills "
            f"{row['spill_store_bytes']:6d}/{row['spill_load_bytes']:6d} B  "
            f"{row['scene']}/{row['solver']}  {row['entry']}",
            flush=True,
        )
    name = "ptx_registers" + "".join(
        f"_{k}-{v}" for k, v in {**compile_options, **step_options}.items()
    )
    print("  saved", save_csv(backend, name, rows, results, device))
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
        "--no-gpu",
        action="store_true",
        help="compile on a stand-in CUDA driver (cuda_stub.c): no GPU needed",
    )
    parser.add_argument(
        "--arch", default=None, help="ptxas's -arch (default: the device's; sm_90 with --no-gpu)"
    )
    add_option_arguments(parser, "gpu_world_block=128")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    step_options, compile_options = parsed_options(parser, args)
    if args.worlds < 1:
        parser.error("--worlds must be positive")
    if args.arch is not None and not re.fullmatch(r"sm_\d{2,3}a?", args.arch):
        parser.error(f"--arch must look like sm_90, not {args.arch!r}")
    results = str(Path(args.results).resolve()) if args.results else None
    if args.no_gpu and not os.environ.get(_STUB_ENV):
        again = [a for a in argv if a != "--no-gpu"]
        raise SystemExit(run_without_gpu(again, args.arch or "sm_90"))
    run(
        args.scenes,
        args.solver,
        args.worlds,
        args.ptxas,
        results,
        compile_options,
        args.arch,
        step_options,
    )


if __name__ == "__main__":
    main()
