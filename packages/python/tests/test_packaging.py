"""`pip install ./packages/python` builds offline with the standard backend (setuptools), with no
index and no build isolation, and the installed package is complete (its types included)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from harness import PACKAGE

# Debian's interpreter has setuptools and wheel (DESIGN.md, toolchain facts); another python3
# with setuptools works too.
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


class OfflineInstall(unittest.TestCase):
    def test_pip_install_with_no_index(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            # A copy, so the build leaves nothing in the working tree.
            source = Path(tmp) / "python"
            shutil.copytree(PACKAGE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
            venv = Path(tmp) / "venv"
            subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", str(venv)], check=True)
            env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
            install = subprocess.run(
                [str(venv / "bin" / "pip"), "install", "--no-index", "--no-build-isolation", str(source)],
                capture_output=True,
                text=True,
                env=env,
            )
            self.assertEqual(install.returncode, 0, install.stdout + install.stderr)
            probe = (
                "import memory_service, pathlib;"
                "root = pathlib.Path(memory_service.__file__).parent;"
                "print(memory_service.__version__, (root / 'py.typed').exists(), root.parent.name,"
                " len(memory_service.OPERATIONS))"
            )
            # Run outside the source tree, so the import is the installed copy.
            out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, cwd=tmp)
            self.assertEqual(out.returncode, 0, out.stderr)
            version, typed, parent, operations = out.stdout.split()
            self.assertEqual((version, typed, parent), ("0.1.0", "True", "site-packages"))
            self.assertGreaterEqual(int(operations), 24)


if __name__ == "__main__":
    unittest.main()
