"""Standard output whose reader may go away: ``sharewise show 1 | head -1`` closes the pipe after
one line, which is no failure of the command. Every command then ends quietly with status 0
(Python's recipe, the ``signal`` module's "Note on SIGPIPE"), whether the pipe breaks while the
command writes (:class:`PipeSafeGroup`; rich's console passes the error on,
:class:`sharewise.render.PipeConsole`) or when its output is flushed at the end
(:func:`sharewise.cli.main`)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click


def quiet_stdout() -> None:
    """Point standard output at the null device: its reader has gone, and what is still buffered
    would fail again when the interpreter flushes it on exit (status 120)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - it is standard output until exit
    finally:
        os.close(devnull)


class PipeSafeGroup(click.Group):
    """A command group whose commands end with status 0 when their reader closes the pipe."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a broken pipe on standard output ends it as done."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # click would exit with status 1 here, as for a failure
            quiet_stdout()
            raise click.exceptions.Exit(0) from None
