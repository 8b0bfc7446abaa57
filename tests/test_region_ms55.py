"""ms55: what walk19 left of regions of several sites: a missing site spec's error, each span's DCI figure for 95%
of one site, the region plan's storage sized for the region's job."""

from conftest import run_cli

from topo.spec.load import bundled_regions, bundled_specs


def test_missing_site_spec_lists_only_one_site_specs(tmp_path):
    """walk19: a missing site spec's error offered the bundled regions (two-site-h100, ...) as a site's spec, which
    nested regions refuse; it lists the specs of one fabric alone, and suggests none of the regions."""
    body = ('name = "x"\n[[sites]]\nname = "a"\nspec = "SPEC"\n[[sites]]\nname = "b"\nspec = "dgx-h100-superpod"\n'
            '[interconnect]\ndistance_km = 10\n')
    for spec in ("nosuch.toml", "two-site-h10"):
        (tmp_path / "r.toml").write_text(body.replace("SPEC", spec))
        p = run_cli("describe", str(tmp_path / "r.toml"))
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
        listed = p.stderr.split("bundled: ")[1].strip().split(", ")
        assert listed == bundled_specs() and bundled_regions(), p.stderr
        assert not any(r in p.stderr for r in bundled_regions()), p.stderr
    p = run_cli("describe", "no-such-spec")  # outside a region, the regions are specs to name
    assert all(r in p.stderr for r in bundled_regions()), p.stderr
