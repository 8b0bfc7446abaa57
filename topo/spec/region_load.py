"""Reading a region of several sites: the region file, its ``--set`` overrides, then each site's fabric spec.

Errors are the spec loader's one-line errors; a site's own spec error names the site (``sites[1] (west)``).
"""

from __future__ import annotations

import os
import typing
from pathlib import Path

from pydantic import ValidationError

from ..errors import RegionNotSpec, TopoError
from ..inputs import read_toml
from .load import display_path, _to_topo_error, apply_overrides, load_spec, resolve_spec_path, spec_from_dict
from .model import Spec
from .sites import RegionSpec, is_region_data

__all__ = ["load_region", "region_from_dict", "is_region_file", "site_specs", "site_spec_files", "site_profile_keys"]


def is_region_file(name_or_path) -> bool:
    """True when ``name_or_path`` (a file or a bundled name; None is the default spec) is a region of several sites."""
    if name_or_path is None:
        return False
    try:
        path = resolve_spec_path(name_or_path)
    except TopoError:
        return False
    return is_region_data(read_toml(path, "spec file (.toml)", source=display_path(path)))


def load_region(name_or_path, overrides: typing.Sequence[str] = ()) -> tuple[RegionSpec, list[Spec]]:
    """The region spec and one fabric spec per ``[[sites]]`` entry (not per site: ``count`` alike sites share it).

    Parameters
    ----------
    name_or_path : str or Path
        A region file or a bundled region's name.
    overrides : sequence of str
        ``KEY=VALUE`` overrides of the region file (``interconnect.distance_km=500``).

    Returns
    -------
    tuple of (RegionSpec, list of Spec)
    """
    path = resolve_spec_path(name_or_path)
    source = display_path(path)
    data = read_toml(path, "spec file (.toml)", source=source)
    region = region_from_dict(data, source, overrides)
    region._path = str(path)
    return region, site_specs(region, path.parent, source)


def region_from_dict(data: dict, source: str = "<region>", overrides: typing.Sequence[str] = ()) -> RegionSpec:
    """Validate a region given as a dict (the parsed TOML), after applying ``KEY=VALUE`` overrides."""
    data, set_paths = apply_overrides(data, overrides, source=source)
    try:
        region = RegionSpec.model_validate(data)
    except ValidationError as exc:
        raise _to_topo_error(exc, source, set_paths, root=RegionSpec) from None
    region._origin = source
    region._set_paths = set_paths
    return region


def site_specs(region: RegionSpec, folder: Path, source: str) -> list[Spec]:
    """The fabric spec of every ``[[sites]]`` entry: a file beside the region file, a bundled name, or inline."""
    out = []
    for i, site in enumerate(region.sites):
        where = f"{source}: sites[{i}] ({site.name})"
        try:
            if site.fabric is not None:
                out.append(spec_from_dict(site.fabric, source=f"{where}.fabric"))
                continue
            path = resolve_spec_path(_site_file(site, folder), one_site=True)  # its error: one-fabric names only
            out.append(load_spec(path, site.set))
        except RegionNotSpec as exc:  # named by the region's file and key, with the nested file (small50 left it)
            raise TopoError(f"{site.spec!r} (site {site.name}) is a region of several sites ([[sites]], {exc.source}), "
                            "and a site is one fabric; allowed: one fabric's spec file or bundled name (e.g. "
                            "dgx-h100-superpod) or an inline [sites.fabric] table: name one of its sites' specs",
                            source=source, key=f"sites[{i}].spec") from None
        except TopoError as exc:
            if site.fabric is None and exc.source:  # the site's own file: its line, column or key is read there
                where += f": {exc.source}"
            raise TopoError(exc.message, source=where if site.fabric is None else exc.source, key=exc.key) from None
    return out


def _site_file(site, folder: Path) -> Path | str:
    """What a site's ``spec`` names: a file beside the region file, else the path or bundled name as given. Anything
    beside it by that name counts (a folder, a pipe: :func:`load_spec` refuses it as what it is, where ``is_file``
    sent it on to the working folder, "no such spec file")."""
    beside = folder / site.spec
    return beside if os.path.lexists(beside) else site.spec


def site_profile_keys(region: RegionSpec) -> list[str | None]:
    """Each ``[[sites]]`` entry's ``profile`` key (None where it gives none): a file beside the region file, else
    the name or path as given, as a site's ``spec`` is found (reg70).

    Parameters
    ----------
    region : RegionSpec

    Returns
    -------
    list of str or None
    """
    folder = Path(region.input_path).parent if region.input_path else None
    out = []
    for site in region.sites:
        beside = folder / site.profile if folder is not None and site.profile else None
        out.append(str(beside) if beside is not None and os.path.lexists(beside) else site.profile)
    return out


def site_spec_files(region: RegionSpec) -> list[str]:
    """The spec files (or bundled names) the sites of a loaded region read: inputs no output may replace.

    Parameters
    ----------
    region : RegionSpec
        As :func:`load_region` returns it (it knows its file).

    Returns
    -------
    list of str
    """
    folder = Path(region.input_path).parent
    return [str(_site_file(site, folder)) for site in region.sites if site.fabric is None]
