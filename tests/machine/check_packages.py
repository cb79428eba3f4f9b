#!/usr/bin/env python3
"""Checks that the suite needs nothing a fresh machine lacks and no script installs.

A test that passes only because something else installed a package first (a peer's
preparation, a session's `apt-get install` or `pip install` by hand) fails on a fresh machine.
This check makes that failure happen here, in the suite:

1. The packages the project's scripts install: every `*_packages` array of
   scripts/lib/common.sh (the one place they are listed; scripts call `ensure_packages` with
   those arrays only, which is checked too), with everything they depend on (the installed
   packages' Depends/Pre-Depends, read from dpkg).
2. The packages of a fresh machine of this kind: tests/fixtures/fresh_machine/<kind>.tsv.
3. What the tests use:
   - every module the tests' Python files import, resolved the way the tests' interpreter
     (/usr/bin/python3) resolves it: it must come from a Debian package in 1 or 2 (dpkg owns
     the file), or be the project's own; a module installed by pip outside any package, or
     not installed at all, fails (unless listed in OPTIONAL_MODULES with the reason);
   - every program of an installed Debian package that is in neither 1 nor 2 (installed by
     hand): if a test or script names it as a command, it fails.
Prints what it found; exits 1 with one line per problem.
"""

import argparse
import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_PYTHON = "/usr/bin/python3"  # tests/CMakeLists.txt: kPython
# Folders whose Python files and scripts the suite runs.
TEST_DIRS = ["tests", "python/tests", "integrations/comfyui/tests"]
SCRIPT_FILES = ["scripts", ".ci"]
# Modules a test may import without any script installing them, each with the reason the
# test still passes on a fresh machine (it runs only where the module is, or is skipped).
OPTIONAL_MODULES = {
    "diffusers": "peer tests only (tests/peers, run by scripts/peers in their own venvs)",
    "transformers": "peer tests only (tests/peers, run by scripts/peers in their own venvs)",
    "safetensors": "peer tests only (tests/peers, run by scripts/peers in their own venvs)",
    "accelerate": "peer tests only (tests/peers, run by scripts/peers in their own venvs)",
    "tokenizers": "peer tests only (tests/peers, run by scripts/peers in their own venvs)",
    "stable_diffusion_cpp": "peer tests only (tests/peers, run by scripts/peers in their own venvs)",
    "comfy": "ComfyUI's own modules: tests that need them take GENSCOPE_COMFYUI_DIR and skip without it",
    "comfy_execution": "ComfyUI's own modules: tests that need them take GENSCOPE_COMFYUI_DIR",
    "comfyui_version": "ComfyUI's own modules: tests that need them take GENSCOPE_COMFYUI_DIR",
    "folder_paths": "ComfyUI's own modules: tests that need them take GENSCOPE_COMFYUI_DIR",
    "execution": "ComfyUI's own modules: tests that need them take GENSCOPE_COMFYUI_DIR",
    "server": "ComfyUI's own modules: tests that need them take GENSCOPE_COMFYUI_DIR",
    "nodes": "ComfyUI's own modules: tests that need them take GENSCOPE_COMFYUI_DIR",
    "PIL": "ComfyUI peer tests only (tests/peers, in the ComfyUI environment they prepare)",
    "pynvml": "GPU checks (tests/gpu, scripts/gpu-check) on a GPU machine, which has nvidia-ml-py",
}


def read_fresh(kind: str) -> set:
    path = ROOT / "tests" / "fixtures" / "fresh_machine" / f"{kind}.tsv"
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        source, name = line.split("\t")[:2]
        if source == "apt":
            names.add(name.split(":")[0])
    if not names:
        raise SystemExit(f"{path}: no apt packages listed")
    return names


def script_packages() -> dict:
    """{array name: [packages]} of every *_packages array in scripts/lib/common.sh."""
    out = subprocess.run(
        ["bash", "-c", 'source "$1" >/dev/null; for v in $(compgen -A arrayvar); do '
         'case $v in *_packages) eval "printf \'%s\\t%s\\n\' $v \\"\\${$v[*]}\\"";; esac; done',
         "check", str(ROOT / "scripts" / "lib" / "common.sh")],
        check=True, capture_output=True, text=True).stdout
    arrays = {}
    for line in out.splitlines():
        name, _, value = line.partition("\t")
        arrays[name] = value.split()
    return arrays


