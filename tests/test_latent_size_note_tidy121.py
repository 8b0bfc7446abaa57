"""A LatentMoE ``latent_size`` not below ``hidden`` is noted, not refused (tidy121, docs/calibration-findings.md
section 443; walk43's section 440, Left 1): Megatron-Core asserts only that ``moe_latent_size`` is positive and the
model has experts (NVIDIA/Megatron-LM@d98e8a64 megatron/training/arguments.py lines 1979-1982), so topo prices it
and says the projection widens the routed tokens. Before, a 5,000-wide latent on a 4,096 hidden was priced silently."""

from __future__ import annotations

import tomllib

import topo
from conftest import run_cli
from topo.resources import data_dir
from topo.training.model import load_model
from topo.training.parallel import make_layout
from topo.training.step import estimate_step

SUPER = "nemotron-3-super-120b-a12b"
NOTE = "moe latent_size 5,000 is not below hidden 4,096"


def _wide(tmp_path, latent):
    text = (data_dir("models") / f"{SUPER}.toml").read_text(encoding="utf-8")
    assert tomllib.loads(text)["moe"]["latent_size"] == 1024 and tomllib.loads(text)["hidden"] == 4096
    path = tmp_path / "wide.toml"
    path.write_text(text.replace("latent_size = 1024", f"latent_size = {latent}"), encoding="utf-8")
    return path


def test_a_wide_latent_is_noted_and_priced(tmp_path):
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod"))
    lay = make_layout(tp=2, ep=8, dp=32, global_batch=256)
    wide = estimate_step(fabric, load_model(str(_wide(tmp_path, 5000))), lay)
    assert any(n.startswith(NOTE) for n in wide.notes)
    narrow = estimate_step(fabric, load_model(SUPER), lay)  # the bundled 1,024: no note
    assert not any("is not below hidden" in n for n in narrow.notes)
    assert wide.step_time_s > narrow.step_time_s  # priced at the width given


def test_the_cli_says_it(tmp_path):
    out = run_cli("train", "dgx-h100-superpod", "--model", str(_wide(tmp_path, 5000)), "--gpus", "512", "--tp", "2",
                  "--ep", "8", "--dp", "256", "--global-batch", "1024", check=True).stdout
    assert f"note: {NOTE}: the latent projections widen the routed tokens" in out
