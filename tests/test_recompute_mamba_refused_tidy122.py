"""``mamba`` is not a recompute module: topo refuses it in one line naming what is allowed (tidy122,
docs/calibration-findings.md section 445; tidy121's section 443, Left 3).

topo used to price a ``mamba`` module (the whole Mamba-2 mixer replayed, only its input kept) that no framework runs.
Sources: NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/transformer_config.py`` lines 1945-1957 (the
allowed ``recompute_modules``: core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts, gdn_norm_out,
gdp_in_proj, gdp_qkv, mhc; no Mamba entry), ``megatron/core/ssm/mamba_layer.py`` and ``mamba_mixer.py`` (no
checkpoint), ``megatron/core/models/hybrid/hybrid_block.py`` line 360 (a Mamba-2 layer is recomputed only whole,
under ``recompute_granularity == 'full'``); NVIDIA-NeMo/Megatron-Bridge@067f987d sets it in no recipe.
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from topo.errors import TopoError
from topo.training.parallel import RECOMPUTE_MODULES, make_layout

ROOT = Path(__file__).resolve().parents[1]
MEGATRON_ALLOWED = {"core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts",
                    "gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc"}  # transformer_config.py lines 1945-1957


@pytest.mark.parametrize("mods", [("mamba",), ("moe", "mamba")])
def test_the_layout_refuses_mamba_naming_what_is_allowed(mods):
    with pytest.raises(TopoError) as e:
        make_layout(tp=1, dp=8, global_batch=8, recompute="selective", recompute_modules=mods)
    msg = e.value.message
    assert e.value.key == "recompute_modules" and "\n" not in msg
    assert msg.startswith("mamba is not a recompute module") and 'recompute = "full"' in msg
    allowed = msg.split("allowed: ")[1].split(", ")
    assert allowed == list(RECOMPUTE_MODULES) and "mamba" not in allowed


def test_every_megatron_module_topo_takes_is_in_megatrons_list_or_a_maxtext_name():
    # the Megatron-Core names topo takes are Megatron-Core's; the rest are MaxText tensor names (topo.training.remat)
    maxtext = {"mlp_act", "mlp_wi", "qkv_proj", "out_proj"}
    assert set(RECOMPUTE_MODULES) - maxtext <= MEGATRON_ALLOWED


def test_no_published_or_holdout_row_recomputes_a_mamba_module():
    for name in ("training_runs_published.csv", "training_runs_holdout.csv"):
        with open(ROOT / "data" / "reference" / name, newline="") as f:
            for row in csv.DictReader(f):
                assert "mamba" not in (row["recompute_modules"] or "").split(), (name, row)


def test_the_cli_says_it_in_one_line():
    r = subprocess.run([sys.executable, "-m", "topo", "train", "dgx-h100-superpod", "--model",
                        "nemotron-3-nano-30b-a3b", "--gpus", "16", "--ep", "8", "--global-batch", "64",
                        "--recompute", "selective", "--recompute-modules", "moe,mamba"], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith("error: --recompute-modules: mamba is not a recompute module")