def stray_installs() -> list:
    """Install commands in scripts that bypass the arrays of common.sh."""
    problems = []
    for top in SCRIPT_FILES:
        for path in sorted((ROOT / top).rglob("*")):
            if not path.is_file() or path.suffix in (".py", ".md"):
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
            rel = path.relative_to(ROOT)
            for no, line in enumerate(text.splitlines(), 1):
                code = line.split("#", 1)[0]
                if re.search(r"\bensure_packages\b", code) and not re.match(r"\s*ensure_packages\(\)", code):
                    args = code.split("ensure_packages", 1)[1].split()
                    literal = [a for a in args if not re.fullmatch(r'"\$\{\w+_packages\[@\]\}"', a)]
                    if literal:
                        problems.append(f"{rel}:{no}: ensure_packages with literal names {literal}: "
                                        "list them in an array of scripts/lib/common.sh")
                if re.match(r"\s*(\w+=\S*\s+)*(sudo\s+|\$\w+\s+)?apt(-get)?\s+(-\S+\s+)*install\b", code) \
                        and rel.as_posix() != "scripts/lib/common.sh":
                    problems.append(f"{rel}:{no}: apt-get install outside scripts/lib/common.sh")
    return problems


def installed_packages() -> dict:
    """{package: (provides, depends)} of every installed Debian package."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package}\t${db:Status-Abbrev}\t${Provides}\t${Depends}, ${Pre-Depends}\n"],
        check=True, capture_output=True, text=True).stdout
    pkgs = {}
    for line in out.splitlines():
        name, status, provides, depends = (line.split("\t") + ["", "", ""])[:4]
        if not status.startswith("ii"):
            continue
        pkgs[name] = (provides, depends)
    return pkgs


def names_in(field: str) -> list:
    """Alternatives per dependency of a Depends-style field, without versions or arch."""
    groups = []
    for dep in field.split(","):
        alts = [re.sub(r"\s*\(.*?\)|:\S+|\s*\[.*?\]", "", a).strip() for a in dep.split("|")]
        alts = [a for a in alts if a]
        if alts:
            groups.append(alts)
    return groups


def closure(roots, installed: dict) -> set:
    provided_by = {}
    for name, (provides, _) in installed.items():
        for group in names_in(provides):
            for virtual in group:
                provided_by.setdefault(virtual, set()).add(name)
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name not in installed:
            todo.extend(provided_by.get(name, ()))
            continue
        for group in names_in(installed[name][1]):
            for alt in group:
                if alt in installed:
                    todo.append(alt)
                todo.extend(provided_by.get(alt, ()))
    return seen


def test_files(suffixes, with_scripts: bool) -> list:
    """The suite's files with these suffixes; with_scripts adds scripts/ and .ci/ (no suffix)."""
    files = []
    for top in TEST_DIRS + (SCRIPT_FILES if with_scripts else []):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "node_modules" not in path.parts and "fixtures" not in path.parts \
                    and (path.suffix in suffixes or (not path.suffix and top in SCRIPT_FILES)):
                files.append(path)
    return files


def local_module_names() -> set:
    """Modules the project itself provides (its packages and the tests' own helpers)."""
    names = {"genscope", "genscope_comfyui"}
    for path in ROOT.rglob("*.py"):
        if "node_modules" in path.parts or ".git" in path.parts:
            continue
        names.add(path.stem)
        if path.name == "__init__.py":
            names.add(path.parent.name)
    return names


