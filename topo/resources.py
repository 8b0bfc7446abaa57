"""Where topo's bundled files live: the specs in ``topologies/`` and the data in ``topo/data/``.

One home for these paths, so a module that moves between packages never recomputes them. The bundled specs
live once, in the repository's top-level ``topologies/`` folder; the wheel ships that folder as
``topo/topologies/`` (``[tool.setuptools] package-dir`` in ``pyproject.toml``). From a source checkout or an
editable install the folder beside the package is used.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["data_dir", "topologies_dir", "topologies_installed"]

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
