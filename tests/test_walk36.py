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
