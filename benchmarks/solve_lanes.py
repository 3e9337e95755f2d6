"""What Taichi's CPU backend makes of several contact manifolds solved as one unit of work:
the experiment behind docs/performance.md's "The soft step beside Box2D v3 built natively".

    python -m benchmarks.solve_lanes [--threads N] [--repeats R] [--lanes L ...]
        [--results DIR]

Box2D v3 solves a colour's manifolds 4 (SSE2) or 8 (AVX2) at a time in SIMD lanes
(b2ContactConstraintSIMD). Taichi gives a kernel no SIMD type to program, so the only way
to the same lanes is to hand LLVM several manifolds' arithmetic side by side and hope its
SLP vectoriser packs it. This measures whether it does, on a contact solve reduced to
Box2D's (a 2-point manifold: two soft normal rows, then two Coulomb friction rows, bodies
gathered by index and written back), not the engine's own solve_soft_contact:

- "one a work item": a manifold a loop iteration (the engine's layout);
- "L interleaved": L manifolds a loop iteration, every quantity an L-wide
  ti.types.vector (lane = manifold), branches as selects, so each operation of the L
  manifolds stands next to the others in program order (L = 1, 2, 4, 5, 10).

Columns: ns a manifold (best of the repeats, one pass over NC colours of PER_COLOR
manifolds, all in one launch), and how many of the optimised LLVM IR's instructions work
on `<N x float>` vectors (0: not one operation was vectorised).

Saves benchmarks/results/<device>/solve_lanes.csv.
"""

import argparse
import datetime
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import taichi as ti

from .common import device_name, print_table, save_csv

#: The bodies, a colour's manifolds (no two of a colour share a body) and the colours: a
#: large pyramid's counts (5,051 bodies, ~15,000 manifolds).
N_BODIES, PER_COLOR, N_COLORS = 5000, 2500, 6
N_MANIFOLDS = PER_COLOR * N_COLORS
LANE_COUNTS = (1, 2, 4, 5, 10)
#: What a pass writes: the layouts are checked against each other on these.
_SOLVED = ("v", "w", "normal_impulse", "tangent_impulse")
#: The soft rows' constants: a substep (s), the bias rate (1/s), mass and impulse scales
#: (soft_contacts.softness of 30 Hz, damping ratio 10, at 240 Hz), the push-out cap (m/s).
H, BIAS_RATE, MASS_SCALE, IMPULSE_SCALE, MAX_PUSH = 1.0 / 240.0, -30.0, 0.9, 0.1, 3.0


def _fields(rng):
    """The bodies' and manifolds' fields, filled as a resting pile's: points slightly
    overlapping (so the branches go one way, as they do in a pyramid), neighbouring bodies
    paired (colour c pairs body 2k + c % 2 with the next)."""
    f = {}
    for name in ("w", "dq", "inv_mass", "inv_inertia"):
        f[name] = ti.field(ti.f32, N_BODIES)
    for name in ("v", "dp"):
        f[name] = ti.Vector.field(2, ti.f32, N_BODIES)
    for name in ("body_a", "body_b"):
        f[name] = ti.field(ti.i32, N_MANIFOLDS)
    f["normal"] = ti.Vector.field(2, ti.f32, N_MANIFOLDS)
    f["friction"] = ti.field(ti.f32, N_MANIFOLDS)
    for name in ("arm_a", "arm_b"):
        f[name] = ti.Vector.field(2, ti.f32, (N_MANIFOLDS, 2))
    for name in ("separation", "normal_mass", "tangent_mass", "normal_impulse", "tangent_impulse"):
        f[name] = ti.field(ti.f32, (N_MANIFOLDS, 2))
    k = np.arange(N_MANIFOLDS)
    color = k // PER_COLOR
    first = (2 * (k % PER_COLOR) + color % 2) % N_BODIES
    f["body_a"].from_numpy(first.astype(np.int32))
    f["body_b"].from_numpy(((first + 1) % N_BODIES).astype(np.int32))
    f["v"].from_numpy(rng.normal(size=(N_BODIES, 2)).astype(np.float32))
    f["w"].from_numpy(rng.normal(size=N_BODIES).astype(np.float32))
    f["dp"].from_numpy((rng.normal(size=(N_BODIES, 2)) * 1e-3).astype(np.float32))
    f["dq"].from_numpy((rng.normal(size=N_BODIES) * 1e-3).astype(np.float32))
    f["inv_mass"].fill(1.0)
    f["inv_inertia"].fill(6.0)
    angle = rng.uniform(0.0, 2.0 * np.pi, N_MANIFOLDS)
    f["normal"].from_numpy(np.stack([np.cos(angle), np.sin(angle)], 1).astype(np.float32))
    f["friction"].fill(0.6)
    for name in ("arm_a", "arm_b"):
        f[name].from_numpy((rng.normal(size=(N_MANIFOLDS, 2, 2)) * 0.5).astype(np.float32))
    depth = -np.abs(rng.normal(size=(N_MANIFOLDS, 2))) * 1e-3 - 1e-4
    f["separation"].from_numpy(depth.astype(np.float32))
    f["normal_mass"].fill(0.3)
    f["tangent_mass"].fill(0.3)
    return f


