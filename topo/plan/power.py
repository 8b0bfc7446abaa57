"""Power and energy: GPUs, the rest of the servers, switches, optics, storage and front-end -> IT power; PUE ->
facility power; a year at the facility's load factor -> energy and its cost.

    IT = N_gpu x (TDP + non-GPU power per GPU) x (1 + storage/front-end fraction) + switches + optics
    facility = IT x PUE;  energy per year = facility x load factor x 8,760 h;  cost = energy x price per kWh

The switches' power is their power with copper; every switch-side transceiver adds its own (so a switch full of
optics draws its copper power plus its modules: switches.toml's power_with_optics_W). Optics include active optical
and electrical cables (AOC, AEC) when the layout uses them. NIC-side modules are *not* added: the server's power
already feeds its cages (SemiAnalysis' ~575 W per GPU for CPU, NIC and PSU, planner.md line 19; DGX H100's 10.2 kW
maximum, line 35, powers its OSFP modules), so they are reported apart (``nic_optics_in_servers_W``), inside the
servers' power, not counted twice.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["PowerBreakdown", "power_breakdown", "HOURS_PER_YEAR"]

HOURS_PER_YEAR = 365 * 24  # a 365-day year, as SemiAnalysis' TWh figure (planner.md line 21: / 8,760 h)


@dataclass(frozen=True)
class PowerBreakdown:
    gpu_W: float
    server_rest_W: float
    switches_W: float
    optics_W: float
    storage_frontend_W: float
    it_power_W: float
    pue: float
    facility_power_W: float
    load_factor: float
    energy_per_year_Wh: float
    electricity_usd_per_kWh: float
    energy_cost_per_year_usd: float
    nic_optics_in_servers_W: float = 0.0  # NIC-side modules: inside the servers' power, shown, not added

    @property
    def servers_W(self) -> float:
        return self.gpu_W + self.server_rest_W

    @property
    def network_W(self) -> float:
        return self.switches_W + self.optics_W

    def parts(self) -> dict[str, float]:
        """The stacked parts of IT power."""
        return {"GPUs": self.gpu_W, "rest of servers": self.server_rest_W, "switches": self.switches_W,
                "optics": self.optics_W, "storage and front-end": self.storage_frontend_W}

    def to_dict(self) -> dict:
        return asdict(self)


def power_breakdown(num_gpus: int, gpu_tdp_W: float, non_gpu_power_per_gpu_W: float, switches_W: float,
                    optics_W: float, storage_frontend_fraction: float, pue: float, load_factor: float,
                    electricity_usd_per_kWh: float, nic_optics_in_servers_W: float = 0.0) -> PowerBreakdown:
    """Add up the power of a cluster (see the module doc for the formula); ``optics_W`` is the switch-side modules
    and active cables, ``nic_optics_in_servers_W`` the NIC-side modules (reported, already in the servers')."""
    gpu_W = num_gpus * gpu_tdp_W
    rest_W = num_gpus * non_gpu_power_per_gpu_W
    storage_W = storage_frontend_fraction * (gpu_W + rest_W)
    it_W = gpu_W + rest_W + storage_W + switches_W + optics_W
    facility_W = it_W * pue
    energy_Wh = facility_W * load_factor * HOURS_PER_YEAR
    return PowerBreakdown(gpu_W=gpu_W, server_rest_W=rest_W, switches_W=switches_W, optics_W=optics_W,
                          storage_frontend_W=storage_W, it_power_W=it_W, pue=pue, facility_power_W=facility_W,
                          load_factor=load_factor, energy_per_year_Wh=energy_Wh,
                          electricity_usd_per_kWh=electricity_usd_per_kWh,
                          energy_cost_per_year_usd=energy_Wh / 1e3 * electricity_usd_per_kWh,
                          nic_optics_in_servers_W=nic_optics_in_servers_W)
