"""The /moe page under AppTest: every section on a (tiny) MoE folder, a dense model's offer of the bundled MoE,
and layer/expert indices from a URL clamped and said."""

import json
from dataclasses import asdict

import pytest
from streamlit.testing.v1 import AppTest

from inference.core import routing
from inference.training import moe_stats
from tests.conftest import APP_FILE
from tests.test_moe import stats, tiny_moe, tiny_moe_folder  # noqa: F401  (fixtures)

pytestmark = pytest.mark.page

PAGE = "app_pages/moe.py"


@pytest.fixture(scope="module")
def moe_folder(tiny_moe_folder, stats):  # noqa: F811
    """The tiny MoE folder with what a bundled MoE carries: stats, training meta, load log."""
    from inference.core.paths import BUNDLED_MODEL_DIR
    from inference.training.train import PRESETS, TrainSettings

    folder, _ = tiny_moe_folder
    moe_stats.write(folder, stats)
    dense = json.loads((BUNDLED_MODEL_DIR / "training_meta.json").read_text())
    meta = {
        "settings": {**asdict(TrainSettings()), **PRESETS["moe"]},
        "preset": "moe",
        "tokenizer_from": BUNDLED_MODEL_DIR.name,
        "stats": {**dense["stats"], "heldout_bits_per_byte": 1.5},
    }
    (folder / "training_meta.json").write_text(json.dumps(meta))
    log = [
        {"step": 200, "fractions": [[0.7, 0.1, 0.1, 0.1]] * 2},
        {"step": 400, "fractions": stats["load"]["fractions"]},
    ]
    (folder / "expert_load_log.json").write_text(json.dumps(log))
    return folder


def open_moe_page() -> AppTest:
    at = AppTest.from_file(APP_FILE, default_timeout=240)
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception
    return at


def load_folder(at: AppTest, folder) -> AppTest:
    at.text_input(key="model_input").input(str(folder)).run()
    at.button(key="model_load").click().run()
    assert not at.exception and not at.sidebar.error
    return at


def test_dense_model_says_it_has_no_experts_and_offers_the_bundled_moe_in_one_click(
    local_server, moe_folder, monkeypatch
):
    monkeypatch.setattr(routing, "BUNDLED_MOE_DIR", moe_folder)
    monkeypatch.setattr(routing, "BUNDLED_MOE_NAME", moe_folder.name)
    at = open_moe_page()
    assert any("has no experts" in i.value for i in at.info)
    # Sections 1-5 need experts: the one section a dense model shows is not numbered "6.".
    headings = [e.label for e in at.expander]  # a closed section with its one line (#46 item 11)
    assert any(h.startswith("At scale") for h in headings) and not any(h[:2] == "6." for h in headings), headings
    at.button(key="moe_load_bundled").click().run()
    assert not at.exception
    assert any("Routing, live" in h.value for h in at.subheader)
    in_use = " ".join(c.value for c in at.sidebar.caption)
    assert f"**{moe_folder.name}**" in in_use and str(moe_folder) not in in_use  # a name, never the path (#46 14)


def test_every_section_renders_for_an_moe_and_the_page_measures_decode_speed_itself(local_server, moe_folder):
    """Sections 1-6 drawn; Step and Play route new tokens; layer and expert from a URL beyond the model are clamped
    and said; the stored decode times (taken while a model trained) are on no chart, the page times its own."""
    from inference.core.machine import cpu_name

    at = load_folder(open_moe_page(), moe_folder)
    headings = [h.value for h in at.subheader] + [e.label for e in at.expander]  # 6 is a closed section
    assert all(any(h.startswith(f"{n}.") for h in headings) for n in range(1, 7)), headings
    assert len({c.proto.id for c in at.get("plotly_chart")}) >= 7  # heat map, router, mixture, load, balance, ...
    chips = [m.value for m in at.markdown if "token-chip" in m.value]
    assert chips and "<script" not in chips[0]
    before = at.slider(key="moe_token").max
    at.button(key="moe_step").click().run()
    assert not at.exception and at.slider(key="moe_token").max == before + 1
    at.button(key="moe_play").click().run()
    assert not at.exception and at.slider(key="moe_token").max > before + 1
    at.query_params["layer"], at.query_params["expert"] = "9", "-3"
    at.run()
    warnings = " ".join(w.value for w in at.warning)
    assert "`layer=9` is outside layers 0–1" in warnings and "`expert=-3` is outside experts 0–3" in warnings
    assert at.slider(key="moe_layer").value == 1 and at.selectbox(key="moe_expert").value == 0
    at.selectbox(key="moe_expert").set_value(3).run()
    table = next(d.value for d in at.dataframe if "times routed here" in d.value.columns)
    assert (table["times routed here"] <= table["times in the text"]).all() and len(table) > 0
    sparsity = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "moe_sparsity" in c.proto.id)
    titles = [a["text"] for a in sparsity["layout"]["annotations"]]
    assert len(titles) == 3 and not any("ms" in t for t in titles), titles
    at.button(key="moe_time").click().run()
    assert not at.exception
    timed = next(d.value for d in at.dataframe if "decode ms per token" in d.value.columns)
    assert set(timed["model"]) == {"dense", "MoE, top-2", "MoE, top-1"} and (timed["decode ms per token"] > 0).all()
    captions = " ".join(c.value for c in at.caption)
    assert cpu_name() in captions and "transformers' own forward with a KV cache" in captions
