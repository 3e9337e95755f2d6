"""Reference graph colouring in NumPy / plain Python: brute-force validity of a colouring
(no colour holds two constraints on one moving body), the colours a sequential greedy
colouring needs, and the colours the documented bidding rule gives (rule_colors).

The references of solver/coloring.py's color_constraints (the colour lists of a step's
contact pairs and joints)."""

import numpy as np

from fx2d_gpu.device import MAX_COLORS, UNSOLVED_COLOR


def colors_sharing_a_body(color_list, color_start, ends, moving, n_colors):
    """The colours c < n_colors of which two constraints share a moving body, by brute
    force: constraint k (listed in color_list[color_start[c]:color_start[c + 1]]) acts on
    the body slots ends[k] (k, 2); moving[slot] marks the slots that conflict (dynamic and
    awake: static or sleeping bodies may be shared)."""
    shared = []
    for c in range(n_colors):
        members = color_list[color_start[c] : color_start[c + 1]]
        bodies = ends[members].reshape(-1)
        bodies = bodies[moving[bodies]]
        if len(bodies) != len(np.unique(bodies)):
            shared.append(c)
    return shared


def greedy_color_count(pairs, moving):
    """Colours a sequential greedy colouring of `pairs` (k, 2) needs, where only bodies with
    moving[body] conflict: the reference for how many colours a pile needs."""
    masks = np.zeros(len(moving), np.int64)
    used = 0
    for a, b in pairs:
        taken = (masks[a] if moving[a] else 0) | (masks[b] if moving[b] else 0)
        color = 0
        while (taken >> color) & 1:
            color += 1
        for body in (a, b):
            if moving[body]:
                masks[body] |= 1 << color
        used = max(used, color + 1)
    return used


#: Sub-rounds per colour of the bidding rule (coloring.py's module docstring: "a few
#: sub-rounds per colour let the losers try bodies still free"). Only the chain's and the
#: star's exact colours depend on it; the hubs' do not (one bid per round wins the hub).
SUB_ROUNDS = 4


#: coloring.priority's bid: a rank above BID_INDEX_BITS bits of the permutation.
BID_INDEX_BITS, RANK_MAX = 27, 15


def bid_priority(local):
    """coloring.priority's documented permutation of a constraint's index within its world,
    the bid's low BID_INDEX_BITS bits (a world of fewer constraints than 2**BID_INDEX_BITS:
    the bids of a world are unique)."""
    mixed = np.asarray(local, np.uint64) * np.uint64(2654435761)
    return mixed & np.uint64((1 << BID_INDEX_BITS) - 1)


def rule_colors(a, b, dynamic, index_bits, solved=None):
    """Colours (MAX_COLORS: overflow, UNSOLVED_COLOR: not solved[k]) of the documented
    bidding rule, simulated one constraint at a time: in round c, SUB_ROUNDS times, every
    uncoloured constraint whose dynamic bodies hold no colour-c constraint bids on them
    (lowest wins); those that win all their dynamic bodies take colour c. A bid is its rank
    (RANK_MAX less the constraints still uncoloured at the constraint's dynamic bodies when
    the round starts, itself counted at each, at most RANK_MAX) above index_bits[k]
    (bid_priority)."""
    solved = np.ones(len(a), bool) if solved is None else solved
    color = np.where(solved, -1, UNSOLVED_COLOR)
    for c in range(MAX_COLORS):
        left = {}  # dynamic body: its constraints without a colour as the round starts
        for k in np.nonzero(color < 0)[0]:
            for x in (a[k], b[k]):
                if dynamic[x]:
                    left[x] = left.get(x, 0) + 1
        priority = {
            k: (
                (RANK_MAX - min(RANK_MAX, sum(left.get(x, 0) for x in (a[k], b[k]) if dynamic[x])))
                << BID_INDEX_BITS
            )
            | int(index_bits[k])
            for k in np.nonzero(color < 0)[0]
        }
        holding = set()  # bodies with a colour-c constraint
        for _ in range(SUB_ROUNDS):
            claim = {}
            free = [
                k
                for k in range(len(a))
                if color[k] < 0 and all(not dynamic[x] or x not in holding for x in (a[k], b[k]))
            ]
            for k in free:
                for x in (a[k], b[k]):
                    if dynamic[x]:
                        claim[x] = min(claim.get(x, priority[k]), priority[k])
            winners = [
                k
                for k in free
                if all(not dynamic[x] or claim[x] == priority[k] for x in (a[k], b[k]))
            ]
            for k in winners:
                color[k] = c
                holding.update((a[k], b[k]))
    color[color < 0] = MAX_COLORS
    return color
