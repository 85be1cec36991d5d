"""``manage.py set_password USER --password-file FILE``: a dashboard password without a prompt.

Django's ``changepassword`` only asks on a terminal, and ``createsuperuser --noinput`` (which reads
``DJANGO_SUPERUSER_PASSWORD``) only makes superusers; scripts and CI need a tenant member's
password set without a person at the keyboard. The password is read from a file (``-``: standard
input) or from the environment variable ``SHAREWISE_PASSWORD``, never from the command line:
every user of the machine sees a process's arguments (``ps``, ``/proc/PID/cmdline``), while its
environment and a mode-0600 file are its owner's only.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.models import Membership

#: The environment variable read when no ``--password-file`` is given.
PASSWORD_ENV = "SHAREWISE_PASSWORD"


def read_password(path: str | None) -> str:
    """The password in the file at ``path`` (``"-"``: standard input; one final newline is not
    part of it), else in ``$SHAREWISE_PASSWORD``. Raises ``CommandError`` when the file cannot be
    read, neither source is given, or the password is empty, not valid UTF-8 or holds a control
    character (U+0000–U+001F, U+007F: e.g. a second final newline)."""
    if path is None:
        password = os.environ.get(PASSWORD_ENV)
        if password is None:
            raise CommandError(
                f"give the password in a file (--password-file FILE, - for stdin) or in ${PASSWORD_ENV}"
            )
    else:
        try:
            if path == "-":
                password = sys.stdin.read()
            else:
                with open(path, encoding="utf-8") as f:
                    password = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read --password-file {path}: {exc}") from None
        password = password.removesuffix("\n").removesuffix("\r")  # `echo` and editors add one
    if not password:
        raise CommandError("the password is empty")
    try:
        password.encode("utf-8")  # stdin and the environment carry undecodable bytes as surrogates
    except UnicodeEncodeError:
        raise CommandError("the password is not valid UTF-8 text") from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in password):
        # a second newline, a tab or a NUL: no login form can type it, so nobody could log in with it
        raise CommandError("the password holds a control character (a newline, tab or NUL): remove it")
    return password


class Command(BaseCommand):
    help = (
        f"Set a user's dashboard password without a prompt: from --password-file FILE (- for stdin) "
        f"or ${PASSWORD_ENV} (never on the command line, which ps shows to every user)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        # no abbreviations: `--password SECRET` must be refused, not read as --password-file
        parser.allow_abbrev = False
        parser.add_argument("username", help="the user, e.g. team-a-owner (create_tenant's member)")
        parser.add_argument(
            "--password-file",
            default=None,
            help="file holding the password (one final newline ignored); - reads stdin; "
            f"default ${PASSWORD_ENV}",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        users = get_user_model()
        try:
            user = users.objects.get(**{users.USERNAME_FIELD: options["username"]})
        except users.DoesNotExist:
            raise CommandError(f"no user named {options['username']!r}") from None
        password = read_password(options["password_file"])
        try:
            validate_password(password, user)  # the same rules as the dashboard's password change
        except ValidationError as exc:
            raise CommandError(f"password refused: {' '.join(exc.messages)}") from None
        user.set_password(password)
        user.save(update_fields=["password"])
        tenants = sorted(Membership.objects.filter(user=user).values_list("tenant__name", flat=True))
        view = (
            "cluster view"
            if user.is_staff
            else f"tenant view of {', '.join(tenants)}"
            if tenants
            else "no view"
        )
        self.stderr.write(f"Password of {user.get_username()} set ({view}); log in at /dashboard/login/.")
