"""The ``hermes-replay`` command line.

Sub-commands live in ``hermes_replay._cli.<name>`` (see that package's docstring); they parse
flags and print, and leave the work to the library (``hermes_replay.cassette``,
``load_cassette`` and the private modules behind them).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import sys

# OSErrors that mean "this disk takes no more": no space, over quota, read-only, file too big
_DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})

# Order here is the order ``--help`` lists them in.
COMMANDS: tuple[str, ...] = (
    "record",
    "replay",
    "results",
    "watch",
    "passthrough",
    "ls",
    "show",
    "diff",
    "fork",
    "report",
    "scripted_endpoint",
    "check",
    "probe",
    "verify",
    "merge",
    "compact",
    "normalize",
    "trust",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hermes-replay",
        description="Record and replay the LLM traffic of Atropos agent environments.",
    )
    from hermes_replay import __version__
    from hermes_replay._cli._runner import EnvArgsParser

    parser.add_argument("--version", action="version", version=f"hermes-replay {__version__}")

    # every sub-command may take `-- MODE [env flags]` (record, replay, passthrough do)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=EnvArgsParser)
    for name in COMMANDS:
        importlib.import_module(f"hermes_replay._cli.{name}").register(sub)
    return parser


# the commands whose first argument is an environment: `-m MODULE` there means what it means
# to python (the module, from the working directory), and is given as that argument
_ENV_COMMANDS = frozenset({"record", "replay", "passthrough", "check", "probe", "watch"})


def _module_flag(argv: list[str]) -> list[str]:
    """``hermes-replay record -m pkg.env …`` as ``hermes-replay record pkg.env …``: before
    ``--`` only (after it the flags are the environment's own)."""
    if not argv or argv[0] not in _ENV_COMMANDS:
        return argv
    end = argv.index("--") if "--" in argv else len(argv)
    out = list(argv)
    for i in range(1, end - 1):
        if out[i] in ("-m", "--module"):
            out[i:i + 2] = [out[i + 1]]
            break
    return out


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_module_flag(list(sys.argv[1:] if argv is None else argv)))
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    from hermes_replay._runner.log_folder import LogFolderError
    from hermes_replay._runner.signals import describe, exit_code, terminate_as_interrupt

    # transformers' import-time advice that no torch is installed (the harness needs only the
    # tokenizers): a library line that would reach the terminal before any env log is open
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    try:
        with terminate_as_interrupt():
            return int(args.func(args) or 0)
    except KeyboardInterrupt as exc:  # Ctrl-C / SIGTERM outside a run (runs report their own)
        print(f"\nhermes-replay: {describe(exc)}.", file=sys.stderr)
        return exit_code(exc)
    except LogFolderError as exc:  # before the run: nothing was written
        print(exc, file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`hermes-replay ls | head`): not an error of ours. Point stdout
        # at /dev/null so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        if exc.errno not in _DISK_ERRORS:
            raise
        # a full disk (or a read-only one, a quota) met while writing outputs: say where and
        # what to do, as record/merge/compact do, rather than a traceback
        where = f" {exc.filename}" if exc.filename else ""
        print(f"hermes-replay {args.command}: cannot write{where}: {exc.strerror or exc}. "
              "Next step: free space on that disk (or point --out / -o at another one) and "
              "run it again.", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
