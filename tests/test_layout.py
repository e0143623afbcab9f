"""inference/ is plain Python: importing every module of it never loads Streamlit."""
import subprocess
import sys

from inference.paths import PROJECT_ROOT


def test_no_inference_module_imports_streamlit():
    modules = sorted(f"inference.{p.stem}" for p in (PROJECT_ROOT / "inference").glob("*.py") if p.stem != "__init__")
    assert "inference.engine" in modules and "inference.moe" in modules
    code = ("import importlib, sys\n"
            f"for name in {modules!r}: importlib.import_module(name)\n"
            "print('streamlit' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "False"
