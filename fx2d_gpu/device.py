"""All device state in one place: a pool of Taichi fields shared by every Scene.

Taichi compiles a kernel once per distinct set of fields. A process builds many scenes (a test
suite, a parameter sweep), so scenes do not own fields: they share one `DevicePool` whose
capacities cover them, and the kernels compile once per pool. One scene is *resident* in the
pool at a time; switching scenes saves the old one's arrays to the host and loads the new
one's (rare in practice: most processes step one scene). A scene that outgrows the pool's
capacities gets a bigger pool (capacities at least doubled), which compiles once more.

Index conventions, world first:
    body slot   g = world * n_bodies + body        (n_worlds * n_bodies slots)
    model row   b = body                           (shared by all worlds)
    pair        k in [0, n_pairs)                  (candidate pairs of the last broad phase)
"""

import taichi as ti

from . import runtime
from .shapes import MAX_POLYGON_VERTICES

vec2 = ti.math.vec2
ivec3 = ti.math.ivec3

#: Points per contact manifold.
MAX_MANIFOLD_POINTS = 2
#: Graph colours solved in parallel; constraints left over go to one serial overflow colour.
MAX_COLORS = 12
#: Block length of the device prefix sum.
SCAN_BLOCK = 256

# Indices into DevicePool.status (device-side counters read back once per collision pass).
STATUS_ENTRIES = 0  # grid entries written
STATUS_PAIRS = 1  # candidate pairs needed
STATUS_NONFINITE = 2  # bodies with a non-finite pose (left out of collision)
STATUS_SIZE = 4


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


