"""Build the optional compiled core (streamk/_core.pyx); everything else is in pyproject.toml.

The core is optional, and this file makes that true for every way it can fail: no C
compiler, a compiler error, missing Python headers, or no Cython and no generated C. Each
extension that fails prints one line saying why, and the install goes on without it;
:mod:`streamk.accel` then runs the NumPy code paths (same results, slower) and
``streamk.accel.describe()`` says so at start-up.

* ``build_ext`` builds each extension on its own and turns its failure into that line
  (``cythonize()`` is not called at import time: it rebuilt the ``Extension`` objects and
  dropped ``optional=True``, so a missing compiler failed the whole install).
* A wheel whose extensions all failed is tagged pure (``py3-none-any``) and one with the
  core is tagged for its platform, so the wheel's name says which it is.
* An sdist ships the Cython-generated C next to the ``.pyx``: building from an sdist then
  needs a C compiler only, not Cython (the build still prefers the ``.pyx`` when Cython is
  there). The generated C is never committed (see ``.gitignore``).
* The extensions compile side by side, one per CPU (``build_ext -j N`` still chooses):
  each is one large generated C file and its own compiler process, so on a machine with
  more than one core the compiles overlap instead of running one after another.
* ``STREAMK_QUICK_BUILD=1`` compiles at ``-O0`` (about five times faster, the core several
  times slower): for checking that a build works, never for a build that will run.
"""

from __future__ import annotations

import os
import re
import sys
import threading

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist

try:  # setuptools >= 70.1 carries bdist_wheel itself
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # an old setuptools (e.g. `python setup.py build_ext` in a dev venv)
    bdist_wheel = None

try:
    from setuptools.errors import CCompilerError, CompileError, ExecError, PlatformError
except ImportError:  # setuptools < 59
    from distutils.errors import CCompilerError, CompileError
    from distutils.errors import DistutilsExecError as ExecError
    from distutils.errors import DistutilsPlatformError as PlatformError

# Helper extensions go here; each is optional and fails on its own.
extensions = [
    Extension(
        "streamk._core",
        ["streamk/_core.pyx"],
        include_dirs=["streamk"],
        depends=[
            "streamk/_fastexp.h",
            "streamk/_dense.h",
            "streamk/_hintrow.h",
            "streamk/_kcol.pxi",
            "streamk/budget/_smallest.pxi",
            "streamk/budget/_vec.pxi",
            "streamk/budget/_merge.pxi",
            "streamk/budget/_forgetron.pxi",
        ],
        extra_compile_args=["-O3", "-fno-trapping-math"],
        optional=True,
    ),
    Extension(
        "streamk.kernels._strings",
        ["streamk/kernels/_strings.pyx"],
        extra_compile_args=["-O3"],
        optional=True,
    ),
    Extension(
        "streamk.solvers._smo",
        ["streamk/solvers/_smo.pyx"],
        include_dirs=["streamk"],
        depends=["streamk/_fastexp.h", "streamk/solvers/_smo_impl.pxi"],
        extra_compile_args=["-O3", "-fno-trapping-math"],
        optional=True,
    ),
    Extension(  # the same core with a double-precision column cache
        "streamk.solvers._smo64",
        ["streamk/solvers/_smo64.pyx"],
        include_dirs=["streamk"],
        depends=["streamk/_fastexp.h", "streamk/solvers/_smo_impl.pxi"],
        extra_compile_args=["-O3", "-fno-trapping-math"],
        optional=True,
    ),
    Extension(
        "streamk.budget._policies",
        ["streamk/budget/_policies.pyx"],
        include_dirs=["streamk"],
        depends=[
            "streamk/_fastexp.h",
            "streamk/_dense.h",
            "streamk/budget/_projectron.pxi",
            "streamk/budget/_merge.pxi",
            "streamk/budget/_vec.pxi",
        ],
        extra_compile_args=["-O3", "-fno-trapping-math"],
        optional=True,
    ),
    Extension(  # the per-event learn_one / predict_one (streamk/learners/eventpass.py)
        "streamk.learners._event",
        ["streamk/learners/_event.pyx"],
        include_dirs=["streamk"],
        depends=[
            "streamk/_fastexp.h",
            "streamk/_dense.h",
            "streamk/_kcol.pxi",
            "streamk/_kprog.pxi",
            "streamk/_hintrow.h",
            "streamk/budget/_projectron.pxi",
            "streamk/budget/_merge.pxi",
            "streamk/budget/_vec.pxi",
            "streamk/budget/_smallest.pxi",
            "streamk/budget/_forgetron.pxi",
            "streamk/learners/_adatron_pass.pxi",
        ],
        extra_compile_args=["-O3", "-fno-trapping-math"],
        optional=True,
    ),
    Extension(  # the resweeps of the adatron and the SVR (streamk/learners/dualpass.py)
        "streamk.learners._dual",
        ["streamk/learners/_dual.pyx"],
        depends=["streamk/learners/_adatron_pass.pxi"],
        extra_compile_args=["-O3", "-ffp-contract=off"],
        optional=True,
    ),
]

#: What a failed build of one extension may raise: compiler missing or failing (the
#: distutils errors), the compiler executable not found (OSError), Cython missing.
BUILD_ERRORS: tuple[type[BaseException], ...] = (
    CCompilerError,
    CompileError,
    ExecError,
    PlatformError,
    OSError,
    ImportError,
)
try:  # a .pyx that Cython rejects
    from Cython.Compiler.Errors import CompileError as CythonCompileError

    BUILD_ERRORS += (CythonCompileError,)
except ImportError:
    pass


