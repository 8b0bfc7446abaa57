"""The bundled DGX A100 SuperPOD spec (the Megatron-LM SC21 network) against its published figures."""

import topo


def test_dgx_a100_superpod_published_figures():
    # Narayanan et al. 2021 (arXiv 2104.04473) sec. 5: DGX A100 nodes, 8 x 80-GB A100 with NVLink/NVSwitch,
    # eight 200 Gb/s HDR InfiniBand HCAs per node, three-level fat tree; DGX SuperPOD RA: 20-node scalable units,
    # 40-port QM8790 HDR switches, rail-optimized and non-blocking
    s = topo.load_spec("dgx-a100-superpod")
    f = topo.build_fabric(s)
    inv = topo.inventory(f)
    assert s.gpu == "A100" and s.server.nics == 8 and s.server.nic_rate_Bps == 25e9
    assert s.nvlink_Bps == 300e9 and s.fabric.servers_per_unit == 20
    assert f.layout.num_gpus >= 3072  # the largest SC21 run
    assert len(s.fabric.tiers) == 3 and all(t.radix == 40 for t in s.fabric.tiers)
    assert inv.bisection_bandwidth_per_gpu_Bps == 25e9  # non-blocking: one 200G NIC per GPU across the bisection
