"""Reading and writing a resident scene: state, contacts, per-world resets, snapshots and state
files, spatial queries."""
