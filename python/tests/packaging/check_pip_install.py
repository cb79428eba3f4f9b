#!/usr/bin/python3
"""`pip install .` and `pip wheel .` of this checkout, as a Python user runs them.

Build isolation on: pip fetches scikit-build-core and pybind11 from the index (its cache
after the first time) and scikit-build-core builds through the project's CMake in the
checkout's build-py-<wheel tag>/ (ccache hits for what scripts/setup's build compiled). Two
modes (GENSCOPE_PIP_MODE), one ctest test each:

- install (python.pip_install): a fresh venv (`/usr/bin/python3 -m venv V`),
  `V/bin/pip install <checkout>`, then from an empty environment: the package imports from the
  venv and runs a monitored step, `V/bin/genscope --version` and `V/bin/python -m genscope
  --version` print this version, and `genscope demo` without a genscope-demo on the PATH fails
  with [DemoNotFound];
- wheel (python.pip_wheel): `pip wheel --no-deps <checkout>`, the wheel installed into a second
  fresh venv, then `ldd` of the installed module and CLI must name the wheel's own copies
  (genscope/_libs) of every library the unbundled build (GENSCOPE_BUILD_DIR) takes from the
  system, and inside a private mount namespace (`unshare -m`, root) where each of those
  system files is covered with /dev/null, the package imports and runs a step and the
  bundled CLI runs `--version` and `probe`; the unbundled CLI must fail to start there
  (the hiding works). Without the right to unshare the namespace part is skipped, saying so.
"""

import json
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
MODE = os.environ.get("GENSCOPE_PIP_MODE", "install")
# What every Debian has: not bundled, not hidden.
SYSTEM_LIBS = re.compile(r"^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|"
                         r"libutil|libstdc\+\+|libgcc_s)\.so")
CHECK = (
    "import json, genscope\n"
    "m = genscope.Monitor(nvml=False)\n"
    "run = m.start_run(pipeline='venv')\n"
    "with run.step('custom', 'inside the venv') as s:\n"
    "    s.add_counter('items', 3)\n"
    "doc = run.finish()\n"
    "import genscope._genscope as native\n"
    "print(json.dumps({'file': genscope.__file__, 'module': native.__file__,\n"
    "    'version': genscope.__version__,\n"
    "    'status': doc['steps'][0]['status'], 'items': doc['steps'][0]['counters']['items']}))\n")


