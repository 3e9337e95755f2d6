"""The step's physics on the device: collision (broad and narrow phase, queries) and the solver
(colouring, substeps, contacts, joints, sleep)."""
