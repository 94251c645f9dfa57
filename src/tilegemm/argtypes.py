"""argparse types that the commands share: each turns one option's text into its value, or into
one line saying what the option takes (argparse prints it as `tilegemm CMD: argument --X: ...`).

    sizes("512,4096x14336x4096") == [(512, 512, 512), (4096, 14336, 4096)]
    positive_int("0")            -> ArgumentTypeError("'0': must be a positive integer")

The CLI and every tool module that adds a subcommand (`add_cli`) take their types from here, so a
bad number reads the same in each command and no tool imports the CLI.
"""

from __future__ import annotations

import argparse


def shape(text: str) -> tuple[int, int, int]:
    """'512' → (512, 512, 512); '4096x14336x4096' or '4096×14336×4096' → (M, N, K)."""
    from .bench.shapes import parse_shape

    try:
        return parse_shape(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: use N or MxNxK with positive integers") from None


def sizes(text: str) -> list[tuple[int, int, int]]:
    """Comma-separated shapes, each as `shape` reads it."""
    parts = [t.strip() for t in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError("no size given: use N or MxNxK, comma-separated")
    if not all(parts):
        raise argparse.ArgumentTypeError(f"an empty entry in {text!r}: use N or MxNxK, comma-separated")
    return [shape(t) for t in parts]


def _number(kind, least, strict: bool, what: str):
    """An argparse type: a number of `kind` at least `least` (above it where strict), said in one line."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if v != v or v < least or (strict and v == least) or v == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r}: must be {what}")
        return v
    return parse


positive_int = _number(int, 0, True, "a positive integer")
nonnegative_int = _number(int, 0, False, "an integer ≥ 0")
positive_float = _number(float, 0.0, True, "a positive number")
nonnegative_float = _number(float, 0.0, False, "a number ≥ 0")
