"""Small 2D helpers for Taichi kernels (ti.func)."""

import taichi as ti

vec2 = ti.math.vec2


@ti.func
def rotate(v, c, s):
    """v rotated by the angle whose cosine and sine are (c, s)."""
    return vec2(c * v.x - s * v.y, s * v.x + c * v.y)


@ti.func
def rotate_inv(v, c, s):
    """v rotated by minus the angle (c, s)."""
    return vec2(c * v.x + s * v.y, -s * v.x + c * v.y)


@ti.func
def cross(a, b):
    """z of the 3D cross product of two plane vectors."""
    return a.x * b.y - a.y * b.x


@ti.func
def cross_sv(s, v):
    """s ẑ × v: the velocity of a point at v for angular velocity s."""
    return vec2(-s * v.y, s * v.x)
