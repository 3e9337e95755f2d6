"""Facts about the code's structure that anyone can recompute (issue 73's measures).

    python -m benchmarks.structure [--list]

Prints: the package's folders with their line counts; the number of top-level modules of
fx2d_gpu/; import circles among the package's modules (a function's deferred import counts;
those under `if TYPE_CHECKING:` do not: they never run); imports from a lower layer to a
higher one (LAYERS); host functions (not Taichi kernels or funcs) over HOST_FUNCTION_LINES
lines; Taichi kernels and funcs over KERNEL_PARAMETERS parameters; monkeypatches in the
tests (calls of monkeypatch's methods); tests that read a private member (an attribute
starting with one underscore, of anything but self). --list names each function and test
counted. tests/test_structure.py holds the package to the first four.
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fx2d_gpu"
HOST_FUNCTION_LINES = 80
KERNEL_PARAMETERS = 16
#: The package's layers, lowest first: a module may import from its own layer and those
#: below it, never from one above. Modules in none (fx2d_gpu's Scene, scenes, demos, cli,
#: io/, envs/, distributed/, examples/) are the top layer.
LAYERS = (
    ("vocabulary", ("fx2d_gpu.checks", "fx2d_gpu.enums", "fx2d_gpu.shapes", "fx2d_gpu.records")),
    ("model", ("fx2d_gpu.model",)),
    ("device", ("fx2d_gpu.device",)),
    ("physics", ("fx2d_gpu.physics",)),
    ("access", ("fx2d_gpu.access",)),
    ("draw", ("fx2d_gpu.draw",)),
)


def modules() -> dict[str, Path]:
    """{dotted module name: path} of the package's modules."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _is_taichi(function: ast.AST) -> bool:
    return any(
        "ti.func" in ast.unparse(d)
        or "ti.kernel" in ast.unparse(d)
        or "real_func" in ast.unparse(d)
        for d in function.decorator_list
    )


def _runtime_imports(module: str, path: Path, modules: dict) -> set[str]:
    """The package modules `module` imports when it runs (anywhere in it, a function's
    deferred import too; not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()

    def visit(body):
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                visit(ast.iter_child_nodes(node))  # imports inside functions count too
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("fx2d_gpu"))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not target.startswith("fx2d_gpu"):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    found.add(sub if sub in modules else target)

    visit(tree.body)
    return {m for m in found if m in modules and m != module}


def top_level_modules() -> list[Path]:
    """fx2d_gpu's own modules outside any folder (its __init__ aside)."""
    return sorted(p for p in PACKAGE.glob("*.py") if p.name != "__init__.py")


def layer_of(module: str) -> int:
    """The index of `module`'s layer in LAYERS (len(LAYERS): the top)."""
    for index, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return len(LAYERS)


def upward_imports(modules: dict) -> list[tuple[str, str]]:
    """(importer, imported) where a module imports one of a higher layer."""
    return sorted(
        (name, target)
        for name, path in modules.items()
        for target in _runtime_imports(name, path, modules)
        if layer_of(target) > layer_of(name)
    )


def import_circles(modules: dict) -> list[list[str]]:
    """The strongly connected groups (of more than one module) of the import graph."""
    graph = {m: _runtime_imports(m, p, modules) for m, p in modules.items()}
    # A package's __init__ importing its own modules is not a circle through them.
    index, low, stack, on_stack, groups, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in graph:
        if v not in index:
            strong(v)
    return groups


def long_functions(modules: dict) -> tuple[list, list]:
    """(host functions over HOST_FUNCTION_LINES lines, Taichi kernels/funcs over
    KERNEL_PARAMETERS parameters), each (module:function, count)."""
    host, kernels = [], []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            where = f"{module}:{node.name}"
            if _is_taichi(node):
                n = len(node.args.args) + len(node.args.kwonlyargs)
                if n > KERNEL_PARAMETERS:
                    kernels.append((where, n))
            else:
                body = node.body
                if (
                    body
                    and isinstance(body[0], ast.Expr)
                    and isinstance(getattr(body[0], "value", None), ast.Constant)
                ):
                    body = body[1:]  # the docstring does not count
                if body:
                    lines = body[-1].end_lineno - body[0].lineno + 1
                    if lines > HOST_FUNCTION_LINES:
                        host.append((where, lines))
    return host, kernels


#: A named tuple's public API, whose names start with an underscore so as not to clash with
#: its fields (Python's collections.namedtuple documentation): not private members.
NAMEDTUPLE_API = frozenset({"_fields", "_field_defaults", "_asdict", "_replace", "_make"})


def test_facts() -> tuple[list, list]:
    """(monkeypatch calls, tests reading a private member), each (file:line or test)."""
    patches, private = [], []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "monkeypatch"
            ):
                patches.append(f"{path.name}:{node.lineno}")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                for inner in ast.walk(node):
                    if (
                        isinstance(inner, ast.Attribute)
                        and inner.attr.startswith("_")
                        and not inner.attr.startswith("__")
                        and inner.attr not in NAMEDTUPLE_API
                        and not (isinstance(inner.value, ast.Name) and inner.value.id == "self")
                    ):
                        private.append(f"{path.name}::{node.name}")
                        break
    return patches, private


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="name each item counted")
    args = parser.parse_args(argv)
    found = modules()
    lines = defaultdict(int)
    for path in found.values():
        folder = str(path.parent.relative_to(ROOT))
        lines[folder] += len(path.read_text().splitlines())
    print("folders (lines):")
    for folder, count in sorted(lines.items()):
        print(f"  {folder:32s} {count:6d}")
    print(f"top-level modules of fx2d_gpu/: {len(top_level_modules())}")
    circles = import_circles(found)
    print(f"import circles: {len(circles)}")
    for group in circles:
        print("  " + " <-> ".join(group))
    upward = upward_imports(found)
    print(f"imports from a lower layer to a higher one: {len(upward)}")
    for importer, imported in upward:
        print(f"  {importer} -> {imported}")
    host, kernels = long_functions(found)
    print(f"host functions over {HOST_FUNCTION_LINES} lines: {len(host)}")
    print(f"kernels or funcs over {KERNEL_PARAMETERS} parameters: {len(kernels)}")
    patches, private = test_facts()
    print(f"monkeypatches in tests: {len(patches)}")
    print(f"tests reading private members: {len(set(private))}")
    if args.list:
        for title, items in (("host functions", host), ("kernels", kernels)):
            print(f"{title}:")
            for where, n in sorted(items, key=lambda item: -item[1]):
                print(f"  {where} ({n})")
        print("monkeypatches:", ", ".join(patches))
        print("tests reading private members:", ", ".join(sorted(set(private))))


if __name__ == "__main__":
    main()
