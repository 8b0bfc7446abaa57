"""Entry point: parse arguments, run one command, turn library errors into one line and exit status 2."""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback

from .. import __version__
from ..errors import RegionNotSpec, StudyNotSpec, TopoError, one_line
from .flags import FLAGS

__all__ = ["main", "build_parser", "COMMANDS"]

# command -> its module in topo.cli (which declares the command's flags in ``register`` and runs it in ``run``), in
# the order `topo --help` lists them. A command's module, and the library behind it, is imported only when the
# parser for that command is built: `topo describe` does not import the planner, the training model or the
# calibration (every command imported every command's library before, ~110 of topo's modules).
COMMANDS = {"describe": "describe", "estimate": "estimate", "export": "export", "list": "listing",
            "report": "report", "train": "train", "plan": "plan", "profile": "profile", "compare": "compare",
            "calibrate": "calibrate", "sweep": "sweep"}


# library option names -> the flag that sets them on every command that has it (from the one flag map)
_SHARED_FLAGS = {k: FLAGS[k] for k in ("fail",)}


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line ``error: ...`` with exit status 2."""

    def error(self, message):  # noqa: D401
        sys.stderr.write(one_line(f"error: {self.prog}: {message} (see '{self.prog} --help')") + "\n")
        raise SystemExit(2)


def command_module(name: str):
    """The module of ``topo NAME`` (imported on first use).

    Parameters
    ----------
    name : str
        A command, a key of :data:`COMMANDS`.

    Returns
    -------
    module
        Its ``register(sub)`` adds the command's parser; the parser's ``func`` runs it.
    """
    return importlib.import_module(f"{__package__}.{COMMANDS[name]}")


def command_in(argv: list[str]) -> str | None:
    """The command an argument list runs, when it can be told without parsing: its first argument after any
    ``--debug``. None when that is not a command (``--help``, ``--version``, a typo): the whole parser is needed."""
    args = list(argv)
    while args and args[0] == "--debug":
        args.pop(0)
    return args[0] if args and args[0] in COMMANDS else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``topo`` parser.

    Parameters
    ----------
    command : str, optional
        Build only this command's parser (and import only its module), for running it; default: every command's
        (``topo --help``, a command that is not one, the tests of the flags).

    Returns
    -------
    argparse.ArgumentParser
    """
    parser = _Parser(prog="topo", description="GPU-cluster network topology and collective-communication "
                     "modeler. Every command works on the bundled default cluster when no SPEC is given.")

    parser.add_argument("--version", action="version", version=f"topo {__version__}")
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in [command] if command in COMMANDS else COMMANDS:
        command_module(name).register(sub)
    for command in sub.choices.values():  # `topo plan ... --debug` as well as `topo --debug plan ...`
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show a traceback on errors")
    parser.commands = sub.choices  # each command's parser, by name (empty_option)
    return parser


# options whose command says more than empty_option can about an empty value (``-o ''``: give a name, or -)
_OWN_EMPTY_MESSAGE = {"output"}


def empty_option(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TopoError | None:
    """An option or argument given as the empty string (an unset shell variable), as an error.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The ``topo`` parser (:func:`build_parser`).
    args : argparse.Namespace
        What it parsed.

    Returns
    -------
    TopoError or None
        Keyed by the flag (or the argument's name): a command took ``''`` as not given (``train --layout ''`` ran
        the default layout, ``plan --model ''`` planned without the model, ``report --train ''`` left the job out)
        or named the working folder (``--model ''``: ``.: is not a regular file``). None when nothing is empty;
        an option's own empty constant or default (``topo sweep --report`` without a FILE) is not given by hand.
    """
    command = getattr(parser, "commands", {}).get(getattr(args, "command", None))
    for action in command._actions if command is not None else ():
        value = getattr(args, action.dest, None)
        values = value if isinstance(value, list) else [value]
        blank = [v for v in values
                 if isinstance(v, str) and not v.strip() and v not in (action.const, action.default)]
        if action.dest in _OWN_EMPTY_MESSAGE or not blank:
            continue
        name = max(action.option_strings, key=len) if action.option_strings else (action.metavar or action.dest)
        return TopoError(f"is empty, got {blank[0]!r}; give a value or leave it out (see 'topo {args.command} "
                         "--help')", key=name)
    return None


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(command_in(argv))
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's parser: 'topo report: ... (see topo report --help)', not 'topo: ...'
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        empty = empty_option(parser, args)
        if empty is not None:
            raise empty
        return int(args.func(args) or 0)
    except TopoError as exc:
        if args.debug:
            traceback.print_exc()
        if exc.key in _SHARED_FLAGS and not exc.source:  # options every command has: name the flag
            exc = TopoError(exc.message, key=_SHARED_FLAGS[exc.key])
        if isinstance(exc, StudyNotSpec):  # the library names no command: say how a study runs
            exc = TopoError(f"{exc.message}: run it with 'topo sweep {exc.source}' (add --report for its page)",
                            source=exc.source, key=exc.key)
        if isinstance(exc, RegionNotSpec):  # the library names no command: say which take a region
            exc = TopoError(f"{exc.message} (describe, estimate, train, plan, report, export and sweep take a region "
                            "alone; compare, calibrate, a traffic mix and designs side by side need one fabric)",
                            source=exc.source, key=exc.key)
        sys.stderr.write(f"error: {exc.line()}\n")
        return 2
    except BrokenPipeError:  # e.g. piped into head
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except MemoryError as exc:  # a cluster or job too large for this machine: not a bug to report
        if args.debug:
            traceback.print_exc()
        sys.stderr.write(one_line(f"error: out of memory{f' ({exc})' if str(exc) else ''}: what was asked does not "
                                  "fit in this machine's memory; ask for fewer GPUs or a smaller cluster") + "\n")
        return 2
    except Exception as exc:  # a bug, not bad input: say so, and how to see more
        if args.debug:
            raise
        sys.stderr.write(one_line(f"error: internal error ({type(exc).__name__}: {exc}); rerun with --debug and "
                                  "report it") + "\n")
        return 1
