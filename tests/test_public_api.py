"""Every public name of fx2d_gpu is documented, so the API reference (mkdocstrings, built from
docstrings) has no holes, and a name added later without a docstring fails here by name.

The public API: every name in fx2d_gpu.__all__; every public function, class and constant
of fx2d_gpu.shapes and fx2d_gpu.examples; for every public class, every public method,
property and classmethod it (or a project base class) defines. Record classes (dataclasses)
document their fields in the class docstring instead of one docstring per field; classes
with a hand-written __init__ document its arguments and the public attributes it sets
there. Functions and methods mention every one of their parameters.
"""

import ast
import dataclasses
import functools
import importlib
import inspect
import re
import sys
import textwrap
import types

import fx2d_gpu

PACKAGE = "fx2d_gpu"
#: Modules whose public functions, classes and constants are API (beyond __all__).
#: (Not fx2d_gpu.distributed.worker's ShardWorker: Ray rewrites the signatures of an actor
#: class's methods in place, and it is the package's own.)
API_MODULES = (
    "fx2d_gpu.shapes",
    "fx2d_gpu.enums",
    "fx2d_gpu.examples",
    "fx2d_gpu.distributed.sharded_scene",
)
#: Modules the reference renders whole, or whose docstring introduces an API name.
DOCUMENTED_MODULES = (
    "fx2d_gpu",
    "fx2d_gpu.records",
    "fx2d_gpu.shapes",
    "fx2d_gpu.scene",
    "fx2d_gpu.access.snapshots",
    "fx2d_gpu.io.scene_loader",
    "fx2d_gpu.examples",
    "fx2d_gpu.enums",
)


def _is_public(name: str) -> bool:
    return not name.startswith("_")


def _ours(obj) -> bool:
    """Defined in this project (not imported from NumPy, the standard library ...)."""
    return (getattr(obj, "__module__", None) or "").split(".")[0] == PACKAGE


def _text(doc) -> str:
    """A docstring, "" where there is none or it is blank."""
    return doc.strip() if isinstance(doc, str) else ""


def _class_doc(cls) -> str:
    """cls's own docstring (never a base class's), "" for dataclasses' generated one."""
    doc = _text(vars(cls).get("__doc__"))
    if dataclasses.is_dataclass(cls):
        try:
            generated = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):
            generated = None
        if doc == generated:
            return ""
    return doc


def _member_function(member):
    """The function behind a class member (a method, property, cached_property,
    classmethod or staticmethod), or None for data."""
    if isinstance(member, (classmethod, staticmethod)):
        return member.__func__
    if isinstance(member, property):
        return member.fget
    if isinstance(member, functools.cached_property):
        return member.func
    if inspect.isfunction(member):
        return member
    return None


