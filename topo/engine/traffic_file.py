"""Traffic files: a small TOML description of collectives that run at once (see the README's "Traffic mixes").

::

    name = "3D-parallel step"      # optional
    sharing = "equal"              # optional: equal (default) or maxmin
    ecmp = "ideal"                 # optional: ideal (default) or hash

    [[member]]
    name = "tp"                    # unique
    collective = "all_reduce"      # nccl-tests names
    size = "64MiB"                 # nccl-tests' size of one communicator's collective
    groups = "per_domain"          # optional: communicators at once (default 1), a number or a symbol:
                                   # per_domain, per_server, per_pod_position, pods, domains
    group_layout = "blocked"       # optional: strided or blocked (default: blocked for per_domain and
                                   # per_server, whose communicators are one domain or server; else strided)
    # optional, as for `topo estimate`: gpus, ranks ("0-7,64-71" or a list), placement, rail, rank_order,
    # algorithm, protocol, channels, chunks, stages

Every key is checked; an unknown one is an error naming the file, the member and the allowed keys.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import TopoError, closest
from ..inputs import is_input_file, read_toml
from ..resources import data_dir
from .contention import SHARING_MODES
from .options import EstimateOptions
from .traffic import SYMBOLS, Member

__all__ = ["load_traffic", "traffic_from_dict", "bundled_traffic", "TOP_KEYS", "MEMBER_KEYS"]

TOP_KEYS = ("name", "sharing", "ecmp", "subflows", "member")
_OPTION_KEYS = ("gpus", "ranks", "placement", "rail", "groups", "group_layout", "rank_order", "algorithm",
                "protocol", "channels", "chunks", "stages")
MEMBER_KEYS = ("name", "collective", "size") + _OPTION_KEYS


def bundled_traffic() -> dict[str, Path]:
    """Bundled traffic files by name (``topo/data/traffic/*.toml``).

    Returns
    -------
    dict of str to Path
    """
    d = data_dir("traffic")
    return {p.stem: p for p in sorted(d.glob("*.toml"))}


def load_traffic(path_or_name: str | Path) -> tuple[dict, list[Member]]:
    """Read a traffic file, or a bundled one by name.

    Parameters
    ----------
    path_or_name : str or Path

    Returns
    -------
    settings : dict
        name, sharing, ecmp and subflows.
    members : list of Member

    Raises
    ------
    TopoError
        A missing or unreadable file, invalid TOML, or a bad key or value (with the file and key).
    """
    p = Path(path_or_name)
    if not is_input_file(p):  # a name that is not a file (nor a folder, device or pipe): a bundled one
        bundled = bundled_traffic()
        if str(path_or_name) not in bundled:
            raise TopoError(f"no such traffic file; bundled: {', '.join(bundled) or '(none)'}",
                            source=str(path_or_name))
        p = bundled[str(path_or_name)]
    data = read_toml(p, "traffic file", source=str(path_or_name))
    return traffic_from_dict(data, source=str(path_or_name))


def _unknown(key: str, allowed, source: str, where: str) -> TopoError:
    close = closest(key, allowed)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return TopoError(f"unknown key {key!r}; allowed: {', '.join(allowed)}{hint}", source=source,
                     key=f"{where}{key}")


def traffic_from_dict(data: dict, source: str = "<traffic>") -> tuple[dict, list[Member]]:
    """Validate a parsed traffic file.

    Parameters
    ----------
    data : dict
        The TOML document.
    source : str
        Names the file in errors.

    Returns
    -------
    settings : dict
    members : list of Member

    Raises
    ------
    TopoError
    """
    for k in data:
        if k not in TOP_KEYS:
            raise _unknown(k, TOP_KEYS, source, "")
    settings = {"name": str(data.get("name", Path(source).stem)), "sharing": data.get("sharing", "equal"),
                "ecmp": data.get("ecmp", "ideal"), "subflows": data.get("subflows", 1)}
    if settings["sharing"] not in SHARING_MODES:
        raise TopoError(f"unknown sharing model {settings['sharing']!r}; allowed: {', '.join(SHARING_MODES)}",
                        source=source, key="sharing")
    try:
        EstimateOptions.from_kwargs(ecmp=settings["ecmp"], subflows=settings["subflows"])
    except TopoError as exc:
        raise TopoError(exc.message, source=source, key=exc.key) from None
    raw = data.get("member")
    if not isinstance(raw, list) or not raw or not all(isinstance(m, dict) for m in raw):
        raise TopoError("needs at least one [[member]] table", source=source, key="member")
    members = []
    for i, m in enumerate(raw):
        where = f"member[{i}]."
        for k in m:
            if k not in MEMBER_KEYS:
                raise _unknown(k, MEMBER_KEYS, source, where)
        for k in ("name", "collective", "size"):
            if k not in m:
                raise TopoError("missing; every member needs name, collective and size", source=source,
                                key=f"{where}{k}")
        opts = {k: m[k] for k in _OPTION_KEYS if k in m}
        symbolic = []
        for k in ("groups", "stages", "gpus"):
            if isinstance(opts.get(k), str):
                if opts[k] not in SYMBOLS:
                    raise TopoError(f"a whole number or one of {', '.join(SYMBOLS)}, got {opts[k]!r}",
                                    source=source, key=f"{where}{k}")
                symbolic.append((k, opts.pop(k)))
        # per_domain / per_server mean one communicator per domain / server: blocked unless the file says otherwise
        layout = _SYMBOL_LAYOUT.get(dict(symbolic).get("groups"))
        if layout and "group_layout" not in opts:
            opts["group_layout"] = layout
        if isinstance(opts.get("ranks"), str):
            opts["ranks"] = _ranks(opts["ranks"], source, where)
        try:
            options = EstimateOptions.from_kwargs(**opts)
        except TopoError as exc:
            raise TopoError(exc.message, source=source, key=f"{where}{exc.key}") from None
        members.append(Member(str(m["name"]), str(m["collective"]), m["size"], options, tuple(symbolic)))
    return settings, members


_SYMBOL_LAYOUT = {"per_domain": "blocked", "per_server": "blocked", "per_pod_position": "strided"}


def _ranks(text: str, source: str, where: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        try:
            lo, hi = int(a), int(b or a)
        except ValueError:
            raise TopoError(f"cannot read {part!r}; write GPU ids and ranges such as 0-7,64-71", source=source,
                            key=f"{where}ranks") from None
        out.extend(range(lo, hi + 1))
    return out
