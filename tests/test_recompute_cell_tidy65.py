"""A search table's recompute column, one formatter for one site's table and a region's (plan65's Left, walk24's
Left 3: the region's column printed the layout's ``recompute`` field, ``none`` for a layout recomputing its MLPs,
where the one-site table names ``mlp``)."""

from conftest import run_cli
from topo.cli.train_text import recompute_cell


def _column(stdout: str, name: str = "recompute") -> list[str]:
    lines = stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("#  "))
    at = lines[head].index(f" {name} ") + 1  # a left-aligned column: its cells start under its name
    rows = []
    for line in lines[head + 1:]:
        if not line[:1].isdigit():
            break
        rows.append(line[at:].split()[0])
    return rows


def test_the_cell_names_the_modules():
    assert recompute_cell({"recompute": "none", "recompute_modules": ["mlp"]}) == "mlp"
    assert recompute_cell({"recompute": "selective", "recompute_modules": ["core_attn", "mlp"]}) == \
        "selective+core_attn,mlp"
    assert recompute_cell({"recompute": "full", "recompute_modules": ["mlp"]}) == "full"
    assert recompute_cell({"recompute": "none", "remat_policy": "minimal"}) == "remat minimal"


def test_a_regions_search_names_the_modules_as_one_sites_does():
    flags = ["--model", "llama3-8b", "--search", "--top", "2", "--recompute-modules", "mlp", "--no-contention"]
    one = run_cli("train", "dgx-h100-superpod", *flags, "--global-batch", "384", check=True)
    region = run_cli("train", "two-site-h100", *flags, "--global-batch", "768", check=True)
    assert _column(one.stdout) == ["mlp", "mlp"]
    assert _column(region.stdout) == ["mlp", "mlp"]


def test_a_search_asked_for_selective_alone_finds_its_layouts():
    """``--search --recompute selective --recompute-modules core_attn,mlp``: the search drops ``selective`` under
    flash attention as a duplicate of ``none`` (the scores it recomputes are not kept), but asked for it alone it
    found nothing and said "no layout ... satisfies the divisibility rules (261 tried)"; ``topo train`` runs such a
    layout (tp 4 cp 2 dp 128: 509.2 ms), and the search now ranks it with the same step."""
    flags = ["--model", "llama3-8b", "--global-batch", "384", "--recompute", "selective", "--recompute-modules",
             "core_attn,mlp", "--no-contention"]
    out = run_cli("train", "dgx-h100-superpod", *flags, "--search", "--top", "2", check=True)
    assert _column(out.stdout) == ["selective+core_attn,mlp"] * 2
    one = run_cli("train", "dgx-h100-superpod", *flags, "--tp", "4", "--cp", "2", check=True)
    step = one.stdout.splitlines()[1].split()[2:4]  # "step time   509.2 ms"
    first = out.stdout.splitlines()[2]
    assert " ".join(step) in first, (step, first)