@ti.data_oriented
class DevicePool:
    """Fields sized by capacities; shapes in the docstrings are (capacity,) unless noted.

    body_capacity: body slots (n_worlds * n_bodies); model_capacity: bodies per world;
    world_capacity: worlds; pair_capacity: candidate pairs (and contact manifolds).
    """

    def __init__(self, capacities: dict):
        self.capacities = dict(capacities)
        self.body_capacity = capacities["bodies"]
        self.model_capacity = capacities["models"]
        self.world_capacity = capacities["worlds"]
        self.pair_capacity = capacities["pairs"]
        # A body registers in at most 4 grid cells, except when rounding far from the origin
        # adds a row; the broad phase reports that and the pool grows.
        self.entry_capacity = capacities["entries"]
        self.joint_capacity = capacities["joints"]  # joints per world
        self.joint_slot_capacity = capacities["joint_slots"]  # n_worlds * joints
        self.table_capacity = next_pow2(4 * self.body_capacity)
        scan_len = max(self.table_capacity, self.body_capacity,
                       capacities["pairs"] + capacities["joint_slots"]) + 1
        self.scan_block_capacity = (scan_len + SCAN_BLOCK - 1) // SCAN_BLOCK + 1

        fb = ti.FieldsBuilder()
        f32, i32 = ti.f32, ti.i32
        B, N = self.model_capacity, self.body_capacity
        W, P = self.world_capacity, self.pair_capacity
        J, JS = self.joint_capacity, self.joint_slot_capacity
        C = P + JS  # constraints: contact pairs, then joint slots
        V = MAX_POLYGON_VERTICES

        self.nbytes = 0  # device memory of all the fields

        def field(dtype, shape):
            return vfield(1, dtype, shape)

        def vfield(n, dtype, shape):
            f = ti.field(dtype) if n == 1 else ti.Vector.field(n, dtype)
            fb.dense(ti.i if isinstance(shape, int) else ti.ij, shape).place(f)
            elements = shape if isinstance(shape, int) else shape[0] * shape[1]
            self.nbytes += elements * n * 4  # every field is 32-bit
            return f

        # --- model: constant per body, shared by all worlds -------------------------------
        self.body_inv_mass = field(f32, B)  # 1/kg, 0 for static bodies
        self.body_inv_inertia = field(f32, B)  # 1/(kg m²)
        self.body_kinematic = field(i32, B)  # 1: moved by gravity alone (Fx2D's
        # external_forces_enabled: false), 0 inverse mass for contacts, joints and forces
        self.body_gravity_scale = field(f32, B)
        self.body_damping = field(f32, B)  # 1/s, linear and angular
        self.body_elasticity = field(f32, B)
        self.body_static_friction = field(f32, B)
        self.body_dynamic_friction = field(f32, B)
        self.shape_kind = field(i32, B)  # SHAPE_NONE / SHAPE_CIRCLE / SHAPE_POLYGON
        self.shape_radius = field(f32, B)  # circle radius, m
        self.shape_center = vfield(2, f32, B)  # circle centre in the body frame, m
        self.shape_vertex_count = field(i32, B)
        self.shape_vertices = vfield(2, f32, (B, V))  # counter-clockwise, body frame, m
        self.shape_normals = vfield(2, f32, (B, V))  # outward unit normal of edge (v_i, v_i+1)

        # --- state: per body slot (world first) --------------------------------------------
        self.body_position = vfield(2, f32, N)  # centre of mass, m
        self.body_angle = field(f32, N)  # rad
        # Displacement since the step began (body_anchor_*), kept apart from the pose so that
        # velocities derived from it and joint errors keep float32 precision far from the
        # origin (at x = 300 m a pose holds 3e-5 m steps, a substep may move 1e-6 m).
        self.body_delta_position = vfield(2, f32, N)  # m
        self.body_delta_angle = field(f32, N)  # rad
        self.body_prev_delta_position = vfield(2, f32, N)  # displacement when the substep began
        self.body_prev_delta_angle = field(f32, N)
        self.body_velocity = vfield(2, f32, N)  # m/s
        self.body_angular_velocity = field(f32, N)  # rad/s
        self.body_force = vfield(2, f32, N)  # N, applied for the next step
        self.body_torque = field(f32, N)  # N m
        self.body_sleeping = field(i32, N)  # 1 while asleep
        self.body_sleep_time = field(f32, N)  # s spent below the sleep thresholds
        # Sleep islands (solver/sleep.py): the smallest slot of the body's island (dynamic
        # bodies joined by touching contacts and joints), its own slot for other bodies.
        self.body_island = field(i32, N)
        self.island_prev = field(i32, N)  # labelling scratch: a sleeping body's old label
        self.island_parent = field(i32, N)  # labelling scratch: union-find parent (a key)
        self.island_wake = field(i32, N)  # per island: a mark that it must wake (see sleep.py)
        self.island_status = field(i32, 3)  # labelling not converged, bodies woken, wake stamp
        self.body_anchor_position = vfield(2, f32, N)  # pose when the step began, m
        self.body_anchor_angle = field(f32, N)  # rad

        # --- broad phase: multi-level grid hash -------------------------------------------
        self.body_aabb_lower = vfield(2, f32, N)  # m
        self.body_aabb_upper = vfield(2, f32, N)
        self.body_level = field(i32, N)  # grid level, -1 when the body has no shape
        self.body_entry_start = field(i32, N + 1)  # counts, then exclusive prefix sum
        self.body_pair_start = field(i32, N + 1)  # counts, then exclusive prefix sum
        self.world_level_mask = field(i32, W)  # bit L set when level L holds a body
        E, T = self.entry_capacity, self.table_capacity
        self.entry_body = field(i32, E)  # body slot of each grid entry
        self.entry_cell = vfield(3, i32, E)  # (cx, cy, level)
        self.entry_slot = field(i32, E)  # hash-table slot
        self.grid_start = field(i32, T + 1)  # entries per slot, then exclusive prefix sum
        self.grid_cursor = field(i32, T)
        self.grid_entries = field(i32, E)  # entry ids grouped by slot
        self.scan_blocks = field(i32, self.scan_block_capacity)
        self.status = field(i32, STATUS_SIZE)

        # --- pairs and contact manifolds (one manifold per candidate pair) ----------------
        M = MAX_MANIFOLD_POINTS
        self.pair_body_a = field(i32, P)  # body slot, pair_body_a < pair_body_b
        self.pair_body_b = field(i32, P)
        self.contact_point_count = field(i32, P)  # 0 when the pair does not touch
        self.contact_normal = vfield(2, f32, P)  # unit, from body a to body b
        self.contact_point = vfield(2, f32, (P, M))  # world space, halfway between surfaces, m
        self.contact_depth = field(f32, (P, M))  # penetration, m (> 0 overlapping)
        self.contact_feature = field(i32, (P, M))  # id matching points across steps
        self.contact_normal_impulse = field(f32, (P, M))  # accumulated this substep, N s
        self.contact_tangent_impulse = field(f32, (P, M))  # along (-n.y, n.x), N s
        self.contact_bounced = field(i32, (P, M))  # 1: the point bounced this step
        self.contact_friction = field(f32, (P, M))  # mu_s if the point sticks, else mu_k
        self.pair_solver_mass = vfield(4, f32, P)  # (w_a, I_a, w_b, I_b) this step, see
        # contacts.solver_mass (sleep flags only change between steps)
        self.pair_restitution = field(f32, P)
        self.pair_slop = field(f32, P)  # penetration the position pass leaves alone, m
        self.contact_arm_a = vfield(2, f32, (P, M))  # point - body a's centre at refresh, m
        self.contact_arm_b = vfield(2, f32, (P, M))
        self.pair_ref_shift = vfield(4, f32, P)  # (delta a, delta b) at the last refresh, m
        self.pair_ref_turn = vfield(2, f32, P)  # (delta angle a, delta angle b) then, rad
        self.pair_refresh = field(i32, P)  # 1: the narrow phase runs again every substep
        self.contact_normal_mass = field(f32, (P, M))  # 1 / effective mass along the normal
        self.contact_tangent_mass = field(f32, (P, M))

        # --- the previous step's pairs, for warm starting ---------------------------------
        self.prev_body_pair_start = field(i32, N + 1)
        self.prev_pair_body_a = field(i32, P)
        self.prev_pair_body_b = field(i32, P)
        self.prev_contact_point_count = field(i32, P)
        self.prev_contact_normal = vfield(2, f32, P)
        self.prev_contact_point = vfield(2, f32, (P, M))
        self.prev_contact_feature = field(i32, (P, M))
        self.prev_contact_normal_impulse = field(f32, (P, M))
        self.prev_contact_tangent_impulse = field(f32, (P, M))

        # --- joints: model (per joint), then state per joint slot (world * n_joints + j) ---
        self.joint_type = field(i32, J)  # JOINT_REVOLUTE / JOINT_PRISMATIC
        self.joint_parent = field(i32, J)  # body indices
        self.joint_child = field(i32, J)
        self.joint_anchor_parent = vfield(2, f32, J)  # parent frame, m
        self.joint_anchor_child = vfield(2, f32, J)  # child frame, m
        self.joint_axis = vfield(2, f32, J)  # prismatic axis, parent frame, unit
        self.joint_reference_angle = field(f32, J)  # child angle - parent angle at creation
        self.joint_lower = field(f32, J)  # rad or m
        self.joint_upper = field(f32, J)
        self.joint_mode = field(i32, J)  # MOTOR_NONE / _POSITION / _VELOCITY / _EFFORT
        self.joint_pid = vfield(3, f32, J)
        self.joint_max_effort = field(f32, J)  # N m or N
        self.joint_collide = field(i32, J)  # 1: the joined bodies still collide
        self.body_joint_start = field(i32, B + 1)  # per body: its joints in body_joints
        self.body_joints = field(i32, 2 * J)
        self.body_has_joint = field(i32, B)
        # Pairs that never collide (Scene.disable_collision): per body, the other bodies.
        self.body_filter_start = field(i32, B + 1)
        self.body_filters = field(i32, capacities["filters"])
        self.joint_target = field(f32, JS)  # per world
        self.joint_integral = field(f32, JS)  # PID state
        self.joint_prev_error = field(f32, JS)
        self.joint_pid_started = field(i32, JS)
        self.joint_effort = field(f32, JS)  # motor output this substep

        # --- graph colouring of constraints (pairs [0, n_pairs), then joint slots) -------
        self.pair_color = field(i32, C)  # colour, MAX_COLORS = overflow (solved serially)
        self.color_start = field(i32, MAX_COLORS + 2)  # colour c: color_list[start[c]:start[c+1]]
        self.color_cursor = field(i32, MAX_COLORS + 1)
        self.color_list = field(i32, C)  # constraint indices grouped by colour
        self.constraint_rank = field(i32, C + 1)  # pairs before each color_list entry
        self.pair_origin = field(i32, P)  # broad-phase index of the pair stored at k
        self.step_counts = field(i32, 2)  # (n_pairs, n_joints) of the step
        self.body_contact_start = field(i32, N + 1)  # per body: its pairs in body_contacts
        self.body_contacts = field(i32, 2 * P)  # pair indices by body, sorted per body
        self.body_contact_cursor = field(i32, N)  # scratch: fill cursor of body_contacts
        self.body_claim = field(i32, N)  # lowest pair index bidding for the body this round
        self.body_color_mask = field(i32, N)  # bit c: a constraint of colour c has the body
        self.prev_pair_color = field(i32, P)  # last step's colours, broad-phase order, -1: none
        self.pair_kept_color = field(i32, P)  # the colour the pair had last step, or -1
        self.joint_color = field(i32, JS)  # per joint slot, from the last colouring
        self.uncolored = field(i32, C)  # constraints that bid for colours this step
        self.uncolored_count = field(i32, 1)
        self.body_colored_dynamic = field(i32, N)  # 1: dynamic and awake when last coloured

        self._tree = fb.finalize()
        self.serial = False  # kernels given this object run their loops in parallel
        self.serial_view = SerialPoolView(self)

    def fits(self, needs: dict) -> bool:
        return all(needs[key] <= self.capacities[key] for key in needs)

    def destroy(self):
        self._tree.destroy()


