"""Reading and writing scenes: the Fx2D YAML scene format."""
