"""walk30's fixes (an MoE research team with its own 200B-A20B model file choosing between 2,048 H100 and 1,152
B200 / GB200): a search's first-row line that named the model inside the file, not the file."""

import shlex

from conftest import ROOT, run_cli

LAB = ("dgx-h100-superpod", "--set", "cluster.num_units=1")


def _own_model(tmp_path):
    """Llama 3 8B's bundled file under another file name and model name, as a team writes its own."""
    text = (ROOT / "topo" / "data" / "models" / "llama3-8b.toml").read_text()
    path = tmp_path / "our-model.toml"
    path.write_text(text.replace('name = "llama3-8b"', 'name = "ours-8b"'))
    return str(path)


def test_a_searchs_breakdown_line_names_the_model_file_it_was_given(tmp_path):
    """walk30: `topo train ... --model moe200.toml --search` printed "#1's breakdown: topo train ... --model
    moe200 ...", the name inside the file, which is neither a file nor a bundled model, so the line run as printed
    was "error: moe200: model: no such model file or bundled model". It now repeats --model as given; run as
    printed it gives the row's step."""
    model = _own_model(tmp_path)
    out = run_cli("train", *LAB, "--gpus", "16", "--model", model, "--global-batch", "32", "--seq", "2048",
                  "--search", "--top", "1", check=True).stdout
    row = next(line for line in out.splitlines() if line.startswith("1 "))
    line = next(line for line in out.splitlines() if line.startswith("#1's breakdown: topo train "))
    flags = shlex.split(line.removeprefix("#1's breakdown: topo train "))
    assert flags[flags.index("--model") + 1] == model
    again = run_cli("train", *flags, check=True).stdout
    assert again.splitlines()[0].startswith("ours-8b on dgx-h100-superpod")
    step = again.splitlines()[1].split()[2:4]  # "step time   304.0 ms ..."
    assert " ".join(step) in row