@ti.data_oriented
class SerialPoolView:
    """The same pool's fields, for scenes small enough to run every kernel loop serially.

    Why: on Taichi's CPU backend a parallel loop costs ~15 us to start, even when empty (the
    thread pool hands it to its workers and waits for them), and a loop of up to 512 items
    runs on one thread anyway (measured, Taichi 1.7.4). A small scene's step starts ~180
    such loops: most of its time. A serial loop starts for free. Kernels read `p.serial` at
    compile time (ti.loop_config), and Taichi compiles a kernel per template object, so
    passing this view instead of the pool gives every kernel a serial variant, compiled
    only if a small scene runs. The results are the same: no kernel's result depends on the
    order of its loop's iterations (the step is bitwise deterministic).
    """

    serial = True

    def __init__(self, pool: DevicePool):
        self._pool = pool

    def __getattr__(self, name):
        return getattr(self._pool, name)


#: Scenes of at most this many body slots (n_worlds * n_bodies) run their kernels' loops
#: serially on CPU backends (SerialPoolView).
SERIAL_SLOTS = 512

_pool: dict = {"pool": None, "resident": None}


#: Smallest capacities of a pool: enough that typical scenes of a process share one compile.
MIN_CAPACITIES = {"bodies": 16384, "models": 16384, "worlds": 1024, "pairs": 65536,
                  "entries": 65536, "joints": 1024, "joint_slots": 16384, "filters": 1024}


