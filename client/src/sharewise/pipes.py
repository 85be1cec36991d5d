"""Standard output whose reader may go away: ``sharewise show 1 | head -1`` closes the pipe after
one line, which is no failure of the command. Every command then ends quietly with status 0
(Python's recipe, the ``signal`` module's "Note on SIGPIPE"), whether the pipe breaks while the
command writes (:class:`PipeSafeGroup`; rich's console passes the error on,
:class:`sharewise.render.PipeConsole`) or when its output is flushed at the end
(:func:`sharewise.cli.main`).

A command that still has work to do after a line it prints (``cancel 3 4 5`` reports each job
as it goes) writes that line with :func:`echo`, and output after which its exit status still
matters in :func:`output_only`: a reader gone silences the rest of the output, never the rest of
the work nor the status it earns.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

import click


def quiet(stream: TextIO) -> None:
    """Point ``stream`` (standard output or standard error) at the null device: its reader has
    gone, and what is still buffered would fail again when the interpreter flushes it on exit
    (status 120)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        silent = open(os.devnull, "w")  # noqa: SIM115 - it is the stream until exit
        if stream is sys.stderr:
            sys.stderr = silent
        else:
            sys.stdout = silent
    finally:
        os.close(devnull)


def open_closed_streams() -> None:
    """Give a standard stream the shell closed (``sharewise login 0<&-``, ``sharewise show 1
    >&-``; Python then starts with it ``None``) the null device: standard input reads as empty,
    and output goes nowhere, as to a reader gone, while the command does its work."""
    if sys.stdin is None:
        sys.stdin = open(os.devnull)  # noqa: SIM115 - it is standard input until exit
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - it is standard output until exit
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - it is standard error until exit


def quiet_stdout() -> None:
    """:func:`quiet` for standard output."""
    quiet(sys.stdout)


@contextlib.contextmanager
def output_only(err: bool = False) -> Iterator[None]:
    """A block that only writes to standard output (``err``: standard error): a reader gone (a
    broken pipe) ends the block and points the stream at the null device instead of raising, so
    the command goes on with its work and keeps its exit status."""
    try:
        yield
    except BrokenPipeError:
        quiet(sys.stderr if err else sys.stdout)


def echo(message: str, err: bool = False) -> None:
    """``click.echo(message, err=err)`` in :func:`output_only`: a reader gone drops the line."""
    with output_only(err):
        click.echo(message, err=err)


class PipeSafeGroup(click.Group):
    """A command group whose commands end with status 0 when their reader closes the pipe."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        """Read the group's own options; a broken pipe while one of them prints (``--help``,
        ``--version``) ends the command as done."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except BrokenPipeError:
            # click's main would exit with status 1 here: this is before any command runs
            quiet_stdout()
            raise click.exceptions.Exit(0) from None

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a broken pipe on standard output ends it as done."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # click would exit with status 1 here, as for a failure
            quiet_stdout()
            raise click.exceptions.Exit(0) from None
