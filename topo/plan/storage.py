"""Storage sized from the checkpoints and the dataset it holds and the rate a checkpoint must be written at.

    checkpoint      = parameters x bytes per parameter x share      (reliability.checkpoint.bytes_per_param;
                                                                     share: a region's site's part, else 1)
    dataset         = tokens trained on x bytes per token           (tokens = FLOP / (6 x parameters))
    capacity needed = checkpoints kept x checkpoint + dataset
    write needed    = checkpoint / write budget                     (a sync checkpoint stalls at most the budget)
    servers         = max(ceil(capacity needed / capacity each), ceil(write needed / write each))
    write, read     = servers x each server's write (read) rate    -> checkpoint write and reload times
    power           = servers x power each;  racks = ceil(servers / servers per rack);  capex = servers x price
    floor           = racks x the floor plan's area per rack position (rack width x row pitch / rack area fraction)

With ``sizing = "per_gpu"`` the count is instead ``ceil(GPUs x storage servers per GPU)`` (Llama 3's 7,500 per 24,576
GPUs) and the needs are reported beside it. The server is one of the catalog's named kinds (Llama 3's Tectonic
servers, a 3FS flash node, a DDN appliance), each with its source. Catalog data: ``topo/data/catalog/storage.toml``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..units import whole_bytes

__all__ = ["StorageServerSpec", "StoragePlan", "size_storage", "storage_servers_for"]


@dataclass(frozen=True)
class StorageServerSpec:
    """One storage server: capacity (bytes), write and read rates (bytes/s), power (W), servers per rack, price."""

    capacity_bytes: float
    write_Bps: float
    read_Bps: float
    power_W: float
    servers_per_rack: int
    price_usd: float


@dataclass(frozen=True)
class StoragePlan:
    """The storage of one design: what it must hold and write, and the servers that do it."""

    sizing: str
    checkpoint_bytes: float
    checkpoints_kept: int
    dataset_tokens: float
    dataset_bytes: float
    capacity_needed_bytes: float
    write_budget_s: float
    write_needed_Bps: float
    servers_for_capacity: int
    servers_for_bandwidth: int
    servers: int
    capacity_bytes: float
    write_Bps: float
    read_Bps: float
    checkpoint_write_s: float  # the checkpoint at these servers' aggregate write rate
    checkpoint_read_s: float
    power_W: float
    racks: int
    floor_m2: float
    capex_usd: float
    kind: str = ""  # the storage server's kind (storage.toml [kinds.<name>])

    @property
    def limit(self) -> str:
        """What sets the count: ``capacity``, ``bandwidth`` or ``per_gpu``."""
        if self.sizing == "per_gpu":
            return "per_gpu"
        return "bandwidth" if self.servers_for_bandwidth >= self.servers_for_capacity else "capacity"

    def to_dict(self) -> dict:
        return whole_bytes({**asdict(self), "limit": self.limit})


def storage_servers_for(capacity_bytes: float, write_Bps: float, server: StorageServerSpec) -> tuple[int, int]:
    """(servers to hold ``capacity_bytes``, servers to write at ``write_Bps``), each at least one.

    >>> s = StorageServerSpec(32e12, 266.7e6, 933.3e6, 600.0, 16, 25_000.0)
    >>> storage_servers_for(100e12, 1e12, s)
    (4, 3750)
    """
    eps = 1e-9
    return (max(1, math.ceil(capacity_bytes / server.capacity_bytes - eps)),
            max(1, math.ceil(write_Bps / server.write_Bps - eps)))


def size_storage(*, params: float, bytes_per_param: float, flop: float, bytes_per_token: float,
                 checkpoints_kept: int, write_budget_s: float, server: StorageServerSpec, area_per_rack_m2: float,
                 sizing: str = "needs", num_gpus: int = 0, servers_per_gpu: float = 0.0, kind: str = "",
                 checkpoint_share: float = 1.0) -> StoragePlan:
    """Size the storage of a design (see the module doc for every formula).

    Parameters
    ----------
    params, bytes_per_param : the checkpointed model; its checkpoint is their product (bytes).
    flop : the training budget; the dataset is FLOP / (6 x params) tokens of ``bytes_per_token`` each.
    checkpoints_kept : checkpoints stored at once.
    write_budget_s : the longest a checkpoint's write may take (s).
    server : one storage server.
    area_per_rack_m2 : floor per rack position, aisles included (the floor plan's).
    sizing : ``"needs"`` (from capacity and bandwidth) or ``"per_gpu"`` (``ceil(num_gpus x servers_per_gpu)``).
    kind : the server's kind, carried into the plan (storage.toml ``[kinds.<name>]``).
    checkpoint_share : the part of the checkpoint this storage holds and writes (a region's site: its GPUs' share,
        the other sites writing theirs; :func:`topo.plan.region.plan_region`).

    >>> s = StorageServerSpec(32e12, 266.7e6, 933.3e6, 600.0, 16, 25_000.0)
    >>> p = size_storage(params=1e9, bytes_per_param=14, flop=6e9 * 20e9, bytes_per_token=4, checkpoints_kept=5,
    ...                  write_budget_s=30, server=s, area_per_rack_m2=2.5)
    >>> p.capacity_needed_bytes, p.servers, p.racks
    (150000000000.0, 2, 1)
    """
    ckpt = params * bytes_per_param * checkpoint_share
    tokens = flop / (6 * params)
    dataset = tokens * bytes_per_token
    need = checkpoints_kept * ckpt + dataset
    write_need = ckpt / write_budget_s
    by_cap, by_bw = storage_servers_for(need, write_need, server)
    if sizing == "per_gpu":
        n = math.ceil(num_gpus * servers_per_gpu - 1e-9)
    elif sizing == "needs":
        n = max(by_cap, by_bw)
    else:
        raise ValueError(f"sizing must be 'needs' or 'per_gpu', got {sizing!r}")
    write, read = n * server.write_Bps, n * server.read_Bps
    racks = math.ceil(n / server.servers_per_rack)
    return StoragePlan(
        sizing=sizing, checkpoint_bytes=ckpt, checkpoints_kept=checkpoints_kept, dataset_tokens=tokens,
        dataset_bytes=dataset, capacity_needed_bytes=need, write_budget_s=write_budget_s, write_needed_Bps=write_need,
        servers_for_capacity=by_cap, servers_for_bandwidth=by_bw, servers=n, capacity_bytes=n * server.capacity_bytes,
        write_Bps=write, read_Bps=read, checkpoint_write_s=ckpt / write if n else math.inf,
        checkpoint_read_s=ckpt / read if n else math.inf, power_W=n * server.power_W, racks=racks,
        floor_m2=racks * area_per_rack_m2, capex_usd=n * server.price_usd, kind=kind)
