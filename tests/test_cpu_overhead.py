"""NCCL's network overhead by the host's CPU (issue 33).

NVIDIA/nccl src/graph/tuning.cc (v2.30.7) getNetOverhead: 1 us per step on Intel x86, 2 us on AMD x86, and 1 us on
anything else (Arm, as Grace, falls through to ``return 1.0``); ncclTopoTuneModel multiplies it by 3 for Simple and
takes ``intraLat = max(intraLat, netOverhead)`` for the ring's steps inside a node when the ring leaves the node.
The server catalog says which CPU each server has (topo/data/catalog/servers.toml ``cpu_vendor``, with its source).
"""

import subprocess
import sys

import pytest

import topo
from topo.calibrate.setup import node_spec
from topo.engine.algorithms import build_schedule
from topo.engine.cost import latency_s
from topo.engine.estimate import default_profile
from topo.engine.placement import place
from topo.engine.profiles import fabric_profile, profile_for
from topo.engine.schedule import NodeShape
from topo.errors import TopoError
from topo.fabric.server_cpu import CPU_VENDORS, server_cpu_vendor
from topo.plan.catalog import load_catalog

US = 1e-6


def _fabric(gpu, cpu=None, servers=2, **kw):
    d = node_spec(gpu, 8, "400 Gb/s", "infiniband_ndr", servers, **kw)
    if cpu is not None:
        d["server"]["cpu_vendor"] = cpu
    return topo.build_fabric(topo.spec_from_dict(d))


def test_every_catalog_server_names_its_cpu_with_a_source():
    cat = load_catalog()
    for name, server in cat.servers.items():
        assert server.cpu_vendor.value in CPU_VENDORS and server.cpu_vendor.source, name
    # the datasheets: DGX A100 2 x AMD EPYC 7742, DGX H100 2 x Intel Xeon 8480C, GB200 tray 2 Grace (Arm)
    assert cat.servers["DGX A100"].cpu_vendor.value == "amd"
    assert cat.servers["DGX H100"].cpu_vendor.value == "intel"
    assert cat.servers["GB200 NVL72 compute tray"].cpu_vendor.value == "arm"


def test_a_spec_takes_its_catalog_servers_cpu_unless_it_names_one():
    assert server_cpu_vendor("A100") == "amd" and server_cpu_vendor("GB200") == "arm"
    assert server_cpu_vendor("H100") == "intel"
    assert server_cpu_vendor("H100", "dgx a100") == "amd"  # [plan] server_model, any case
    assert server_cpu_vendor("MI300X-unknown") is None
    assert _fabric("A100").spec.cpu_vendor == "amd"
    assert _fabric("A100", "intel").spec.cpu_vendor == "intel"  # e.g. AWS p4d's Xeon 8275CL
    assert _fabric("H100", "amd").spec.cpu_vendor == "amd"  # e.g. AWS p5's EPYC 7R13


def test_the_overhead_is_two_us_on_amd_and_one_elsewhere():
    p = profile_for("hopper", "infiniband_ndr")
    assert p.net_overhead_s == pytest.approx(1.0 * US)
    assert p.for_cpu("amd").net_overhead_s == pytest.approx(2.0 * US)
    assert p.for_cpu("intel").net_overhead_s == pytest.approx(1.0 * US)
    assert p.for_cpu("arm").net_overhead_s == pytest.approx(1.0 * US)
    assert p.for_cpu("amd").overhead("Simple") == pytest.approx(6.0 * US)  # x3 for Simple
    assert fabric_profile(_fabric("H100", "amd")).net_overhead_s == pytest.approx(2.0 * US)
    assert default_profile(_fabric("H100", "amd")).net_overhead_s == pytest.approx(2.0 * US)
    # NCCL 2.7's model has no overhead term on any CPU
    old = profile_for("ampere", "infiniband_hdr", "2.7")
    assert old.for_cpu("amd").net_overhead_s == old.net_overhead_s == 0.0


def test_ring_latency_on_amd_hosts_closed_form():
    """2 x 8 H100, ring all-reduce (NCCL's own terms): 30 steps, 2 across the network, 28 inside the nodes.
    LL on Intel: 6.6 + 28 x max(0.6, 1) + 2 x 2.7 = 40.0 us; on AMD: 6.6 + 28 x max(0.6, 2) + 2 x 2.7 = 68.0 us.
    Simple on AMD: 8.4 + 28 x max(3.4, 3 x 2) + 2 x 14 = 204.4 us (Intel: max(3.4, 3) = 3.4, 131.6 us)."""
    intel, amd = _fabric("H100", "intel"), _fabric("H100", "amd")
    counts = build_schedule("ring", "all_reduce", NodeShape.of(amd), place(amd, 16)).latency
    pi, pa = default_profile(intel).nccl_model(), default_profile(amd).nccl_model()
    assert latency_s(counts, 0.0, pi, "LL") == pytest.approx(40.0 * US, rel=1e-9)
    assert latency_s(counts, 0.0, pa, "LL") == pytest.approx(68.0 * US, rel=1e-9)
    assert latency_s(counts, 0.0, pi, "Simple") == pytest.approx(131.6 * US, rel=1e-9)
    assert latency_s(counts, 0.0, pa, "Simple") == pytest.approx(204.4 * US, rel=1e-9)
    # inside one node the overhead does not apply (nNodes == 1): 6.6 + 14 x 0.6 = 15.0 us on either CPU
    one = build_schedule("ring", "all_reduce", NodeShape.of(amd), place(amd, 8)).latency
    assert latency_s(one, 0.0, pa, "LL") == pytest.approx(15.0 * US, rel=1e-9)


