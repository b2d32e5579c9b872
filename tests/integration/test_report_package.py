"""The report templates are package data: a built wheel carries them, and an installed copy of
perfscout (not this checkout) renders a page with them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted(p.name for p in (ROOT / "perfscout" / "analysis" / "report" / "templates").iterdir())

pytestmark = pytest.mark.slow  # builds and installs a wheel (~5 s here)


def test_wheel_carries_the_templates_and_an_installed_copy_renders_with_them(tmp_path: Path) -> None:
    src = tmp_path / "src"  # built from a copy: the shared checkout gets no build/ or egg-info
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copy(ROOT / "README.md", src)
    shutil.copytree(ROOT / "perfscout", src / "perfscout", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = tmp_path / "wheels"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(src)], env=env, capture_output=True, text=True, timeout=600)
    if built.returncode != 0 and "No module named" in built.stderr:
        pytest.skip(f"cannot build a wheel here: {built.stderr[-300:]}")
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("perfscout-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert TEMPLATES and {f"perfscout/analysis/report/templates/{n}" for n in TEMPLATES} <= names

    site = tmp_path / "site"
    inst = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site),
                           str(wheel)], env=env, capture_output=True, text=True, timeout=600)
    assert inst.returncode == 0, inst.stderr[-2000:]
    program = (
        "import sys; sys.path.insert(0, sys.argv[1]); import perfscout\n"
        "assert perfscout.__file__.startswith(sys.argv[1]), perfscout.__file__\n"
        "from perfscout.analysis.report.blocks import Document, Paragraph, Table\n"
        "from perfscout.analysis.report.html import to_html\n"
        "page = to_html(Document('installed', [Paragraph('<b>x</b>'), Table([{'a': 1}])]))\n"
        "assert 'border-collapse' in page and '&lt;b&gt;x&lt;/b&gt;' in page and '<td class=\"right\">1</td>' in page\n"
        "import jinja2, perfscout.analysis.report.html as h\n"
        "print(h.environment().get_template('page.html.j2').filename)\n"
    )
    run = subprocess.run([sys.executable, "-c", program, str(site)], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().startswith(str(site))  # the template came from the installed copy
