"""`sam build` without Docker, from any local Python >= 3.11: every function builds with functions/Makefile
(BuildMethod: makefile), which installs the runtime's pinned wheels for python3.12 and the function's architecture,
then compiles every module with the runtime's own Python 3.12 (the bytecode Lambda loads from its read-only
/var/task). The artifact is built here (wheels from the package index) and opened."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from dfdlocal.template import load_template

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ROOT / "functions"
PLATFORMS = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}
MACHINE = {"arm64": "aarch64", "x86_64": "x86_64"}

pytestmark = pytest.mark.build


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[_canonical(name)] = version.strip()
    return pins


def _elf_machine(path: Path) -> str:
    """The machine an ELF shared object is built for (e_machine, at byte 18 of the header)."""
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", path
    return {0xB7: "aarch64", 0x3E: "x86_64"}.get(int.from_bytes(header[18:20], "little"), "other")


@pytest.fixture(scope="module")
def functions() -> dict[str, dict[str, Any]]:
    template = load_template(ROOT / "template.yaml")
    defaults = template["Globals"]["Function"]
    return {
        name: {"Metadata": resource.get("Metadata", {}), **defaults, **resource["Properties"]}
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(FUNCTIONS), f"PYTHON={sys.executable}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


@pytest.fixture(scope="session")
def sam_build() -> Path:
    """`make sam`'s build directory: `sam validate --lint` and `sam build` of template.yaml, the artifacts as `sam
    deploy` uploads them (make test runs it first; here it is redone only if an input changed)."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), "sam"], capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return ROOT / ".aws-sam" / "build"


@pytest.fixture(scope="session")
def artifact(sam_build: Path) -> Path:
    """IngestFunction's artifact (SAM's per-function build directory)."""
    return sam_build / "IngestFunction"


def test_every_function_is_built_by_the_makefile_for_its_architecture(functions: dict[str, dict[str, Any]]) -> None:
    assert functions
    for name, props in functions.items():
        assert props["Metadata"].get("BuildMethod") == "makefile", name
        assert props["Runtime"] == "python3.12", name  # = RUNTIME_PYTHON in functions/Makefile
        (architecture,) = props["Architectures"]
        plan = _make("-n", f"build-{name}", "ARTIFACTS_DIR=/build")
        assert plan.returncode == 0, plan.stderr
        assert f"--platform {PLATFORMS[architecture]} " in plan.stdout, (name, plan.stdout)
        assert "--python-version 3.12 " in plan.stdout and "--only-binary=:all:" in plan.stdout
        assert "-r requirements.txt" in plan.stdout


def test_the_other_architecture_gets_its_own_wheels() -> None:
    plan = _make("-n", "build-IngestFunction", "ARTIFACTS_DIR=/build", "ARCH_IngestFunction=x86_64")
    assert "--platform manylinux2014_x86_64 " in plan.stdout


def test_a_build_without_artifacts_dir_or_of_an_unknown_function_fails() -> None:
    assert "ARTIFACTS_DIR is required" in _make("build-IngestFunction").stderr
    assert "no architecture for Nope" in _make("build-Nope", "ARTIFACTS_DIR=/build").stderr


def test_a_build_without_the_runtimes_python_fails_with_one_line_before_installing_anything(tmp_path: Path) -> None:
    for exe in (str(tmp_path / "python3.12"), sys.executable if sys.version_info[:2] != (3, 12) else "/bin/false"):
        done = _make("build-IngestFunction", f"ARTIFACTS_DIR={tmp_path / 'out'}", f"RUNTIME_PYTHON_EXE={exe}")
        assert done.returncode != 0
        (line,) = [line for line in done.stderr.splitlines() if not line.startswith("make")]
        assert line.startswith("no Python 3.12 to compile the bytecode"), line
        assert not (tmp_path / "out").exists()


def test_the_bytecode_is_compiled_by_the_runtimes_python_unchecked_and_deterministic() -> None:
    plan = _make("-n", "build-IngestFunction", "ARTIFACTS_DIR=/build").stdout
    (compile_line,) = [line for line in plan.splitlines() if "-m compileall" in line]
    assert "PYTHONHASHSEED=0 " in compile_line and "--invalidation-mode unchecked-hash" in compile_line
    assert " -j" not in compile_line  # parallel workers made different bytes for the same sources
    exe = compile_line.split("PYTHONHASHSEED=0 ", 1)[1].split(" -m compileall", 1)[0].strip('"')
    version = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
    assert version.stdout.strip() == "(3, 12)"


def test_runtime_pins_are_the_dev_locks_versions() -> None:
    runtime, dev = _pins(FUNCTIONS / "requirements.txt"), _pins(ROOT / "requirements" / "dev.lock")
    assert {"botocore", "aws-lambda-powertools"} <= set(runtime)
    assert not {"boto3", "s3transfer"} & set(runtime)  # the functions make botocore clients (dfd.adapters.aws)
    assert {name: dev.get(name) for name in runtime} == runtime


def test_sam_builds_every_function_of_the_template(sam_build: Path, functions: dict[str, dict[str, Any]]) -> None:
    built = load_template(sam_build / "template.yaml")["Resources"]
    for name in functions:
        assert built[name]["Properties"]["CodeUri"] == name, name
        assert (sam_build / name / "dfd" / "__init__.py").is_file(), name
    # one set of inputs, one artifact: every function's is the same bytes (13 builds, or copies of one)
    first = _tree(sam_build / "IngestFunction")
    assert all(_tree(sam_build / name) == first for name in functions)


def test_artifact_holds_the_handlers_and_their_pinned_dependencies_and_nothing_of_dev(
    artifact: Path, functions: dict[str, dict[str, Any]]
) -> None:
    for name, props in functions.items():
        module, _, attribute = props["Handler"].rpartition(".")
        source = artifact / (module.replace(".", "/") + ".py")
        assert source.is_file(), (name, source)
        assert re.search(rf"^{attribute}\b|^def {attribute}\b", source.read_text(), re.M), (name, attribute)
    assert (artifact / "dfd" / "adapters" / "dynamo" / "__init__.py").is_file()

    installed = {
        _canonical(path.name.removesuffix(".dist-info").rsplit("-", 1)[0]): path.name.removesuffix(".dist-info")
        for path in artifact.glob("*.dist-info")
    }
    runtime = _pins(FUNCTIONS / "requirements.txt")
    assert set(installed) == set(runtime)
    for name, version in runtime.items():
        assert installed[name].endswith("-" + version), (name, installed[name])

    # compiled extensions are the runtime's: CPython 3.12 on the function's machine (a stable-ABI extension,
    # cryptography's `_rust.abi3.so`, names no Python: its ELF header says the machine)
    (architecture,) = functions["IngestFunction"]["Architectures"]
    extensions = list(artifact.rglob("*.so"))
    assert extensions
    for path in extensions:
        if path.name.endswith(".abi3.so"):
            assert _elf_machine(path) == MACHINE[architecture], path
        else:
            assert f"cpython-312-{MACHINE[architecture]}-linux-gnu" in path.name, path

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    dev = {_canonical(re.split(r"[\[<>=!~ ;]", spec, maxsplit=1)[0]) for spec in extras["dev"]}
    assert dev and not dev & set(installed)
    for absent in ("dfdlocal", "dfdtools", "dfdbench", "tests", "moto", "pytest", "mypy_boto3_s3", "bin"):
        assert not (artifact / absent).exists(), absent

    size = sum(path.stat().st_size for path in artifact.rglob("*") if path.is_file())
    print(f"IngestFunction artifact: {size / 2**20:.1f} MiB unzipped, {len(installed)} distributions")
    assert size < 250 * 2**20  # Lambda's limit for an unzipped package


def _runtime_magic() -> bytes:
    plan = _make("-n", "build-IngestFunction", "ARTIFACTS_DIR=/build").stdout
    exe = plan.split("PYTHONHASHSEED=0 ", 1)[1].split(" -m compileall", 1)[0].strip('"')
    code = "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"
    return bytes.fromhex(subprocess.run([exe, "-c", code], capture_output=True, text=True, check=True).stdout)


def test_every_module_ships_the_bytecode_lambdas_python312_loads(artifact: Path) -> None:
    """Each .py has __pycache__/<name>.cpython-312.pyc: 3.12's magic number, hash-based and unchecked (flags 0b01:
    never compared with the source, whose mtime SAM's zip sets to 1980), compiled under /var/task's paths."""
    magic = _runtime_magic()
    sources = [path for path in artifact.rglob("*.py") if "__pycache__" not in path.parts]
    assert len(sources) > 500
    for source in sources:
        pyc = source.parent / "__pycache__" / f"{source.stem}.cpython-312.pyc"
        header = pyc.read_bytes()[:16]
        assert header[:4] == magic and int.from_bytes(header[4:8], "little") == 0b01, pyc
        relative = source.relative_to(artifact).as_posix()
        assert f"/var/task/{relative}".encode() in pyc.read_bytes(), pyc  # its co_filename
    compiled = {path.name.split(".")[1] for path in artifact.rglob("*.pyc")}
    assert compiled == {"cpython-312"}  # nothing for another interpreter, no optimised (opt-1) copies


def _tree(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def test_the_same_inputs_build_the_same_bytes(artifact: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another build, elsewhere, of the same sources and pins (the wheels `make sam` downloaded, no build cache):
    every file byte for byte the same."""
    again = tmp_path / "again"
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(ROOT / ".aws-sam" / "wheels"))
    done = _make("build-IngestFunction", f"ARTIFACTS_DIR={again}", "BUILD_CACHE=")
    assert done.returncode == 0, done.stderr
    first, second = _tree(artifact), _tree(again)
    assert first.keys() == second.keys()
    assert [name for name in first if first[name] != second[name]] == []
