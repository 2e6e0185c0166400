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