def test_an_unknown_cpu_vendor_is_one_clear_error(tmp_path):
    d = node_spec("H100", 8, "400 Gb/s", "infiniband_ndr", 2)
    d["server"]["cpu_vendor"] = "via"
    with pytest.raises(TopoError) as exc:
        topo.spec_from_dict(d)
    assert "server.cpu_vendor" in str(exc.value) and "via" in str(exc.value)
    spec = tmp_path / "s.toml"
    spec.write_text('gpu = "H100"\n[server]\ncpu_vendor = "via"\n[cluster]\nnum_servers = 2\n'
                    '[fabric]\nkind = "rail_optimized"\ntechnology = "infiniband_ndr"\n')
    r = subprocess.run([sys.executable, "-m", "topo", "estimate", str(spec), "--size", "1KiB"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and "server.cpu_vendor" in line and "via" in line


def test_nccls_nvls_tree_correction_holds_on_x86_blackwell_only():
    """ncclTopoGetAlgoTime (NCCL 2.30.7, master 5067397c): NVLSTree all-reduce's bandwidth x
    treeCorrectionFactor[proto][log2i(bytes >> 6)] when minCompCap >= 100 and the host is x86. 2 x 8 B200 (Intel,
    as DGX B200): at 1 MiB (index 14, Simple 0.5) NCCL's NVLSTree bandwidth term doubles; on Grace (Arm) it does
    not; Hopper never takes it."""
    from topo.engine.estimate import evaluate
    from topo.engine.tuner import nccl_time_s

    assert profile_for("blackwell", "infiniband_ndr").nvls_tree_correction
    assert not profile_for("blackwell", "infiniband_ndr").for_cpu("arm").nvls_tree_correction
    assert profile_for("blackwell", "infiniband_ndr").for_cpu("amd").nvls_tree_correction
    assert not profile_for("hopper", "infiniband_ndr").nvls_tree_correction
    fab = _fabric("B200")
    ev = evaluate(fab, "all_reduce", gpus=16)
    assert "nvls_tree" in ev.costed
    x86, arm = ev.profile, ev.profile.for_cpu("arm")
    assert x86.nvls_tree_correction and not arm.nvls_tree_correction

    def bw_term(prof, size):
        t = nccl_time_s("nvls_tree", ev.costed, prof, "Simple", size, "all_reduce", 16, 2)
        return t - nccl_time_s("nvls_tree", ev.costed, prof, "Simple", 0, "all_reduce", 16, 2)

    assert bw_term(x86, 2**20) == pytest.approx(2.0 * bw_term(arm, 2**20), rel=1e-9)
    assert bw_term(x86, 2**30) == pytest.approx(bw_term(arm, 2**30), rel=1e-9)  # past the table


def test_nccls_ll_cap_across_nodes_is_its_amd_row_on_amd_hosts():
    """NVIDIA/nccl src/graph/tuning.cc (2.8.3 to 2.30.7) ncclTopoTuneModel: across nodes the LL busbw cap is
    llMaxBws[index1][index2] with index1 = 1 on AMD hosts, 0 on the others: 22.5 GB/s on 2 nodes and 19.0 on more
    (AMD), 39.0 and 20.4 (Intel); one node reads the GPU's row (Hopper 141). A tree turns busbw into algbw x 0.5:
    2 x 8 H100 tree/LL runs at most 11.25 GB/s of message on AMD, 19.5 on Intel."""
    from topo.engine.cost import Limit, rate_limit
    from topo.engine.estimate import evaluate

    p = profile_for("hopper", "infiniband_ndr")
    GB = 1e9
    assert p.busbw_cap("tree", "LL", 2) == pytest.approx(39.0 * GB)
    assert p.for_cpu("amd").busbw_cap("tree", "LL", 2) == pytest.approx(22.5 * GB)
    assert p.for_cpu("amd").busbw_cap("ring", "LL", 4) == pytest.approx(19.0 * GB)
    assert p.for_cpu("amd").busbw_cap("ring", "LL", 1) == pytest.approx(141.0 * GB)  # one node: the GPU's
    assert p.for_cpu("intel").busbw_cap("ring", "LL", 4) == pytest.approx(20.4 * GB)
    assert p.for_cpu("arm").busbw_cap("tree", "LL", 2) == pytest.approx(39.0 * GB)
    assert p.for_cpu("amd").busbw_cap("tree", "LL128", 2) == p.busbw_cap("tree", "LL128", 2)  # LL only
    rates = {}
    for cpu in ("intel", "amd"):
        ev = evaluate(_fabric("H100", cpu), "all_reduce", gpus=16)
        r = rate_limit(ev.costed["tree"], ev.profile, "LL", "all_reduce", 16, 2)
        assert r.limit == Limit.PROTOCOL_CAP
        rates[cpu] = r.rate_Bps
    assert rates["intel"] == pytest.approx(19.5 * GB, rel=1e-9)
    assert rates["amd"] == pytest.approx(11.25 * GB, rel=1e-9)
    # NCCL 2.7's file has no AMD row: the GPU file's cap whatever the CPU
    old = profile_for("ampere", "infiniband_hdr", "2.7")
    assert old.for_cpu("amd").busbw_cap("tree", "LL", 2) == old.busbw_cap("tree", "LL", 2)
