"""inference/ is plain Python: importing every module of it (packages included) never loads
Streamlit; a lesson's figure module imports no other lesson's figures (what they share is `lessons.style`)."""

import ast
import subprocess
import sys

import pytest

from inference.core.paths import PROJECT_ROOT

pytestmark = pytest.mark.unit

INFERENCE = PROJECT_ROOT / "inference"
LESSONS = INFERENCE / "lessons"


def module_name(path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_inference_module_imports_streamlit():
    modules = sorted(module_name(p) for p in INFERENCE.rglob("*.py"))
    assert {
        "inference.core.run",
        "inference.lessons.moe.scale",
        "inference.lessons.style",
        "inference.lessons.kv_cache.figures",
    } <= set(modules)
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print('streamlit' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "False"


def imported_modules(path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_a_figure_module_never_imports_another_lessons_figure_module():
    """Each lesson's charts live in its own figures.py; what they share lives in `inference.lessons.style`."""
    figure_modules = sorted(LESSONS.glob("*/figures.py"))
    lessons = {
        "generate",
        "sampling_lab",
        "prefill_decode",
        "kv_cache",
        "quantization",
        "cost",
        "inside",
        "constrained",
    }
    assert lessons <= {p.parent.name for p in figure_modules}
    for path in figure_modules:
        own = f"inference.lessons.{path.parent.name}"
        figure_imports = {name for name in imported_modules(path) if name.endswith(".figures") or ".figures." in name}
        foreign = {name for name in figure_imports if not name.startswith(own)}
        assert not foreign, f"{path} imports {sorted(foreign)}"


def test_the_old_flat_figure_modules_are_gone():
    """One obvious place per chart: no leftover figures.py, render.py or *_figures.py beside the package."""
    flat = [p.name for p in INFERENCE.glob("*.py") if p.stem in ("figures", "render") or p.stem.endswith("_figures")]
    assert flat == []
