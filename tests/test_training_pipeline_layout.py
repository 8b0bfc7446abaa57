"""An explicit pipeline layout in Megatron-Core's notation (issue 29: the recipes' own settings).

Megatron-Bridge's DeepSeek-V3 recipe (NVIDIA-NeMo/Megatron-Bridge@05d003fb
src/megatron/bridge/recipes/deepseek/deepseek_v3.py, ``layout_map``) puts, on 16 chunks, the embedding and 4 layers
on the first, 4 layers on each of the next 14 and 1 layer + the MTP module + the loss on the last:
``Et*4|(t*4|)*14tmL``. An even split of DeepSeek-V3's 61 layers puts 3-4 layers, the MTP module and two output
heads on the last stage instead.
"""

import pytest

from conftest import run_cli
from topo.errors import TopoError
from topo.training.gpus import gpu_compute
from topo.training.model import load_model
from topo.training.operators import block_time, pipeline_units, stage_compute
from topo.training.parallel import check_layout, make_layout
from topo.training.pipeline_layout import expand_layout, layout_chunks

DSV3 = "Et*4|(t*4|)*14tmL"


def test_repeats_and_groups_expand_as_megatron_writes_them():
    assert expand_layout("Et*2|(tt|)*2L") == ["Ett", "tt", "tt", "L"]
    assert expand_layout(" E t | t L ") == ["Et", "tL"]
    chunks = layout_chunks(DSV3, chunks=16, layers=61, mtp_layers=1)
    assert [len(c) for c in chunks] == [5] + [4] * 14 + [3]
    assert chunks[0] == "Etttt" and chunks[-1] == "tmL"


@pytest.mark.parametrize("text, needle", [
    ("Et*4|x", "has 'x'; allowed: E (embedding)"),
    ("Et*4|(t*4|*14tmL", "unbalanced group"),
    ("Et*0|tL", "0 times"),
    ("Et*4|(t*4|)*13tmL", "has 15 chunks; allowed: pp x vpp = 16"),
    ("Et*4|(t*4|)*14ttmL", "places 62 layers (t); the model has 61"),
    ("Et*4|(t*4|)*14tL", "places 0 MTP modules"),
    ("t*4|E(t*4|)*14tmL", "embedding (E) once, in the first chunk"),
])
def test_a_layout_that_does_not_fit_the_job_names_what_is_wrong(text, needle):
    with pytest.raises(TopoError) as e:
        layout_chunks(text, chunks=16, layers=61, mtp_layers=1)
    assert e.value.key == "pipeline_layout" and needle in str(e.value)


def test_stages_hold_what_the_layout_says_and_the_light_last_stage_is_lighter():
    ds = load_model("deepseek-v3-671b")
    lay = make_layout(pp=16, dp=16, ep=8, etp=1, global_batch=256, seq_len=4096, pipeline_layout=DSV3)
    check_layout(ds, lay, gpus=256)
    stages = pipeline_units(ds, lay)
    assert stages[0] == ["embedding", *ds.blocks[:4]]
    assert stages[7] == list(ds.blocks[28:32])
    assert stages[-1] == [ds.blocks[60], ds.blocks[-1], "mtp_head", "logits"]
    even = make_layout(pp=16, dp=16, ep=8, etp=1, global_batch=256, seq_len=4096)
    gpu = gpu_compute("B200")
    laid, flat = stage_compute(ds, lay, gpu), stage_compute(ds, even, gpu)
    layer = block_time(ds, lay, gpu, "*").forward_s + block_time(ds, lay, gpu, "E").forward_s
    # the last stage loses 3 of its 4 layers' forward (and backward) to the layout
    assert flat.stage_s[-1] - laid.stage_s[-1] > 3 * layer
    assert laid.stage_s.max() < flat.stage_s.max()


def test_layout_with_pipeline_embedding_is_refused():
    ds = load_model("deepseek-v3-671b")
    lay = make_layout(pp=16, dp=16, ep=8, etp=1, global_batch=256, pipeline_layout=DSV3, pipeline_embedding=True)
    with pytest.raises(TopoError) as e:
        check_layout(ds, lay, gpus=256)
    assert e.value.key == "pipeline_embedding"


def test_cli_takes_a_layout_and_a_wrong_one_gets_one_line():
    base = ["train", "dgx-h100-superpod", "--model", "deepseek-v3-671b", "--gpus", "256", "--pp", "16", "--dp", "16",
            "--ep", "8", "--etp", "1", "--global-batch", "256"]
    ok = run_cli(*base, "--pipeline-layout", DSV3)
    assert ok.returncode == 0, ok.stderr
    assert "pipeline layout " + DSV3 in ok.stdout
    bad = run_cli(*base, "--pipeline-layout", "Et*4|tL")
    assert bad.returncode == 2 and bad.stdout == ""
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "--pipeline-layout" in lines[0] and "allowed: pp x vpp = 16" in lines[0]
    search = run_cli(*base, "--pipeline-layout", DSV3, "--search")
    assert search.returncode == 2 and "the search chooses" in search.stderr
