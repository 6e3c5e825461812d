"""The install is one ``sentinel`` namespace; the core never imports Lightning."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_core_never_imports_lightning():
    code = (
        "import importlib, pkgutil, sys, sentinel\n"
        "names = [m.name for m in pkgutil.walk_packages(sentinel.__path__, 'sentinel.')\n"
        "         if not m.name.startswith(('sentinel.callbacks', 'sentinel.cli'))]\n"
        "for name in names: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('lightning', 'pytorch_lightning'))\n"
        "assert not bad, bad\n"
        "print(len(names))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 20  # really walked the core


def test_every_package_directory_is_listed_in_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the package itself runs on 3.10
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    mapping = config["package-dir"]
    found = set()
    for top, directory in mapping.items():
        for init in (ROOT / directory).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / directory)
            found.add(".".join([top, *rel.parts]) if rel.parts else top)
    assert found == listed


@pytest.mark.slow
def test_wheel_installs_one_namespace_and_the_console_script(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path / "dist")], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("*.whl"))
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert "sentinel" in tops and not {"callbacks", "cli"} & tops, tops
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # Dependencies come from this environment (appended after the fresh site-packages).
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, capture_output=True)
    assert not (Path(site) / "callbacks").exists() and not (Path(site) / "cli").exists()
    env = {**os.environ, "PYTHONPATH": ""}
    probe = ("import sentinel, sentinel.callbacks, sentinel.cli.main; "
             "assert sentinel.__file__.startswith(%r), sentinel.__file__; "
             "print(sentinel.callbacks.SentinelCallback.__name__)" % site)
    out = subprocess.run([py, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0 and "SentinelCallback" in out.stdout, out.stderr
    help_out = subprocess.run([venv / "bin" / "sentinel", "--help"], capture_output=True, text=True,
                              env=env, cwd=tmp_path)
    assert help_out.returncode == 0 and "analyze" in help_out.stdout, help_out.stderr
