"""Launching compiled Taichi kernels with less Python in the way.

A Taichi kernel call spends ~35 us in Python before the kernel runs (argument checks,
template mangling, cache lookups; measured on the 2-core CPU machine, Taichi 1.7.4), and a
step of the awake large pyramid makes ~90 launches: ~3 ms of each ~22 ms step. `quick` wraps
a kernel so that, once a call with the same template arguments has gone through Taichi's own
path (which compiles and checks everything), later calls only fill a fresh launch context
with the scalar arguments and launch the compiled kernel: ~17 us. The compiled kernel is
still fetched from Taichi's cache on every launch, so semantics are Taichi's own.

Array arguments (`ti.types.ndarray` of scalars) take the short path too, given a
C-contiguous NumPy array or a Taichi ndarray of scalars: the compiled instance is then
remembered per template arguments and each array's dtype and dimensions (what Taichi
compiles an instance for), and the array is set as Taichi sets it (its address, size and
shape; on a GPU Taichi's launcher still copies a NumPy array over and back). Taichi's own
call checks and mangles every argument anew: a kernel given 3 arrays took ~104 us a launch
that way and takes 46-54 us now (2-core CPU machine, most of it the launch itself), and
the scene's uploads and reads pass a few arrays each (a vector env's restart makes ~12
such launches).

This uses Taichi internals of the pinned version (taichi==1.7.4 in pyproject.toml); any
kernel whose arguments it does not know (structs, ndarrays of vectors), any array it does
not know (a torch tensor, a non-contiguous array) and any failure to set up the fast path
fall back to the normal call.
"""

import ast
import inspect
import textwrap
import weakref

import numpy as np
import taichi as ti
from taichi.lang import impl
from taichi.lang._ndarray import ScalarNdarray
from taichi.lang.matrix import MatrixType
from taichi.lang.util import cook_dtype
from taichi.types import primitive_types
from taichi.types.ndarray_type import NdarrayType
from taichi.types.utils import is_signed

_FLOAT, _INT, _MATRIX, _INT_VECTOR, _ARRAY = 0, 1, 2, 3, 4
#: Kernel launches made through `quick` kernels in this process (launch_count), and those
#: of kernels that return a value (returning_count): the host waits for the device there.
_launches = 0
_returning = 0
#: Launches given a host array (a NumPy array as an ndarray argument; host_array_count) and
#: those arrays: on CUDA Taichi 1.7.4 copies each to the device before the launch and back
#: after it, and waits for the device on both sides (kernel_launcher.cpp: two stream
#: synchronizations a launch), so each such launch is a sync the host pays twice.
_host_array_launches = 0
_host_arrays = 0
#: The step stage whose launches are being made (set_stage; None outside a step), and the
#: launches made under each stage name (stage_launches).
_stage: str | None = None
_stage_launches: dict[str | None, int] = {}
#: Every `quick` kernel made in this process, for kernel_launches.
_kernels: list = []


def launch_count() -> int:
    """Kernel launches made through `quick` kernels in this process so far (every kernel of
    a step is one): the benchmarks' launches per step, the figure that decides a GPU's step
    time in small and medium scenes."""
    return _launches


def returning_count() -> int:
    """Launches of `quick` kernels that return a value, in this process so far: each makes
    the host wait for the device (a sync), the cost a GPU step can least afford."""
    return _returning


def host_array_count() -> tuple[int, int]:
    """(launches given a host array, host arrays given) through `quick` kernels in this
    process so far: NumPy arrays passed as ndarray arguments, each copied to a GPU and back
    around its launch, which waits for the device before and after (see _host_arrays)."""
    return _host_array_launches, _host_arrays


def set_stage(name: str | None) -> str | None:
    """Count the launches that follow under stage `name` (a step's planned stage,
    solver/plan.py; None: outside a step); returns the stage they counted under before, to
    set back."""
    global _stage
    before, _stage = _stage, name
    return before


