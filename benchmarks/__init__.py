"""fx2d_gpu benchmarks: each script prints a table and saves CSV under results/<device>/."""
