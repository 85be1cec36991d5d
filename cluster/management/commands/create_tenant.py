"""``manage.py create_tenant NAME --quota-gpus N``: a tenant, its quota and a first member's API token."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cluster.models import Tenant


class Command(BaseCommand):
    help = "Create a tenant with a GPU quota and a first member (role owner); print the member's API token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="tenant name: 1-64 lowercase letters, digits and inner hyphens")
        parser.add_argument("--quota-gpus", type=int, required=True, help="guaranteed GPUs (>= 0)")
        parser.add_argument(
            "--borrow-limit", type=int, default=None, help="GPUs it may borrow beyond its quota"
        )
        parser.add_argument("--username", default=None, help="first member's user name (default NAME-owner)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            tenant, token = Tenant.create_with_owner(
                options["name"], options["quota_gpus"], options["borrow_limit"], options["username"]
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        owner = tenant.memberships.select_related("user").get().user.get_username()
        self.stderr.write(
            f"Created tenant {tenant.name} (quota {options['quota_gpus']} GPUs), member {owner}."
        )
        self.stderr.write("API token (send as 'Authorization: Token <token>'):")
        self.stdout.write(token)
