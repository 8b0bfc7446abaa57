"""Render times as nccl-tests prints them (current layout), to test compare and calibrate on known answers."""

from __future__ import annotations

from topo.engine.collectives import busbw_factor


def render(collective: str, hosts: list[str], gpus_per_host: int, gpu: str, sizes, times_s, ngpus: int = 1) -> str:
    n = len(hosts) * gpus_per_host
    lines = [f"# Collective test starting: {collective}_perf",
             f"# nThread 1 nGpus {ngpus} minBytes {min(sizes)} maxBytes {max(sizes)} step: 2(factor) warmup iters: 5 "
             "iters: 20 agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    rank = 0
    for h in hosts:
        for d in range(gpus_per_host):
            lines.append(f"#  Rank {rank:2d} Group  0 Pid  {1000 + rank} on {h:>10} device  {d} [0x{d:02x}] {gpu}")
            rank += 1
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
              "   algbw   busbw #wrong"]
    f = busbw_factor(collective, n)
    for s, t in zip(sizes, times_s):
        us, alg = t * 1e6, s / t / 1e9
        lines.append(f"{s:12d} {s // 4:13d}     float     sum      -1 {us:8.2f} {alg:7.2f} {alg * f:7.2f}      0 "
                     f"{us:8.2f} {alg:7.2f} {alg * f:7.2f}      0")
    lines.append("# Avg bus bandwidth    : 1.0")
    return "\n".join(lines) + "\n"
