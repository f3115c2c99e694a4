"""Packages whose `__init__` imports its submodules only when one of their names is asked for.

Python runs a package's `__init__` before any of its submodules, and three that the functions use import far more
than a function needs: Powertools' `event_handler` every resolver it holds (AppSync, Bedrock, VPC Lattice...) and
with them asyncio, Powertools' `utilities.data_classes` the data classes of every event source, and wrapt (the
X-Ray SDK's, on a sampled request) asyncio. Deferred, an HTTP function's cold start loads one resolver and seven
data classes (docs/performance.md, target 7). Hand-written because nothing defers a package's `__init__` from
outside it: `importlib.util.LazyLoader` runs it as soon as a submodule is imported (the import reads the package's
`__path__`), and lazy_loader (SPEC 1) serves a package's own `__init__`.

A deferred package runs its `__init__` without the statements that import from its own submodules (`from
.<module> import <name>`, `from <package>.<module> import <name>`: read from its source); each such name is
imported from its module when first asked for, as any submodule is (PEP 562 `__getattr__`; `dir()` lists them).
Everything else in the `__init__` runs as written; one that uses a name it imports is imported as usual.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import threading
from typing import Any

DEFERRED = (
    "aws_lambda_powertools.event_handler",
    "aws_lambda_powertools.utilities.data_classes",
    "wrapt",
)

_lock = threading.Lock()


def _submodule_imports(name: str, tree: ast.Module) -> tuple[dict[str, tuple[str, str]], ast.Module]:
    """The `from <name>.<module> import <names>` (or relative) statements of package `name`'s `__init__` as
    {exported name: (module, name in it)}, and the rest of the `__init__`."""
    exports: dict[str, tuple[str, str]] = {}
    rest: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and all(alias.name != "*" for alias in node.names):
            if node.level:
                base = name.rsplit(".", node.level - 1)[0] if node.level > 1 else name
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module == name or module.startswith(name + "."):
                for alias in node.names:
                    exports[alias.asname or alias.name] = (module, alias.name)
                continue
        rest.append(node)
    return exports, ast.Module(body=rest, type_ignores=[])


def defer_init(name: str) -> None:
    """Register package `name` with its `__init__` run without its own submodules' imports, which are made when
    one of their names is asked for (nothing happens when the package is imported already)."""
    with _lock:
        if name in sys.modules:
            return
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            raise ImportError(f"{name} is not a package", name=name)
        source = spec.loader.get_source(name)  # type: ignore[attr-defined]
        exports, rest = _submodule_imports(name, ast.parse(source, spec.origin or name))
        package = importlib.util.module_from_spec(spec)

        def __getattr__(attribute: str) -> Any:  # a module's attribute hook (PEP 562)
            if attribute in exports:
                module, original = exports[attribute]
                if module == name:  # `from . import submodule`
                    value: Any = importlib.import_module(f"{name}.{original}")
                else:
                    value = getattr(importlib.import_module(module), original)
            elif not attribute.startswith("__") and importlib.util.find_spec(f"{name}.{attribute}") is not None:
                value = importlib.import_module(f"{name}.{attribute}")
            else:
                raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
            setattr(package, attribute, value)
            return value

        def __dir__() -> list[str]:
            return sorted(set(package.__dict__) | set(exports))

        package.__getattr__ = __getattr__  # type: ignore[method-assign]
        package.__dir__ = __dir__  # type: ignore[method-assign]
        sys.modules[name] = package
        try:
            exec(compile(rest, spec.origin or name, "exec"), package.__dict__)  # noqa: S102 (the package's own code)
        except NameError:  # the rest of the __init__ uses what it imports: the package is imported as usual
            del sys.modules[name]
            importlib.import_module(name)
            return
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, package)


for _name in DEFERRED:
    defer_init(_name)
