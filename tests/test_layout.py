"""The package's layout rules, checked on its source."""

import ast
from pathlib import Path

import sklearn_crocs

PACKAGE = Path(sklearn_crocs.__file__).parent
# The shared helpers module: the only one whose underscore names other modules import.
SHARED = {"sklearn_crocs._utils"}


def _module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private_imports():
    """``(importing module, imported module, name)`` of every underscore name imported."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not source.startswith("sklearn_crocs"):
                continue
            for alias in node.names:
                name = alias.name
                submodule = PACKAGE.parent.joinpath(*f"{source}.{name}".split("."))
                if submodule.with_suffix(".py").exists() or submodule.is_dir():
                    continue  # a private module of the package, not a private name
                if name.startswith("_") and not name.startswith("__"):
                    found.append((module, source, name))
    return found


def test_private_names_come_only_from_shared_helper_modules():
    offending = [
        f"{module} imports {name} from {source}"
        for module, source, name in _private_imports()
        if source not in SHARED
    ]
    assert offending == []


def test_the_check_sees_relative_imports():
    # Guard against a check that cannot fail: the package does import
    # underscore names from its shared helpers.
    assert any(source in SHARED for _, source, _ in _private_imports())


# ------------------------------------------------ private attributes of others
# Underscore attributes the package may use on objects of other modules: the
# APIs of its dependencies that are underscore-named but meant for this use,
# each with the reason. Everything else underscored is the module's own.
ALLOWED_PRIVATE = {
    # scikit-learn: BaseEstimator's method that validates parameters against
    # _parameter_constraints, called on estimators rebuilt from a model file.
    "_validate_params": "scikit-learn's parameter validation of estimators",
    # scikit-learn: estimators build their constraints from other estimators'
    # (as scikit-learn's own do, e.g. {**KMeans._parameter_constraints}).
    "_parameter_constraints": "scikit-learn's declared parameter constraints",
    # Python: sys._getframe, documented (if implementation-specific), to find
    # the first caller outside the package for a warning's location.
    "_getframe": "the interpreter's frame access, for warnings",
}
SELF_NAMES = {"self", "cls"}


def _package_sources():
    """``{module name: source}`` of every module of the package."""
    return {
        _module_name(path): path.read_text(encoding="utf-8")
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def _is_private(name):
    return name.startswith("_") and not name.startswith("__")


def _defined_names(tree):
    """Names a module defines: functions, classes, parameters, names, attributes of self."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and getattr(node.value, "id", None) in SELF_NAMES
        ):
            names.add(node.attr)  # an attribute that the module's classes set
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("setattr",):
            if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                names.add(node.args[1].value)
    return names