def stage_launches() -> dict[str | None, int]:
    """{stage name: launches made under it} in this process so far (a copy; None: launches
    outside a step): subtract two readings to count a step's launches per stage."""
    return dict(_stage_launches)


def kernel_launches() -> dict[str, int]:
    """{kernel's qualified name (module.function): launches of it through `quick`} in this
    process so far, every `quick` kernel listed (0: not launched yet): subtract two readings
    to see which kernels a step ran, the way a GPU profiler names them (a test asks whether
    a path ran, a benchmark where a step's launches go)."""
    counts: dict[str, int] = {}
    for kernel in _kernels:
        counts[kernel.name] = counts.get(kernel.name, 0) + kernel.launches
    return counts


#: Taichi's signed integer types (a vector of one is set with set_struct_arg_int).
_SIGNED_INT_IDS = {id(t) for t in (ti.i8, ti.i16, ti.i32, ti.i64)}


def _argument_kinds(primal):
    """Per argument: None (template) or the setter kind; None overall if unsupported."""
    kinds = []
    for argument in primal.arguments:
        needed = argument.annotation
        if isinstance(needed, ti.template):
            kinds.append(None)
        elif id(needed) in primitive_types.real_type_ids:
            kinds.append((_FLOAT, None))
        elif id(needed) in primitive_types.integer_type_ids:
            kinds.append((_INT, None))
        elif isinstance(needed, MatrixType) and needed.ndim == 1:
            # A vector of i32 (the engine's answers and argument packs) is set entry by
            # entry, as Taichi's set_kernel_struct_args sets it, without making a Matrix.
            signed = id(needed.dtype) in _SIGNED_INT_IDS
            kinds.append((_INT_VECTOR, needed) if signed else (_MATRIX, needed))
        elif isinstance(needed, NdarrayType) and not isinstance(needed.dtype, MatrixType):
            kinds.append((_ARRAY, None))
        else:
            return None
    return kinds


def _array_key(value):
    """What Taichi compiles an array argument's instance for (dtype, dimensions), with how
    it is set: None where the short path does not know the array (Taichi's path takes it)."""
    if isinstance(value, np.ndarray):
        return (value.dtype, value.ndim, True) if value.flags.c_contiguous else None
    if type(value) is ScalarNdarray and value.grad is None:
        return (value.dtype, len(value.shape), False)
    return None


#: Template arguments keyed by value rather than by identity (Taichi keys them so too).
_BY_VALUE = (str, int, float, bool, type(None))

#: Template instantiations a kernel remembers at most (the oldest is forgotten first).
_MAX_ENTRIES = 256


def _by_value(value) -> bool:
    """Whether a template argument is keyed by value (_BY_VALUE), asked of its type:
    isinstance asks a non-matching object for its __class__ too, which on a Taichi
    data_oriented object (the pool's groups) runs Taichi's Python __getattribute__, ~1 us
    a type: the step's 15 groups took ~100 us a launch to key and again to match."""
    return issubclass(type(value), _BY_VALUE)


def _template_key(value):
    """A template argument's part of the key: a tuple's items' keys (Taichi keys a tuple by
    its items; the transfers pass new tuples of the same groups and names at each call),
    a number's or a string's value, any other object's id."""
    if type(value) is tuple:
        return tuple(map(_template_key, value))
    return value if _by_value(value) else id(value)


def _objects(templates) -> list:
    """The template arguments keyed by id (_template_key), tuples walked into, in order."""
    found = []
    for value in templates:
        if type(value) is tuple:
            found.extend(_objects(value))
        elif not _by_value(value):
            found.append(value)
    return found


