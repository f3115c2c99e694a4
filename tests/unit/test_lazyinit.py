"""dfd.lazyinit: a package whose __init__ is deferred answers every name, submodule, `dir()` and `__all__` as the
package imported as usual does, in whatever order they are asked for; a package already imported is left alone;
one whose __init__ uses what it imports is imported as usual."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dfd.lazyinit import DEFERRED

FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"

_DESCRIBE = """
import importlib, json, pkgutil, sys
name, deferred = sys.argv[1], sys.argv[2] == "deferred"
if deferred:
    import dfd.lazyinit
    assert sys.modules[name].__dict__.get("__getattr__"), "not deferred"
package = importlib.import_module(name)
{first}
def describe(value):
    label = getattr(value, "__qualname__", getattr(value, "__name__", type(value).__name__))
    return f"{{getattr(value, '__module__', None)}}.{{label}}"
public = getattr(package, "__all__", None) or [n for n in dir(package) if not n.startswith("_")]
names = {{n: describe(getattr(package, n)) for n in public}}
failed = []
for module in pkgutil.walk_packages(package.__path__, name + "."):
    try:
        importlib.import_module(module.name)
    except ImportError as error:
        if "No module named" not in str(error):  # an optional dependency (fastjsonschema) is not a failure
            failed.append(module.name)
print(json.dumps({{"names": names, "all": list(getattr(package, "__all__", [])), "failed": failed,
                  "version": str(getattr(package, "__version__", None)),
                  "dir": sorted(n for n in dir(package) if not n.startswith("__"))}}))
"""


def describe(name: str, mode: str, first: str = "") -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(FUNCTIONS)}
    code = _DESCRIBE.format(first=first)
    command = [sys.executable, "-c", code, name, mode]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", DEFERRED)
def test_a_deferred_package_answers_as_the_package(name: str) -> None:
    assert describe(name, "deferred") == describe(name, "normal")


def test_a_submodule_first_then_the_names_it_imports_from_the_package() -> None:
    """Imported on its own, a submodule that imports names from its package (bedrock_agent imports
    ApiGatewayResolver from the event handler package) finds them: the __init__ is never half run."""
    first = "import aws_lambda_powertools.event_handler.bedrock_agent"
    name = "aws_lambda_powertools.event_handler"
    assert describe(name, "deferred", first) == describe(name, "normal", first)


def _package(root: Path, init: str) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text(textwrap.dedent(init))
    (root / "pkg" / "sub.py").write_text("VALUE = 1\nimport sys\nsys.modules['pkg'].loaded_sub = True\n")


def _run(root: Path, code: str) -> str:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{FUNCTIONS}"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_the_rest_of_the_init_runs_and_submodules_wait(tmp_path: Path) -> None:
    _package(tmp_path, "from pkg.sub import VALUE\nSTARTED = True\n__all__ = ['VALUE']\n")
    out = _run(
        tmp_path,
        """
        import sys
        from dfd.lazyinit import defer_init
        defer_init("pkg")
        import pkg
        before = "pkg.sub" in sys.modules
        print(before, pkg.STARTED, pkg.__all__, pkg.VALUE, "pkg.sub" in sys.modules, dir(pkg).count("VALUE"))
        """,
    )
    assert out == "False True ['VALUE'] 1 True 1"


def test_an_init_using_what_it_imports_is_imported_as_usual(tmp_path: Path) -> None:
    _package(tmp_path, "from pkg.sub import VALUE\nDOUBLE = VALUE * 2\n")
    out = _run(
        tmp_path,
        """
        import sys
        from dfd.lazyinit import defer_init
        defer_init("pkg")
        import pkg
        print("pkg.sub" in sys.modules, pkg.DOUBLE, "__getattr__" in vars(pkg))
        """,
    )
    assert out == "True 2 False"


def test_a_package_imported_already_is_left_alone(tmp_path: Path) -> None:
    _package(tmp_path, "from pkg.sub import VALUE\n")
    out = _run(
        tmp_path,
        """
        import pkg
        from dfd.lazyinit import defer_init
        defer_init("pkg")
        import sys
        print(sys.modules["pkg"] is pkg, "__getattr__" in vars(pkg), pkg.VALUE)
        """,
    )
    assert out == "True False 1"
