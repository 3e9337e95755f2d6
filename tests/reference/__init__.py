"""Slow, obvious NumPy oracles the device kernels are tested against, one module a concept:
geometry (shapes at their poses, narrow phase), broad_phase (brute-force AABB pairs),
queries (rays and overlaps), coloring (colouring validity, greedy colour counts, the bidding rule),
contacts (closing-speed bound, XPBD push-out, sequential impulses), sleep (island labels),
joints (PID motor, revolute XPBD)."""