class _Entry:
    """What one template instantiation needs to be launched again: the C++ kernel and weak
    references to its template arguments keyed by id (an id can be reused once an object
    is freed)."""

    __slots__ = ("kernel", "refs", "program")

    def __init__(self, kernel, templates, program):
        self.kernel = kernel
        self.refs = tuple(
            weakref.ref(t) if _weakrefable(t) else (lambda t=t: t) for t in _objects(templates)
        )
        self.program = program

    def matches(self, templates, program) -> bool:
        return program is self.program and all(
            ref() is t for ref, t in zip(self.refs, _objects(templates), strict=True)
        )


def _weakrefable(obj) -> bool:
    try:
        weakref.ref(obj)
    except TypeError:
        return False
    return True


class QuickKernel:
    """A Taichi kernel launched through the short path (see the module docstring)."""

    def __init__(self, kernel):
        self._kernel = kernel
        self._primal = kernel._primal
        self._kinds = _argument_kinds(self._primal)
        self._template_positions = tuple(
            i for i, kind in enumerate(self._kinds or ()) if kind is None
        )
        #: Positions of the ndarray arguments (host_array_count looks only there; their
        #: dtypes and dimensions choose the compiled instance with the templates).
        self._array_positions = tuple(
            i
            for i, argument in enumerate(self._primal.arguments)
            if isinstance(argument.annotation, NdarrayType)
        )
        self._entries = {}
        self.__doc__ = kernel.__doc__
        self.__name__ = getattr(kernel, "__name__", "kernel")
        self.__wrapped__ = kernel
        self._returns = self._primal.return_type is not None
        self._readers = [_return_reader(t) for t in self._primal.return_type or ()]
        #: The kernel's qualified name (kernel_launches) and its launches so far.
        self.name = f"{self._primal.func.__module__}.{self._primal.func.__name__}"
        self.launches = 0
        _kernels.append(self)

    @property
    def short_path(self) -> bool:
        """False once the kernel's arguments turned out unsupported (Taichi's path always)."""
        return self._kinds is not None

    @property
    def remembered(self) -> int:
        """Template instantiations that launch through the short path."""
        return len(self._entries)

    def launch(self, args: tuple):
        """Launch with every argument in parameter order (what __call__ binds)."""
        global _launches, _returning, _host_array_launches, _host_arrays
        _launches += 1
        _returning += self._returns
        if self._array_positions:
            given = sum(isinstance(args[i], np.ndarray) for i in self._array_positions)
            _host_array_launches += given > 0
            _host_arrays += given
        self.launches += 1
        _stage_launches[_stage] = _stage_launches.get(_stage, 0) + 1
        if self._kinds is None or len(args) != len(self._kinds):
            return self._kernel(*args)
        templates = tuple(args[i] for i in self._template_positions)
        arrays = tuple(_array_key(args[i]) for i in self._array_positions)
        if None in arrays:
            return self._kernel(*args)  # an array the short path does not set
        program = impl.get_runtime().prog
        key = (_template_key(templates), arrays)
        entry = self._entries.get(key)
        if entry is None or not entry.matches(templates, program):
            result = self._kernel(*args)  # Taichi's path: compiles, checks the arguments
            self._remember(args, key, templates, program)
            return result
        return self._launch(entry.kernel, program, args)

    def _remember(self, args, key, templates, program):
        try:
            compiled_key = self._primal.ensure_compiled(*args)
            kernel = self._primal.compiled_kernels[compiled_key]
        except Exception:  # noqa: BLE001 - internals changed: keep Taichi's own path
            self._kinds = None
            return
        if len(self._entries) >= _MAX_ENTRIES:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = _Entry(kernel, templates, program)

    def _launch(self, kernel, program, args):
        context = kernel.make_launch_context()
        index = 0
        for kind, value in zip(self._kinds, args, strict=True):
            if kind is None:
                continue
            setter, matrix_type = kind
            if setter == _FLOAT:
                context.set_arg_float((index,), float(value))
            elif setter == _INT:
                context.set_arg_int((index,), int(value))
            elif setter == _ARRAY:
                if isinstance(value, np.ndarray):  # as Taichi's set_arg_ext_array sets it
                    context.set_arg_external_array_with_shape(
                        (index,), int(value.ctypes.data), value.nbytes, value.shape, 0
                    )
                else:
                    context.set_arg_ndarray((index,), value.arr)
            elif setter == _INT_VECTOR and len(value) == matrix_type.n:
                for entry, number in enumerate(value):
                    context.set_struct_arg_int((index, entry), int(number))
            else:
                values = np.asarray(value).reshape(-1).tolist()
                matrix_type.set_kernel_struct_args(matrix_type(*values), context, (index,))
            index += 1
        compiled = program.compile_kernel(program.config(), program.get_device_caps(), kernel)
        program.launch_kernel(compiled, context)
        return_types = self._primal.return_type
        if not return_types:
            return None
        impl.get_runtime().sync()
        results = [
            self._primal.construct_kernel_ret(context, t, (i,))
            if reader is None
            else _read_vector(getattr(context, reader[0]), i, reader[1])
            for i, (t, reader) in enumerate(zip(return_types, self._readers, strict=True))
        ]
        return results[0] if len(results) == 1 else results


