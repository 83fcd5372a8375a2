"""Build the optional compiled core (streamk/_core.pyx); everything else is in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and
:mod:`streamk.accel` falls back to the NumPy code paths (same results, slower).
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension(
        "streamk._core",
        ["streamk/_core.pyx"],
        include_dirs=["streamk"],
        depends=["streamk/_fastexp.h"],
        extra_compile_args=["-O3", "-fno-trapping-math"],
        optional=True,
    )
]

setup(ext_modules=cythonize(extensions, compiler_directives={"language_level": "3"}))
