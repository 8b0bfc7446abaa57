"""Where topo's bundled files live: the specs in ``topologies/`` and the data in ``topo/data/``.

One home for these paths, so a module that moves between packages never recomputes them. The bundled specs
live once, in the repository's top-level ``topologies/`` folder; the wheel ships that folder as
``topo/topologies/`` (``[tool.setuptools] package-dir`` in ``pyproject.toml``). From a source checkout or an
editable install the folder beside the package is used.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["data_dir", "topologies_dir", "topologies_installed", "example_logs"]

_PACKAGE = Path(__file__).resolve().parent


def data_dir(*parts: str) -> Path:
    """A folder (or file) under the package's ``data/``: ``data_dir("catalog")`` -> ``.../topo/data/catalog``."""
    return _PACKAGE.joinpath("data", *parts)


def topologies_dir() -> Path:
    """The folder of bundled specs: ``topo/topologies/`` in an installed wheel, else the checkout's
    ``topologies/`` (a source tree or an editable install)."""
    installed = _PACKAGE / "topologies"
    if installed.is_dir():
        return installed
    return _PACKAGE.parent / "topologies"


def topologies_installed() -> bool:
    """Whether the bundled specs are the installed package's own copy (``topo/topologies/`` in a wheel), not a
    checkout's top-level ``topologies/`` folder."""
    return topologies_dir() == _PACKAGE / "topologies"


def example_logs() -> dict[str, Path]:
    """The bundled example nccl-tests logs (``topo/data/examples/*.log``, their sources in that folder's
    README.md), by name (the file's stem): what a wheel user can give ``topo compare`` and ``topo calibrate``.

    Returns
    -------
    dict of str to pathlib.Path
        Name -> file, sorted by name.
    """
    return {p.stem: p for p in sorted(data_dir("examples").glob("*.log"))}