def _return_reader(return_type) -> tuple | None:
    """How the short path reads a kernel's returned vector of integers or floats from the
    launch context: (the name of the context's getter, the vector's entries), its
    entries then returned as a tuple of Python numbers, where Taichi's own path builds a
    ti.Vector of them (construct_kernel_ret: ~20 us for 3 entries, more for the step's
    answer of 19, against ~1 us an entry read; 2-core CPU machine). The engine's callers
    only iterate over and unpack what these kernels return. None: any other type, read by
    Taichi's construct_kernel_ret."""
    if not isinstance(return_type, MatrixType) or return_type.ndim != 1:
        return None
    dtype = return_type.dtype
    if dtype in primitive_types.integer_types:
        signed = is_signed(cook_dtype(dtype))
        getter = "get_struct_ret_int" if signed else "get_struct_ret_uint"
    elif dtype in primitive_types.real_types:
        getter = "get_struct_ret_float"
    else:
        return None
    return getter, return_type.n


def _read_vector(get, index: int, entries: int) -> tuple:
    """Return value `index`'s `entries` numbers, read with the launch context's `get`."""
    return tuple([get((index, entry)) for entry in range(entries)])


def _with_signature(primal) -> type:
    """A QuickKernel subclass whose __call__ takes the kernel's parameters by name, so that
    Python binds keyword arguments to positions as it calls, in C: keywords through
    Taichi's own path cost up to ~30 us a launch more, and a walk over a **kwargs dict ~3 us
    for 16 of them (2-core CPU machine, Taichi 1.7.4; kernels take no default values)."""
    names = [argument.name for argument in primal.arguments]  # identifiers: safe to compile
    namespace = {}
    exec(
        f"def __call__(self, {', '.join(names)}):\n"
        f"    return self.launch(({''.join(name + ', ' for name in names)}))\n",
        namespace,
    )
    return type(
        f"Quick_{primal.func.__name__}", (QuickKernel,), {"__call__": namespace["__call__"]}
    )


def quick(kernel) -> QuickKernel:
    """Decorator, above @ti.kernel: launch through the short path after the first call;
    arguments by position or by keyword."""
    return _with_signature(kernel._primal)(kernel)


