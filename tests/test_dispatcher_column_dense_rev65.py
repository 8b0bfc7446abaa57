"""A search's table names the expert dispatcher only for an MoE model (rev65).

``train_text.dispatcher_searched`` read an expert group as ``ep x (etp or tp) > 1``; a dense model has no experts,
yet its TP 2 rows made the column appear, each row saying ``alltoall`` (a region's search of Llama 3 8B: the
dense model's rows read as if a dispatcher had been chosen). The region: two sites of 2 DGX H100 scalable units
(NVIDIA's DGX SuperPOD H100 reference architecture, the bundled spec), 40 km apart, west's leaf3 failed so that
the share's best rows run TP 2."""

from conftest import run_cli
from small_regions import two_sites

REGION = two_sites("two-su", "two sites of 2 DGX H100 scalable units, 40 km apart (a test region)", "dgx-h100-superpod", 2)


def test_a_dense_models_region_search_has_no_dispatcher_column(tmp_path):
    path = tmp_path / "two-su.toml"
    path.write_text(REGION)
    out = run_cli("train", str(path), "--model", "llama3-8b", "--global-batch", "512", "--search", "--top", "2",
                  "--fail", "west:leaf3", check=True).stdout.splitlines()
    head = next(i for i, line in enumerate(out) if line.startswith("#  tp"))
    assert out[head + 1].split()[1] == "2"  # the premise: a TP 2 row, an 'expert group' of 2 as read before
    assert "dispatcher" not in out[head] and "alltoall" not in out[head + 1], out[head:head + 2]
