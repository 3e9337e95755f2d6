"""Imports Taichi with its banner on stderr: imported by fx2d_gpu before anything else.

Taichi prints "[Taichi] version ..." to stdout when it is first imported. On stdout it
lands in whatever a program writes there (`fx2d run ... > summary.txt`, a pipe into
another tool); on stderr it stays visible without mixing into the output. Taichi's own
setting ENABLE_TAICHI_HEADER_PRINT=0 still turns it off.

Not by redirecting stdout around the import: Taichi looks at sys.stdout then, and one that
is not the console's makes it wrap every kernel call (taichi.lang.shell's print buffer).
"""

import contextlib
import os
import sys

_SETTING = "ENABLE_TAICHI_HEADER_PRINT"

if "taichi" in sys.modules or _SETTING in os.environ:
    import taichi  # noqa: F401  (already imported, or the user's setting decides)
else:
    os.environ[_SETTING] = "0"
    try:
        import taichi  # noqa: F401
    finally:
        del os.environ[_SETTING]
    try:
        from taichi._lib.utils import _print_taichi_header
    except ImportError:  # another Taichi than the pinned one: no banner at all
        pass
    else:
        with contextlib.redirect_stdout(sys.stderr):
            _print_taichi_header()
