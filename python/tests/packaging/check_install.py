#!/usr/bin/python3
"""The installed package, imported by /usr/bin/python3 in a fresh shell without any
environment variable.

Runs the install command scripts/setup runs, `cmake --install <build> --component python`,
into a staging folder (DESTDIR), then checks that
- the package lands in the folder CMake chose, and that folder (under the real prefix) is on
  the sys.path of `env -i /usr/bin/python3` (so the real install is found with no PYTHONPATH);
- a fresh `env -i /usr/bin/python3` imports the staged copy from that very folder and runs a
  step: the staged folder is bind-mounted over the real one in a private mount namespace
  (`unshare -m`, root), so nothing on this machine changes; without that permission the
  import runs with PYTHONPATH=<staged folder> instead, and the test says so;
- when genscope is already installed system-wide (scripts/setup ran), a fresh shell imports
  it from anywhere and gets this build's version.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

BUILD = os.environ.get("GENSCOPE_BUILD_DIR", "")
PYTHON = "/usr/bin/python3"
CHECK = (
    "import json, genscope, genscope.torch\n"
    "m = genscope.Monitor(nvml=False)\n"
    "run = m.start_run()\n"
    "with run.step('custom', 'fresh shell'):\n"
    "    pass\n"
    "doc = run.finish()\n"
    "print(json.dumps({'file': genscope.__file__, 'version': genscope.__version__,\n"
    "                  'status': doc['steps'][0]['status']}))\n")


def cache_value(name):
    with open(os.path.join(BUILD, "CMakeCache.txt"), encoding="utf-8") as f:
        m = re.search(rf"^{name}:\w+=(.*)$", f.read(), re.M)
    return m.group(1).strip() if m else None


def fresh(cmd, **kwargs):
    """A command in an empty environment, from /."""
    return subprocess.run(["env", "-i", *cmd], capture_output=True, text=True, timeout=120,
                          cwd="/", **kwargs)


@unittest.skipUnless(os.path.exists(os.path.join(BUILD, "CMakeCache.txt")),
                     "GENSCOPE_BUILD_DIR is not a configured build")
class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.prefix = cache_value("CMAKE_INSTALL_PREFIX")
        rel = cache_value("GENSCOPE_PYTHON_INSTALL_DIR")
        cls.target = rel if os.path.isabs(rel) else os.path.join(cls.prefix, rel)
        base = os.environ.get("GENSCOPE_TEST_TMP")
        if base:
            os.makedirs(base, exist_ok=True)
        cls.tmp = tempfile.mkdtemp(prefix="genscope-install-", dir=base or None)
        done = subprocess.run(["cmake", "--install", BUILD, "--component", "python"],
                              capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, DESTDIR=cls.tmp))
        assert done.returncode == 0, done.stdout + done.stderr
        cls.staged = cls.tmp + cls.target

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_files_installed(self):
        package = os.path.join(self.staged, "genscope")
        names = sorted(os.listdir(package))
        self.assertTrue([n for n in names if n.startswith("_genscope.") and n.endswith(".so")], names)
        for name in ("__init__.py", "_errors.py", "_genscope.pyi", "py.typed"):
            self.assertIn(name, names)
        self.assertIn("_instrument.py", os.listdir(os.path.join(package, "torch")))
        self.assertNotIn("__pycache__", names)

    def test_install_folder_is_on_a_fresh_sys_path(self):
        if cache_value("Python3_EXECUTABLE") != PYTHON:
            self.skipTest("the build is configured for another interpreter")
        out = fresh([PYTHON, "-c", "import sys, json; print(json.dumps(sys.path))"])
        self.assertIn(self.target, json.loads(out.stdout))

    def test_fresh_shell_imports_the_installed_package(self):
        mounted = fresh(["unshare", "-m", "sh", "-c",
                         f"mount --bind '{self.staged}' '{self.target}' && "
                         f"exec {PYTHON} -c \"$0\"", CHECK]) if os.path.isdir(self.target) \
            else None
        if mounted is not None and mounted.returncode == 0:
            got = json.loads(mounted.stdout)
            self.assertEqual(os.path.dirname(got["file"]), os.path.join(self.target, "genscope"))
        else:
            reason = mounted.stderr.strip() if mounted is not None else f"{self.target} missing"
            print(f"\nno private mount namespace ({reason}); importing with "
                  f"PYTHONPATH={self.staged} instead")
            done = fresh([f"PYTHONPATH={self.staged}", PYTHON, "-c", CHECK])
            self.assertEqual(done.returncode, 0, done.stderr)
            got = json.loads(done.stdout)
            self.assertEqual(os.path.dirname(got["file"]), os.path.join(self.staged, "genscope"))
        self.assertEqual(got["status"], "ok")
        self.assertEqual(got["version"], cache_value("CMAKE_PROJECT_VERSION"))

    def test_system_install_when_present(self):
        where = fresh([PYTHON, "-c", "import genscope, json; print(json.dumps("
                       "[genscope.__file__, genscope.__version__]))"])
        if where.returncode != 0:
            self.skipTest("genscope is not installed system-wide here (scripts/setup not run)")
        path, version = json.loads(where.stdout)
        self.assertEqual(version, cache_value("CMAKE_PROJECT_VERSION"))
        self.assertTrue(path.startswith(self.target), path)


if __name__ == "__main__":
    unittest.main()
