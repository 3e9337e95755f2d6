"""The scene's model on the host: bodies, shapes and joints as built (builder), queries of it,
joint kinematics and per-world values."""
