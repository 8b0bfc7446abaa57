"""Training-step accuracy: predict the step time of every published run we hold, in-sample and leave-one-run-out.

Runs (each row cites its source): ``data/reference/training_runs.csv`` (Megatron-LM SC21 Table 1 on DGX A100,
Llama 3 405B Table 4 on Meta's H100 cluster; TFLOPs/GPU converted to step time with the source's own FLOP count)
and ``data/reference/training_runs_published.csv`` (NeMo / Megatron-Bridge performance tables on DGX-H100, DGX-B200
and DGX-GB200, BF16, FP8 and MXFP8 (modelled as FP8), dense and MoE; NeMo AutoModel and JAX MaxText on DGX-H100;
DeepSeek-V3 on 2,048 H800; sources by run_id prefix in data/reference/README.md). Groups: dense BF16, dense FP8, MoE.

What is fitted (``topo/data/compute/efficiency.toml``), each by minimising the mean absolute log step-time error
(a robust L1 fit; golden-section search):

- one large-GEMM efficiency per (GPU generation, precision) on the DENSE runs of that generation and precision
  (ampere bf16; hopper bf16, fp8; blackwell fp8). Blackwell bf16 has no dense run: it takes Hopper's bf16 value
  times Blackwell's fp8/Hopper's fp8 ratio (stated as an assumption);
- on the MoE runs (all generations together, the dense values fixed): the grouped-GEMM efficiency of the expert
  GEMMs (taken at their real per-expert shapes) and the host seconds per local expert and pass of an eager MoE
  block, a floor under its GPU time (``[moe]`` in efficiency.toml), two values for every generation; the router, the permutation and the all-to-alls are physics.

Everything else is data or an assumption stated in ``efficiency.toml`` (GEMM shape scale, attention and memory
efficiencies).

- in-sample: every row predicted with the values fitted on all rows;
- leave-one-run-out (LOO): every row predicted with the one value its group fits (its dense key, or its
  generation's MoE factor) refitted without that row; a row alone in its key has no LOO prediction.

Per-source settings (not fitted; from each source's description of the run): Megatron SC21 2021: no fused
attention, full recomputation, plain data parallelism with an fp32 all-reduce not overlapped, micro-batch 1;
Llama 3: fused attention, FSDP SHARD_GRAD_OP with fp32 reduce-scatter, 4 interleaved stages, the embedding and the
loss counted as pipeline layers (the paper: "first and last stage one layer fewer"); NeMo / Megatron-Bridge
recipes: fused attention, the distributed optimizer (or Megatron FSDP where FSDP = 1), bf16 gradient reduction
(``grad_reduce_in_fp32 = False``), TP communication and pipeline sends overlapped, expert-tensor-parallel 1, the
embedding and loss as pipeline layers where the layer count needs it to split evenly; GB200 jobs on 64 of each
NVL72 rack's 72 GPUs (assumption); DGX-B200 on the DGX H100 SuperPOD's fabric with B200 GPUs and NVLink5 (``SPECS``);
NeMo AutoModel (PyTorch FSDP2) and MaxText (JAX) rows get the same settings, an approximation their notes state.
Memory (per source): NeMo and Megatron-Bridge rows keep bf16 gradients (``grad_bytes = 2``: with
``grad_reduce_in_fp32 = False`` Megatron-Core allocates its gradient buffer in the parameters' dtype); the rows'
``activation_offload_layers`` column (the recipe's ``cpu_offloading_num_layers`` / ``activation_offload_layers``,
GB200 FSDP recipes) and ``recompute_granularity`` column (AutoModel's ``activation_checkpointing: true``: full)
are read; sources in data/reference/README.md.
MoE rows carry their recipe's EP settings in the CSV (``moe_a2a_overlap``, ``moe_dispatcher``,
``moe_dispatch_bytes``, from Megatron-Bridge's ``scripts/performance/configs/{qwen,deepseek}/
*_workload_base_configs.py``); where a row leaves them empty, the recipes' defaults: no EP overlap
(``WorkloadBaseConfig.moe_a2a_overlap = False``), the all-to-all dispatcher, BF16 dispatch. Every row's
``recompute_modules`` column (the recipe's Megatron-Core ``recompute_modules``) is modelled; its
``cuda_graph_scope`` column is recorded only (``data/reference/README.md`` says why). Overlapped all-to-alls take
20 SMs from the compute beside them (``ParallelLayout.ep_comm_sms``, DeepEP's default). DeepSeek-V3: DualPipe
(its bubble, EP overlapped), FP8 dispatch (sec. 3.3.2), ZeRO-1, recomputed norms, node-limited routing, on the bundled DGX H100
SuperPOD with H800 GPUs (recomputing RMSNorm and the MLA up-projections, sec. 3.2.3: its CSV row).

    python benchmarks/training_accuracy.py            # prints the table
    python benchmarks/training_accuracy.py --fit      # also writes the fitted values into efficiency.toml
    python benchmarks/training_accuracy.py --write    # also updates benchmarks/RESULTS.md
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import sys
import time

from _results import ROOT, update_section

sys.path.insert(0, str(ROOT))

SPECS = {"DGX-H100": ("dgx-h100-superpod", ()), "DGX-GB200": ("gb200-nvl72-superpod", ()),
         "H800 cluster": ("dgx-h100-superpod", ("gpu=H800", "cluster.num_units=8")),
         # DGX B200: 8 B200 per node on NVLink5 (18 links, 14.4 TB/s per 8 GPUs = 900 GB/s per GPU and direction) and
         # 8 x ConnectX-7 NDR 400 Gb/s, the DGX H100 SuperPOD's node and rail fabric with the GPU and NVLink changed
         # (MLCommons inference v6.0, Nebius B200 system description: "18x 5th Gen NVLink, 14.4 TB/s aggregated",
         # "8x ConnectX-7 IB NDR 400Gb/s"; gpus.toml [B200])
         "DGX-B200": ("dgx-h100-superpod", ("gpu=B200", "scale_up.bandwidth_per_gpu=900 GB/s"))}
GROUPS = ("dense_bf16", "dense_fp8", "moe")
MOE_KEYS = (("moe", "grouped_gemm_efficiency"), ("moe", "moe_host_per_expert_s"))  # fitted on MoE runs, all generations


def _setups():
    """One dict per published run: fabric key, model, layout, convention, measured step time, group, params."""
    from topo.training.flops import model_flops_per_step
    from topo.training.parallel import make_layout
    from topo.training.model import load_model

    out = []
    for row in csv.DictReader(open(ROOT / "data" / "reference" / "training_runs.csv")):
        rid = row["run_id"]
        if rid.startswith("megatron_"):
            model = load_model("megatron-gpt-" + rid.removeprefix("megatron_").replace("p", "."))
            spec, conv = ("dgx-a100-superpod", ()), "megatron"
            extra = dict(flash_attention=False, dp_sharding="none", recompute="full", overlap_dp=False)
        else:
            model, spec, conv = load_model("llama3-405b"), ("meta-llama3-24k", ()), "6n"
            extra = dict(flash_attention=True, dp_sharding="fsdp_grad_op", recompute="none", vpp=4,
                         pipeline_embedding=True)
        lay = make_layout(tp=int(row["tp"]), cp=int(row["cp"]), pp=int(row["pp"]), dp=int(row["dp"]),
                          global_batch=int(row["global_batch_seqs"]), seq_len=int(row["seq_len"]),
                          **{k: v for k, v in extra.items() if not (k == "vpp" and int(row["pp"]) == 1)})
        step = model_flops_per_step(model, lay, conv) / (float(row["value"]) * 1e12 * int(row["num_gpus"]))
        out.append(dict(run=rid, spec=spec, model=model, lay=lay, step_s=step, source=row["source_url"],
                        gpu=row["gpu"].split("-")[0]))
    for row in csv.DictReader(open(ROOT / "data" / "reference" / "training_runs_published.csv")):
        model = load_model(row["model"])
        n, tp, pp, cp, vp, ep = (int(row[k]) for k in ("num_gpus", "tp", "pp", "cp", "vpp", "ep"))
        dp = n // (tp * pp * cp)
        chunks = pp * vp
        emb = pp > 1 and model.layers % chunks != 0 and (model.layers + 2) % chunks == 0
        kw = dict(tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, vpp=vp, micro_batch=int(row["micro_batch"]),
                  global_batch=int(row["global_batch_seqs"]), seq_len=int(row["seq_len"]),
                  precision=row["precision"], flash_attention=True, recompute="none",
                  dp_sharding="zero3" if row["fsdp"] == "1" else "zero1", grad_reduce_bytes=2.0,
                  overlap_tp=True, overlap_pp=vp > 1, pipeline_embedding=emb)
        # the recipe's recomputed modules (space-separated; empty: none). The cuda_graph_scope column is recorded
        # but not modelled (see data/reference/README.md)
        kw.update(recompute_modules=tuple((row.get("recompute_modules") or "").split()))
        if model.moe is not None:  # the recipe's EP overlap and dispatcher: the row's own columns
            kw.update(etp=1, overlap_ep=row.get("moe_a2a_overlap") == "1",
                      ep_dispatcher=row.get("moe_dispatcher") or "alltoall",
                      ep_dispatch_bytes=float(row.get("moe_dispatch_bytes") or 2))
        if row["system"] == "DGX-GB200":
            kw["gpus_per_domain_used"] = 64
        if row["run_id"].startswith(("nemo", "mb")):  # grad_reduce_in_fp32 = False: a bf16 gradient buffer
            kw["grad_bytes"] = 2.0
        # the recipe's memory settings (empty: none): activation offloading, recomputation
        kw["activation_offload_layers"] = int(row.get("activation_offload_layers") or 0)
        kw["recompute"] = row.get("recompute_granularity") or "none"
        if row["run_id"].startswith("deepseekv3_h800"):
            kw.update(grad_reduce_bytes=4.0, overlap_tp=False, pipeline_schedule="dualpipe")
        out.append(dict(run=row["run_id"], spec=SPECS[row["system"]], model=model, lay=make_layout(**kw),
                        step_s=float(row["step_time_s"]), source=row["source_url"], gpu=row["gpu"]))
    for s in out:
        s["group"] = "moe" if s["model"].moe is not None else f"dense_{s['lay'].precision}"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="write the fitted efficiencies into efficiency.toml")
    ap.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    args = ap.parse_args()

    import topo
    from topo.fabric.hardware import lookup_gpu
    from topo.training.comm import CommEngine
    from topo.training.step import estimate_step

    t0 = time.perf_counter()
    setups = _setups()
    fabrics, engines = {}, {}
    for s in setups:
        if s["spec"] not in fabrics:
            name, over = s["spec"]
            fabrics[s["spec"]] = topo.build_fabric(topo.load_spec(name, list(over)))
            engines[s["spec"]] = CommEngine(fabrics[s["spec"]])
        s["gen"] = lookup_gpu(fabrics[s["spec"]].spec.gpu).generation
        s["key"] = (s["gen"], "fp8" if s["lay"].precision == "fp8" else "bf16")
        first = estimate_step(fabrics[s["spec"]], s["model"], s["lay"], engine=engines[s["spec"]], convention="6n")
        s["contention"] = first.contention  # the traffic mix depends on the layout only: reused by the fit

    memo = {}  # (run, the values its prediction reads) -> its prediction: a golden-section search probes the same
    # points for every leave-one-out fit of a group until a comparison differs, so most probes repeat

    def predict(s, values):
        key = (s["run"], tuple(sorted((k, v) for k, v in values.items() if k[0] in (s["gen"], "moe"))))
        got = memo.get(key)
        if got is None:
            got = memo[key] = _predict(s, values)
        return got

    def _predict(s, values):
        over = {}
        for key, e in values.items():
            gen, what = key
            if gen == "moe":
                over.setdefault("moe", {})[what] = e
            else:
                over.setdefault(gen, {})[f"gemm_efficiency_{what}"] = e
        return estimate_step(fabrics[s["spec"]], s["model"], s["lay"], engine=engines[s["spec"]], check=False,
                        contention=s["contention"], kernel_overrides=over)

    def fit(rows, key, values, lo=0.2, hi=1.0, digits=3):
        """Golden-section search of one value on ``rows`` (mean |log error|), the others fixed."""
        if not rows:
            return None

        def loss(e):
            v = {**values, key: e}
            return sum(abs(math.log(predict(s, v).step_time_s / s["step_s"])) for s in rows) / len(rows)

        g = (math.sqrt(5) - 1) / 2
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        fa, fb = loss(a), loss(b)
        for _ in range(16):
            if fa < fb:
                hi, b, fb = b, a, fa
                a = hi - g * (hi - lo)
                fa = loss(a)
            else:
                lo, a, fa = a, b, fb
                b = lo + g * (hi - lo)
                fb = loss(b)
        return round((lo + hi) / 2, digits)

    for s in setups:
        s["fitkey"] = MOE_KEYS if s["group"] == "moe" else s["key"]
    dense_keys = sorted({s["key"] for s in setups} | {("blackwell", "bf16")})
    values = {k: 0.7 for k in dense_keys}
    values.update({MOE_KEYS[0]: 1.0, MOE_KEYS[1]: 0.0})
    assumed = []

    def fit_moe(rows, values):
        """The two MoE values (one for every generation) on ``rows``: coordinate descent, two rounds."""
        v = dict(values)
        if not rows:
            return None
        for _ in range(2):
            v[MOE_KEYS[0]] = fit(rows, MOE_KEYS[0], v, lo=0.2, hi=1.0)
            v[MOE_KEYS[1]] = fit(rows, MOE_KEYS[1], v, lo=0.0, hi=0.002, digits=6)
        return v

    def fit_all(rows_of, values):
        v = dict(values)
        for k in dense_keys:
            if k != ("blackwell", "bf16"):
                got = fit(rows_of(k), k, v)
                v[k] = got if got is not None else v[k]
        if ("hopper", "bf16") in v and ("blackwell", "fp8") in v and ("hopper", "fp8") in v \
                and not rows_of(("blackwell", "bf16")):
            v[("blackwell", "bf16")] = round(v[("hopper", "bf16")] * v[("blackwell", "fp8")] / v[("hopper", "fp8")], 3)
        return fit_moe(rows_of(MOE_KEYS), v) or v

    values = fit_all(lambda k: [s for s in setups if s["fitkey"] == k], values)
    assumed.append(f"blackwell bf16 {values[('blackwell', 'bf16')]:.3f} (no dense BF16 Blackwell run): hopper bf16 x "
                   "blackwell fp8 / hopper fp8")
    for s in setups:
        s["pred"] = predict(s, values)
        others = [o for o in setups if o["fitkey"] == s["fitkey"] and o is not s]
        if s["fitkey"] == MOE_KEYS:
            v_loo = fit_moe(others, values)
            s["loo"] = predict(s, v_loo).step_time_s if v_loo is not None else None
            continue
        e_loo = fit(others, s["fitkey"], values)
        s["loo"] = predict(s, {**values, s["fitkey"]: e_loo}).step_time_s if e_loo is not None else None

    lines = ["| run | group | GPU | layout | measured step (s) | in-sample | error | leave-one-out | error | fits |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    errs = {g: ([], []) for g in GROUPS}
    for s in setups:
        L = s["lay"]
        e_in = s["pred"].step_time_s / s["step_s"] - 1
        errs[s["group"]][0].append(abs(e_in))
        loo = "-" if s["loo"] is None else f"{s['loo']:.3g}"
        e_out = "-" if s["loo"] is None else f"{s['loo'] / s['step_s'] - 1:+.1%}"
        if s["loo"] is not None:
            errs[s["group"]][1].append(abs(s["loo"] / s["step_s"] - 1))
        lay = f"tp{L.tp} cp{L.cp} pp{L.pp}" + (f"x{L.vpp}" if L.vpp > 1 else "") + f" dp{L.dp}" \
            + (f" ep{L.ep}" if L.ep > 1 else "") + f" {L.precision}"
        lines.append(f"| {s['run']} | {s['group']} | {s['gpu']} | {lay} | {s['step_s']:.3g} | "
                     f"{s['pred'].step_time_s:.3g} | {e_in:+.1%} | {loo} | {e_out} | "
                     f"{'yes' if s['pred'].fits else 'no'} |")
    summary = ["| group | runs | median abs error in-sample | leave-one-run-out (runs with a LOO fit) |",
               "|---|---|---|---|"]
    for g in GROUPS:
        i, o = errs[g]
        if i:
            summary.append(f"| {g} | {len(i)} | {statistics.median(i):.1%} | "
                           + (f"{statistics.median(o):.1%} ({len(o)})" if o else "-") + " |")
    has_rows = {s["fitkey"] for s in setups}
    has_rows = {k for k in has_rows if k != MOE_KEYS} | (set(MOE_KEYS) if MOE_KEYS in has_rows else set())
    fitted = ", ".join(f"{gen} {what} {v:.3g}" for (gen, what), v in sorted(values.items()) if (gen, what) in has_rows)
    assumed += [f"{gen} {what} {v:.3f} (no run to fit)" for (gen, what), v in sorted(values.items())
                if (gen, what) not in has_rows and (gen, what) != ("blackwell", "bf16")]
    body = ("Step time of each published run (both CSV files in `data/reference/`), predicted by `topo train`'s "
            "operator roofline and traffic mix on the source's network. Fitted (mean |log error|; GEMM efficiency "
            "per generation and precision on dense runs; on MoE runs, with those fixed, the grouped-GEMM efficiency "
            f"and the host seconds per local expert and pass, a floor under an MoE block's GPU time, one value "
            f"each for every generation): {fitted}. "
            f"Assumed: {'; '.join(assumed)}. Leave-one-run-out refits the row's own value without it. "
            "Settings per source are in the script's docstring.\n\n"
            + "\n".join(summary) + "\n\n" + "\n".join(lines)
            + f"\n\nWall time {time.perf_counter() - t0:.0f} s.")
    print(body)
    if args.fit:
        _write_fit(values)
    if args.write:
        update_section("Training-step accuracy (topo train)", body, "python benchmarks/training_accuracy.py")


def _write_fit(values) -> None:
    path = ROOT / "topo" / "data" / "compute" / "efficiency.toml"
    text = path.read_text()
    for (gen, what), v in values.items():
        name = what if gen == "moe" else f"gemm_efficiency_{what}"
        pat = re.compile(rf"(\[{gen}\][^\[]*?{name} = )[0-9.]+", re.S)
        text = pat.sub(lambda mo: f"{mo.group(1)}{v:.6f}" if what == "moe_host_per_expert_s" else f"{mo.group(1)}{v:.3f}",
                       text)
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
