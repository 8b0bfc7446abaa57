"""An explicit pipeline layout: which layers each pipeline chunk holds, in Megatron-Core's notation.

Megatron-Core's ``--pipeline-model-parallel-layout`` (``PipelineParallelLayerLayout``) writes the chunks of a
pipeline left to right, separated by ``|``: ``E`` the embedding, ``t`` a transformer layer, ``m`` a
multi-token-prediction module, ``L`` the loss (the output head). ``X*n`` repeats a token and ``(...)*n`` a group,
so DeepSeek-V3's 61 layers on 16 chunks with a light last stage read ``Et*4|(t*4|)*14tmL``. With ``pp`` stages and
``vpp`` virtual stages there are ``pp x vpp`` chunks; chunk ``c`` runs on stage ``c mod pp`` (interleaved 1F1B).
Recipes set such layouts where an even split would overload a stage, e.g. Megatron-Bridge's DeepSeek-V3 recipe
(``src/megatron/bridge/recipes/deepseek/deepseek_v3.py``, ``layout_map``: one layer + MTP + loss on the last of
16 chunks).
"""

from __future__ import annotations

import re

from ..errors import TopoError

END_UNITS = ("embedding", "logits", "mtp_head")
"""Pipeline units that are not layers: the embedding, the output head, a multi-token-prediction module's head."""

__all__ = ["expand_layout", "layout_chunks", "TOKENS"]

TOKENS = {"E": "embedding", "t": "layer", "m": "mtp", "L": "loss"}
_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")
_REPEAT = re.compile(r"([EtmL])\*(\d+)")


def expand_layout(text: str, source: str = "layout") -> list[str]:
    """The chunks of a layout string, each a string of ``E``, ``t``, ``m`` and ``L``.

    Parameters
    ----------
    text : str
        Megatron-Core's notation (``Et*4|(t*4|)*14tmL``); spaces are ignored.
    source : str
        Where the text came from (named in errors).

    Returns
    -------
    list of str
        One string per chunk, in pipeline order.

    Raises
    ------
    TopoError
        A character outside ``E t m L | ( ) * 0-9``, an unbalanced group, or a repeat count of 0 (key
        ``pipeline_layout``).
    """
    s = "".join(text.split())
    bad = sorted(set(re.sub(r"[EtmL|()*0-9]", "", s)))
    if bad:
        raise TopoError(f"{text!r} has {''.join(bad)!r}; allowed: E (embedding), t (layer), m (MTP), L (loss), "
                        f"| between chunks, X*n and (...)*n repeats", source=source, key="pipeline_layout")
    if re.search(r"\*0+(?!\d)", s):
        raise TopoError(f"{text!r} repeats something 0 times; allowed: a count of 1 or more", source=source,
                        key="pipeline_layout")
    while _GROUP.search(s):
        s = _GROUP.sub(lambda m: m.group(1) * int(m.group(2)), s)
    s = _REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), s)
    if re.search(r"[()*0-9]", s):
        raise TopoError(f"{text!r} has an unbalanced group or a repeat without a token before it; write X*n or "
                        f"(...)*n", source=source, key="pipeline_layout")
    return s.split("|")


def layout_chunks(text: str, *, chunks: int, layers: int, mtp_layers: int, source: str = "layout") -> list[str]:
    """The chunks of ``text``, checked against the job: ``chunks`` (pp x vpp) of them, every one of the model's
    ``layers`` and ``mtp_layers`` once, the embedding in the first chunk and the loss in the last.

    Raises
    ------
    TopoError
        Keyed ``pipeline_layout``, naming what does not match and what is allowed.
    """
    out = expand_layout(text, source)

    def bad(msg):
        raise TopoError(f"{text!r} {msg}", source=source, key="pipeline_layout")

    if len(out) != chunks:
        bad(f"has {len(out)} chunks; allowed: pp x vpp = {chunks}")
    joined = "".join(out)
    if joined.count("t") != layers:
        bad(f"places {joined.count('t')} layers (t); the model has {layers}")
    if joined.count("m") != mtp_layers:
        bad(f"places {joined.count('m')} MTP modules (m); the model has {mtp_layers}")
    if joined.count("E") != 1 or "E" not in out[0]:
        bad("must hold the embedding (E) once, in the first chunk")
    if joined.count("L") != 1 or "L" not in out[-1]:
        bad("must hold the loss (L) once, in the last chunk")
    return out
