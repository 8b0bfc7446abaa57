"""Entry point: parse arguments, run one command, turn library errors into one line and exit status 2."""

from __future__ import annotations

import argparse
import sys
import traceback

from .. import __version__
from ..errors import TopoError, one_line
from . import calibrate, compare, describe, estimate, export, listing, plan, profile, report, sweep, train

__all__ = ["main", "build_parser"]

COMMANDS = [describe, estimate, export, listing, report, train, plan, profile, compare, calibrate, sweep]


# library option names -> the flag that sets them on every command that has it (from the one flag map)
_SHARED_FLAGS = {k: estimate.FLAGS[k] for k in ("fail",)}


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line ``error: ...`` with exit status 2."""

    def error(self, message):  # noqa: D401
        sys.stderr.write(one_line(f"error: {self.prog}: {message} (see '{self.prog} --help')") + "\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="topo", description="GPU-cluster network topology and collective-communication "
                     "modeler. Every command works on the bundled default cluster when no SPEC is given.")

    parser.add_argument("--version", action="version", version=f"topo {__version__}")
    parser.add_argument("--debug", action="store_true", help="show a traceback on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module in COMMANDS:
        module.register(sub)
    for command in sub.choices.values():  # `topo plan ... --debug` as well as `topo --debug plan ...`
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show a traceback on errors")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TopoError as exc:
        if args.debug:
            traceback.print_exc()
        if exc.key in _SHARED_FLAGS and not exc.source:  # options every command has: name the flag
            exc = TopoError(exc.message, key=_SHARED_FLAGS[exc.key])
        sys.stderr.write(f"error: {exc.line()}\n")
        return 2
    except BrokenPipeError:  # e.g. piped into head
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
    except Exception as exc:  # a bug, not bad input: say so, and how to see more
        if args.debug:
            raise
        sys.stderr.write(one_line(f"error: internal error ({type(exc).__name__}: {exc}); rerun with --debug and "
                                  "report it") + "\n")
        return 1
