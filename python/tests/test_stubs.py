"""The type stubs (genscope/_genscope.pyi) describe the built extension, and the version is
the C++ library's."""

import ast
import inspect
import os
import re
import subprocess
import unittest

import genscope
from genscope import _genscope

SOURCE = os.environ.get("GENSCOPE_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("GENSCOPE_BUILD_DIR", "")
STUB = os.path.join(os.path.dirname(genscope.__file__), "_genscope.pyi")
DUNDERS = {"__init__", "__enter__", "__exit__", "__bool__"}


def stub_tree():
    with open(STUB, encoding="utf-8") as f:
        return ast.parse(f.read())


def stub_params(fn):
    a = fn.args
    return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg != "self"]


def runtime_params(obj):
    """Parameter names from pybind11's signature line "name(self: T, a: int = 0, *, b: ...)"."""
    doc = (obj.__doc__ or "").strip().splitlines()[0]
    inside = doc[doc.index("(") + 1: doc.rindex(") ->")]
    names = re.findall(r"(?:^|, )\*?\*?(\w+)(?=: |, |$)", inside)
    return [n for n in names if n not in ("self", "kwargs")]


class StubTest(unittest.TestCase):
    def test_every_public_name_is_stubbed_and_exists(self):
        tree = stub_tree()
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        runtime = {n for n in dir(_genscope) if not n.startswith("__")}
        aliases = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets}
        self.assertEqual(set(classes) | set(functions), runtime)
        self.assertEqual(aliases, {"StepKind", "TensorRole", "RunDocument"})
        for name, node in classes.items():
            cls = getattr(_genscope, name)
            stubbed = {m.name for m in node.body if isinstance(m, ast.FunctionDef)}
            stubbed |= {m.target.id for m in node.body if isinstance(m, ast.AnnAssign)}
            if name == "Error":
                self.assertEqual(stubbed, {"name", "message"})
                continue
            public = {a for a in vars(cls) if not a.startswith("_") or a in DUNDERS}
            if name != "Monitor":  # pybind11's "no constructor" __init__ is not API
                public.discard("__init__")
            self.assertEqual(stubbed, public, name)

    def test_parameter_names_match(self):
        tree = stub_tree()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                self.assertEqual(stub_params(node), runtime_params(getattr(_genscope, node.name)),
                                 node.name)
            if isinstance(node, ast.ClassDef) and node.name != "Error":
                cls = getattr(_genscope, node.name)
                for m in node.body:
                    if not isinstance(m, ast.FunctionDef) or m.name in DUNDERS - {"__init__"}:
                        continue
                    attr = vars(cls).get(m.name)
                    if attr is None or isinstance(attr, property) or \
                            type(attr).__name__ == "property":
                        continue
                    expected = runtime_params(attr)
                    got = stub_params(m)
                    if m.name == "analyze_tensor":  # **kwargs at run time, named in the stub
                        got = got[: len(expected)]
                    self.assertEqual(got, expected, f"{node.name}.{m.name}")

    def test_package_is_typed(self):
        folder = os.path.dirname(genscope.__file__)
        self.assertTrue(os.path.exists(os.path.join(folder, "py.typed")))
        import genscope.torch as gt
        for name in gt.__all__:
            obj = getattr(gt, name)
            if inspect.isfunction(obj):
                hints = inspect.signature(obj)
                self.assertNotEqual(hints.return_annotation, inspect.Signature.empty, name)


class VersionTest(unittest.TestCase):
    def test_version_is_the_cmake_project_version(self):
        with open(os.path.join(SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
            declared = re.search(r"project\(genscope VERSION ([0-9.]+)", f.read()).group(1)
        self.assertEqual(genscope.__version__, declared)

    @unittest.skipUnless(os.path.exists(os.path.join(BUILD, "tools", "genscope", "genscope")),
                         "the genscope CLI is not built")
    def test_version_is_the_clis(self):
        cli = os.path.join(BUILD, "tools", "genscope", "genscope")
        out = subprocess.run([cli, "--version"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.stdout.strip(), "genscope " + genscope.__version__)


if __name__ == "__main__":
    unittest.main()