def declared_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(genscope VERSION ([0-9.]+)", f.read()).group(1)


def ldd(path):
    """{soname: resolved path or None} of what the loader would load for `path`."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=60)
    libs = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (.+?)(?: \(0x[0-9a-f]+\))?$", line)
        if m:
            libs[m.group(1)] = None if m.group(2) == "not found" else m.group(2)
    return libs


def venv_unavailable():
    probe = subprocess.run([PYTHON, "-c", "import venv, ensurepip"], capture_output=True,
                           text=True)
    return "python3-venv is not installed" if probe.returncode != 0 else None


def clean_env(**extra):
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    env.update(extra)
    return env


@unittest.skipIf(venv_unavailable(), venv_unavailable() or "")
class PipTest(unittest.TestCase):
    def setUp(self):
        base = os.environ.get("GENSCOPE_TEST_TMP")
        if base:
            os.makedirs(base, exist_ok=True)
        self.tmp = tempfile.mkdtemp(prefix=f"genscope-pip-{MODE}-", dir=base or None)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.version = declared_version()

    def make_venv(self, name):
        venv = os.path.join(self.tmp, name)
        made = subprocess.run([PYTHON, "-m", "venv", venv], capture_output=True, text=True,
                              timeout=300)
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        return venv

    def pip(self, venv, *args, timeout=1700):
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        done = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "pip", *args],
                              capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=self.tmp)
        self.assertEqual(done.returncode, 0, done.stdout[-6000:] + done.stderr[-6000:])
        return done

    def check_package(self, venv, cmd_prefix=()):
        run = subprocess.run([*cmd_prefix, os.path.join(venv, "bin", "python"), "-c", CHECK],
                             capture_output=True, text=True, timeout=120, cwd="/",
                             env=clean_env())
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        got = json.loads(run.stdout)
        self.assertTrue(os.path.realpath(got["file"]).startswith(os.path.realpath(venv)),
                        got["file"])
        self.assertEqual(got["version"], self.version)
        self.assertEqual((got["status"], got["items"]), ("ok", 3))
        return got

    def run_cli(self, venv, *args, via=None, cmd_prefix=(), env=None):
        cmd = via or [os.path.join(venv, "bin", "genscope")]
        return subprocess.run([*cmd_prefix, *cmd, *args], capture_output=True, text=True,
                              timeout=120, cwd="/", env=env or clean_env())

    @unittest.skipUnless(MODE == "install", "GENSCOPE_PIP_MODE=install")
    def test_pip_install_into_a_fresh_venv(self):
        venv = self.make_venv("V")
        done = self.pip(venv, "install", "--progress-bar", "off", SOURCE)
        self.assertIn("Successfully installed", done.stdout)
        got = self.check_package(venv)
        cli = os.path.join(os.path.dirname(got["file"]), "_bin", "genscope")
        for via in ([os.path.join(venv, "bin", "genscope")],
                    [os.path.join(venv, "bin", "python"), "-m", "genscope"]):
            out = self.run_cli(venv, "--version", via=via)
            self.assertEqual((out.returncode, out.stdout.strip()), (0, f"genscope {self.version}"),
                             out.stderr)
        # The console script is the CLI itself (os.execv): same exit status and output as the
        # bundled binary run directly, here for a usage error.
        direct = self.run_cli(venv, "no-such-command", via=[cli])
        bad = self.run_cli(venv, "no-such-command")
        self.assertNotEqual(direct.returncode, 0)
        self.assertEqual((bad.returncode, bad.stdout, bad.stderr),
                         (direct.returncode, direct.stdout, direct.stderr))
        # Built without LibTorch; no genscope-demo on this PATH (/usr/bin:/bin).
        demo = self.run_cli(venv, "demo")
        self.assertEqual(demo.returncode, 2, demo.stdout + demo.stderr)
        self.assertIn("[DemoNotFound]", demo.stderr)
        self.assertIn("scripts/setup", demo.stderr)
        shown = self.pip(venv, "show", "-f", "genscope").stdout
        self.assertIn(f"Version: {self.version}", shown)
        self.assertRegex(shown, r"genscope/_bin/genscope\n")

    @unittest.skipUnless(MODE == "wheel", "GENSCOPE_PIP_MODE=wheel")
    def test_wheel_runs_without_the_system_libraries(self):
        unbundled = [p for p in (os.path.join(BUILD, "tools", "genscope", "genscope"),
                                 *self.build_modules()) if os.path.exists(p)]
        self.assertEqual(len(unbundled), 2, f"GENSCOPE_BUILD_DIR={BUILD}: needs the built "
                         "genscope and _genscope (scripts/setup)")
        system = {}
        for path in unbundled:
            for name, where in ldd(path).items():
                if not SYSTEM_LIBS.match(name):
                    self.assertIsNotNone(where, f"{path}: {name} not found")
                    system[name] = where
        for expected in ("libhwy", "libsqlite3", "libre2", "libopenblas", "libgomp",
                         "libcpp-httplib"):
            self.assertTrue(any(n.startswith(expected + ".so") for n in system),
                            f"{expected} not among the build's libraries {sorted(system)}")

        builder = self.make_venv("builder")
        wheels = os.path.join(self.tmp, "wheels")
        self.pip(builder, "wheel", "--no-deps", "--progress-bar", "off", "-w", wheels, SOURCE)
        (wheel,) = os.listdir(wheels)
        self.assertRegex(wheel,
                         rf"^genscope-{re.escape(self.version)}-cp\d+-cp\d+-linux_x86_64\.whl$")
        venv = self.make_venv("elsewhere")
        self.pip(venv, "install", "--progress-bar", "off", os.path.join(wheels, wheel))
        got = self.check_package(venv)
        package = os.path.dirname(got["file"])
        cli = os.path.join(package, "_bin", "genscope")
        libs_dir = os.path.realpath(os.path.join(package, "_libs"))
        loaded = {}
        for path in (got["module"], cli):
            for name, where in ldd(path).items():
                if not SYSTEM_LIBS.match(name):
                    self.assertEqual(os.path.dirname(os.path.realpath(where or "")), libs_dir,
                                     f"{path}: {name} => {where} (not bundled)")
                    loaded[name] = where
        self.assertEqual(sorted(loaded), sorted(system))

        # The system's copies covered: only the bundled ones can load. The interpreter's own
        # libraries (Debian's python3 links libz) stay for the Python run: the process has
        # loaded them before the module asks.
        python = os.path.join(venv, "bin", "python")
        interpreter = set(ldd(os.path.realpath(python)))

        def hidden(cmd, keep=frozenset()):
            files = sorted({os.path.realpath(p) for n, p in system.items() if n not in keep})
            mounts = "".join(f"mount --bind /dev/null {f} && " for f in files)
            return subprocess.run(["unshare", "-m", "sh", "-c", mounts + 'exec "$@"', "hidden",
                                   *cmd], capture_output=True, text=True, timeout=120, cwd="/",
                                  env=clean_env())

        probe = hidden(["true"])
        if probe.returncode != 0:
            self.skipTest("cannot hide the system libraries (unshare -m and bind mounts need "
                          f"root): {probe.stderr.strip()}")
        before = hidden([unbundled[0], "--version"])
        self.assertNotEqual(before.returncode, 0, "the unbundled genscope started with the "
                            "system libraries hidden: the hiding does not work")
        self.assertIn("error while loading shared libraries", before.stderr)
        self.assertGreaterEqual(len(set(system) - interpreter), 10, sorted(interpreter))
        run = hidden([python, "-c", CHECK], keep=interpreter)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertEqual(json.loads(run.stdout)["status"], "ok")
        # The CLI itself with every copy hidden; the console script (a Python launcher) with
        # the interpreter's kept.
        script = os.path.join(venv, "bin", "genscope")
        for cmd, keep in (([cli], frozenset()), ([script], interpreter)):
            for args, expect in ((["--version"], f"genscope {self.version}"), (["probe"], "Host:")):
                out = hidden([*cmd, *args], keep=keep)
                self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
                self.assertIn(expect, out.stdout)

    def build_modules(self):
        folder = os.path.join(BUILD, "python", "genscope")
        if not os.path.isdir(folder):
            return []
        return [os.path.join(folder, f) for f in os.listdir(folder)
                if f.startswith("_genscope") and f.endswith(".so")]


if __name__ == "__main__":
    unittest.main()