def cache_source_positions():
    """Cheap source-position text for the AST nodes Taichi's frontend transforms (taichi
    1.7.4).

    Taichi's frontend formats a file/line/caret message for every node it transforms (the
    IR's debug info, shown by a failed ti.static_assert or a debug-mode bounds check), with
    textwrap, every time a kernel is instantiated and every time a ti.func is inlined, with
    the offline cache warm too: 0.29 s of a small scene's ~3 s first step on the 2-core CPU
    machine, even memoised per node (46,853 calls). This gives every node of a source line
    the line's text (file, line, function and the line itself, without the caret), made
    once per line. An error in the frontend (a TaichiSyntaxError...) still gets Taichi's
    full message with the caret: once a node has raised, its context asks again and gets
    Taichi's own text. Idempotent; leaves Taichi alone if its internals differ.
    """
    try:
        from taichi.lang.ast.ast_transformer_utils import ASTTransformerContext
    except ImportError:
        return
    original = ASTTransformerContext.get_pos_info
    if getattr(original, "_fx2d_cached", False):
        return
    texts: dict = {}

    def get_pos_info(self, node):
        try:
            if self.raised:
                return original(self, node)
            line = node.lineno + self.lineno_offset
            key = (self.file, line, self.func.func.__name__, node.lineno)
            text = texts.get(key)
            if text is None:
                text = texts[key] = (
                    f'File "{self.file}", line {line}, in {key[2]}:\n{self.src[node.lineno - 1]}\n'
                )
            return text
        except (AttributeError, IndexError):
            return original(self, node)

    get_pos_info._fx2d_cached = True
    ASTTransformerContext.get_pos_info = get_pos_info


#: The parameters of taichi.lang.kernel_impl._get_tree_and_ctx in taichi 1.7.4.
_TREE_PARAMETERS = (
    "self",
    "excluded_parameters",
    "is_kernel",
    "arg_features",
    "args",
    "ast_builder",
    "is_real_function",
)


def cache_function_sources():
    """Read each Taichi function's source once (taichi 1.7.4).

    Taichi's frontend re-reads a ti.func's source every time it inlines it (the file's
    lines, a tokenizer pass to find the function's end, textwrap over every line) before
    parsing it: 2,498 times in a small scene's first step, ~2.4 s of a ~5 s frontend on the
    2-core CPU machine, with the offline cache warm. The text of a function's source does
    not change while the process runs; the syntax tree is still parsed afresh for every
    inlining (the transformer writes into it). Idempotent; leaves Taichi alone if its
    internals differ.
    """
    try:
        from taichi.lang import kernel_impl
        from taichi.lang.ast.ast_transformer_utils import ASTTransformerContext
    except ImportError:
        return
    original = getattr(kernel_impl, "_get_tree_and_ctx", None)
    if original is None or getattr(original, "_fx2d_cached", False):
        return
    if tuple(inspect.signature(original).parameters) != _TREE_PARAMETERS:
        return
    sources = weakref.WeakKeyDictionary()

    def source_of(func):
        """(file, lines, first line number, dedented text) of a Python function."""
        cached = sources.get(func)
        if cached is None:
            lines, start_lineno = kernel_impl.getsourcelines(func)
            lines = [textwrap.fill(line, tabsize=4, width=9999) for line in lines]
            cached = (
                kernel_impl.getsourcefile(func),
                lines,
                start_lineno,
                textwrap.dedent("\n".join(lines)),
            )
            sources[func] = cached
        return cached

    def get_tree_and_ctx(
        self,
        excluded_parameters=(),
        is_kernel=True,
        arg_features=None,
        args=None,
        ast_builder=None,
        is_real_function=False,
    ):
        # Taichi's _get_tree_and_ctx, with the source read through source_of.
        file, src, start_lineno, text = source_of(self.func)
        tree = ast.parse(text)
        tree.body[0].decorator_list = []
        global_vars = kernel_impl._get_global_vars(self.func)
        if is_kernel or is_real_function:
            for i in self.template_slot_locations:  # template arguments become globals
                global_vars[self.arguments[i].name] = args[i]
        return tree, ASTTransformerContext(
            excluded_parameters=excluded_parameters,
            is_kernel=is_kernel,
            func=self,
            arg_features=arg_features,
            global_vars=global_vars,
            argument_data=args,
            src=src,
            start_lineno=start_lineno,
            file=file,
            ast_builder=ast_builder,
            is_real_function=is_real_function,
        )

    get_tree_and_ctx._fx2d_cached = True
    kernel_impl._get_tree_and_ctx = get_tree_and_ctx
