"""Interactive viewer on Taichi GGUI and its offscreen recorder.

Three layers, so that tests drive the same code as a user:

* `ViewerController`: plain Python, no window. It holds the camera, the world(s) shown, the
  overlay toggles and the body being dragged, consumes events (press / release of GGUI's key
  names, the cursor in [0, 1]^2, wheel clicks) and advances the scene a frame at a time,
  pulling a dragged body to the cursor with a spring (Box2D samples' mouse joint) through
  Scene.apply_force.
* The bodies' triangles and lines, filled on the device by one kernel
  (frame_geometry.FrameGeometry, drawn by `GGUIPainter.draw_bodies`; `body_geometry` copies
  them to NumPy), and `overlay_geometry` (contacts, AABBs, joints, sleeping bodies, tile
  borders, a demo's rays, the drag spring), on the host.
* `GGUIPainter` and `run_viewer`: a thin GGUI loop that feeds the window's events to the
  controller and draws, in a window or offscreen (`show_window=False`, for recording on a
  machine without a display: Vulkan is enough, Mesa's software driver included). Where GGUI
  cannot start, `run_viewer` raises ViewerUnavailable with the reason (interactive), or
  records with the image renderer of render.py instead (offscreen).

Keys (GGUI 1.7.4 reports letters, space, arrows, Tab, Shift, Escape, ..., but no digits or
punctuation, and no mouse wheel; KEYS lists them): space pause/run, n single step, r reset,
h home (fit the scene), z / x zoom in / out about the cursor, arrows pan, t one world <->
tiles, Tab / Shift+Tab next / previous world (a page of tiles when tiled), c contacts,
a AABBs, j joints, s sleeping bodies, i heads-up text, k keys, p screenshot, Escape quit.
Mouse: left button drags a body, right or middle button drags the view.
"""

import math
import os
import sys
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..enums import SHAPE_CIRCLE
from ..shapes import AREALESS_KINDS, outline, rotation
from .frame_geometry import FrameGeometry
from .render import _BACKGROUND, default_bounds, drawn

#: Worlds drawn at once as tiles; Tab pages through the rest.
MAX_TILES = 64
#: One zoom key press (or wheel click) shows 1.25x less (or more) of the world.
ZOOM_STEP = 1.25
#: One arrow key press moves the view by this fraction of its height.
PAN_STEP = 0.1
#: The drag spring, Box2D samples' mouse joint: 5 Hz, damping ratio 0.7. Its stiffness and
#: damping are per kg of the dragged body, so heavy and light bodies follow alike.
SPRING_HERTZ = 5.0
SPRING_DAMPING_RATIO = 0.7
#: The spring's pull is capped at 100 g (Box2D's: 1000 g), so that a cursor far away does
#: not fling the body out of the scene.
SPRING_MAX_ACCELERATION = 981.0
#: Angular damping of a dragged body, 1/s. The spring holds the grabbed point, not the
#: rotation about it: a body pulled off its centre would spin about the cursor for ever
#: (16 rad/s after 2 s for a box pulled 2.5 m by a corner; 5 rad/s with 2/s of damping).
#: Box2D's mouse joint damps the rotation too; at 10/s the box is still in half a second.
SPRING_ANGULAR_DAMPING = 10.0

KEYS = {
    "space": "pause / run",
    "n": "single step (pauses)",
    "r": "reset the scene to its first frame",
    "h": "home: fit the scene in the window",
    "z / x": "zoom in / out about the cursor",
    "arrows": "pan",
    "t": "one world <-> tiles of many worlds",
    "Tab / Shift+Tab": "next / previous world (a page of tiles when tiled)",
    "c": "contacts (points and normals)",
    "a": "AABBs",
    "j": "joints",
    "s": "sleeping bodies (a dot on each)",
    "i": "heads-up text",
    "k": "this list of keys",
    "p": "screenshot (fx2d_view_NNNN.png in the current folder)",
    "Escape": "quit",
    "left button": "drag a body (a spring to the cursor)",
    "right / middle button": "drag the view",
}

# Overlay colours (RGB 0-1).
_CONTACT = (0.85, 0.1, 0.1)
_AABB = (0.1, 0.65, 0.25)
_JOINT = (0.0, 0.55, 0.6)
_SLEEPING = (0.55, 0.35, 0.75)
_TILE_BORDER = (0.35, 0.35, 0.38)
_SPRING = (0.1, 0.1, 0.1)
_RAY_HIT = (0.86, 0.16, 0.16)
_RAY_MISS = (0.47, 0.78, 0.47)
#: Where unused entries of the GGUI buffers are parked: off the window, so they draw nothing.
_OFF_SCREEN = -10.0
#: The file ImGui (GGUI's text panels) writes its layout to, in the current folder.
IMGUI_SETTINGS = "imgui.ini"


class ViewerUnavailable(RuntimeError):
    """GGUI could not open a window here."""


def _blend(rgba, background):
    """RGB(A) 0-255 over background (3,) 0-255: (3,) float, rounded."""
    rgba = np.asarray(rgba, float)
    alpha = rgba[3] / 255.0 if len(rgba) > 3 else 1.0
    return np.round(rgba[:3] * alpha + np.asarray(background[:3], float) * (1 - alpha))


