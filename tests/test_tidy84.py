"""tidy84: four small items left by walk36 (section 379) and plan81 (section 377): a region job's model faults before
its batch, the host-link note's remedy worded by the command, ``topo report REGION --plan --across``, the README's
calibrate paragraph."""
from topo.cli.main import main
from topo.training.model import load_model


def _err(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err.strip()


def test_a_region_job_names_tp_against_the_heads_before_its_batch(capsys):
    # Llama 3 8B has 32 attention heads ("The Llama 3 Herd of Models", arXiv 2407.21783, Table 3): tp 3
    # cannot split them, whatever the batch; one site's topo train checks the layout against the model before the
    # batch (check_layout), and the region's job did the batch first: "512 sequences do not split into dp (1024, over
    # the 2 sites)" hid the real fault (walk36 Left 2)
    assert load_model("llama3-8b").heads % 3
    rc, err = _err(capsys, ["train", "two-site-h100", "--model", "llama3-8b", "--tp", "3", "--global-batch", "512"])
    assert rc == 2
    assert err == "error: --tp: 3 does not divide the 32 attention heads"


def test_a_region_job_with_a_good_tp_still_says_its_batch_over_the_sites(capsys):
    # two-site-h100 holds 3,072 GPUs: tp 8 fills dp = 384 replicas, and 512 sequences do not split into 384 x 1
    rc, err = _err(capsys, ["train", "two-site-h100", "--model", "llama3-8b", "--tp", "8", "--global-batch", "512"])
    assert rc == 2 and "512 sequences do not split into dp (384, over the 2 sites)" in err
