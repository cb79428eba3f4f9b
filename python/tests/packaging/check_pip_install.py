#!/usr/bin/python3
"""`pip install .` of this checkout into a fresh venv, offline, then import and run there.

    /usr/bin/python3 -m venv --system-site-packages V
    V/bin/pip install --no-index --no-build-isolation <checkout>

(Debian's setuptools, wheel and numpy come from the system site packages; nothing is
downloaded.) The build goes through setup.py -> CMake. Two modes (GENSCOPE_PIP_MODE):

- reuse (default; test python.pip_install): setup.py is pointed at the project's own build
  (GENSCOPE_CMAKE_BUILD_DIR = GENSCOPE_BUILD_DIR), so pip packages the module that build has
  already compiled: the packaging, metadata and venv import are tested without a second
  compile;
- clean (test python.pip_install_clean, label "slow"): a fresh CMake build folder of pip's
  own (build-pip-clean-PID/ in the checkout, removed afterwards), configured and built from
  nothing, as a user's `pip install .` does. The main build's compiler launcher (ccache,
  which scripts/setup configures) is passed on, so the compiler runs are cache hits when the
  sources are those the main build compiled.
Skipped, with the reason printed, only where venv or pip are missing.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

SOURCE = os.path.abspath(os.environ.get("GENSCOPE_SOURCE_DIR",
                                        os.path.join(os.path.dirname(__file__), "..", "..", "..")))
BUILD = os.environ.get("GENSCOPE_BUILD_DIR", "")
PYTHON = "/usr/bin/python3"
MODE = os.environ.get("GENSCOPE_PIP_MODE", "reuse")


def venv_unavailable():
    """Why a venv with pip cannot be made here, or None."""
    probe = subprocess.run([PYTHON, "-c", "import venv, ensurepip"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        return "python3-venv is not installed (no venv/ensurepip module)"
    return None


def launcher_args():
    """The main build's compiler launcher (ccache), for the pip build's CMake."""
    cache = os.path.join(BUILD, "CMakeCache.txt")
    if not os.path.exists(cache):
        return ""
    with open(cache, encoding="utf-8") as f:
        text = f.read()
    args = []
    for var in ("CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_C_COMPILER_LAUNCHER"):
        m = re.search(rf"^{var}:\w+=(.+)$", text, re.M)
        if m and m.group(1).strip():
            args.append(f"-D{var}={m.group(1).strip()}")
    return " ".join(args)


@unittest.skipIf(venv_unavailable(), venv_unavailable() or "")
class PipInstallTest(unittest.TestCase):
    def test_pip_install_into_a_venv(self):
        base = os.environ.get("GENSCOPE_TEST_TMP")
        if base:
            os.makedirs(base, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix="genscope-pip-", dir=base or None)
        try:
            self.run_in(tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def run_in(self, tmp):
        venv = os.path.join(tmp, "V")
        made = subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", venv],
                              capture_output=True, text=True, timeout=300)
        if made.returncode != 0 and "ensurepip" in made.stdout + made.stderr:
            self.skipTest("venv has no pip (python3-venv / python3-pip-whl missing): " +
                          made.stdout.strip())
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env["GENSCOPE_PIP_BUILD_DIR"] = os.path.join(tmp, "pip-build")
        if MODE == "reuse":
            self.assertTrue(BUILD, "GENSCOPE_BUILD_DIR must name the project's build")
            env["GENSCOPE_CMAKE_BUILD_DIR"] = BUILD
        else:
            env.pop("GENSCOPE_CMAKE_BUILD_DIR", None)
            env["CMAKE_ARGS"] = (env.get("CMAKE_ARGS", "") + " " + launcher_args()).strip()
            # A fresh build folder one level under the checkout, like build/: ccache (keyed on
            # paths relative to the build folder, scripts/lib/common.sh) then finds the main
            # build's objects.
            cmake_dir = os.path.join(SOURCE, f"build-pip-clean-{os.getpid()}")
            shutil.rmtree(cmake_dir, ignore_errors=True)
            self.addCleanup(shutil.rmtree, cmake_dir, True)
            env["GENSCOPE_PIP_CMAKE_DIR"] = cmake_dir
        pip = [os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation",
               SOURCE]
        done = subprocess.run(pip, capture_output=True, text=True, timeout=1700, env=env,
                              cwd=tmp)
        self.assertEqual(done.returncode, 0, done.stdout[-4000:] + done.stderr[-4000:])
        self.assertIn("Successfully installed genscope", done.stdout)
        check = (
            "import importlib.metadata, json, genscope, genscope.torch\n"
            "m = genscope.Monitor(nvml=False)\n"
            "run = m.start_run(pipeline='venv')\n"
            "with run.step('custom', 'inside the venv') as s:\n"
            "    s.add_counter('items', 3)\n"
            "doc = run.finish()\n"
            "print(json.dumps({'file': genscope.__file__, 'version': genscope.__version__,\n"
            "    'dist': importlib.metadata.version('genscope'),\n"
            "    'status': doc['steps'][0]['status'], 'items': doc['steps'][0]['counters']['items'],\n"
            "    'torch': genscope.torch.instrument.__module__}))\n")
        run = subprocess.run([os.path.join(venv, "bin", "python"), "-c", check],
                             capture_output=True, text=True, timeout=120, cwd="/",
                             env={"PATH": "/usr/bin:/bin"})
        self.assertEqual(run.returncode, 0, run.stderr)
        import json

        got = json.loads(run.stdout)
        self.assertTrue(got["file"].startswith(os.path.realpath(venv)) or
                        got["file"].startswith(venv), got["file"])
        with open(os.path.join(SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
            declared = re.search(r"project\(genscope VERSION ([0-9.]+)", f.read()).group(1)
        self.assertEqual(got["version"], declared)
        self.assertEqual(got["dist"], declared)
        self.assertEqual((got["status"], got["items"]), ("ok", 3))
        self.assertEqual(got["torch"], "genscope.torch._instrument")
        site = os.path.dirname(got["file"])
        for name in ("py.typed", "_genscope.pyi", os.path.join("torch", "__init__.py")):
            self.assertTrue(os.path.exists(os.path.join(site, name)), name)


if __name__ == "__main__":
    unittest.main()