def acquire_pool(scene, needs: dict) -> DevicePool:
    """The shared pool, grown if `needs` exceed it, with `scene` resident in it; its
    SerialPoolView for a small scene on a CPU backend.

    needs: capacities by name (the keys of MIN_CAPACITIES). The
    previously resident scene, if another, is saved to the host first.
    """
    pool = _acquire(scene, needs)
    if needs["bodies"] <= SERIAL_SLOTS and runtime.on_cpu():
        return pool.serial_view
    return pool


def _acquire(scene, needs: dict) -> DevicePool:
    pool, resident = _pool["pool"], _pool["resident"]
    resident_scene = resident() if resident is not None else None
    if pool is not None and pool.fits(needs):
        if resident_scene is not scene:
            if resident_scene is not None:
                resident_scene._evict()
            _pool["resident"] = scene._weakref
            scene._load_into(pool)
        return pool
    if resident_scene is not None:
        resident_scene._evict()
    # Grow: at least double every capacity that is too small, so growth compiles rarely.
    capacities = {}
    for key, floor in MIN_CAPACITIES.items():
        cap = pool.capacities[key] if pool is not None else floor
        while cap < needs.get(key, 0):
            cap *= 2
        capacities[key] = cap
    if pool is not None:
        pool.destroy()
    pool = DevicePool(capacities)
    _pool["pool"] = pool
    _pool["resident"] = scene._weakref
    scene._load_into(pool)
    return pool