def _generated_c(ext: Extension) -> list[str]:
    """The C file Cython generates next to each ``.pyx`` source of ``ext``."""
    return [s[: -len(".pyx")] + ".c" for s in ext.sources if s.endswith(".pyx")]


def _have_cython() -> bool:
    try:
        import Cython.Build  # noqa: F401
    except ImportError:
        return False
    return True


def _why(exc: BaseException) -> str:
    """A short reason for a failed build (the compiler has printed its own errors above)."""
    text = " ".join(str(exc).split())
    missing = re.search(r"No such file or directory: '([^']+)'", text)
    if missing:
        return f"no C compiler: {missing[1]} not found"
    failed = re.search(r"Command '\['([^']+)'.*exit status (\d+)", text) or re.search(
        r"command '([^']+)' failed with exit (?:code|status) (\d+)", text
    )
    if failed:
        return f"the C compiler {failed[1]!r} failed with exit status {failed[2]}"
    return f"{type(exc).__name__}: {text}"


_SAY = threading.Lock()


def _say(line: str) -> None:
    """One line on stderr (pip shows it with ``-v``; ``accel.describe()`` repeats the outcome),
    written whole: the extensions build in threads."""
    with _SAY:
        sys.stderr.write(f"streamk: {line}\n")
        sys.stderr.flush()


def _quick(args: list[str]) -> list[str]:
    """``args`` at ``-O0`` when ``STREAMK_QUICK_BUILD=1`` asks for a build check, else as is."""
    if os.environ.get("STREAMK_QUICK_BUILD") != "1":
        return args
    return [a for a in args if not a.startswith("-O")] + ["-O0"]


class OptionalBuildExt(build_ext):
    """Build each extension on its own; a failure skips that extension with one line."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:  # one compile per CPU unless -j says otherwise
            self.parallel = min(len(self.extensions or []), os.cpu_count() or 1)
        for ext in self.extensions or []:
            ext.extra_compile_args = _quick(list(ext.extra_compile_args or []))

    def run(self) -> None:
        self.skipped: dict[str, str] = {}
        try:
            super().run()
        except BUILD_ERRORS as exc:  # e.g. no compiler at all on Windows, raised up front
            for ext in self.extensions:
                if ext.name not in self.skipped:
                    self._skip(ext, exc)

    def build_extensions(self) -> None:
        self.skipped = getattr(self, "skipped", {})
        if _have_cython():  # serially: Cython's compiler is not safe to run in threads
            for ext in self.extensions:
                self._cythonize(ext)
        super().build_extensions()

    def _cythonize(self, ext: Extension) -> None:
        """Generate ``ext``'s C from its ``.pyx`` (unless up to date) and compile that C."""
        from Cython.Build import cythonize

        if not _generated_c(ext):
            return
        try:
            cythonize([Extension(ext.name, list(ext.sources))], quiet=True, force=self.force)
        except BUILD_ERRORS as exc:
            self._skip(ext, exc)
            return
        ext.sources = [s[: -len(".pyx")] + ".c" if s.endswith(".pyx") else s for s in ext.sources]

    def build_extension(self, ext: Extension) -> None:
        if ext.name in self.skipped:
            return
        missing = [c for c in _generated_c(ext) if not os.path.exists(c)]
        if missing and not _have_cython():
            self._skip(ext, f"Cython is not installed and {', '.join(missing)} is not shipped")
            return
        try:
            super().build_extension(ext)
        except BUILD_ERRORS as exc:
            self._skip(ext, exc)

    def _skip(self, ext: Extension, why: BaseException | str) -> None:
        reason = why if isinstance(why, str) else _why(why)
        self.skipped[ext.name] = reason
        # a stale module from an earlier build must not ship with the new sources
        stale = self.get_ext_fullpath(ext.name)  # in the source tree when --inplace
        if os.path.exists(stale):
            os.remove(stale)
        _say(f"{ext.name} not built ({reason}); installing without it: NumPy paths only")

    def built(self) -> list[str]:
        """Names of the extensions whose module is in the build tree now."""
        return [e.name for e in self.extensions if os.path.exists(self.get_ext_fullpath(e.name))]

    def get_source_files(self) -> list[str]:
        # the generated C goes into the sdist when it exists (SdistWithC makes it)
        generated = [c for ext in self.extensions for c in _generated_c(ext)]
        return [*super().get_source_files(), *(c for c in generated if os.path.exists(c))]


class SdistWithC(sdist):
    """An sdist that carries the Cython-generated C, regenerated from the ``.pyx`` first."""

    def run(self) -> None:
        if _have_cython():
            from Cython.Build import cythonize

            for ext in self.distribution.ext_modules or []:
                if any(s.endswith(".pyx") for s in ext.sources):
                    cythonize([Extension(ext.name, list(ext.sources))], quiet=True)
        else:
            _say("no Cython: this sdist ships no generated C, so building it needs Cython")
        super().run()


commands: dict[str, type] = {"build_ext": OptionalBuildExt, "sdist": SdistWithC}

if bdist_wheel is not None:

    class TaggedBdistWheel(bdist_wheel):
        """Tag the wheel pure when no extension was built, for its platform otherwise."""

        def run(self) -> None:
            if not self.skip_build:
                self.reinitialize_command("build_ext").inplace = False
                self.run_command("build")
                self.skip_build = True  # built once; install must not rebuild a failed one
            self.root_is_pure = not self.get_finalized_command("build_ext").built()
            if self.root_is_pure:  # install into purelib, as a pure distribution would
                self.distribution.ext_modules = []
            super().run()

    commands["bdist_wheel"] = TaggedBdistWheel


setup(ext_modules=extensions, cmdclass=commands)
