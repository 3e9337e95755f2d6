"""Imports Taichi with its banner on stderr, and makes its decorators cheap to apply at a
module's top level (know_import_frames): imported by fx2d_gpu before anything else.

Taichi prints "[Taichi] version ..." to stdout when it is first imported. On stdout it
lands in whatever a program writes there (`fx2d run ... > summary.txt`, a pipe into
another tool); on stderr it stays visible without mixing into the output. Taichi's own
setting ENABLE_TAICHI_HEADER_PRINT=0 still turns it off.

Not by redirecting stdout around the import: Taichi looks at sys.stdout then, and one that
is not the console's makes it wrap every kernel call (taichi.lang.shell's print buffer).
"""

import contextlib
import inspect
import os
import sys

#: The modules whose frames (importlib's own, frozen into the interpreter: no source file)
#: run a module's top level while it is imported.
IMPORT_FRAME_MODULES = ("importlib._bootstrap", "importlib._bootstrap_external")


def know_import_frames():
    """Name importlib's frozen frames' modules in inspect's own table of files to modules.

    Why: Taichi's decorators (ti.func, ti.kernel; taichi 1.7.4's kernel_impl._inside_class)
    read the source line of the frame three levels up, through inspect.getframeinfo, to
    tell a function defined in a class. For one defined at a module's top level that frame
    is importlib's `<frozen importlib._bootstrap>`, a file on no disk, so inspect.getmodule
    went through every module loaded so far (~500 with numpy and Taichi, more in a program
    that imported more before) looking for its file, three times a decorator, and found
    none. fx2d_gpu applies 480 of them and Taichi's own modules 93: about a second of
    `import fx2d_gpu` on the 2-core CPU machine (2026-12-07: 2.0 -> 1.0 s without bytecode
    caches, ~1.2 -> ~0.6 s with them), in every process that imports it (the command line,
    Ray's actors, a test's child processes). Named here, each lookup is one dict hit and
    gives what the search gave: no source, so not in a class (the same answer for all 497
    decorators of fx2d_gpu and its envs, compared in order). Idempotent; leaves a Python
    whose inspect keeps no such table alone.
    """
    table = getattr(inspect, "modulesbyfile", None)
    if not isinstance(table, dict):
        return
    for name in IMPORT_FRAME_MODULES:
        if name in sys.modules:
            table.setdefault(f"<frozen {name}>", name)


# Before Taichi: its own modules apply its decorators too.
know_import_frames()

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
