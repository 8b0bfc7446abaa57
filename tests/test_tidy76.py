"""tidy76: small defects the last sessions listed (findings section 353), one test per fix."""
import pytest

from topo.cli.main import main
from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.parallel import check_layout, make_layout

LLAMA70_64 = ["train", "dgx-h100-superpod", "--unset", "cluster.num_units", "--set", "cluster.num_gpus=64", "--set",
              "fabric.servers_per_unit=8", "--model", "llama3-70b", "--tp", "4", "--pp", "8", "--dp", "2",
              "--global-batch", "128", "--seq", "8192"]


def test_pipeline_overlap_at_vpp_1_is_refused_as_megatron_core_refuses_it(capsys):
    # NVIDIA/Megatron-LM@d98e8a64 megatron/core/pipeline_parallel/schedules.py lines 2181-2184:
    # forward_backward_pipelining_without_interleaving raises ValueError when config.overlap_p2p_comm is set
    m = load_model("llama3-70b")
    with pytest.raises(TopoError) as e:
        check_layout(m, make_layout(tp=4, pp=8, dp=2, global_batch=128, overlap_pp=True), gpus=64)
    assert e.value.key == "overlap_pp" and "vpp > 1" in str(e.value)
    check_layout(m, make_layout(tp=4, pp=8, vpp=5, dp=2, global_batch=128, overlap_pp=True), gpus=64)
    check_layout(m, make_layout(tp=4, pp=8, dp=2, global_batch=128, overlap_pp=True,
                                pipeline_schedule="dualpipe"), gpus=64)  # DeepSeek's own schedule overlaps them
    assert main([*LLAMA70_64, "--overlap", "pp=on"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--overlap" in err and "overlap_pp" in err and "Traceback" not in err
