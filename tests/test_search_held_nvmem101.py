"""A search's "#1's breakdown" command carries the fields ``--layout`` held in every layout tried (walk39, section
407 Left 5: a search holding ``fp8_recipe = "nvfp4"`` printed a command that, pasted alone, stepped per-tensor FP8);
and ``module_recipes`` under the default FP8 recipe (unset: delayed, Megatron-Core's default ``fp8_recipe``), which
Megatron-Core accepts with per-module recipes (NVIDIA/Megatron-LM@d98e8a64
megatron/core/extensions/transformer_engine.py lines 190-191 refuse delayed only as a module's own recipe;
docs/calibration-findings.md section 412)."""

import shlex

from conftest import run_cli

LAB = ("dgx-h100-superpod", "--set", "cluster.num_units=1", "--set", "fabric.technology=roce")
HELD = 'fp8_recipe=blockwise,module_recipes=["linear_qkv=bf16","linear_proj=bf16"]'


def _step(out: str) -> str:
    return " ".join(next(ln for ln in out.splitlines() if ln.startswith("step time")).split()[2:4])


def test_the_breakdown_command_steps_the_held_layout_fields():
    """Run the search with two held --layout fields (block-wise FP8, two BF16 attention modules), then the printed
    #1 command as printed: its step is the row's, and the same command without the held fields steps another."""
    out = run_cli("train", *LAB, "--gpus", "32", "--model", "llama3-8b", "--global-batch", "32", "--seq", "2048",
                  "--precision", "fp8", "--layout", HELD, "--search", "--top", "1", check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("1 "))
    line = next(line for line in out.splitlines() if line.startswith("#1's breakdown: topo train "))
    flags = shlex.split(line.removeprefix("#1's breakdown: topo train "))
    layout = flags[flags.index("--layout") + 1]
    assert "fp8_recipe=\"blockwise\"" in layout and 'module_recipes=["linear_qkv=bf16", "linear_proj=bf16"]' in layout
    again = run_cli("train", *flags, check=True).stdout
    assert _step(again) in row
    i = flags.index("--layout")
    bare = run_cli("train", *(flags[:i] + flags[i + 2:]), check=True).stdout
    assert _step(bare) != _step(again)


def test_module_recipes_with_the_default_recipe_run_as_delayed():
    """walk39's refusal ("got precision fp8, fp8_recipe none"): unset is delayed, as README says, so the step is
    fp8_recipe=delayed's, and the BF16 module makes it another than without module_recipes."""
    base = ("train", *LAB, "--model", "llama3-8b", "--tp", "8", "--dp", "2", "--global-batch", "16", "--precision",
            "fp8", "--layout")
    unset = run_cli(*base, 'module_recipes=["linear_qkv=bf16"]', check=True).stdout
    delayed = run_cli(*base, 'fp8_recipe=delayed,module_recipes=["linear_qkv=bf16"]', check=True).stdout
    plain = run_cli(*base, "fp8_recipe=delayed", check=True).stdout
    assert _step(unset) == _step(delayed) != _step(plain)