# ---------------------------------------------------------------------------- camera and views
@dataclass
class Camera:
    """The part of the world a viewport shows: its centre (2,) m and half its height, m.

    Its width follows from the viewport's aspect (width / height, in pixels), so a metre is
    as many pixels across as up. Every tile of a tiled view shares the one camera.
    """

    centre: np.ndarray
    half_height: float

    def bounds(self, aspect: float) -> tuple[float, float, float, float]:
        """(xmin, ymin, xmax, ymax), m, shown in a viewport of that aspect."""
        half = np.array([self.half_height * aspect, self.half_height])
        lo, hi = self.centre - half, self.centre + half
        return (float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1]))

    def fit(self, bounds, aspect: float, margin: float = 0.02):
        """Centre on bounds (xmin, ymin, xmax, ymax) m and show all of it, plus a margin."""
        xmin, ymin, xmax, ymax = bounds
        self.centre = np.array([(xmin + xmax) / 2, (ymin + ymax) / 2], float)
        self.half_height = (1 + margin) * max((ymax - ymin) / 2, (xmax - xmin) / 2 / aspect, 1e-6)

    def zoom(self, factor: float, about):
        """Show `factor` times as much (factor < 1 zooms in), keeping the world point
        `about` (2,) m where it is in the viewport."""
        about = np.asarray(about, float)
        self.centre = about + (self.centre - about) * factor
        self.half_height *= factor


#: What drives a scene frame by frame (attach_controller): {id(scene): (weak reference to the
#: scene, controller)}.
_CONTROLLERS = {}


def controller_of(scene):
    """The per-frame controller a demo scene comes with (its before_step(scene) runs before
    every step; its `rays` are drawn), or None."""
    entry = _CONTROLLERS.get(id(scene))
    return entry[1] if entry is not None and entry[0]() is scene else None


def attach_controller(scene, controller):
    """Make `controller` the one `controller_of(scene)` returns: `fx2d run`, `fx2d demo` and
    the viewer call its before_step(scene) before every step and draw its `rays` (None: no
    rays). A demo's agents (the lidar's) and an example's driver (fx2d_gpu.examples) are
    attached this way. The scene is held weakly: the entry dies with it."""
    _CONTROLLERS[id(scene)] = (weakref.ref(scene), controller)


@dataclass(frozen=True)
class View:
    """One world drawn into one rectangle of the window.

    rect: (x0, y0, x1, y1), fractions of the window, y up (GGUI's canvas coordinates).
    bounds: (xmin, ymin, xmax, ymax), m, the part of the world filling rect.
    """

    world: int
    rect: tuple
    bounds: tuple

    def to_window(self, points) -> np.ndarray:
        """(n, 2) window coordinates of world points (n, 2) m (or one point (2,))."""
        points = np.asarray(points, float).reshape(-1, 2)
        x0, y0, x1, y1 = self.rect
        xmin, ymin, xmax, ymax = self.bounds
        return np.stack(
            [
                x0 + (points[:, 0] - xmin) / (xmax - xmin) * (x1 - x0),
                y0 + (points[:, 1] - ymin) / (ymax - ymin) * (y1 - y0),
            ],
            axis=1,
        )

    def to_world(self, cursor) -> np.ndarray:
        """(2,) m: the world point under window position `cursor` (2,) (may lie outside rect:
        the mapping goes on linearly)."""
        x0, y0, x1, y1 = self.rect
        xmin, ymin, xmax, ymax = self.bounds
        return np.array(
            [
                xmin + (cursor[0] - x0) / (x1 - x0) * (xmax - xmin),
                ymin + (cursor[1] - y0) / (y1 - y0) * (ymax - ymin),
            ]
        )

    def contains(self, cursor) -> bool:
        x0, y0, x1, y1 = self.rect
        return x0 <= cursor[0] <= x1 and y0 <= cursor[1] <= y1

    def metres_per_pixel(self, window_height: int) -> float:
        return (self.bounds[3] - self.bounds[1]) / ((self.rect[3] - self.rect[1]) * window_height)


def tile_grid(n: int) -> tuple[int, int]:
    """(columns, rows) of the grid that tiles n worlds, as square as can be."""
    columns = int(math.ceil(math.sqrt(n)))
    return columns, int(math.ceil(n / columns))


# ---------------------------------------------------------------------------- the controller
@dataclass
class Overlays:
    """What is drawn over the bodies (each toggled by a key, see KEYS)."""

    contacts: bool = False
    aabbs: bool = False
    joints: bool = False
    sleeping: bool = False
    hud: bool = True
    keys: bool = False


@dataclass
class BodyDrag:
    """A body held by the left mouse button: a spring from a point on it to the cursor.

    body, world: what is held; local_anchor (2,) m: the grabbed point in the body's frame;
    view: the view it was grabbed in (the cursor maps to world points through it).
    """

    body: int
    world: int
    local_anchor: np.ndarray
    view: View


def spring_force(mass, inertia, position, angle, velocity, angular_velocity, local_anchor, target):
    """(force (2,) N, torque N m) of the drag spring on one body: from the grabbed point
    (local_anchor (2,) m in the body frame) towards target (2,) m.

    A damped spring per kg of the body, SPRING_HERTZ and SPRING_DAMPING_RATIO, acting on
    the grabbed point's offset and velocity, its pull capped at SPRING_MAX_ACCELERATION; the
    force acts at the grabbed point (hence the torque about the centre of mass), and the
    rotation is damped at SPRING_ANGULAR_DAMPING.
    """
    omega = 2 * math.pi * SPRING_HERTZ
    arm = rotation(angle) @ np.asarray(local_anchor, float)  # centre of mass -> grabbed point
    anchor = np.asarray(position, float) + arm
    anchor_velocity = np.asarray(velocity, float) + angular_velocity * np.array([-arm[1], arm[0]])
    acceleration = (
        omega**2 * (np.asarray(target, float) - anchor)
        - 2 * SPRING_DAMPING_RATIO * omega * anchor_velocity
    )
    size = np.linalg.norm(acceleration)
    if size > SPRING_MAX_ACCELERATION:
        acceleration *= SPRING_MAX_ACCELERATION / size
    force = mass * acceleration
    torque = arm[0] * force[1] - arm[1] * force[0]
    if np.isfinite(inertia):
        torque -= inertia * SPRING_ANGULAR_DAMPING * angular_velocity
    return force, float(torque)


