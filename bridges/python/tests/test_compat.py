"""The package keeps its promises: Python 3.9 syntax, standard library only, no trainer imports."""
from __future__ import annotations

import ast
import glob
import os
import subprocess
import sys
import unittest

from tests.helpers import ROOT

PKG = os.path.join(ROOT, "bridges", "python", "raas_bridge")


class CompatTest(unittest.TestCase):
    def test_python_39_syntax(self):
        files = glob.glob(os.path.join(PKG, "*.py")) + [os.path.join(ROOT, "examples", "python", "train_loop.py")]
        for f in files:
            with open(f, encoding="utf-8") as fh:
                ast.parse(fh.read(), f, feature_version=(3, 9))

    def test_imports_only_the_standard_library_and_never_trainers(self):
        code = (
            "import sys, raas_bridge\n"
            "bad = [m for m in ('numpy', 'torch', 'verl', 'nemo_rl') if m in sys.modules]\n"
            "print(','.join(bad))\n"
        )
        env = {**os.environ, "RAAS_BRIDGE_NO_NUMPY": "1", "PYTHONPATH": os.path.dirname(PKG)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        self.assertEqual(out.stdout.strip(), "")
        for f in glob.glob(os.path.join(PKG, "*.py")):
            with open(f, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
                for n in names:
                    top = n.split(".")[0]
                    self.assertTrue(top == "numpy" or top in sys.stdlib_module_names or top == "__future__", f"{f}: imports {n}")


if __name__ == "__main__":
    unittest.main()
