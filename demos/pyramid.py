"""`fx2d demo pyramid`: see fx2d_gpu/demos.py. Arguments are passed on (--gif out.gif)."""

import sys

from fx2d_gpu.cli import main

if __name__ == "__main__":
    sys.exit(main(["demo", "pyramid", *sys.argv[1:]]))
