"""The install never needs a compiler, and says whether the compiled core runs.

The wheels are built for real (``pip wheel --no-build-isolation`` in a subprocess, from a
copy of exactly the files deploy/Dockerfile's builder stage copies), with the compiler
broken (``CC=false``), with it working, and from an sdist with Cython hidden. They need the
build requirements in this environment (the ``[dev]`` extra has them) and no network.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from streamk import accel
from tests.test_deploy import ROOT, context_ignores, copies, dockerfile_stages, excluded

SKIP_LINE = re.compile(
    r"^\s*streamk: streamk\._core not built \((.+)\); installing without it", re.M
)
#: every module's line: the README says one line per compiled module, seven of them
ANY_SKIP_LINE = re.compile(r"^\s*streamk: (streamk\.[\w.]+) not built \(", re.M)
CORE = re.compile(r"^streamk/_core\.[^/]+\.(so|pyd)$")
STRINGS = re.compile(r"^streamk/kernels/_strings\.[^/]+\.(so|pyd)$")
#: a compile command of one module's C, up to its last flag (the build log of ``pip -v``)
COMPILES = re.compile(r"^\s*\S*(?:gcc|cc|clang)\b.* -c streamk/\S+\.c -o .*$", re.M)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "STREAMK_"))}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


@pytest.fixture(scope="module")
def build_ready() -> None:
    """Skip unless the build requirements of pyproject.toml import here (no downloads)."""
    probe = subprocess.run(
        [sys.executable, "-c", "import setuptools, Cython; print(setuptools.__version__)"],
        capture_output=True,
        text=True,
        env=_env(),
    )
    if probe.returncode or int(probe.stdout.split(".")[0]) < 77:
        pytest.skip("build requirements missing: pip install 'setuptools>=77' 'cython>=3.0'")


def _builder_sources(dest: Path) -> Path:
    """Copy what the Dockerfile's builder stage copies, minus what its context leaves out."""
    builder = dockerfile_stages()[0]
    ignores = context_ignores()
    for from_stage, sources, _ in copies(builder):
        assert from_stage is None
        for src in sources:
            path = ROOT / src
            if path.is_file():
                shutil.copy2(path, dest / src)
                continue
            for f in path.rglob("*"):
                rel = f.relative_to(ROOT).as_posix()
                if f.is_file() and not excluded(rel, ignores):
                    (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(f, dest / rel)
    return dest


def _pip_wheel(target: Path | str, out: Path, env: dict[str, str]) -> tuple[Path, str]:
    """Build one wheel of ``target``; return it and pip's verbose output (the build's too)."""
    cmd = [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation"]
    run = subprocess.run(
        [*cmd, "-w", str(out), str(target)],
        capture_output=True,
        text=True,
        env=env,
        cwd=out,
        timeout=900,  # seven extensions, compiled one after another on a machine the suite shares
    )
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    (wheel,) = out.glob("streamk-*.whl")
    return wheel, log


def _members(wheel: Path) -> tuple[list[str], str]:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    return names, meta


def _has_compiler() -> bool:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) is not None


BROKEN = {
    "no compiler": ({"CC": "/nonexistent/gcc"}, "no C compiler: /nonexistent/gcc not found"),
    "compiler fails": ({"CC": "false"}, "the C compiler 'false' failed with exit status 1"),
    "compile error": ({"CFLAGS": "-include /nonexistent/streamk.h"}, "failed with exit status"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BROKEN))
def test_wheel_builds_when_the_compiler_is_missing_or_fails(build_ready, tmp_path, case):
    broken, expected = BROKEN[case]
    if case == "compile error" and not _has_compiler():
        pytest.skip("no C compiler here to make fail")
    (tmp_path / "src").mkdir()
    src = _builder_sources(tmp_path / "src")
    out = tmp_path / "out"
    out.mkdir()
    wheel, log = _pip_wheel(src, out, _env(**broken))
    names, meta = _members(wheel)
    assert not [n for n in names if CORE.match(n) or STRINGS.match(n)]
    assert wheel.name == "streamk-0.1.0-py3-none-any.whl" and "Root-Is-Purelib: true" in meta
    assert {"streamk/__init__.py", "streamk/accel.py"} <= set(names)
    assert not [n for n in names if n.endswith((".pyx", ".pxi", ".c", ".h")) or ".data/" in n]
    reasons = SKIP_LINE.findall(log)
    assert len(reasons) == 1 and expected in reasons[0], log[-3000:]
    modules = ANY_SKIP_LINE.findall(log)
    assert len(modules) == len(set(modules)) == 7, modules


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_sdist_ships_the_generated_c_and_builds_without_cython(build_ready, tmp_path):
    # from the files the Dockerfile's builder stage copies; the wheel is what it accepts
    if not _has_compiler():
        pytest.skip("no C compiler here")
    (tmp_path / "src").mkdir()
    src = _builder_sources(tmp_path / "src")
    dist = tmp_path / "dist"
    dist.mkdir()
    make = "from setuptools import build_meta as b; import sys; print(b.build_sdist(sys.argv[1]))"
    run = subprocess.run(
        [sys.executable, "-c", make, str(dist)], cwd=src, capture_output=True, text=True, env=_env()
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (sdist,) = dist.glob("streamk-*.tar.gz")
    with tarfile.open(sdist) as t:
        members = {m.split("/", 1)[1] for m in t.getnames() if "/" in m}
    needed = {"setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "PKG-INFO"}
    needed |= {"streamk/_core.pyx", "streamk/_core.c", "streamk/_fastexp.h", "streamk/accel.py"}
    needed |= {
        "streamk/_kcol.pxi",
        "streamk/_kprog.pxi",
        "streamk/_hintrow.h",
        "streamk/_dense.h",
        "streamk/budget/_projectron.pxi",
        "streamk/budget/_merge.pxi",
        "streamk/budget/_vec.pxi",
        "streamk/budget/_smallest.pxi",
    }
    needed |= {"streamk/solvers/_smo.pyx", "streamk/solvers/_smo.c"}
    needed |= {"streamk/kernels/_strings.pyx", "streamk/kernels/_strings.c"}
    needed |= {"streamk/budget/_policies.pyx", "streamk/budget/_policies.c"}
    needed |= {
        "streamk/solvers/_smo_impl.pxi",
        "streamk/solvers/_smo64.pyx",
        "streamk/solvers/_smo64.c",
    }
    needed |= {"streamk/learners/_event.pyx", "streamk/learners/_event.c"}
    needed |= {"streamk/learners/_dual.pyx", "streamk/learners/_dual.c"}
    assert needed <= members, needed - members
    # Cython hidden: the shipped C is all the build needs besides a compiler
    block = tmp_path / "block" / "Cython"
    block.mkdir(parents=True)
    (block / "__init__.py").write_text("raise ImportError('Cython hidden by the test')\n")
    out = tmp_path / "out"
    out.mkdir()
    path = os.pathsep.join([str(block.parent), os.environ.get("PYTHONPATH", "")])
    # at -O0 (STREAMK_QUICK_BUILD): this checks that the shipped C builds, not how fast it runs
    wheel, log = _pip_wheel(sdist, out, _env(PYTHONPATH=path, STREAMK_QUICK_BUILD="1"))
    names, meta = _members(wheel)
    assert len([n for n in names if CORE.match(n)]) == 1, log[-3000:]
    assert all(line.endswith("-O0") for line in COMPILES.findall(log)), COMPILES.findall(log)
    assert len(COMPILES.findall(log)) == 7, log[-3000:]  # every module, from the shipped C
    assert [n for n in names if STRINGS.match(n)], log[-3000:]
    assert "Cythonizing" not in log and not SKIP_LINE.search(log)
    # the name says it is compiled: the Dockerfile's builder stage accepts only such a wheel
    assert re.fullmatch(r"streamk-0\.1\.0-cp3\d+-cp3\d+-linux_\w+\.whl", wheel.name), wheel.name
    assert "Root-Is-Purelib: false" in meta


@pytest.mark.slow
def test_no_cython_and_no_generated_c_still_installs(build_ready, tmp_path):
    (tmp_path / "src").mkdir()
    src = _builder_sources(tmp_path / "src")
    assert not (src / "streamk" / "_core.c").exists()  # a checkout, not an sdist
    block = tmp_path / "block" / "Cython"
    block.mkdir(parents=True)
    (block / "__init__.py").write_text("raise ImportError('Cython hidden by the test')\n")
    out = tmp_path / "out"
    out.mkdir()
    env = _env(PYTHONPATH=os.pathsep.join([str(block.parent), os.environ.get("PYTHONPATH", "")]))
    wheel, log = _pip_wheel(src, out, env)
    assert wheel.name.endswith("-py3-none-any.whl")
    (reason,) = SKIP_LINE.findall(log)
    assert reason == "Cython is not installed and streamk/_core.c is not shipped"


# --- what the running engine says -------------------------------------------------------


def _describe(env: dict[str, str]) -> str:
    code = "import streamk.accel as a; print(a.describe())"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_describe_says_why_the_numpy_path_runs():
    line = _describe(_env(STREAMK_NO_ACCEL="1"))
    assert line == "compiled core: off (NumPy) — STREAMK_NO_ACCEL is set"


def test_describe_names_the_clone_the_cpu_runs():
    if not accel.available():
        assert accel.describe().startswith("compiled core: off (NumPy) — ")
        pytest.skip("compiled core not built")
    assert accel.describe() == f"compiled core: on ({accel.isa()})"
    if platform.machine() != "x86_64" or not _has_compiler():
        pytest.skip("the oracle below is GCC's own x86-64 CPU check")
    # oracle: the check GCC's target_clones loader makes, compiled and run here
    c = 'int main(void){__builtin_cpu_init(); return !__builtin_cpu_supports("x86-64-v3");}'
    exe = Path(os.environ.get("TMPDIR", "/tmp")) / f"streamk-isa-{os.getpid()}"
    src = exe.with_suffix(".c")
    src.write_text(c + "\n")
    try:
        if subprocess.run(["gcc", "-o", str(exe), str(src)], capture_output=True).returncode:
            pytest.skip("gcc cannot build the oracle")
        v3 = subprocess.run([str(exe)]).returncode == 0
    finally:
        src.unlink(missing_ok=True)
        exe.unlink(missing_ok=True)
    assert accel.isa() == ("x86-64-v3" if v3 else "x86-64 baseline")


def test_x86_64_clone_needs_the_whole_v3_level():
    # the level as the x86-64 psABI lists it (v2 + v3), in /proc/cpuinfo's spelling
    v3 = "cx16 lahf_lm popcnt pni sse4_1 sse4_2 ssse3 avx avx2 bmi1 bmi2 f16c fma abm movbe xsave"
    flags = v3.split() + ["sse2", "avx512f"]
    assert accel.x86_64_clone(flags) == "x86-64-v3"
    for missing in v3.split():
        assert accel.x86_64_clone([f for f in flags if f != missing]) == "x86-64 baseline"


def test_version_says_whether_the_core_runs():
    env = _env(STREAMK_NO_ACCEL="1")
    run = subprocess.run(["streamk", "--version"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines == ["streamk 0.1.0", "compiled core: off (NumPy) — STREAMK_NO_ACCEL is set"]


def test_readme_quotes_what_the_build_and_the_engine_print():
    readme = " ".join((ROOT / "README.md").read_text().split())
    quoted = re.search(r"`(streamk: streamk\._core not built \(<reason>\)[^`]*)`", readme)
    assert quoted and SKIP_LINE.search(quoted[1].replace("<reason>", "no compiler"))
    assert quoted[1].endswith("installing without it: NumPy paths only")
    off = _describe(_env(STREAMK_NO_ACCEL="1"))
    assert "`compiled core: off (NumPy) — <reason>`" in readme
    assert off.startswith("compiled core: off (NumPy) — ")
    assert "`compiled core: on (x86-64-v3)`" in readme and "`py3-none-any`" in readme
