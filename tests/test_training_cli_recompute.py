"""`topo train`'s header line says what the layout recomputes (walk11: ``--recompute full`` and
``--recompute-modules`` were shown nowhere in the text), and marks a module the model has no block for: Megatron-Core's
``mlp`` recomputes the dense MLP only (``moe`` the experts), so on an all-MoE model it changes nothing, and
``--recompute selective`` with flash attention has no s x s scores left to recompute; a silently idle flag reads as
a different model. The options line names a recipe's BF16 layers of an FP8 run."""


from conftest import run_cli

BASE = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "8", "--tp", "1", "--dp", "8",
        "--ep", "8", "--global-batch", "8", "--seq", "2048"]


def _run(*extra):
    lines = run_cli(*BASE, *extra, check=True).stdout.splitlines()
    lines = lines[1:] if lines[0].startswith("DOES NOT FIT") else lines  # mem56: said first, above the header
    return lines[0], next(ln for ln in lines if ln.startswith("step time"))


def test_header_names_full_recompute_and_its_layers():
    header, _ = _run("--recompute", "full", "--recompute-num-layers", "4")
    assert ", recompute full (the first 4 layers of each stage), " in header
    assert "recompute" not in _run()[0]


def test_an_idle_module_is_marked_and_changes_nothing():
    _, none = _run()
    header, mlp = _run("--recompute-modules", "mlp")
    assert ", recompute mlp (no effect: qwen3-30b-a3b has no dense MLP layers; moe and moe_act recompute the " \
           "experts), " in header
    assert mlp == none  # the mark is true: the step is the one without recomputation
    header, moe = _run("--recompute-modules", "moe,mla_up_proj")  # tidy122: mamba is refused, no longer idle
    assert ", recompute moe, mla_up_proj (no effect: qwen3-30b-a3b has no MLA attention), " in header
    assert moe != none  # moe recomputes the experts: the step is slower


def test_selective_with_flash_attention_is_marked():
    _, none = _run()
    header, sel = _run("--recompute", "selective")
    assert ", recompute selective (no effect: flash attention keeps no s x s scores; " in header and sel == none
    header, _ = _run("--recompute", "selective", "--no-flash-attention")
    assert ", recompute selective, " in header


def test_options_line_names_the_bf16_layers_of_an_fp8_run():
    out = run_cli("train", "dgx-h100-superpod", "--model", "nemotron-h-56b", "--gpus", "8", "--tp", "8",
                  "--global-batch", "8", "--precision", "fp8", "--layout",
                  "num_layers_at_start_in_bf16=2,num_layers_at_end_in_bf16=2", check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("framework options: "))
    # amax53: an FP8 run without a recipe also names the amax reduction Megatron-Core's default recipe runs
    assert line.endswith(", num_layers_at_start_in_bf16 2, num_layers_at_end_in_bf16 2 (layout fields)")


def test_search_table_names_the_recomputation_and_marks_an_idle_module():
    """``--search`` held ``--remat-policy`` and ``--recompute-modules`` in every layout, but its recompute column
    said ``none`` (walk11)."""
    search = ["train", "dgx-h100-superpod", "--model", "qwen3-30b-a3b", "--gpus", "8", "--global-batch", "8",
              "--seq", "2048", "--search", "--top", "2"]
    out = run_cli(*search, "--remat-policy", "save_dot_except_mlpwi", check=True).stdout
    rows = [ln for ln in out.splitlines() if ln[:1].isdigit()]
    assert rows and all("remat save_dot_except_mlpwi" in ln for ln in rows)
    out = run_cli(*search, "--recompute-modules", "mlp,moe", "--recompute", "none", check=True).stdout
    rows = [ln for ln in out.splitlines() if ln[:1].isdigit()]
    assert rows and all(" mlp,moe " in ln for ln in rows)
    assert ("recompute mlp (no effect: qwen3-30b-a3b has no dense MLP layers; moe and moe_act recompute the "
            "experts), moe") in out.splitlines()
