"""The base of the example drivers: what an example's program does to its scene."""

from __future__ import annotations


class ExampleDriver:
    """What an example's program does to its loaded scene, as Fx2D's example programs do
    beside their Scene.yml: `setup` once (joints, motors), `before_step` before every step
    (spawning bodies, the slingshot's shot, motor phases).

    A driver keys what it does on the scene's own clock (`scene.step_count`, `scene.time`),
    so one driver serves a scene put back to its start (the viewer's reset) and every world
    of a batch (what it adds or sets, it adds or sets in every world).

    `fx2d run --example NAME` and `fx2d view --example NAME` call before_step for you
    (examples.load attaches the driver to its scene); in a loop of your own, call
    `driver.step(scene, dt)` instead of `scene.step(dt)`.

    Attributes:
        rays: None: an example draws no rays (the viewer's overlay hook, which the lidar demo
            uses).
    """

    rays = None

    def setup(self, scene) -> None:
        """Once, on the freshly loaded scene: what the program adds in code (joints...)."""

    def before_step(self, scene) -> None:
        """Before every step of `scene`: what the program does between frames."""

    def step(self, scene, dt: float) -> None:
        """before_step(scene), then scene.step(dt) (dt in s)."""
        self.before_step(scene)
        scene.step(dt)
