"""Runs a unittest folder (python_modern_torch.sh: python/tests) with the interpreter and
packages of the venv it is started in, the folder first on sys.path; prints the versions
tested. Exit 0 when every test passed. (Guarded by __main__: the distributed tests spawn
processes that import this file again.)"""
import os
import sys
import unittest


def main(folder):
    import numpy
    import torch

    sys.path.insert(0, folder)
    print(f"# python/tests on torch {torch.__version__}, NumPy {numpy.__version__}", flush=True)
    suite = unittest.defaultTestLoader.discover(folder)
    result = unittest.TextTestRunner(verbosity=1).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1])))
