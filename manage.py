#!/usr/bin/env python
"""Django's command-line utility for Sharewise administrative tasks."""

import os
import sys


def main() -> None:
    """Run a management command with ``config.settings`` unless DJANGO_SETTINGS_MODULE says otherwise."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
