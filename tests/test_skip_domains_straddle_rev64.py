"""``skip_domains`` from a first GPU inside a domain (rev64): the job's runs of ``gpus_per_domain_used`` GPUs from
there reach into the next domain, so a skipped domain still held some of them (first GPU 104 of 72-GPU NVL72
domains at 64 each, domain 2 skipped: GPUs 104-167 then 248-311, 24 of them in domain 2), and a failed nvswitch2
was refused offering that same skip again. Refused in one line; the failure's refusal offers it only where it holds."""

import pytest

import topo
from conftest import run_cli
from topo.errors import TopoError
from topo.training.mapping import map_layout, refuse_failed_gpus
from topo.training.model import load_model
from topo.training.parallel import ParallelLayout
from topo.training.search import search_layouts

D, FABRIC = 72, 72 * 8


def _lay(first_gpu: int, skip: tuple, used: int = 64) -> ParallelLayout:
    return ParallelLayout(dp=2 * used, gpus_per_domain_used=used, first_gpu=first_gpu, skip_domains=skip,
                          global_batch=2 * used)  # two domains' runs


def test_a_skip_from_inside_a_domain_is_refused_naming_what_holds():
    with pytest.raises(TopoError) as e:
        map_layout(_lay(104, (2,)), D, FABRIC)
    assert e.value.key == "skip_domains" and "first GPU 104 is GPU 32 of its 72-GPU NVLink domain" in str(e.value)
    assert "a first GPU at a domain's start (72 or 144) or at most 40 GPUs of each domain" in str(e.value)


@pytest.mark.parametrize("first_gpu, used", [(144, 64), (104, 40), (8, 64)])
def test_where_each_run_stays_in_its_domain_the_skipped_domain_holds_none(first_gpu, used):
    """From a domain's start, or few enough GPUs a domain that a run ends inside it (32 + 40 = 72; 8 + 64 = 72),
    no job GPU is in the skipped domain and every other run is one domain's."""
    skip = (first_gpu // D + 1,)
    ids = map_layout(_lay(first_gpu, skip, used), D, FABRIC).grid.ravel()
    assert not any(i // D == skip[0] for i in ids)
    runs = ids.reshape(-1, used)
    assert all(len({int(i) // D for i in run}) == 1 for run in runs)


def test_a_failed_rack_offers_the_skip_only_where_it_is_accepted():
    with pytest.raises(TopoError) as e:
        refuse_failed_gpus(_lay(104, ()), D, ("nvswitch2",), FABRIC)
    assert "skip_domains" not in str(e.value) and "first_gpu = 216" in str(e.value)
    with pytest.raises(TopoError) as e:
        refuse_failed_gpus(_lay(72, ()), D, ("nvswitch2",), FABRIC)
    assert "skip_domains = [2] (the job on the other domains, 64 of each)" in str(e.value)
    map_layout(_lay(72, (2,)), D, FABRIC)  # and that skip is accepted


def test_the_flag_names_itself_without_a_layout():
    """--skip-domains given as a flag (no --layout) is named by the flag, not 'layout: skip_domains'."""
    out = run_cli("train", "gb200-nvl72-superpod", "--model", "llama3-8b", "--tp", "4", "--gpus", "128",
                  "--global-batch", "1024", "--skip-domains", "999")
    assert out.returncode == 2 and out.stderr == ("error: --skip-domains: 999: the fabric has 32 NVLink domains; "
                                                  "allowed: domain indices 0 to 31\n")


@pytest.mark.parametrize("fixed, key, says", [
    ({"skip_domains": (999,)}, "skip_domains", "999: the fabric has 32 NVLink domains"),
    ({"first_gpu": 248}, "first_gpu", "the job needs GPUs 248 to 263 from this first GPU, but the fabric has 256")])
def test_a_search_none_of_whose_layouts_can_be_placed_says_why(fixed, key, says):
    """A search whose every layout that fits is refused where it is placed (a skipped domain the fabric lacks, a
    first GPU past it) says the placement's reason, not that the model fits in no layout by the memory of one that
    does not fit (it said llama3-8b needed 205.6 GB per GPU on 128 GB200 with --skip-domains 999)."""
    fabric = topo.build_fabric(topo.load_spec("dgx-h100-superpod", ["cluster.num_units=1"]))  # 32 DGX H100: 256 GPUs
    with pytest.raises(TopoError) as e:
        search_layouts(fabric, load_model("llama3-8b"), 16, 16, top=1, contention=False, **fixed)
    assert e.value.key == key and "no layout of llama3-8b that fits on 16 GPUs can be placed" in e.value.message
    assert says in e.value.message, e.value.message
