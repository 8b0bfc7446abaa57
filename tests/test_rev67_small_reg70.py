"""reg70: rev67's small leftovers (section 285, Left): a sweep's unknown profile named once; ``--tokens`` below one
token refused."""

import pytest

from conftest import run_cli

SPEC = "dgx-h100-superpod"


def test_a_sweeps_unknown_profile_is_named_once(tmp_path):
    """Was ``axes.profile: 'nosuch': 'nosuch': unknown profile ...`` (the profile's error names the value, and the
    sweep's check named it again)."""
    (tmp_path / "study.toml").write_text(
        f'spec = "{SPEC}"\ncompute = ["train"]\n[axes]\n"cluster.num_units" = 1\nmodel = "llama3-8b"\n'
        'layout = "tp=1,dp=16"\nglobal_batch = 32\nprofile = ["hopper+infiniband_ndr", "nosuch"]\n')
    r = run_cli("sweep", "study.toml", "--scheduler", "serial", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "study.toml: axes.profile: 'nosuch': unknown profile 'nosuch'; allowed:" in r.stderr, r.stderr


@pytest.mark.parametrize("tokens, ok", [("0.1", False), ("0.5", False), ("1", True), ("0.5T", True)])
def test_tokens_below_one_are_refused(tokens, ok):
    r = run_cli("train", SPEC, "--model", "llama3-8b", "--tp", "8", "--dp", "4", "--global-batch", "32",
                "--tokens", tokens)
    if ok:
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert f"--tokens: must be a number of tokens of at least 1, got {tokens}; allowed:" in r.stderr, r.stderr