def _member_doc(member) -> str:
    if isinstance(member, property):
        return _text(member.__doc__) or _text(getattr(member.fget, "__doc__", None))
    function = _member_function(member)
    return _text(getattr(function, "__doc__", None))


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def _attribute_docstring(module: types.ModuleType, name: str) -> str | None:
    """The docstring after `name = ...` at the top level of `module` (what griffe shows for
    a constant), "" if it has none; None if the module does not assign `name`."""
    tree = ast.parse(inspect.getsource(module))
    body = tree.body
    for i, node in enumerate(body):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            after = body[i + 1] if i + 1 < len(body) else None
            if (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                return after.value.value.strip()
            return ""
    return None


def _constant_doc(name: str) -> str:
    """The attribute docstring of constant `name`, from the fx2d_gpu module assigning it."""
    for module_name, module in sorted(sys.modules.items()):
        if module_name.split(".")[0] != PACKAGE or module is None:
            continue
        try:
            doc = _attribute_docstring(module, name)
        except (OSError, TypeError):
            continue
        if doc is not None:
            return doc
    return ""


def _init_attributes(cls) -> list[str]:
    """The public attributes cls's own __init__ sets (self.name = ...)."""
    init = vars(cls).get("__init__")
    if not inspect.isfunction(init):
        return []
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    except (OSError, TypeError):
        return []
    names = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for item in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if (
                        isinstance(item, ast.Attribute)
                        and isinstance(item.value, ast.Name)
                        and item.value.id == "self"
                        and _is_public(item.attr)
                    ):
                        names.append(item.attr)
    return sorted(set(names))


def _parameters(function) -> list[str]:
    """The parameters a caller passes (self and cls left out)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    names = list(signature.parameters)
    if names and names[0] in ("self", "cls"):
        names = names[1:]
    return names


def _mentions(doc: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}\b", doc) is not None


# ---------------------------------------------------------------------------- the API
def _public_objects(kind) -> dict:
    """Qualified name -> object, for every public object of the API that `kind` accepts
    (inspect.isclass or inspect.isfunction): those of __all__, and those each API module
    defines itself."""
    found = {
        f"{PACKAGE}.{name}": getattr(fx2d_gpu, name)
        for name in fx2d_gpu.__all__
        if kind(getattr(fx2d_gpu, name, None))
    }
    for module_name in API_MODULES:
        for name, obj in vars(_module(module_name)).items():
            if _is_public(name) and kind(obj) and obj.__module__ == module_name:
                found[f"{module_name}.{name}"] = obj
    return found


def public_classes() -> dict[str, type]:
    """Qualified name -> class, for every public class of the API."""
    return _public_objects(inspect.isclass)


def public_functions() -> dict[str, types.FunctionType]:
    """Qualified name -> function, for every public module-level function of the API."""
    return _public_objects(inspect.isfunction)


def public_constants() -> dict[str, str]:
    """Qualified name -> docstring, for every public constant of the API: the non-class,
    non-function names of __all__ and the UPPER_CASE names each API module assigns."""
    constants = {}
    for name in fx2d_gpu.__all__:
        obj = getattr(fx2d_gpu, name, None)
        if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj)):
            constants[f"{PACKAGE}.{name}"] = _constant_doc(name)
    for module_name in API_MODULES:
        module = _module(module_name)
        for name in vars(module):
            if _is_public(name) and name.isupper():
                doc = _attribute_docstring(module, name)
                if doc is not None:  # assigned here, not imported
                    constants[f"{module_name}.{name}"] = doc
    return constants


def public_members(classes: dict[str, type]) -> dict[str, object]:
    """Qualified name -> member, for every public method, property and classmethod each
    class (or a project base class of it) defines."""
    members = {}
    for qualified, cls in classes.items():
        for klass in reversed(cls.__mro__):
            if not _ours(klass):
                continue
            for name, member in vars(klass).items():
                if _is_public(name) and _member_function(member) is not None:
                    members[f"{qualified}.{name}"] = member
    return members


# ---------------------------------------------------------------------------- the tests
def test_all_names_exist():
    missing = [name for name in fx2d_gpu.__all__ if not hasattr(fx2d_gpu, name)]
    assert not missing, f"fx2d_gpu.__all__ names what fx2d_gpu lacks: {missing}"
    assert len(set(fx2d_gpu.__all__)) == len(fx2d_gpu.__all__), "duplicates in __all__"
    for name in (
        "Scene",
        "load_scene",
        "State",
        "Contacts",
        "ContactEvents",
        "ContactEventList",
        "JointState",
        "RayHits",
        "RayHitList",
        "Overlaps",
        "SceneSnapshot",
        "SimulationError",
        "MAX_POLYGON_VERTICES",
    ):
        assert name in fx2d_gpu.__all__, name


def test_the_api_found_is_not_trivially_small():
    classes = public_classes()
    members = public_members(classes)
    functions = public_functions()
    scene_methods = [name for name in members if name.startswith("fx2d_gpu.Scene.")]
    assert len(scene_methods) > 30, scene_methods
    assert "fx2d_gpu.shapes.Shape" in classes
    for name in ("circle", "box", "polygon", "capsule", "edge", "chain", "circles", "boxes"):
        assert f"fx2d_gpu.shapes.{name}" in functions, name
    for name in ("names", "path"):
        assert f"fx2d_gpu.examples.{name}" in functions, name
    assert "fx2d_gpu.load_scene" in functions
    assert "fx2d_gpu.Contacts.pairs" in members and "fx2d_gpu.RayHits.hit" in members
    assert "fx2d_gpu.SceneSnapshot.load" in members  # a classmethod
    assert len(classes) + len(functions) + len(members) > 100


def test_modules_have_docstrings():
    missing = [name for name in DOCUMENTED_MODULES if not _text(_module(name).__doc__)]
    assert not missing, f"modules without a docstring: {missing}"


def test_classes_and_functions_have_docstrings():
    missing = [name for name, cls in public_classes().items() if not _class_doc(cls)]
    missing += [
        name for name, function in public_functions().items() if not _text(function.__doc__)
    ]
    assert not missing, "no docstring:\n  " + "\n  ".join(missing)


def test_methods_and_properties_have_docstrings():
    missing = [
        name for name, member in public_members(public_classes()).items() if not _member_doc(member)
    ]
    assert not missing, "no docstring:\n  " + "\n  ".join(missing)


def test_constants_have_docstrings():
    # A docstring right after the assignment: what griffe (the reference) shows.
    missing = [name for name, doc in public_constants().items() if not doc]
    assert not missing, "no attribute docstring after the assignment:\n  " + "\n  ".join(missing)


def test_records_describe_every_field():
    undescribed = []
    for qualified, cls in public_classes().items():
        if dataclasses.is_dataclass(cls):
            fields = [f.name for f in dataclasses.fields(cls)]
        elif issubclass(cls, tuple) and hasattr(cls, "_fields"):
            fields = list(cls._fields)
        else:
            continue
        doc = _class_doc(cls)
        undescribed += [
            f"{qualified}.{name}"
            for name in fields
            if _is_public(name) and not _mentions(doc, name)
        ]
    assert not undescribed, "fields not described in their class docstring:\n  " + "\n  ".join(
        undescribed
    )


def test_constructors_describe_their_arguments_and_attributes():
    undescribed = []
    for qualified, cls in public_classes().items():
        init = vars(cls).get("__init__")
        if not inspect.isfunction(init) or dataclasses.is_dataclass(cls):
            continue
        doc = _class_doc(cls) + "\n" + _text(init.__doc__)
        names = set(_parameters(init)) | set(_init_attributes(cls))
        undescribed += [
            f"{qualified}: {name}" for name in sorted(names) if not _mentions(doc, name)
        ]
    assert not undescribed, "constructor arguments or attributes not described:\n  " + "\n  ".join(
        undescribed
    )


def test_functions_and_methods_mention_every_parameter():
    callables = dict(public_functions())
    for name, member in public_members(public_classes()).items():
        if not isinstance(member, (property, functools.cached_property)):
            callables[name] = _member_function(member)
    unmentioned = []
    for qualified, function in callables.items():
        doc = _text(function.__doc__)
        unmentioned += [
            f"{qualified}: {name}"
            for name in _parameters(function)
            if doc and not _mentions(doc, name)
        ]
    assert not unmentioned, "parameters the docstring does not mention:\n  " + "\n  ".join(
        unmentioned
    )


def test_docstrings_point_at_nothing_users_lack():
    # The project's working notes (a shared/ folder) are not in the package or the docs.
    docs = {name: _text(_module(name).__doc__) for name in DOCUMENTED_MODULES}
    docs.update({name: _class_doc(cls) for name, cls in public_classes().items()})
    docs.update({name: _text(f.__doc__) for name, f in public_functions().items()})
    docs.update({name: _member_doc(m) for name, m in public_members(public_classes()).items()})
    pointing = [name for name, doc in docs.items() if "shared/" in doc]
    assert not pointing, f"docstrings that refer to a shared/ folder: {pointing}"
