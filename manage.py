#!/usr/bin/env python
"""Django's command-line utility for Sharewise administrative tasks."""

import os
import sys


def main() -> None:
    """Run a management command with ``config.settings`` unless DJANGO_SETTINGS_MODULE says otherwise;
    a bad setting prints one line and exits 2, a database that cannot be used one line and exits 1
    (config/startup.py)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    from config.startup import database_errors_in_one_line, load_settings_or_exit

    load_settings_or_exit()  # a bad setting: one line and exit status 2, not a traceback

    with database_errors_in_one_line():
        execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
