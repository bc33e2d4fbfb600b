"""The ``cmix`` command: one subcommand per pipeline step, each a thin shell over the package.

The steps' parsers live beside each other by what they work on: :mod:`.cohort` (sample
filters, variant QC, KING and PCA, the steps checked against plink2), :mod:`.traits`
(discovery GWAS, SNP selection, the trait's store), :mod:`.learn` (train, predict,
report), :mod:`.simulate` and :mod:`.setup` (check-config, install-profile); each
parser declares the outputs its command line names (``_outputs``), beside its options.
A step's modules are imported inside its run function, so ``cmix --help`` and the
start-up of every step stay fast.

A :class:`cmix.errors.CmixError` (a user's mistake) is printed as one line, ``cmix
<step>: error: ...``, with exit status 1. Before a step runs, the outputs its command
line names are checked against its inputs and locked (:func:`cmix.outputs.claim_outputs`):
an output never deletes a folder cmix did not write, never overwrites an input, never
lands in a store or names the current folder, and has one writer at a time.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import gc
import sys
from pathlib import Path

from .. import __version__
from ..errors import CmixError
from ..outputs import claim_outputs
from . import cohort, learn, setup, simulate, traits

#: Every subcommand's parser, in the order ``cmix --help`` lists them.
SUBCOMMANDS = [simulate.add_simulate, setup.add_check_config, setup.add_install_profile,
               cohort.add_samples, cohort.add_qc, cohort.add_unrelated, cohort.add_king_tile,
               cohort.add_pca, traits.add_gwas, traits.add_select, traits.add_bgen_index,
               traits.add_store, traits.add_verify, learn.add_train, learn.add_predict,
               learn.add_report]


def _inputs(args, outputs) -> list[tuple]:
    """(option, text) of every argument of a step that may name an input file, prefix
    or folder: all but its outputs (:func:`cmix.outputs.input_paths` finds what they name).
    bgen-index's BGEN files are exact paths (their .bgi is its output)."""
    if args.command == "bgen-index":
        return [("BGEN file", Path(f)) for f in args.bgen]
    flags = {o.flag for o in outputs} | {"--out", "--ids-out", "--dest"}
    pairs = []
    for dest, value in vars(args).items():
        flag = f"--{dest.replace('_', '-')}"
        if flag in flags or dest.startswith("_") or dest in ("func", "command", "name"):
            continue
        pairs += [(flag, v) for v in (value if isinstance(value, list) else [value])
                  if isinstance(v, str)]
    return pairs


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cmix",
        description="Contrastive Mixup on UK Biobank-style genotypes. Each subcommand is "
                    "one pipeline step; `cmix STEP --help` describes it.")
    parser.add_argument("--version", action="version", version=f"cmix {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="STEP")
    sub.required = True
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # At exit, before the interpreter's last garbage collections, move every object to
    # gc's permanent generation, so those collections skip the millions of objects of
    # torch, scikit-learn and dask (about 1 s after `import torch`). Every output is
    # written and closed before a step returns; memory goes back to the system at exit.
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    try:
        parser = build_parser()         # reads the methods, installed plugins included
    except CmixError as err:
        print(f"cmix: error: {err}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    try:
        outputs = args._outputs(args)
        with claim_outputs(args.command, outputs, _inputs(args, outputs)):
            args.func(args)
    except CmixError as err:
        print(f"cmix {args.command}: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        # a file the step could not read or write (a folder, no permission, disk full)
        if err.errno in (errno.ENOSPC, errno.EDQUOT):
            what = "no space left on device"
        elif err.filename is not None:
            what = err.strerror or str(err)
        else:
            raise
        print(f"cmix {args.command}: error: {err.filename or 'output'}: {what}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"cmix {args.command}: interrupted", file=sys.stderr)
        return 130
    return 0

