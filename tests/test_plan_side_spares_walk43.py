"""Side by side, ``topo plan A B --model M --layout L`` names each design's hot spares, as one design's text does
(walk43, docs/calibration-findings.md section 440): a 16,384-GPU job on a 16,384-GPU DGX H100 SuperPOD leaves no
whole server, so each hardware failure waits for its repair, and its goodput fell to a quarter of the GB200 design's
with no word of why; one design's plan said it (``topo/plan/spare_note.py``), the comparison dropped it.

Here a 256-GPU job: four GB200 NVL72 racks hold 4 x 72 = 288 GPUs, the job at 64 of each rack's 72 leaves
4 x 8 / 4 = 8 whole four-GPU trays idle; 32 DGX H100 hold 256 GPUs, all the job's."""

from conftest import run_cli


def test_each_designs_spare_note_is_printed_with_its_name():
    out = run_cli("plan", "gb200-nvl72-superpod", "dgx-h100-superpod", "--set", "gb200-nvl72-superpod:cluster.num_units=4",
                  "--set", "dgx-h100-superpod:cluster.num_units=1", "--model", "llama3-8b", "--layout",
                  "tp=2,dp=128,global_batch=256", "--no-collectives", check=True).stdout
    notes = [line for line in out.splitlines() if line.startswith("note: ") and "'s job holds" in line]
    assert len(notes) == 2
    # spares132: the 8 idle trays are 2 inside each of the job's 4 racks, its hot spares rack by rack
    assert notes[0].startswith("note: gb200-nvl72-superpod: llama3-8b's job holds 256 of the 288 GPUs at 64 of each "
                               "72-GPU NVLink domain (4 domains): each domain's 2 idle whole servers of 4 GPUs (8 in "
                               "all) are its hot spares")
    assert notes[1].startswith("note: dgx-h100-superpod: llama3-8b's job holds 256 of the 256 GPUs: no whole server "
                               "is left as a hot spare, so each hardware failure waits for its repair")
