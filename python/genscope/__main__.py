"""``python -m genscope ARGS`` and the ``genscope`` command of a pip install.

Both run the C++ command-line tool: the one in the wheel (``genscope/_bin/genscope``, built
without LibTorch: ``genscope demo`` runs the ``genscope-demo`` on the PATH), else, for the
package scripts/setup installs for Debian's python3 (which has no ``_bin``), the ``genscope``
program on the PATH. The tool replaces this process (``os.execv``): its exit status, signals
and standard streams are the tool's own, as if it had been started directly.
"""

import os
import sys


class CliNotFound(RuntimeError):
    """No genscope command-line tool to run."""


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def cli_path() -> str:
    """The genscope program to run: the package's own, else the first native one on the PATH
    (never a launcher script, such as a pip install's console script or a pyenv shim, which
    would come back here)."""
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", "genscope")
    if os.access(bundled, os.X_OK):
        return bundled
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        on_path = os.path.join(folder or ".", "genscope")
        if os.path.isfile(on_path) and os.access(on_path, os.X_OK) and _is_elf(on_path):
            return on_path
    raise CliNotFound(
        f"this genscope package has no command-line tool ({bundled} is missing) and no native "
        "genscope is on the PATH: install the package with pip (`pip install .` in a genscope "
        "checkout; the wheel carries the tool) or run scripts/setup (/usr/local/bin/genscope)")


def main() -> None:
    try:
        program = cli_path()
    except CliNotFound as e:
        print(f"genscope: error [CliNotFound]: {e}", file=sys.stderr)
        sys.exit(2)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(program, ["genscope", *sys.argv[1:]])


if __name__ == "__main__":
    main()