class ViewerController:
    """The viewer's state and input handling, without a window.

    Feed it events: press(key) / release(key) with GGUI's key names ("a".."z", " ", "Tab",
    "Shift", "Escape", "Left", ..., and "LMB", "RMB", "MMB" for the mouse buttons),
    move_cursor(x, y) with the cursor in [0, 1]^2 (y up, GGUI's get_cursor_pos), wheel(clicks);
    then call frame() once per drawn frame: it applies the drag spring and steps the scene
    (unless paused). views() says what to draw where; hud_lines() the heads-up text.

    Args:
        scene: the Scene to show (reset goes back to its state at construction).
        dt: simulated seconds per frame (one step a frame).
        size: (width, height) of the window, pixels.
        world: the world shown first.
        tiled: show tiles of many worlds (None: when the scene has more than one).
        overlays: the initial toggles (default: heads-up text only).
        paused: start paused (space runs, n steps once).
    """

    def __init__(
        self,
        scene,
        dt: float = 1 / 60,
        size=(1024, 768),
        world: int = 0,
        tiled: bool | None = None,
        overlays: Overlays | None = None,
        paused: bool = False,
    ):
        if not 0 <= world < scene.n_worlds:
            raise ValueError(f"world must be in [0, {scene.n_worlds}), got {world}")
        self.scene, self.dt = scene, dt
        self.size = (int(size[0]), int(size[1]))
        self.world = world
        self.tiled = scene.n_worlds > 1 if tiled is None else bool(tiled)
        self.first_tile = (world // MAX_TILES) * MAX_TILES
        self.overlays = Overlays() if overlays is None else overlays
        self.paused = bool(paused)
        self.running = True
        self.cursor = np.array([0.5, 0.5])
        self.drag: BodyDrag | None = None
        self.screenshot_requested = False
        self.frames = 0
        self._pan: tuple[View, np.ndarray] | None = None  # (view, world point held)
        self._shift = False
        self._step_requested = False
        self._stepped = False
        self._snapshot = scene.snapshot()
        self.demo = controller_of(scene)  # a demo that drives its scene (lidar), or None
        self._step_seconds = deque(maxlen=30)
        self._frame_starts = deque(maxlen=31)
        self._pairs = (0, -math.inf)  # (contact pairs, when counted)
        self.camera = Camera(np.zeros(2), 1.0)
        self.home()

    # ------------------------------------------------------------------ layout
    @property
    def aspect(self) -> float:
        return self.size[0] / self.size[1]

    def _grid(self) -> tuple[int, int, int]:
        """(tiles, columns, rows) of the tiled layout."""
        n = min(self.scene.n_worlds - self.first_tile, MAX_TILES)
        return (n, *tile_grid(n))

    def viewport_aspect(self) -> float:
        """Width / height in pixels of one viewport: the window, or one tile."""
        if not self.tiled:
            return self.aspect
        _, columns, rows = self._grid()
        return self.aspect * rows / columns

    def views(self) -> list[View]:
        """What to draw where: one View for the chosen world, or one per tile."""
        bounds = self.camera.bounds(self.viewport_aspect())
        if not self.tiled:
            return [View(self.world, (0.0, 0.0, 1.0, 1.0), bounds)]
        n, columns, rows = self._grid()
        views = []
        for k in range(n):
            r, c = divmod(k, columns)
            rect = (c / columns, 1 - (r + 1) / rows, (c + 1) / columns, 1 - r / rows)
            views.append(View(self.first_tile + k, rect, bounds))
        return views

    def view_at(self, cursor=None) -> View | None:
        """The view under the cursor (or under `cursor` (2,)), None over an empty tile."""
        cursor = self.cursor if cursor is None else cursor
        return next((v for v in self.views() if v.contains(cursor)), None)

    def home(self):
        """Fit the shown world's frame (a scene file's size, else its bodies) in a viewport."""
        self.camera.fit(default_bounds(self.scene, self.world), self.viewport_aspect())

    # ------------------------------------------------------------------ events
    def press(self, key: str):
        """A key or mouse button went down (GGUI's names, see the class docstring)."""
        if key == "Shift":
            self._shift = True
        elif key == "LMB":
            self.grab()
        elif key in ("RMB", "MMB"):
            view = self.view_at()
            if view is not None:
                self._pan = (view, view.to_world(self.cursor))
        elif key == " ":
            self.paused = not self.paused
        elif key == "n":
            self.paused, self._step_requested = True, True
        elif key == "r":
            self.reset()
        elif key == "h":
            self.home()
        elif key in ("z", "x"):
            self.wheel(1 if key == "z" else -1)
        elif key in ("Left", "Right", "Up", "Down"):
            step = PAN_STEP * 2 * self.camera.half_height
            dx, dy = {"Left": (-1, 0), "Right": (1, 0), "Up": (0, 1), "Down": (0, -1)}[key]
            self.camera.centre = self.camera.centre + step * np.array([dx, dy])
        elif key == "t":
            self.toggle_tiles()
        elif key == "Tab":
            self.next_world(-1 if self._shift else 1)
        elif key in ("c", "a", "j", "s", "i", "k"):
            name = {
                "c": "contacts",
                "a": "aabbs",
                "j": "joints",
                "s": "sleeping",
                "i": "hud",
                "k": "keys",
            }[key]
            setattr(self.overlays, name, not getattr(self.overlays, name))
        elif key == "p":
            self.screenshot_requested = True
        elif key == "Escape":
            self.running = False

    def release(self, key: str):
        """A key or mouse button went up."""
        if key == "Shift":
            self._shift = False
        elif key == "LMB":
            self.drag = None
        elif key in ("RMB", "MMB"):
            self._pan = None

    def move_cursor(self, x: float, y: float):
        """The cursor is at (x, y) in [0, 1]^2 of the window, y up; a view being dragged
        follows it (the world point grabbed stays under the cursor)."""
        self.cursor = np.array([x, y], float)
        if self._pan is not None:
            view, held = self._pan
            now = View(view.world, view.rect, self.camera.bounds(self.viewport_aspect()))
            self.camera.centre = self.camera.centre + held - now.to_world(self.cursor)

    def wheel(self, clicks: float):
        """Zoom in (clicks > 0) or out about the cursor: the world point under it stays put.
        (GGUI 1.7.4 reports no wheel: the z and x keys call this.)"""
        view = self.view_at()
        about = self.camera.centre if view is None else view.to_world(self.cursor)
        self.camera.zoom(ZOOM_STEP**-clicks, about)

    # ------------------------------------------------------------------ actions
    def grab(self):
        """Take hold of the topmost dynamic body under the cursor, if any."""
        view = self.view_at()
        if view is None:
            return
        point = view.to_world(self.cursor)
        found = self.scene.query_point(point)
        mass = self.scene.get_body_params()["mass"][view.world]
        candidates = [
            b
            for b in found.body[found.world == view.world]
            if mass[b] > 0 and drawn(self.scene, int(b))
        ]
        if not candidates:
            return
        body = int(max(candidates))  # drawn last, so on top
        state = self.scene.get_state(bodies=[body])
        offset = point - state.position[view.world, 0]
        local = rotation(state.angle[view.world, 0]).T @ offset
        self.drag = BodyDrag(body, view.world, local, view)

    def drag_target(self) -> np.ndarray | None:
        """(2,) m: where the cursor puts the dragged body's grabbed point, or None."""
        if self.drag is None:
            return None
        view = self.drag.view
        live = View(view.world, view.rect, self.camera.bounds(self.viewport_aspect()))
        return live.to_world(self.cursor)

    def _pull(self):
        """Apply the drag spring for the coming step (in the dragged body's world only)."""
        drag, scene = self.drag, self.scene
        state = scene.get_state(bodies=[drag.body])
        params = scene.get_body_params([drag.body])
        w = drag.world
        force, torque = spring_force(
            params["mass"][w, 0],
            params["inertia"][w, 0],
            state.position[w, 0],
            state.angle[w, 0],
            state.velocity[w, 0],
            state.angular_velocity[w, 0],
            drag.local_anchor,
            self.drag_target(),
        )
        forces = np.zeros((scene.n_worlds, 2))
        torques = np.zeros(scene.n_worlds)
        forces[w], torques[w] = force, torque
        scene.apply_force(drag.body, forces, torques)

    def reset(self):
        """Back to the scene's state when the viewer started (the drag let go)."""
        self.scene.restore(self._snapshot)
        self.drag = None

    def toggle_tiles(self):
        """One world <-> tiles. From tiles, the world under the cursor becomes the one shown."""
        if self.tiled:
            view = self.view_at()
            if view is not None:
                self.world = view.world
            self.tiled = False
        elif self.scene.n_worlds > 1:
            self.tiled = True
            self.first_tile = (self.world // MAX_TILES) * MAX_TILES
        self.drag, self._pan = None, None

    def next_world(self, direction: int = 1):
        """Show the next (or previous, direction -1) world; when tiled, the next page."""
        n = self.scene.n_worlds
        if self.tiled:
            pages = (n + MAX_TILES - 1) // MAX_TILES
            page = (self.first_tile // MAX_TILES + direction) % pages
            self.first_tile = page * MAX_TILES
            self.world = self.first_tile
        else:
            self.world = (self.world + direction) % n
        self.drag = None

    # ------------------------------------------------------------------ a frame
    def frame(self):
        """One frame: the drag spring and a step, unless paused (n steps once)."""
        self._frame_starts.append(time.perf_counter())
        if not self.paused or self._step_requested:
            self._step_requested = False
            if self.drag is not None:
                self._pull()
            if self.demo is not None:
                self.demo.before_step(self.scene)
            start = time.perf_counter()
            self.scene.step(self.dt)
            _synchronize()  # the step's own time, not its launches'
            if self._stepped:  # the first step compiles (or loads) the kernels: not counted
                self._step_seconds.append(time.perf_counter() - start)
            self._stepped = True
        self.frames += 1

    def step_ms(self) -> float:
        """Median wall time of the last 30 steps, ms, the first step left out (it compiles
        or loads the kernels); nan before the second."""
        return 1000 * float(np.median(self._step_seconds)) if self._step_seconds else math.nan

    def frame_rate(self) -> float:
        """Frames per second over the last 30 frames (nan before the second)."""
        starts = self._frame_starts
        if len(starts) < 2 or starts[-1] == starts[0]:
            return math.nan
        return (len(starts) - 1) / (starts[-1] - starts[0])

    def contact_pairs(self) -> int:
        """Touching pairs in every world, counted at most four times a second (reading them
        back costs time on large scenes)."""
        count, when = self._pairs
        now = time.perf_counter()
        if now - when > 0.25:
            count = len(self.scene.contacts(world=None))
            self._pairs = (count, now)
        return count

    def hud_lines(self) -> list[str]:
        """The heads-up text: timings and counts, what is shown, the keys."""
        scene = self.scene
        shown = (
            f"worlds {self.first_tile}-{self.first_tile + self._grid()[0] - 1} of "
            f"{scene.n_worlds} (tiles)"
            if self.tiled
            else f"world {self.world} of {scene.n_worlds}"
        )
        status = ["paused"] if self.paused else []
        if self.drag is not None:
            status.append(f"dragging body {self.drag.body}")
        return [
            f"{self.step_ms():.2f} ms/step   {self.frame_rate():.0f} fps   "
            f"{scene.n_bodies} bodies x {scene.n_worlds} worlds   "
            f"{self.contact_pairs()} contact pairs   t = {scene.time:.2f} s",
            "   ".join([shown, f"backend {scene.backend}", *status, "k: keys"]),
        ]

    def key_lines(self) -> list[str]:
        """The keys and mouse buttons, a line each (KEYS)."""
        return [f"{key:22s} {what}" for key, what in KEYS.items()]


def _synchronize():
    import taichi as ti

    ti.sync()


# ---------------------------------------------------------------------------- geometry
def body_geometry(scene, state, views: list[View], aspect: float):
    """The bodies of every view as GGUI draws them, in window coordinates (y up):
    (triangles (3t, 2), triangle colours (3t, 3), lines (2l, 2), line colours (2l, 3)),
    float32, colours RGB 0-1, from the device (frame_geometry.FrameGeometry: one kernel).
    aspect: window width / height. With tiles, what reaches past a tile is pressed onto
    its edge (GGUI cannot clip). `state` is unused: the kernel reads the device's. (A
    copy for tests and other renderers; the viewer draws FrameGeometry's buffers as they
    are.)"""
    del state
    return FrameGeometry(scene).update(views, aspect).arrays()


def _clamp(points, rect):
    x0, y0, x1, y1 = rect
    return np.clip(points, [x0, y0], [x1, y1]).astype(np.float32)


class _LocalOutlines:
    """Every drawn body's outline in its own frame, padded to one length, for AABBs of all
    bodies at once: points (n, k, 2) m, and a circle's centre and radius (else radius nan).
    The add_* shapes, or `world`'s (Scene.set_shape_params); for_world gives another
    world's."""

    def __init__(self, scene, world: int | None = None):
        self.scene, self.world = scene, world
        self._worlds: dict = {}
        bodies, outlines, centres, radii = [], [], [], []
        for b in range(scene.n_bodies):
            if not drawn(scene, b):
                continue
            shape = scene.body_shape(b) if world is None else scene.body_shape(b, world=world)
            bodies.append(b)
            if shape.kind == SHAPE_CIRCLE:
                outlines.append(np.zeros((1, 2)))
                centres.append(shape.center)
                radii.append(shape.radius)
            else:
                outlines.append(shape.vertices if shape.kind in AREALESS_KINDS else outline(shape))
                centres.append(np.zeros(2))
                radii.append(np.nan)
        k = max((len(o) for o in outlines), default=1)
        self.bodies = np.array(bodies, np.int64)
        # Pad by repeating the first point: it changes no min or max.
        self.points = (
            np.stack([np.concatenate([o, np.repeat(o[:1], k - len(o), 0)]) for o in outlines])
            if outlines
            else np.zeros((0, 1, 2))
        )
        self.centres = np.array(centres).reshape(-1, 2)
        self.radii = np.array(radii)

    def for_world(self, world: int) -> "_LocalOutlines":
        """These outlines, or those of `world` where its shapes are its own (built once,
        and again once the shapes change)."""
        world_shapes = getattr(self.scene, "_shapes", None)
        if world_shapes is None or not world_shapes.columns or world == self.world:
            return self
        kept = self._worlds.get(world)
        if kept is None or kept[0] != world_shapes.version:
            kept = self._worlds[world] = (world_shapes.version, _LocalOutlines(self.scene, world))
        return kept[1]

    def aabbs(self, position, angle):
        """(lower (n, 2), upper (n, 2)) m of the drawn bodies at poses position (B, 2) m and
        angle (B,) rad of every body."""
        pos, ang = position[self.bodies], angle[self.bodies]
        c, s = np.cos(ang)[:, None], np.sin(ang)[:, None]
        px, py = self.points[..., 0], self.points[..., 1]
        world = np.stack([c * px - s * py, s * px + c * py], -1) + pos[:, None]
        lower, upper = world.min(1), world.max(1)
        circle = np.isfinite(self.radii)
        centre = pos + np.stack(
            [
                c[:, 0] * self.centres[:, 0] - s[:, 0] * self.centres[:, 1],
                s[:, 0] * self.centres[:, 0] + c[:, 0] * self.centres[:, 1],
            ],
            1,
        )
        r = np.nan_to_num(self.radii)[:, None]
        lower[circle], upper[circle] = (centre - r)[circle], (centre + r)[circle]
        return lower, upper


@dataclass
class OverlayGeometry:
    """Lines (2l, 2) and dots (d, 2) in window coordinates, with RGB 0-1 colours."""

    lines: np.ndarray
    line_colours: np.ndarray
    dots: np.ndarray
    dot_colours: np.ndarray


class _OverlayParts:
    """The overlay's lines and dots as they are added, view by view, in window coordinates."""

    def __init__(self):
        self.lines, self.line_colours, self.dots, self.dot_colours = [], [], [], []

    def add_lines(self, view: View, segments, colour):
        """Segments (2l, 2) m of `view`'s world, in `colour` (RGB 0-1)."""
        if len(segments):
            self.add_window_lines(view.to_window(segments), colour)

    def add_window_lines(self, segments, colour):
        """Segments (2l, 2) already in window coordinates."""
        self.lines.append(segments)
        self.line_colours.append(np.tile(colour, (len(segments), 1)))

    def add_dots(self, view: View, points, colour):
        """Points (d, 2) m of `view`'s world, in `colour`."""
        if len(points):
            self.dots.append(view.to_window(points))
            self.dot_colours.append(np.tile(colour, (len(points), 1)))

    def geometry(self) -> OverlayGeometry:
        def stack(parts, width):
            if not parts:
                return np.zeros((0, width), np.float32)
            return np.concatenate(parts).astype(np.float32)

        return OverlayGeometry(
            stack(self.lines, 2),
            stack(self.line_colours, 3),
            stack(self.dots, 2),
            stack(self.dot_colours, 3),
        )


def _overlays_read_state(controller: ViewerController) -> bool:
    """Whether this frame's overlays need the bodies' state on the host: AABBs, sleeping
    bodies, a held body, or joints in a scene that has some."""
    overlays = controller.overlays
    return bool(
        overlays.aabbs
        or overlays.sleeping
        or controller.drag is not None
        or (overlays.joints and controller.scene.n_joints)
    )


def overlay_geometry(
    controller: ViewerController,
    state,
    outlines: _LocalOutlines | None = None,
    read_state: Callable[[], object] | None = None,
) -> OverlayGeometry:
    """What the overlay toggles ask for, over every view: contact points with their normals,
    AABBs, joints (centre -> anchor -> anchor -> centre), sleeping bodies' centres; and always
    tile borders, a demo's rays (the lidar's) and the drag spring (grabbed point -> cursor).
    `state`: the scene's get_state(), or None to read it only where an overlay needs it (a
    frame without AABBs, joints, sleeping bodies or a held body copies no body state to the
    host). `read_state`: what reads it then (None: the scene's get_state; a caller that
    counts or caches the reads passes its own)."""
    scene, overlays = controller.scene, controller.overlays
    views = controller.views()
    if state is None and _overlays_read_state(controller):
        state = (read_state or scene.get_state)()
    parts = _OverlayParts()
    found = scene.contacts(world=None) if overlays.contacts else None
    joints = scene.joint_anchors() if overlays.joints and scene.n_joints else None
    joint_bodies = (
        [scene.joint_bodies(j) for j in range(scene.n_joints)] if joints is not None else []
    )
    for view in views:
        if found is not None:
            _add_contacts(parts, view, found, controller.size[1])
        if overlays.aabbs and outlines is not None:
            _add_aabbs(parts, view, outlines, state)
        if joints is not None:
            _add_joints(parts, view, joints, joint_bodies, state)
        if overlays.sleeping:
            asleep = np.nonzero(state.sleeping[view.world])[0]
            asleep = [b for b in asleep if drawn(scene, int(b))]
            parts.add_dots(view, state.position[view.world, asleep].reshape(-1, 2), _SLEEPING)
        if len(views) > 1:
            x0, y0, x1, y1 = view.rect
            border = [
                [x0, y0],
                [x1, y0],
                [x1, y0],
                [x1, y1],
                [x1, y1],
                [x0, y1],
                [x0, y1],
                [x0, y0],
            ]
            parts.add_window_lines(np.array(border), _TILE_BORDER)
        if controller.demo is not None and controller.demo.rays is not None:
            _add_rays(parts, view, controller.demo.rays)
    if controller.drag is not None:
        _add_drag(parts, controller, views, state)
    return parts.geometry()


def _add_contacts(parts: _OverlayParts, view: View, found, height_px: int):
    """The contact points of `view`'s world and their normals, 12 px long (found: the
    scene's contacts(world=None); height_px: the window's height)."""
    normal_length = 12 * view.metres_per_pixel(height_px)
    for i in np.nonzero(found.world == view.world)[0]:
        points = found.points[i, : found.point_count[i]]
        tips = points + normal_length * found.normal[i]
        parts.add_dots(view, points, _CONTACT)
        parts.add_lines(view, np.stack([points, tips], 1).reshape(-1, 2), _CONTACT)


def _add_aabbs(parts: _OverlayParts, view: View, outlines: _LocalOutlines, state):
    """The drawn bodies' AABBs in `view`'s world, at their poses in `state`."""
    w = view.world
    lo, hi = outlines.for_world(w).aabbs(state.position[w], state.angle[w])
    corners = np.stack(
        [lo, np.stack([hi[:, 0], lo[:, 1]], 1), hi, np.stack([lo[:, 0], hi[:, 1]], 1)], 1
    )  # (n, 4, 2)
    edges = np.stack([corners, np.roll(corners, -1, axis=1)], 2).reshape(-1, 2)
    parts.add_lines(view, edges, _AABB)


def _add_joints(parts: _OverlayParts, view: View, joints, joint_bodies: list, state):
    """Each joint of `view`'s world: centre -> anchor -> anchor -> centre, its anchors as
    dots (joints: the scene's joint_anchors(), (W, J, 2, 2) m; joint_bodies: each joint's
    (parent, child))."""
    centres = state.position[view.world]
    for j, (parent, child) in enumerate(joint_bodies):
        a, b = joints[view.world, j]
        parts.add_lines(view, np.array([centres[parent], a, a, b, b, centres[child]]), _JOINT)
        parts.add_dots(view, np.array([a, b]), _JOINT)


def _add_rays(parts: _OverlayParts, view: View, rays):
    """A demo's rays (the lidar's: starts, ends, hit per world): red to where they hit,
    green where they miss."""
    starts, ends, hit = (np.asarray(a)[view.world] for a in rays)
    for struck, colour in ((True, _RAY_HIT), (False, _RAY_MISS)):
        pick = hit == struck
        parts.add_lines(view, np.stack([starts[pick], ends[pick]], 1).reshape(-1, 2), colour)


def _add_drag(parts: _OverlayParts, controller: ViewerController, views, state):
    """The drag spring, from the grabbed point to the cursor, where its world is shown."""
    drag = controller.drag
    view = next((v for v in views if v.world == drag.world), None)
    if view is None:
        return
    arm = rotation(state.angle[drag.world, drag.body]) @ drag.local_anchor
    anchor = state.position[drag.world, drag.body] + arm
    target = controller.drag_target()
    parts.add_lines(view, np.array([anchor, target]), _SPRING)
    parts.add_dots(view, np.array([anchor, target]), _SPRING)


def background_colour(scene) -> np.ndarray:
    """(3,) RGB 0-1: a scene file's background colour, else render.py's."""
    background = scene.meta.get("background", _BACKGROUND)
    if not isinstance(background, tuple | list | np.ndarray):
        background = _BACKGROUND  # an image: the plain colour instead
    return _blend(background, (255, 255, 255)) / 255.0


# ---------------------------------------------------------------------------- GGUI
class _Buffers:
    """Taichi fields GGUI draws from, reused from frame to frame: each grows (doubling) when
    a frame needs more, and its unused entries are parked off the window."""

    def __init__(self):
        self._fields = {}

    def upload(self, name: str, data: np.ndarray, fill: float = _OFF_SCREEN):
        import taichi as ti

        width = data.shape[1]
        field = self._fields.get(name)
        if field is None or field.shape[0] < len(data):
            capacity = max(64, 1 << int(math.ceil(math.log2(max(len(data), 1)))))
            field = self._fields[name] = ti.Vector.field(width, ti.f32, shape=capacity)
        padded = np.full((field.shape[0], width), fill, np.float32)
        padded[: len(data)] = data
        field.from_numpy(padded)
        return field


class GGUIPainter:
    """Draws a ViewerController's scene on a GGUI window (shown or offscreen)."""

    LINE_WIDTH = 0.002  # of the window's height
    DOT_RADIUS = 0.004

    def __init__(self, window, controller: ViewerController):
        self.window, self.controller = window, controller
        self.canvas = window.get_canvas()
        self.gui = window.get_gui()
        self.buffers = _Buffers()
        self._geometry = None  # FrameGeometry of the controller's scene, made at first draw
        self.outlines = _LocalOutlines(controller.scene)
        self.background = tuple(float(c) for c in background_colour(controller.scene))

    def draw(self):
        """The current frame: background, bodies, overlays, heads-up text."""
        controller = self.controller
        self.canvas.set_background_color(self.background)
        self.draw_bodies(controller.views())
        extra = overlay_geometry(controller, None, self.outlines)
        self._lines("overlay", extra.lines, extra.line_colours)
        if len(extra.dots):
            self.canvas.circles(
                self.buffers.upload("dots", extra.dots),
                radius=self.DOT_RADIUS,
                per_vertex_color=self.buffers.upload("dot_colours", extra.dot_colours, 0.0),
            )
        if controller.overlays.hud:
            text = controller.hud_lines()
            self._panel("fx2d_gpu", text, 0.0)
            if controller.overlays.keys:
                self._panel("keys", controller.key_lines(), self._height(text))

    def draw_bodies(self, views: list[View]):
        """The bodies of every view, filled on the device by one kernel from the device's
        state (frame_geometry.FrameGeometry, made again when the controller's scene is
        another object) and drawn from its buffers: nothing per body on the host."""
        scene = self.controller.scene
        if self._geometry is None or self._geometry.scene is not scene:
            self._geometry = FrameGeometry(scene)
        frame = self._geometry.update(views, self.controller.aspect)
        frame.draw(self.canvas, line_width=self.LINE_WIDTH)

    def _lines(self, name, lines, colours):
        if len(lines):
            self.canvas.lines(
                self.buffers.upload(f"{name}_lines", lines),
                width=self.LINE_WIDTH,
                per_vertex_color=self.buffers.upload(f"{name}_line_colours", colours, 0.0),
            )

    def _height(self, text) -> float:
        """Height of a panel of these lines, window fraction: a title bar (~19 px), a line
        of text (~17 px) each, padding (~20 px)."""
        return min((19 + 17 * len(text) + 20) / self.controller.size[1], 1.0)

    def _panel(self, title, text, top):
        with self.gui.sub_window(title, 0.0, top, 1.0, self._height(text)) as gui:
            for line in text:
                gui.text(line)

    def image(self) -> np.ndarray:
        """What the window shows now: (height, width, 3) uint8, top row first."""
        buffer = self.window.get_image_buffer_as_numpy()  # (width, height, 4) 0-1, y up
        rgb = np.round(np.clip(buffer[..., :3], 0, 1) * 255).astype(np.uint8)
        return np.ascontiguousarray(rgb.transpose(1, 0, 2)[::-1])


class WindowFactory:
    """Opens the viewer's GGUI windows (run_viewer's `windows`).

    Args:
        window_class: GGUI's window class, called as window_class(title, (width, height),
            vsync=..., show_window=...) (None: ti.ui.Window).
        environ: the environment variables that say whether there is a display to show a
            window on (DISPLAY or WAYLAND_DISPLAY, on Linux; None: os.environ).
    """

    def __init__(self, window_class=None, environ=None):
        self.window_class = window_class
        self.environ = environ

    def check_display(self):
        """ViewerUnavailable where a shown window has no display to go on."""
        environ = os.environ if self.environ is None else self.environ
        if sys.platform.startswith("linux") and not (
            environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY")
        ):
            raise ViewerUnavailable("no display (neither DISPLAY nor WAYLAND_DISPLAY is set)")

    def open(self, size, offscreen: bool):
        """A GGUI window of size (width, height) px; offscreen: never shown (no display
        needed, only Vulkan). Raises ViewerUnavailable where GGUI cannot start."""
        if not offscreen:
            self.check_display()
        window_class = self.window_class
        if window_class is None:
            import taichi as ti

            window_class = ti.ui.Window
        try:
            # vsync paces a shown window to the display; offscreen frames go as fast as
            # they can.
            return window_class(
                "fx2d_gpu", tuple(size), vsync=not offscreen, show_window=not offscreen
            )
        except Exception as exc:  # GGUI raises RuntimeError variants without Vulkan
            raise ViewerUnavailable(f"GGUI failed to start ({exc})") from None


def open_window(size, offscreen: bool):
    """A GGUI window of size (width, height) px; offscreen: never shown (no display needed,
    only Vulkan). Raises ViewerUnavailable where GGUI cannot start."""
    return WindowFactory().open(size, offscreen)


class Recorder:
    """Frames to files: every frame to png_dir (frame_00000.png, ...) or into a GIF, and the
    last one to `screenshot`."""

    def __init__(self, png_dir=None, gif=None, screenshot=None, fps: float = 60.0):
        self.png_dir = None if png_dir is None else Path(png_dir)
        self.gif, self.screenshot, self.fps = gif, screenshot, fps
        self.frames: list[np.ndarray] = []  # for the GIF
        self.count = 0
        self.last = None
        if self.png_dir is not None:
            self.png_dir.mkdir(parents=True, exist_ok=True)

    @property
    def wanted(self) -> bool:
        return bool(self.png_dir or self.gif or self.screenshot)

    def add(self, image: np.ndarray):
        from .render import write_png

        if self.png_dir is not None:
            write_png(self.png_dir / f"frame_{self.count:05d}.png", image)
        if self.gif:
            self.frames.append(image)
        self.last = image
        self.count += 1

    def finish(self) -> list[str]:
        """Write what is left (the GIF, the screenshot); what was written, for the user."""
        from .render import write_gif, write_png

        written = []
        if self.png_dir is not None:
            written.append(f"{self.png_dir}/ ({self.count} frames)")
        if self.gif and self.frames:
            write_gif(self.gif, self.frames, fps=self.fps)
            written.append(f"{self.gif} ({len(self.frames)} frames)")
        if self.screenshot and self.last is not None:
            write_png(self.screenshot, self.last)
            written.append(str(self.screenshot))
        return written


def _next_screenshot_path() -> Path:
    k = 1
    while Path(f"fx2d_view_{k:04d}.png").exists():
        k += 1
    return Path(f"fx2d_view_{k:04d}.png")


def run_viewer(
    scene_factory,
    dt=1 / 60,
    size=(1024, 768),
    *,
    offscreen=False,
    frames=None,
    png_dir=None,
    gif=None,
    screenshot=None,
    world=0,
    tiled=None,
    overlays=None,
    paused=False,
    log=None,
    windows: WindowFactory | None = None,
) -> list[str]:
    """Show the scene made by scene_factory() in a GGUI window, or record it offscreen.

    Interactive: until the window closes (Escape) or `frames` frames have been drawn.
    offscreen: `frames` frames drawn without a window (GGUI's show_window=False: Vulkan, no
    display); where GGUI cannot start, a message on `log` (a text stream, default stderr) and
    the frames drawn by the image
    renderer (render.render_worlds) instead. Either way, png_dir / gif take every frame and
    screenshot the last. world, tiled, overlays, paused: as ViewerController takes them.
    windows: what opens the window (None: WindowFactory(), GGUI's and this process's
    display).

    Returns:
        What was written, a line each ("DIR/ (N frames)", "PATH (N frames)", "PATH").

    Raises:
        ViewerUnavailable: interactive, and GGUI cannot open a window here (no display, no
            Vulkan).
    """
    if offscreen and frames is None:
        raise ValueError("offscreen needs a number of frames")
    windows = WindowFactory() if windows is None else windows
    if not offscreen:
        windows.check_display()  # before the scene is built: say so at once
    scene = scene_factory()
    controller = ViewerController(scene, dt, size, world, tiled, overlays, paused)
    recorder = Recorder(png_dir, gif, screenshot, fps=1 / dt)
    imgui_settings_existed = Path(IMGUI_SETTINGS).exists()
    try:
        window = windows.open(size, offscreen)
    except ViewerUnavailable as exc:
        if not offscreen:
            raise
        print(
            f"fx2d view: GGUI cannot render offscreen here: {exc}; drawing the frames with "
            "the image renderer (fx2d_gpu.draw.render) instead",
            file=log or sys.stderr,
        )
        return _record_without_ggui(controller, frames, recorder)
    try:
        return _run_window(window, controller, recorder, offscreen, frames)
    finally:
        if not imgui_settings_existed:
            # ImGui (GGUI's panels) saves its window layout to ./imgui.ini: not ours to leave.
            Path(IMGUI_SETTINGS).unlink(missing_ok=True)


def _run_window(
    window, controller: ViewerController, recorder: Recorder, offscreen: bool, frames: int | None
) -> list[str]:
    """The GGUI loop: events to the controller, a frame, drawing, recording, until done."""
    try:
        written = _frames(window, controller, recorder, offscreen, frames)
    finally:
        if not offscreen:
            window.running = False
        window.destroy()
    return written + recorder.finish()


def _frames(window, controller, recorder, offscreen, frames) -> list[str]:
    painter = GGUIPainter(window, controller)
    if not offscreen:
        # Compile the point query now: else the first click on a body would freeze the
        # window for seconds (taken from the drag that follows it).
        controller.scene.query_point(controller.camera.centre)
    written = []  # the screenshots taken with the p key
    while controller.running and (frames is None or controller.frames < frames):
        if not offscreen:
            if not window.running:
                break
            import taichi as ti

            # The cursor first: a click lands where the cursor is now.
            controller.move_cursor(*window.get_cursor_pos())
            for event in window.get_events(ti.ui.PRESS):
                controller.press(event.key)
            for event in window.get_events(ti.ui.RELEASE):
                controller.release(event.key)
        controller.frame()
        painter.draw()
        if recorder.wanted or controller.screenshot_requested:
            image = painter.image()
            if recorder.wanted:
                recorder.add(image)
            if controller.screenshot_requested:
                from .render import write_png

                path = _next_screenshot_path()
                write_png(path, image)
                written.append(str(path))
                controller.screenshot_requested = False
        if not offscreen:  # never on an offscreen window: it crashes (Taichi issue 8330)
            window.show()
    return written


def _record_without_ggui(controller: ViewerController, frames: int, recorder: Recorder):
    """The offscreen recording drawn by render.render_worlds (no Vulkan needed): the same
    camera, contacts if toggled; no other overlays, no heads-up text."""
    from .render import render_worlds

    scene = controller.scene
    for _ in range(frames):
        controller.frame()
        if recorder.wanted:
            views = controller.views()
            rays = None if controller.demo is None else controller.demo.rays
            if controller.tiled:  # render_worlds tiles the first worlds only
                image = render_worlds(
                    scene,
                    controller.size,
                    bounds=views[0].bounds,
                    contacts=controller.overlays.contacts,
                    rays=rays,
                )
            else:
                from .render import render

                world = controller.world
                image = render(
                    scene,
                    world,
                    controller.size,
                    views[0].bounds,
                    contacts=controller.overlays.contacts,
                    rays=None if rays is None else tuple(a[world] for a in rays),
                )
            recorder.add(image)
    return recorder.finish()
