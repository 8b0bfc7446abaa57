"""The two-site test region several tests write: two sites of one bundled spec, a mesh DCI of 16 x 800 Gb/s waves
attached at the top tier, 40 km apart at 4.9 us a km (light in fibre) plus 50 us of equipment (one place for the
region TOML of test_region_site_failures_regfail65, test_skip_domains_commands_place64,
test_dispatcher_column_dense_rev65 and test_region_search_placement_tidy66), and the one way they build it."""

import json

from topo.fabric.region import build_region


def two_sites(name: str, description: str, spec: str, east_units: int, west_units: int | None = None) -> str:
    """A region TOML: sites ``east`` and ``west`` of ``spec`` with ``cluster.num_units`` of each (``west_units``
    defaults to ``east_units``)."""
    west_units = east_units if west_units is None else west_units
    sites = "".join(f'[[sites]]\nname = "{site}"\nspec = "{spec}"\nset = ["cluster.num_units={units}"]\n'
                    for site, units in (("east", east_units), ("west", west_units)))
    return (f'name = "{name}"\ndescription = "{description}"\n{sites}[interconnect]\ntopology = "mesh"\n'
            'distance_km = 40\nlatency_per_km = "4.9 us"\nequipment_latency = "50 us"\nwaves = 16\n'
            'wave_rate = "800 Gb/s"\nattach = "top"\n')


def region_file(tmp_path_factory, text: str, name: str = "two-su") -> str:
    """The path of region TOML ``text``, written to a fresh temporary folder as ``name``.toml (for the CLI's tests)."""
    path = tmp_path_factory.mktemp(name) / f"{name}.toml"
    path.write_text(text)
    return str(path)


def built_region(tmp_path_factory, text: str, name: str = "two-su"):
    """The region of TOML ``text``, written as :func:`region_file` writes it and built (the module-scoped fixture of
    the region tests)."""
    return build_region(region_file(tmp_path_factory, text, name))


# rev67's two unlike sites of 2 DGX H100 SUs: east's NVLink at 400 GB/s (its TP slower: the slowest share), west's NICs
# and tiers at 100 Gb/s (its in-site DP reduction slower: the last ready, its window w a few ms)
MIXED_SITES = (("east", ["cluster.num_units=2", "scale_up.bandwidth_per_gpu=400 GB/s"]),
               ("west", ["cluster.num_units=2", "server.nic_rate=100 Gb/s", "fabric.tiers[0].port_rate=100 Gb/s",
                         "fabric.tiers[1].port_rate=100 Gb/s"]))


def mixed_region_file(folder, rate_Gbps: float) -> str:
    """The path of a region TOML of :data:`MIXED_SITES` 40 km apart on one wave of ``rate_Gbps``, written in
    ``folder``."""
    sites = "".join(f'[[sites]]\nname = "{n}"\nspec = "dgx-h100-superpod"\nset = {json.dumps(s)}\n'
                    for n, s in MIXED_SITES)
    path = folder / f"mixed-{rate_Gbps:.6f}.toml"
    path.write_text(f'name = "mixed"\ndescription = "two unlike sites (a test region)"\n{sites}[interconnect]\n'
                    'topology = "mesh"\ndistance_km = 40\nlatency_per_km = "4.9 us"\nequipment_latency = "50 us"\n'
                    f'waves = 1\nwave_rate = "{rate_Gbps!r} Gb/s"\nattach = "top"\n')
    return str(path)


def mixed_region(folder, rate_Gbps: float):
    """The region of :func:`mixed_region_file`, built."""
    return build_region(mixed_region_file(folder, rate_Gbps))


def loss_crossing_s(region, job) -> float:
    """The seconds the logged loss's all-reduce takes across the sites of ``region`` for ``job`` (a
    :class:`~topo.training.multisite.MultisiteStep`): regions76's crossing in the ``dp`` way's DCI time, one small
    all-reduce of :data:`~topo.training.dp_across.LOSS_BYTES` through each site's share's NICs."""
    from topo.engine.region_estimate import region_channels, small_all_reduce_dci_s
    from topo.training.dp_across import LOSS_BYTES
    return small_all_reduce_dci_s(region, LOSS_BYTES, region_channels(region), tuple(job.site_gpus.values()))


def spy_dp_crossing(monkeypatch) -> dict:
    """Record what the dp way's pricing (``multisite._dp``) is handed: the share's step ``one``, its layout ``lay``
    and the crossing the region picks (``cross``), into the returned dict, the call itself unchanged."""
    from topo.training import multisite

    seen = {}
    real = multisite._dp

    def spy(region, one, lay, V, forms, *a, **k):
        seen.update(one=one, lay=lay, cross=multisite.pick_dp_crossing(region, forms))
        return real(region, one, lay, V, forms, *a, **k)

    monkeypatch.setattr(multisite, "_dp", spy)
    return seen


# plan79's job across two-site-h100: 3,072 GPUs / 32 = dp 96 (48 a site); 576 = 96 x 6 micro-batches
TWO_SITE_JOB_LAYOUT = "tp=8,pp=4,global_batch=576"


def two_site_job_plan() -> dict:
    """``topo plan two-site-h100 --model llama3-70b --layout TWO_SITE_JOB_LAYOUT --tokens 15T --json``, parsed."""
    from conftest import run_cli

    p = run_cli("plan", "two-site-h100", "--model", "llama3-70b", "--layout", TWO_SITE_JOB_LAYOUT, "--tokens", "15T",
                "--no-collectives", "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)