def release(scene):
    """Forget `scene` as the resident one (its arrays stay valid on the host)."""
    resident = _pool["resident"]
    if resident is not None and resident() is scene:
        _pool["resident"] = None


def current_pool():
    return _pool["pool"]


def is_resident(scene) -> bool:
    resident = _pool["resident"]
    return resident is not None and resident() is scene


# Kernels that take NumPy arrays from the host (ndarray arguments: compiled once).

_vec2 = ti.types.ndarray(dtype=ti.math.vec2, ndim=1)
_f32 = ti.types.ndarray(dtype=ti.f32, ndim=1)
_i32 = ti.types.ndarray(dtype=ti.i32, ndim=1)


@ti.kernel
def scatter_forces(p: ti.template(), slots: _i32, forces: _vec2, torques: _f32):
    ti.loop_config(serialize=p.serial)
    for i in range(slots.shape[0]):
        p.body_force[slots[i]] += forces[i]
        p.body_torque[slots[i]] += torques[i]
        if forces[i].norm() > 0.0 or torques[i] != 0.0:  # a push wakes a sleeping body
            p.body_sleeping[slots[i]] = 0
            p.body_sleep_time[slots[i]] = 0.0


@ti.kernel
def write_state(p: ti.template(), position: _vec2, angle: _f32, velocity: _vec2,
               angular_velocity: _f32, sleeping: _i32):
    ti.loop_config(serialize=p.serial)
    for slot in range(position.shape[0]):
        p.body_position[slot] = position[slot]
        p.body_angle[slot] = angle[slot]
        p.body_velocity[slot] = velocity[slot]
        p.body_angular_velocity[slot] = angular_velocity[slot]
        p.body_sleeping[slot] = sleeping[slot]
        p.body_sleep_time[slot] = 0.0


def compiled_kernel_count() -> int:
    """How many kernel instances fx2d_gpu has compiled in this process (for compile tests)."""
    import sys

    kernels = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("fx2d_gpu") or module is None:
            continue
        for obj in vars(module).values():
            primal = getattr(obj, "_primal", None)
            if primal is not None and hasattr(primal, "compiled_kernels"):
                kernels[id(primal)] = len(primal.compiled_kernels)
    return sum(kernels.values())


@ti.func
def wake_joint_bodies(p: ti.template(), joint, world, n_bodies):
    for body in ti.static(range(2)):
        slot = world * n_bodies + (p.joint_parent[joint] if body == 0 else p.joint_child[joint])
        p.body_sleeping[slot] = 0
        p.body_sleep_time[slot] = 0.0


@ti.kernel
def write_joint_target(p: ti.template(), joint: ti.i32, n_joints: ti.i32, n_bodies: ti.i32,
                       values: _f32):
    """New motor targets for one joint (one per world); a new target wakes its bodies."""
    ti.loop_config(serialize=p.serial)
    for world in range(values.shape[0]):
        p.joint_target[world * n_joints + joint] = values[world]
        wake_joint_bodies(p, joint, world, n_bodies)


@ti.kernel
def write_joint_mode(p: ti.template(), joint: ti.i32, n_joints: ti.i32, n_worlds: ti.i32,
                     n_bodies: ti.i32, mode: ti.i32, pid: ti.math.vec3, max_effort: ti.f32):
    p.joint_mode[joint] = mode
    p.joint_pid[joint] = pid
    p.joint_max_effort[joint] = max_effort
    ti.loop_config(serialize=p.serial)
    for world in range(n_worlds):
        p.joint_pid_started[world * n_joints + joint] = 0  # restart integral and derivative
        wake_joint_bodies(p, joint, world, n_bodies)
