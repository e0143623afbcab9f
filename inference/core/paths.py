"""Where things live, relative to the project root (never the working directory)."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ASSETS_DIR = PROJECT_ROOT / "assets"
MODELS_DIR = ASSETS_DIR / "models"
BUNDLED_MODEL_NAME = "storyteller-llama-6m"
BUNDLED_MODEL_DIR = MODELS_DIR / BUNDLED_MODEL_NAME
PUBLIC_MODELS_FILE = ASSETS_DIR / "public_models.json"
ACCELERATORS_FILE = ASSETS_DIR / "accelerators.json"  # nvidia-smi memory of the cards the calculator lists

# The shared corpus sits beside the project checkout; it is never copied into the repo.
DEFAULT_CORPUS_DIR = PROJECT_ROOT.parent / "shared" / "corpus" / "tinystories"
DEFAULT_HELDOUT_FILE = (
    PROJECT_ROOT.parent / "shared" / "corpus" / "heldout" / "tinystories_v1_valid_part_blanklines.txt"
)