def _solve_kernel(f, lanes: int):
    """A kernel that solves every colour in turn, `lanes` manifolds a loop iteration."""
    lane_vector = ti.types.vector(lanes, ti.f32)
    body_a, body_b, v, w = f["body_a"], f["body_b"], f["v"], f["w"]
    inv_mass, inv_inertia, dp, dq = f["inv_mass"], f["inv_inertia"], f["dp"], f["dq"]
    normal, friction, arm_a, arm_b = f["normal"], f["friction"], f["arm_a"], f["arm_b"]
    separation, normal_mass, tangent_mass = f["separation"], f["normal_mass"], f["tangent_mass"]
    normal_impulse, tangent_impulse = f["normal_impulse"], f["tangent_impulse"]

    @ti.func
    def gather(field: ti.template(), index, component: ti.template()):
        # lane l's value of field[index[l]] (component: -1 for a scalar field)
        result = lane_vector(0.0)
        for lane in ti.static(range(lanes)):
            if ti.static(component < 0):
                result[lane] = field[index[lane]]
            else:
                result[lane] = field[index[lane]][component]
        return result

    @ti.func
    def per_point(field: ti.template(), m, k, component: ti.template()):
        # lane l's value of field[m[l], k] (component: -1 for a scalar field)
        result = lane_vector(0.0)
        for lane in ti.static(range(lanes)):
            if ti.static(component < 0):
                result[lane] = field[m[lane], k]
            else:
                result[lane] = field[m[lane], k][component]
        return result

    @ti.func
    def solve(first):
        m = ti.Vector([first + lane for lane in ti.static(range(lanes))])
        a = ti.Vector([body_a[m[lane]] for lane in ti.static(range(lanes))])
        b = ti.Vector([body_b[m[lane]] for lane in ti.static(range(lanes))])
        vax, vay, wa = gather(v, a, 0), gather(v, a, 1), gather(w, a, -1)
        vbx, vby, wb = gather(v, b, 0), gather(v, b, 1), gather(w, b, -1)
        ma, ia = gather(inv_mass, a, -1), gather(inv_inertia, a, -1)
        mb, ib = gather(inv_mass, b, -1), gather(inv_inertia, b, -1)
        dx, dy = gather(dp, b, 0) - gather(dp, a, 0), gather(dp, b, 1) - gather(dp, a, 1)
        qa, qb = gather(dq, a, -1), gather(dq, b, -1)
        nx, ny = gather(normal, m, 0), gather(normal, m, 1)
        for row in ti.static(range(4)):  # the 2 normal rows, then the 2 friction rows
            k = row % 2
            rax, ray = per_point(arm_a, m, k, 0), per_point(arm_a, m, k, 1)
            rbx, rby = per_point(arm_b, m, k, 0), per_point(arm_b, m, k, 1)
            ux, uy = nx, ny
            if ti.static(row >= 2):
                ux, uy = ny, -nx
            closing_x = vbx - wb * rby - vax + wa * ray
            closing = closing_x * ux + (vby + wb * rbx - vay - wa * rax) * uy
            old, new = lane_vector(0.0), lane_vector(0.0)
            if ti.static(row < 2):
                s = (
                    (dx - qb * rby + qa * ray) * nx
                    + (dy + qb * rbx - qa * rax) * ny
                    + per_point(separation, m, k, -1)
                )
                apart = s > 0.0
                bias = ti.select(apart, s / H, ti.max(BIAS_RATE * s, -MAX_PUSH))
                mass_scale = ti.select(apart, 1.0, MASS_SCALE)
                impulse_scale = ti.select(apart, 0.0, IMPULSE_SCALE)
                mass = per_point(normal_mass, m, k, -1)
                old = per_point(normal_impulse, m, k, -1)
                new = ti.max(old - mass * mass_scale * (closing + bias) - impulse_scale * old, 0.0)
                for lane in ti.static(range(lanes)):
                    normal_impulse[m[lane], k] = new[lane]
            else:
                limit = gather(friction, m, -1) * per_point(normal_impulse, m, k, -1)
                mass = per_point(tangent_mass, m, k, -1)
                old = per_point(tangent_impulse, m, k, -1)
                new = ti.min(ti.max(old - mass * closing, -limit), limit)
                for lane in ti.static(range(lanes)):
                    tangent_impulse[m[lane], k] = new[lane]
            px, py = (new - old) * ux, (new - old) * uy
            vax, vay, wa = vax - ma * px, vay - ma * py, wa - ia * (rax * py - ray * px)
            vbx, vby, wb = vbx + mb * px, vby + mb * py, wb + ib * (rbx * py - rby * px)
        for lane in ti.static(range(lanes)):
            v[a[lane]] = ti.Vector([vax[lane], vay[lane]])
            w[a[lane]] = wa[lane]
            v[b[lane]] = ti.Vector([vbx[lane], vby[lane]])
            w[b[lane]] = wb[lane]

    @ti.kernel
    def solve_colors():
        for color in ti.static(range(N_COLORS)):
            for unit in range(PER_COLOR // lanes):
                solve(color * PER_COLOR + unit * lanes)

    return solve_colors


def _vector_instructions(folder: Path) -> int:
    """Instructions on <N x float> vectors in the optimised IR Taichi wrote into folder."""
    paths = list(folder.glob("*llvm_ir_optimized*.ll"))
    if not paths:
        raise RuntimeError(f"Taichi wrote no optimised IR into {folder}")
    return sum(
        "x float>" in line
        for path in paths
        for line in path.read_text().splitlines()
        if " = " in line
    )


def run(threads: int = 1, repeats: int = 200, results=None, lane_counts=LANE_COUNTS) -> list[dict]:
    """Time each of `lane_counts` (the first is the reference the others must match), best
    of 3 runs of `repeats` passes; print and save the rows."""
    rows, reference = [], None
    with tempfile.TemporaryDirectory() as folder:
        cwd = os.getcwd()
        os.chdir(folder)  # where Taichi writes each kernel's optimised IR
        try:
            for lanes in lane_counts:
                # One process, a fresh runtime a lane count: its kernels' IR on their own.
                ti.init(
                    arch=ti.cpu,
                    cpu_max_num_threads=threads,
                    offline_cache=False,
                    print_kernel_llvm_ir_optimized=True,
                    log_level=ti.WARN,
                )
                for path in Path(folder).glob("*.ll"):
                    path.unlink()
                fields = _fields(np.random.default_rng(1))
                kernel = _solve_kernel(fields, lanes)
                kernel()
                # Each layout does the same work: one pass leaves what one a work item does
                # (up to the rounding of fast math, which may reassociate each differently).
                after = {name: fields[name].to_numpy() for name in _SOLVED}
                reference = reference or after
                for name in _SOLVED:
                    np.testing.assert_allclose(after[name], reference[name], rtol=1e-5, atol=1e-6)
                best = float("inf")
                for _ in range(3):
                    start = time.perf_counter()
                    for _ in range(repeats):
                        kernel()
                    ti.sync()
                    best = min(best, (time.perf_counter() - start) / repeats)
                rows.append(
                    {
                        "date": datetime.date.today().isoformat(),
                        "device": device_name("x64"),
                        "threads": threads,
                        "manifolds": N_MANIFOLDS,
                        "lanes": lanes,
                        "layout": "one a work item" if lanes == 1 else f"{lanes} interleaved",
                        "ns_per_manifold": round(best / N_MANIFOLDS * 1e9, 1),
                        "vector_instructions_in_ir": _vector_instructions(Path(folder)),
                    }
                )
        finally:
            os.chdir(cwd)
            ti.reset()
    print_table(rows)
    print("saved", save_csv("x64", "solve_lanes", rows, results))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--lanes", type=int, nargs="+", default=LANE_COUNTS)
    parser.add_argument("--results")
    args = parser.parse_args(argv)
    return run(args.threads, args.repeats, args.results, tuple(args.lanes))


if __name__ == "__main__":
    main()
