"""walk36: a new user's walk from a plain (non-editable) install: their own nccl-tests log through topo compare and
topo calibrate, then a two-site question."""
import pytest

from topo.calibrate.parse import parse_text
from topo.cli.main import main
from topo.errors import TopoError

HEADER = ("# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 4(factor) warmup iters: 5 iters: 20 agg iters: 1 "
          "validation: 1 graph: 0\n#\n"
          "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
          "busbw #wrong\n"
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
          "(GB/s)\n")
NAN_ROW = "{size:12d}  {count:12d}     float     sum      -1      nan     nan     nan       0      nan     nan     nan       0\n"


def _nan_log(sizes):
    return HEADER + "".join(NAN_ROW.format(size=s, count=s // 4) for s in sizes)


def test_a_log_whose_every_row_is_left_out_says_so_not_that_it_has_no_rows():
    # every row's time is nan in both columns (a run whose timer failed): each row is left out with a reason, and
    # the error said "the log has an nccl-tests header but no result rows (did the run finish ...?)" (walk36)
    with pytest.raises(TopoError) as exc:
        parse_text(_nan_log([8, 32, 128, 512, 1024]), "nan.log")
    msg = exc.value.message
    assert exc.value.source == "nan.log"
    assert "no result row can be used (5 rows left out, the first: the row of size 8 B has a time of nan us" in msg
    assert "no result rows (did the run finish" not in msg


def test_a_log_whose_only_row_is_cut_mid_line_names_that_row():
    text = HEADER + "           8             2     float     sum      -1    35.00    0.00    "
    with pytest.raises(TopoError, match=r"no result row can be used \(1 row left out: the last row \(size 8 B\) is "
                       r"cut mid-line\)"):
        parse_text(text, "cut.log")


def test_a_log_with_no_row_at_all_keeps_its_message():
    with pytest.raises(TopoError, match="header but no result rows"):
        parse_text(HEADER, "none.log")


@pytest.mark.parametrize("name", ["p.json", "p.HTML", "p.csv"])
def test_calibrate_refuses_a_profile_under_another_formats_name(tmp_path, capsys, name):
    # topo calibrate writes a TOML profile; -o p.json wrote TOML under a JSON name (what json.load then fails on),
    # where export and report refuse one format under another's name (README, Output files) (walk36)
    out = tmp_path / name
    rc = main(["calibrate", "nccl1453-h100-allreduce", "--gpu", "H100", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    stem = name.split(".")[0]
    assert f"-o: a .{name.split('.')[1]} name, but topo calibrate writes toml only; name it {stem}.toml" in err
    assert "Traceback" not in err


def test_compare_says_when_the_nic_rate_given_is_faster_than_the_network_and_host_link(capsys):
    # --nic-rate "400 GB/s" (a unit slip for 400 Gb/s) is 3,200 Gb/s: faster than NDR InfiniBand's 400 Gb/s ports
    # (topo/data/profiles/network/infiniband_ndr.toml max_port_rate_Gbps) and than H100's PCIe gen5 x16 host link,
    # 64 GB/s per direction (topo/data/hardware/host_links.toml); describe and estimate said so, compare and
    # calibrate modelled it without a word (walk36)
    rc = main(["compare", "nccl1453-h100-allreduce", "--gpu", "H100", "--nic-rate", "400 GB/s"])
    err = capsys.readouterr().err
    assert rc == 0
    assert ("note: the NICs run 3200 Gb/s but infiniband_ndr ports run at most 400 Gb/s: the network's constants "
            "are infiniband_ndr's") in err
    assert "caps each 3.2 Tb/s NIC at 64 GB/s" in err


def test_calibrate_says_it_too_and_a_400_gbps_nic_gets_no_such_note(tmp_path, capsys):
    rc = main(["calibrate", "nccl1453-h100-allreduce", "--gpu", "H100", "--nic-rate", "400 GB/s",
               "-o", str(tmp_path / "p.toml")])
    err = capsys.readouterr().err
    assert rc == 0 and "note (nccl1453-h100-allreduce): the NICs run 3200 Gb/s" in err
    rc = main(["compare", "nccl1453-h100-allreduce", "--gpu", "H100", "--nic-rate", "400 Gb/s"])
    err = capsys.readouterr().err
    assert rc == 0 and "ports run at most" not in err and "caps each" not in err


def test_a_region_sites_set_given_as_a_string_is_told_how_a_list_is_written(tmp_path, capsys):
    # a site's set = "cluster.num_units=2" (a string where a list belongs) was told "must be a list (e.g.
    # [[fabric.tiers]] entries)", a hint for another key; the hint now names the key's own array (walk36)
    region = tmp_path / "r.toml"
    region.write_text('name = "r"\n[[sites]]\nname = "a"\nspec = "dgx-h100-superpod"\nset = "cluster.num_units=2"\n'
                      '[[sites]]\nname = "b"\nspec = "dgx-h100-superpod"\n[interconnect]\ndistance_km = 10\n')
    rc = main(["describe", str(region)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert err.endswith("sites[0].set: must be a list (a TOML array: set = [...]), got 'cluster.num_units=2'")


def test_a_tier_given_as_one_table_is_still_told_to_write_tier_entries(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('name = "s"\ngpu = "H100"\n[cluster]\nnum_units = 1\n[fabric]\nkind = "rail_optimized"\n'
                    'servers_per_unit = 32\n[fabric.tiers]\nname = "leaf"\nradix = 64\nport_rate = "400 Gb/s"\n')
    rc = main(["describe", str(spec)])
    err = capsys.readouterr().err
    assert rc == 2 and "fabric.tiers: must be a list ([[fabric.tiers]] entries), got {" in err


def test_calibrate_json_and_profile_on_stdout_is_refused(capsys):
    # --json promises one JSON document on stdout, and -o - prints the profile there: the two together printed the
    # TOML profile, then the JSON, which json.load refuses (walk36); plan refuses --json beside --bom-csv - alike
    rc = main(["calibrate", "nccl1453-h100-allreduce", "--gpu", "H100", "-o", "-", "--json"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert "error: -o: --json and -o - both print on stdout; give -o a file" in err
