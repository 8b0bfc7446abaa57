"""walk31's fixes, from a neocloud's walk planning a 2-site 64k-GPU B200 / GB200 build.

The region: two alike sites of one DGX H100 scalable unit each (256 GPUs, the bundled dgx-h100-superpod spec,
NVIDIA's DGX SuperPOD H100 reference architecture), 40 km apart (tests/small_regions.py).
"""

import pytest

from small_regions import built_region, two_sites
from topo.cli.main import main
from topo.errors import TopoError
from topo.training.model import load_model
from topo.training.multisite_search import search_across_sites

TEXT = two_sites("alike", "2 x 256 H100", "dgx-h100-superpod", 1, 1)


@pytest.fixture(scope="module")
def region(tmp_path_factory):
    return built_region(tmp_path_factory, TEXT, "alike")


def test_a_share_with_no_layout_says_it_is_one_sites_share_of_the_job(region):
    """A job of 504 GPUs and 128 sequences over 2 alike sites: each site's share is 252 GPUs and 64 sequences,
    whose greatest common factor is 4, so tp x cp x pp would be a multiple of 63: no layout of Llama 3 8B (tp at
    most the 8 of an NVLink domain, pp at most its 32 layers). The error gave the share's 252 GPUs and batch of 64
    alone, figures the user never typed (walk31: "a global batch of 8,192" for the 16,384 given); it now names
    the job's 504 GPUs and batch of 128 over its 2 sites beside them."""
    with pytest.raises(TopoError) as got:
        search_across_sites(region, load_model("llama3-8b"), 128, gpus=504, top=1)
    assert got.value.key == "gpus"
    assert "on 252 GPUs with a global batch of 64 " in got.value.message
    assert got.value.message.endswith("(one site's equal share of the job's 504 GPUs and global batch of 128 over "
                                      "its 2 sites)")


def test_the_cli_line_says_it_too(tmp_path, capsys):
    path = tmp_path / "alike.toml"
    path.write_text(TEXT)
    assert main(["train", str(path), "--model", "llama3-8b", "--search", "--global-batch", "128", "--gpus", "504"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --gpus: no layout of llama3-8b on 252 GPUs")
    assert "job's 504 GPUs and global batch of 128 over its 2 sites" in err[0]
