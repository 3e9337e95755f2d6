"""benchmarks/device_cache.py and device_run.sh's carried kernel cache: what a lent GPU
machine is given so that it starts warm (no GPU, no Taichi kernel here)."""

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from benchmarks.device_cache import SLIMMED_PREFIX, engine_sources_hash, pack, slim_wheel

ROOT = Path(__file__).resolve().parents[1]


def _tree(tmp_path: Path) -> Path:
    """A checkout's skeleton: device_run.sh and a few engine sources, in an order where
    byte order and a locale's differ (upper case, a sub-folder, an underscore)."""
    root = tmp_path / "tree"
    (root / "benchmarks").mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "device_run.sh", root / "benchmarks")
    for name, text in {
        "fx2d_gpu/a.py": "A = 1\n",
        "fx2d_gpu/B.py": "B = 2\n",
        "fx2d_gpu/_c.py": "C = 3\n",
        "fx2d_gpu/sub/d.py": "D = 4\n",
        "fx2d_gpu/notes.txt": "not a source\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _run_part(
    root: Path, part: str, python: str, cache: Path, path: str = "", arch: str = "cuda"
) -> subprocess.CompletedProcess:
    env = {
        "PATH": path or os.environ["PATH"],
        "FX2D_DEVICE_ARCH": arch,
        "OUT": str(root / "out"),
        "PYTHON": python,
        "TI_OFFLINE_CACHE_FILE_PATH": str(cache),
    }
    return subprocess.run(
        ["bash", str(root / "benchmarks" / "device_run.sh"), part],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("xz", ["tar's", "none: Python's tarfile"])
def test_a_carried_cache_is_unpacked_and_its_misses_counted(tmp_path, xz):
    """device_run.sh unpacks .ticache/cuda-*.txz (as pack() writes it) where Taichi looks
    on CUDA (with tar, or Python's tarfile where no xz is at hand), and at the end of the
    part says how many kernels came with it and how many the part compiled (a part whose
    process writes one kernel: 1), naming the archive its own sources would have: the
    shell's hash of fx2d_gpu's sources is engine_sources_hash."""
    root = _tree(tmp_path)
    path = ""
    if xz.startswith("none"):
        broken = tmp_path / "no_xz"
        broken.mkdir()
        (broken / "xz").write_text("#!/bin/sh\nexit 1\n")
        (broken / "xz").chmod(0o755)
        path = f"{broken}{os.pathsep}{os.environ['PATH']}"
    made = tmp_path / "made"
    made.mkdir()
    for name in ("Taaa.tic", "Tbbb.tic", "ticache.tcb"):
        (made / name).write_bytes(name.encode() * 100)
    archive = pack(made, root)
    assert archive.name == f"cuda-{engine_sources_hash(root)}.txz"
    fake = tmp_path / "python"
    # A stand-in for Python: the part's process (-m) compiles one kernel into the cache;
    # asked what Taichi made of the device (-c), it says so.
    fake.write_text(
        '#!/bin/bash\n[[ $1 == -m ]] && touch "$TI_OFFLINE_CACHE_FILE_PATH/Tnew.tic"\n'
        '[[ $1 == -c ]] && echo "  Taichi here: (asked)"\nexit 0\n'
    )
    fake.chmod(0o755)
    cache = tmp_path / "ticache"
    done = _run_part(root, "bench", str(fake), cache, path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in cache.iterdir()) == [
        "Taaa.tic",
        "Tbbb.tic",
        "Tnew.tic",
        "ticache.tcb",
    ]
    assert (cache / "Taaa.tic").read_bytes() == b"Taaa.tic" * 100
    said, config = (root / "out" / "kernel_cache.txt").read_text().splitlines()
    assert f"2 kernels at hand from {archive.name} and earlier parts" in said
    assert f"(this tree's engine: {archive.name})" in said
    assert said.endswith("1 compiled here")
    assert config == "  Taichi here: (asked)"  # (where kernels were compiled anew)

    # A later part on the same machine: the index Taichi rewrote (here by hand) is kept,
    # not unpacked over; the kernel the first part compiled is at hand.
    (cache / "ticache.tcb").write_bytes(b"rewritten by Taichi")
    done = _run_part(root, "unknown", "true", cache, path)
    assert done.returncode == 2  # (the unknown part), after the cache's report
    assert (cache / "ticache.tcb").read_bytes() == b"rewritten by Taichi"
    said = (root / "out" / "kernel_cache.txt").read_text().splitlines()[-1]
    assert "3 kernels at hand" in said and said.endswith("0 compiled here")

    # Another engine's archive: unpacked all the same, the tree's own name beside it.
    archive.rename(archive.with_name("cuda-000000000000.txz"))
    (root / "fx2d_gpu" / "a.py").write_text("A = 5\n")
    (root / "out" / "kernel_cache.txt").unlink()
    done = _run_part(root, "unknown", "true", tmp_path / "other")
    assert done.returncode == 2  # (the unknown part), after the cache's report
    said = (root / "out" / "kernel_cache.txt").read_text()
    assert "from cuda-000000000000.txz" in said
    assert f"(this tree's engine: cuda-{engine_sources_hash(root)}.txz)" in said


def test_no_cache_is_unpacked_off_cuda(tmp_path):
    """Only CUDA's cache travels: on another backend the part runs as before."""
    root = _tree(tmp_path)
    made = tmp_path / "made"
    made.mkdir()
    (made / "Taaa.tic").write_bytes(b"x")
    pack(made, root)
    cache = tmp_path / "ticache"
    done = _run_part(root, "unknown", "true", cache, arch="vulkan")
    assert done.returncode == 2
    assert not cache.exists() and not (root / "out" / "kernel_cache.txt").exists()


def test_engine_sources_hash_changes_with_any_source_and_only_sources(tmp_path):
    root = _tree(tmp_path)
    first = engine_sources_hash(root)
    (root / "fx2d_gpu" / "notes.txt").write_text("edited\n")
    assert engine_sources_hash(root) == first
    (root / "fx2d_gpu" / "sub" / "d.py").write_text("D = 5\n")
    assert engine_sources_hash(root) != first


def _wheel(path: Path, files: dict) -> Path:
    record = "".join(f"{name},sha256=x,{len(data)}\n" for name, data in files.items())
    record += "taichi-1.7.4.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr("taichi-1.7.4.dist-info/RECORD", record)
    return path


def test_slim_wheel_drops_the_c_api_and_its_record_lines_and_nothing_else(tmp_path):
    """The C API's files and RECORD lines go, a large library is recompressed with LZMA,
    every other file is as it was, and a second pass changes nothing."""
    kept = {
        "taichi/__init__.py": b"import taichi._lib\n",
        "taichi/_lib/core/taichi_python.so": b"\x7fELF core" * 200_000,  # (over 1 MiB)
        "taichi/_lib/runtime/runtime_cuda.bc": b"BC" * 500,
    }
    dropped = {
        f"{SLIMMED_PREFIX}lib/libtaichi_c_api.so": b"\x7fELF c api" * 5000,
        f"{SLIMMED_PREFIX}include/taichi/taichi_core.h": b"// header\n" * 100,
    }
    wheel = _wheel(tmp_path / "taichi-1.7.4-cp312-cp312-manylinux_2_27_x86_64.whl", kept | dropped)
    saved = slim_wheel(wheel)
    assert saved > 0
    with zipfile.ZipFile(wheel) as slim:
        assert slim.testzip() is None
        methods = {e.filename: e.compress_type for e in slim.infolist()}
        assert methods["taichi/_lib/core/taichi_python.so"] == zipfile.ZIP_LZMA
        assert methods["taichi/__init__.py"] == zipfile.ZIP_DEFLATED
        names = set(slim.namelist())
        assert names == set(kept) | {"taichi-1.7.4.dist-info/RECORD"}
        assert all(slim.read(name) == data for name, data in kept.items())
        record = slim.read("taichi-1.7.4.dist-info/RECORD").decode()
    assert [line.split(",")[0] for line in record.splitlines()] == [
        *kept,
        "taichi-1.7.4.dist-info/RECORD",
    ]
    assert slim_wheel(wheel) == 0  # again: nothing left to drop


@pytest.mark.parametrize("folder", [".ticache", ".whl"])
def test_the_carried_folders_are_ignored_by_git(folder):
    """What the device run carries must not travel as tracked files too (the 64 MiB)."""
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", f"{folder}/x"], cwd=ROOT, check=False
    ).returncode
    assert ignored == 0
