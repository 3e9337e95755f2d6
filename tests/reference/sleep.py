"""Reference island labelling in NumPy / plain Python: the graph of bodies joined by
touching contacts and joints, and its connected components by breadth-first search.

The reference of solver/sleep.py's label_islands (the island each body slot belongs to)."""

from collections import deque

import numpy as np

from fx2d_gpu.physics.solver.sleep import TOUCH_DISTANCE


def island_edges(node, n_bodies, n_worlds, a, b, count, depth, joints):
    """The island graph's edges (slot u, slot v): each pair (a[k], b[k]) with a point among
    its first count[k] deeper than -TOUCH_DISTANCE, and each joint (parent, child) of every
    world, both ends island nodes (node[slot]: a body that contacts and joints move)."""
    edges = []
    for k in range(len(a)):
        touching = any(depth[k, i] > -TOUCH_DISTANCE for i in range(count[k]))
        if touching and node[a[k]] and node[b[k]]:
            edges.append((a[k], b[k]))
    for world in range(n_worlds):
        for parent, child in joints:
            u, v = world * n_bodies + parent, world * n_bodies + child
            if node[u] and node[v]:
                edges.append((u, v))
    return edges


def component_labels(n_slots, edges):
    """Per slot, the smallest slot of its connected component (breadth-first search)."""
    neighbours = [[] for _ in range(n_slots)]
    for u, v in edges:
        neighbours[u].append(v)
        neighbours[v].append(u)
    labels = np.full(n_slots, -1)
    for start in range(n_slots):
        if labels[start] >= 0:
            continue
        members, queue = [start], deque([start])
        labels[start] = start
        while queue:
            for v in neighbours[queue.popleft()]:
                if labels[v] < 0:
                    labels[v] = start
                    members.append(v)
                    queue.append(v)
        labels[members] = min(members)
    return labels