def imported_modules() -> dict:
    """{top-level module: first file importing it} over the tests' Python files."""
    found = {}
    for path in test_files({".py"}, with_scripts=False):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except (SyntaxError, UnicodeDecodeError) as exc:
            raise SystemExit(f"{path}: cannot parse: {exc}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = [node.module.split(".")[0]]
            else:
                continue
            for top in tops:
                found.setdefault(top, path.relative_to(ROOT).as_posix())
    return found


RESOLVE = r"""
import importlib.util, json, sys
out = {}
for name in sys.argv[1:]:
    if name in sys.builtin_module_names:
        out[name] = "builtin"; continue
    try:
        spec = importlib.util.find_spec(name)
    except Exception as exc:
        out[name] = None; continue
    if spec is None:
        out[name] = None
    elif spec.origin in (None, "namespace") and spec.submodule_search_locations:
        out[name] = list(spec.submodule_search_locations)[0]
    else:
        out[name] = spec.origin or "builtin"
print(json.dumps(out))
"""


def dpkg_owner(path: str):
    """The Debian package that installed exactly this file (dpkg-query -S also lists others
    whose paths merely contain it), trying the resolved path too."""
    for candidate in dict.fromkeys([path, os.path.realpath(path)]):
        probe = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
        for line in probe.stdout.splitlines():
            owners, _, owned = line.rpartition(": ")
            if owned == candidate and not owners.startswith("diversion"):
                return owners.split(",")[0].strip().split(":")[0]
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="polyglot", help="machine kind (tests/fixtures/fresh_machine)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    problems = stray_installs()

    fresh = read_fresh(args.kind)
    arrays = script_packages()
    scripted = {p for pkgs in arrays.values() for p in pkgs}
    installed = installed_packages()
    for name in sorted(scripted - set(installed)):
        problems.append(f"{name}: listed in scripts/lib/common.sh but not installed (run scripts/test)")
    allowed = fresh | closure(scripted, installed)
    print(f"scripts install {len(scripted)} packages ({', '.join(sorted(arrays))}); with their "
          f"dependencies and the {len(fresh)} of a fresh '{args.kind}' machine: {len(allowed)} allowed")

    # Python modules the tests import.
    local = local_module_names()
    imports = {m: f for m, f in imported_modules().items() if m not in local}
    resolved = json.loads(subprocess.run([TEST_PYTHON, "-c", RESOLVE, *sorted(imports)],
                                         check=True, capture_output=True, text=True).stdout)
    owners = {}
    for module in sorted(imports):
        origin = resolved.get(module)
        where = imports[module]
        if origin in ("builtin", "frozen"):
            continue
        if origin is None:
            if module not in OPTIONAL_MODULES:
                problems.append(f"module {module} (imported by {where}) is not installed for "
                                f"{TEST_PYTHON}: add its Debian package to scripts/lib/common.sh")
            continue
        owner = dpkg_owner(origin)
        if owner is None:
            if module not in OPTIONAL_MODULES:
                problems.append(f"module {module} (imported by {where}) comes from {origin}, which no "
                                "Debian package installed: a pip install by hand? add its Debian package "
                                "to scripts/lib/common.sh")
            continue
        owners[module] = owner
        if owner not in allowed:
            problems.append(f"module {module} (imported by {where}) comes from Debian package {owner}, "
                            "which neither a fresh machine has nor a script installs: add it to "
                            "scripts/lib/common.sh")
    print(f"tests import {len(imports)} modules besides the project's own: "
          f"{len(owners)} from Debian packages, "
          f"{sum(1 for m in imports if resolved.get(m) is None)} absent "
          f"({', '.join(sorted(m for m in imports if resolved.get(m) is None)) or 'none'})")
    if args.verbose:
        for module, owner in sorted(owners.items()):
            print(f"  {module}: {owner}")

    # Programs of packages installed by hand, named by a test or script.
    by_hand = sorted(set(installed) - allowed)
    texts = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8", errors="replace")
             for p in test_files({".py", ".sh", ".txt", ".cmake", ".mjs", ".js"}, with_scripts=True)}
    checked = 0
    for package in by_hand:
        files = subprocess.run(["dpkg-query", "-L", package], capture_output=True, text=True).stdout
        for path in files.splitlines():
            if not re.match(r"^/(usr/)?s?bin/[^/]+$", path):
                continue
            prog = os.path.basename(path)
            checked += 1
            pattern = re.compile(r"(?<![\w.$/-])" + re.escape(prog) + r"(?![\w.-])")
            for rel, text in texts.items():
                if pattern.search(text):
                    problems.append(f"{rel} names {prog}, from Debian package {package}, which "
                                    "neither a fresh machine has nor a script installs")
                    break
    print(f"{len(by_hand)} installed packages are in neither set (installed by hand); their "
          f"{checked} programs are named by no test or script" if not problems else
          f"{len(by_hand)} installed packages are in neither set (installed by hand)")

    for line in problems:
        print("PROBLEM:", line)
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
