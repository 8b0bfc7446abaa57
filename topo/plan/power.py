"""Power, energy and water: GPUs, the rest of the servers, switches, optics, storage and front-end -> IT power at
nameplate; PUE -> facility power; a year at the servers' average draw and the facility's load factor -> energy, its
cost and the site's water.

    IT (nameplate)  = N_gpu x (TDP + non-GPU power per GPU) x (1 + front-end fraction) + switches + optics + storage
    facility        = IT x PUE                           (the grid connection, UPS, generators and halls: nameplate)
    IT (average)    = IT - servers x (1 - server average fraction)    (servers draw less than nameplate on average;
                      switches, optics and storage are counted at their power)
    energy per year = IT (average) x PUE x load factor x 8,760 h;  cost = energy x price per kWh
    water per year  = WUE x IT (average) x load factor x 8,760 h     (The Green Grid: litres per kWh of IT energy)
    standing drop   = GPUs x max(0, TDP x server average fraction - idle) x PUE    (what GPUs held by a job that
                      stands -- restarting, reloading -- draw less than at work: :meth:`PowerBreakdown.standing_drop_W`)

The switches' power is their power with copper; every switch-side transceiver adds its own (so a switch full of
optics draws its copper power plus its modules: switches.toml's power_with_optics_W). Optics include active optical
and electrical cables (AOC, AEC) when the layout uses them. NIC-side modules are *not* added: the server's power
already feeds its cages (SemiAnalysis' ~575 W per GPU for CPU, NIC and PSU, planner.md line 19; DGX H100's 10.2 kW
maximum, line 35, powers its OSFP modules), so they are reported apart (``nic_optics_in_servers_W``), inside the
servers' power, not counted twice. Storage is its own servers' power (:mod:`topo.plan.storage`).
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
    storage_W: float
    frontend_W: float
    it_power_W: float
    pue: float
    facility_power_W: float
    load_factor: float
    energy_per_year_Wh: float
    electricity_usd_per_kWh: float
    energy_cost_per_year_usd: float
    nic_optics_in_servers_W: float = 0.0  # NIC-side modules: inside the servers' power, shown, not added
    server_average_fraction: float = 1.0  # the servers' average draw / their nameplate
    average_it_power_W: float = 0.0  # IT power at the servers' average draw (energy, cost, CO2, water)
    average_facility_power_W: float = 0.0  # the facility's average: average_it_power_W x PUE (plan: "facility average")
    wue_L_per_kWh: float = 0.0
    water_per_year_L: float = 0.0
    pue_source: str = ""  # the catalog key the PUE came from (facility.pue, or cooling.<type>.pue)
    gpu_tdp_W: float = 0.0  # one GPU's nameplate (gpu_W / GPUs)
    gpu_idle_W: float | None = None  # one GPU's draw with no work (gpus.toml idle_W); None: not in the catalog

    @property
    def servers_W(self) -> float:
        return self.gpu_W + self.server_rest_W

    @property
    def network_W(self) -> float:
        return self.switches_W + self.optics_W

    def standing_drop_W(self, gpus: int) -> float:
        """What ``gpus`` of these GPUs draw less at the facility while their job stands (no work: a restart, a
        reload) than at work: ``gpus x max(0, TDP x server average fraction - idle) x PUE``. The rest of their
        servers, the network and storage keep their draw; 0 where the catalog gives no idle draw.

        >>> power_breakdown(8, 700.0, 575.0, 0.0, 0.0, 0.0, 0.0, 1.5, 1.0, 0.1, server_average_fraction=0.8,
        ...                 gpu_idle_W=80.0).standing_drop_W(8)   # 8 x (560 - 80) x 1.5
        5760.0
        """
        if self.gpu_idle_W is None:
            return 0.0
        return gpus * max(0.0, self.gpu_tdp_W * self.server_average_fraction - self.gpu_idle_W) * self.pue

    def parts(self) -> dict[str, float]:
        """The stacked parts of IT power (nameplate)."""
        return {"GPUs": self.gpu_W, "rest of servers": self.server_rest_W, "switches": self.switches_W,
                "optics": self.optics_W, "storage": self.storage_W, "front-end": self.frontend_W}

    def to_dict(self) -> dict:
        return asdict(self)


def power_breakdown(num_gpus: int, gpu_tdp_W: float, non_gpu_power_per_gpu_W: float, switches_W: float,
                    optics_W: float, storage_W: float, frontend_fraction: float, pue: float, load_factor: float,
                    electricity_usd_per_kWh: float, nic_optics_in_servers_W: float = 0.0,
                    server_average_fraction: float = 1.0, wue_L_per_kWh: float = 0.0,
                    pue_source: str = "", gpu_idle_W: float | None = None) -> PowerBreakdown:
    """Add up the power of a cluster, its energy and water (see the module doc for every formula).

    Parameters
    ----------
    num_gpus, gpu_tdp_W, non_gpu_power_per_gpu_W : the GPU servers, at nameplate.
    switches_W : the switches at their copper power.
    optics_W : the switch-side modules and active cables.
    storage_W : the storage servers (:mod:`topo.plan.storage`).
    frontend_fraction : the front-end network and management servers, as a share of the GPU servers' power.
    pue : facility power / IT power.
    load_factor : the share of the year the cluster runs.
    electricity_usd_per_kWh : the price of energy.
    nic_optics_in_servers_W : the NIC-side modules (reported, already in the servers').
    server_average_fraction : the GPU servers' average draw / their nameplate.
    wue_L_per_kWh : litres of site water per kWh of IT energy.
    pue_source : where the PUE came from (reported).
    gpu_idle_W : one GPU's draw with no work (:meth:`PowerBreakdown.standing_drop_W`); None: not known.

    >>> p = power_breakdown(1000, 700.0, 575.0, 0.0, 0.0, 0.0, 0.0, 1.5, 1.0, 0.1, server_average_fraction=0.8,
    ...                     wue_L_per_kWh=2.0)
    >>> p.it_power_W, p.facility_power_W, round(p.average_it_power_W), round(p.energy_per_year_Wh / 1e9, 3)
    (1275000.0, 1912500.0, 1020000, 13.403)
    >>> round(p.water_per_year_L / 1e6, 3)   # 2 L x 1,020 kW x 8,760 h
    17.87
    """
    gpu_W = num_gpus * gpu_tdp_W
    rest_W = num_gpus * non_gpu_power_per_gpu_W
    frontend_W = frontend_fraction * (gpu_W + rest_W)
    it_W = gpu_W + rest_W + frontend_W + storage_W + switches_W + optics_W
    avg_it_W = it_W - (gpu_W + rest_W) * (1.0 - server_average_fraction)
    avg_facility_W = avg_it_W * pue
    energy_Wh = avg_facility_W * load_factor * HOURS_PER_YEAR
    water_L = wue_L_per_kWh * avg_it_W * load_factor * HOURS_PER_YEAR / 1e3
    return PowerBreakdown(gpu_W=gpu_W, server_rest_W=rest_W, switches_W=switches_W, optics_W=optics_W,
                          storage_W=storage_W, frontend_W=frontend_W, it_power_W=it_W, pue=pue,
                          facility_power_W=it_W * pue, load_factor=load_factor, energy_per_year_Wh=energy_Wh,
                          electricity_usd_per_kWh=electricity_usd_per_kWh,
                          energy_cost_per_year_usd=energy_Wh / 1e3 * electricity_usd_per_kWh,
                          nic_optics_in_servers_W=nic_optics_in_servers_W,
                          server_average_fraction=server_average_fraction, average_it_power_W=avg_it_W,
                          average_facility_power_W=avg_facility_W, wue_L_per_kWh=wue_L_per_kWh,
                          water_per_year_L=water_L, pue_source=pue_source, gpu_tdp_W=gpu_tdp_W,
                          gpu_idle_W=gpu_idle_W)
