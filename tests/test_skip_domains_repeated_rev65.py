"""``--skip-domains`` given more than once (rev65): every flag's indices are skipped, as ``--fail`` repeats.

Before, argparse kept the last flag only: ``--skip-domains 3 --skip-domains 5`` placed the job on domain 3 (skipped
5 alone) with no word, while ``--fail nvswitch3 --fail nvswitch5`` fails both. The indices now gather across flags;
an index given twice, in one flag or across two, is refused by the one rule (``mapping._refuse_idle_skip``)."""

import json

from conftest import run_cli

JOB = ["train", "dgx-h100-superpod", "--model", "llama3-8b", "--tp", "8", "--dp", "16", "--global-batch", "512"]


def _skipped(*flags):
    proc = run_cli(*JOB, *flags, "--json", check=True)
    return json.loads(proc.stdout)["layout"]["skip_domains"]


def test_repeated_flags_skip_every_domain_given():
    assert _skipped("--skip-domains", "3", "--skip-domains", "5") == [3, 5]
    assert _skipped("--skip-domains", "3", "--skip-domains", "5") == _skipped("--skip-domains", "3,5")


def test_an_index_repeated_across_flags_is_refused_in_one_line():
    proc = run_cli(*JOB, "--skip-domains", "3", "--skip-domains", "3")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "--skip-domains: 3,3: domain 3 listed more than once" in proc.stderr
