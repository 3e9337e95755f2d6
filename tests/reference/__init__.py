"""Slow, obvious NumPy oracles the device kernels are tested against."""