def private_accesses(source):
    """``(line, attribute)`` of each underscore attribute read or written on another object.

    An access on ``self``, ``cls`` or ``super()`` is the class's own; one of a
    name that the module itself defines (a method or attribute of its own
    classes, reached through another variable) is the module's own too.
    """
    tree = ast.parse(source)
    own = _defined_names(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in SELF_NAMES:
            continue
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "super":
            continue
        if node.attr in own or node.attr in ALLOWED_PRIVATE:
            continue
        found.append((node.lineno, node.attr))
    return sorted(found)


def test_no_module_uses_private_attributes_of_another():
    offending = [
        f"{module}:{line} uses {attr}"
        for module, source in _package_sources().items()
        for line, attr in private_accesses(source)
    ]
    assert offending == []


def test_private_access_check_finds_violations():
    source = (
        "import net\n"
        "class A:\n"
        "    def f(self, model):\n"
        "        self._mine = model._class_index\n"
        "        model._mine = net._inference_batch_size()\n"
        "        model._theirs = 1\n"
        "        super()._g()\n"
        "        return model._validate_params()\n"
    )
    # _mine is the module's own attribute; _validate_params is allowed.
    assert private_accesses(source) == [
        (4, "_class_index"),
        (5, "_inference_batch_size"),
        (6, "_theirs"),
    ]


# ------------------------------------------------------------ import cycles
def _lazy_names(tree):
    """A package ``__init__``'s ``_LAZY`` table: names imported from submodules on access."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(getattr(t, "id", None) == "_LAZY" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            return {k.value: v.value for k, v in zip(node.value.keys, node.value.values)}
    return {}


def import_graph(sources, packages):
    """``{module: set of modules it imports}`` within the package, at any depth of the code.

    ``sources`` maps module names to source, ``packages`` is the set of those
    that are packages (an ``__init__``). ``from .pkg import name`` imports
    ``pkg.name`` when that is a module, else ``pkg``'s ``__init__`` (and, when
    ``name`` is in its lazy ``_LAZY`` table, the module that table names): a
    re-export in an ``__init__`` is followed through the ``__init__``'s own
    imports, so a cycle through a package's re-exports is a cycle. The import
    of a module's parent packages, which Python does first for every module,
    is not counted: it would make every ``__init__`` that imports a child a
    cycle, and it runs the parent's imports only where the code names them.
    """
    root = next(iter(sources)).split(".")[0]
    trees = {module: ast.parse(source) for module, source in sources.items()}
    lazy = {module: _lazy_names(trees[module]) for module in packages}
    graph = {}
    for module, tree in trees.items():
        package = module if module in packages else module.rpartition(".")[0]
        edges = graph.setdefault(module, set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in sources)
                continue
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base.split(".")[0] != root:
                continue
            for alias in node.names:
                if f"{base}.{alias.name}" in sources:
                    edges.add(f"{base}.{alias.name}")
                    continue
                edges.add(base)
                target = lazy.get(base, {}).get(alias.name)
                if target is not None:
                    edges.add(base + target if target.startswith(".") else target)
        edges.discard(module)
    return graph


def import_cycles(graph):
    """Every cycle of ``graph`` found by a depth-first search, each as a list of modules."""
    cycles, state = [], {}

    def visit(module, path):
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                cycles.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return cycles


def test_the_package_has_no_import_cycle():
    sources = _package_sources()
    packages = {
        _module_name(path) for path in PACKAGE.rglob("__init__.py")
    }
    graph = import_graph(sources, packages)
    # Guard against a graph that cannot have a cycle: function-local and
    # relative imports are in it.
    assert "sklearn_crocs._clusterer" in graph["sklearn_crocs._persistence._retriever"]
    assert import_cycles(graph) == []


def test_import_cycle_check_finds_cycles():
    sources = {
        "pkg": "_LAZY = {'Model': '._model'}\n",
        "pkg._model": "from ._files import save\n",
        "pkg._files": "def load():\n    from . import Model\n",
        "pkg.sub": "from ._a import x\n",
        "pkg.sub._a": "from .. import __version__\n",
    }
    graph = import_graph(sources, {"pkg", "pkg.sub"})
    assert graph["pkg._files"] == {"pkg", "pkg._model"}
    assert import_cycles(graph) == [["pkg._files", "pkg._model", "pkg._files"]]
    del sources["pkg._files"]
    assert import_cycles(import_graph(sources, {"pkg", "pkg.sub"})) == []


# ------------------------------------------------------------------- sizes
MAX_MODULE_LINES = 800
MAX_ROOT_MODULES = 15


def test_no_module_is_over_800_lines():
    long = {
        str(path.relative_to(PACKAGE)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_at_most_15_modules_sit_at_the_package_root():
    # __init__.py and __main__.py included; subpackages group the rest.
    root = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert "__init__.py" in root and "__main__.py" in root
    assert len(root) <= MAX_ROOT_MODULES, root


# A code block of the gallery wider than about 86 characters overflows the
# documentation's 720-px column (scripts/check_docs.py finds it only after the
# gallery has run, in CI).
MAX_EXAMPLE_LINE = 85


def test_gallery_lines_fit_the_documentation_column():
    examples = sorted((PACKAGE.parent / "examples").glob("plot_*.py"))
    if not examples:
        return  # an installed package without its examples
    wide = [
        f"{path.name}:{number}"
        for path in examples
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > MAX_EXAMPLE_LINE
    ]
    assert wide == []
