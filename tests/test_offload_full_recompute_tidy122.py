"""``check_layout``'s refusal of MoE ``offload_modules`` beside a recomputed ``moe`` module reads the step's rule
(:func:`topo.training.activation_bytes.modules_recomputed`): under ``recompute = "full"`` the modules recompute
nothing, so the refusal does not apply; under selective recomputation it does (tidy122, docs/calibration-findings.md
section 445; tidy121's section 443, Left 2).

Source: NVIDIA/Megatron-LM@d98e8a64 ``megatron/core/transformer/transformer_config.py`` lines 2165-2175, "Cannot
offload {offload_inside_moe} while recomputing the entire MoE layer", asserted only when
``self.recompute_granularity == "selective" and "moe" in self.recompute_modules``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import ParallelLayout, check_layout

LIGHTNING = "nemotron-3.5-lightning-30b-a3b"  # Megatron-Bridge's H100 recipe offloads expert_fc1


def _lay(**kw):
    return ParallelLayout(**{**dict(tp=1, pp=1, dp=16, ep=8, micro_batch=2, global_batch=512, seq_len=8192), **kw})


@pytest.mark.parametrize("layers", [None, 10])
def test_full_recompute_with_moe_listed_accepts_moe_offload(layers):
    check_layout(load_model(LIGHTNING), _lay(recompute="full", recompute_num_layers=layers, recompute_modules=("moe",),
                                             offload_modules=("expert_fc1",)))


@pytest.mark.parametrize("recompute", ["selective", "none"])
def test_the_moe_module_recomputed_on_its_own_still_refuses_it(recompute):
    with pytest.raises(TopoError) as e:
        check_layout(load_model(LIGHTNING), _lay(recompute=recompute, recompute_modules=("moe",),
                                                 offload_modules=("expert_fc1",)))
    assert "whole MoE block is recomputed" in e.value.message and e.value.key == "offload_modules"


def test_the_cli_prices_the_full_recompute_pair():
    base = [sys.executable, "-m", "topo", "train", "dgx-h100-superpod", "--model", LIGHTNING, "--gpus", "16",
            "--ep", "8", "--global-batch", "64", "--recompute-modules", "moe",
            "--layout", 'offload_modules=["expert_fc1"]']
    full = subprocess.run(base + ["--recompute", "full", "--recompute-num-layers", "10"], capture_output=True,
                          text=True)
    assert full.returncode == 0, full.stderr
    sel = subprocess.run(base + ["--recompute", "selective"], capture_output=True, text=True)
    assert sel.returncode == 2 and "whole MoE block is recomputed" in sel.stderr
    assert len(sel.stderr.strip().splitlines()) == 1 and "Traceback" not in sel.stderr
