"""The XPBD solver: graph colouring, contact constraints and the substep pipeline."""
