"""How an override is named in messages: ``--set KEY=VALUE``, or ``--unset KEY`` when that is how it was given.

``--unset KEY`` is ``--set KEY=`` (an empty value removes the key), and both reach
:func:`topo.spec.load.apply_overrides` as the text ``KEY=``; an :class:`Unset` carries which flag the user typed,
so that an error about it names that flag (``--unset gpu``, not ``--set gpu=``).
"""

from __future__ import annotations

__all__ = ["Unset", "override_label"]


class Unset(str):
    """The override ``KEY=`` as ``--unset KEY`` gives it (its text is ``KEY=``, as every override's)."""


def override_label(item: str) -> str:
    """The flag and value an override was given as, for messages.

    Parameters
    ----------
    item : str
        ``KEY=VALUE`` (an :class:`Unset` when ``--unset`` gave it).

    Returns
    -------
    str
        ``--set KEY=VALUE`` or ``--unset KEY``.

    Examples
    --------
    >>> override_label("cluster.num_units=8"), override_label(Unset("gpu="))
    ('--set cluster.num_units=8', '--unset gpu')
    """
    return f"--unset {item[:-1]}" if isinstance(item, Unset) else f"--set {item}"
