"""Builds the genscope Python package with the project's CMake: one build definition.

setuptools only drives CMake: build_ext configures this checkout (library + _genscope, no
tests, tools or LibTorch), builds the `_genscope` target and copies the module into the
wheel; the pure-Python package comes from python/genscope. Environment:
- GENSCOPE_PIP_BUILD_DIR: folder for setuptools' build files and the CMake build (default
  build-pip/ in the checkout); reusing it makes the next install incremental;
- CMAKE_ARGS: extra CMake arguments (e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache);
- CMAKE_BUILD_PARALLEL_LEVEL: build jobs (default: all cores);
- GENSCOPE_PIP_CMAKE_DIR: the CMake build folder of pip's own build (default
  GENSCOPE_PIP_BUILD_DIR/cmake);
- GENSCOPE_CMAKE_BUILD_DIR: an existing, configured build of this checkout (scripts/setup's
  build/): its `_genscope` target is brought up to date there and packaged, instead of
  configuring and compiling a second build (the test suite's pip test uses it).
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
BUILD_BASE = Path(os.environ.get("GENSCOPE_PIP_BUILD_DIR") or ROOT / "build-pip").resolve()


def cmake_version() -> str:
    """The version in CMakeLists.txt's project(), which is genscope::version()."""
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    return re.search(r"project\(genscope VERSION ([0-9.]+)", text).group(1)


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        reuse = os.environ.get("GENSCOPE_CMAKE_BUILD_DIR")
        if reuse:
            build_dir = Path(reuse).resolve()
            if not (build_dir / "CMakeCache.txt").is_file():
                raise RuntimeError(f"GENSCOPE_CMAKE_BUILD_DIR={reuse}: not a configured CMake "
                                   "build (no CMakeCache.txt)")
            self.build_and_copy(ext, build_dir)
            return
        build_dir = Path(os.environ.get("GENSCOPE_PIP_CMAKE_DIR") or BUILD_BASE / "cmake").resolve()
        build_dir.mkdir(parents=True, exist_ok=True)
        args = [
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DGENSCOPE_BUILD_TESTS=OFF",
            "-DGENSCOPE_BUILD_BENCH=OFF",
            "-DGENSCOPE_BUILD_TOOLS=OFF",
            "-DGENSCOPE_WITH_TORCH=OFF",
            "-DGENSCOPE_REQUIRE_PYTHON=ON",
        ]
        try:  # pybind11 from pip (or python3-pybind11); else CMake finds pybind11-dev
            import pybind11

            args.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:
            pass
        if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
            args += ["-G", "Ninja"]
        args += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), *args], check=True)
        self.build_and_copy(ext, build_dir)

    def build_and_copy(self, ext: Extension, build_dir: Path) -> None:
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_genscope",
                        "--parallel", jobs], check=True)
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = build_dir / "python" / "genscope" / f"_genscope{suffix}"
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)


# Only the CMake build is reused: setuptools' staging folders are rebuilt, so a module deleted
# from the sources never lingers in a wheel.
BUILD_BASE.mkdir(parents=True, exist_ok=True)
for stale in BUILD_BASE.iterdir():
    if stale.name != "cmake":
        shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
setup(
    version=cmake_version(),
    packages=["genscope", "genscope.torch"],
    package_dir={"": "python"},
    package_data={"genscope": ["py.typed", "*.pyi"]},
    ext_modules=[CMakeExtension("genscope._genscope")],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
    options={"build": {"build_base": str(BUILD_BASE)},
             "egg_info": {"egg_base": str(BUILD_BASE)}},
)
