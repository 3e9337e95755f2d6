"""Collision detection: grid-hash broad phase and per-pair narrow phase."""
