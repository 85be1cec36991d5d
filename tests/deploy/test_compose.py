"""``docker-compose.yml`` works as written: every service's command names programs, modules and
options that exist, its environment comes from ``.env.example``, the host names it calls are
services and admitted by ``ALLOWED_HOSTS``, the set-up steps of its header parse, and the token
file ``load_cluster`` writes in ``web`` is the one the agents read. ``docker compose config``
validates the file where Docker is installed (not here: that check skips with the reason)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import environ
import pytest
import yaml
from django.core.management import get_commands, load_command_class
from django.http.request import validate_host

from agent.cli import parser as agent_parser

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]


def env_example() -> dict[str, str]:
    """``.env.example`` as django-environ reads a ``.env`` (what every service's env_file gives)."""
    values: dict[str, str] = {}
    for line in (REPO / ".env.example").read_text().splitlines():
        match = re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
        if match:
            values[match.group(1)] = match.group(2).strip()
    return values


def workdir() -> PurePosixPath:
    """The image's working directory (the Dockerfile's last WORKDIR)."""
    found = re.findall(r"^WORKDIR\s+(\S+)", (REPO / "Dockerfile").read_text(), re.MULTILINE)
    return PurePosixPath(found[-1])


def command_of(service: dict[str, Any]) -> str:
    """The service's command as one shell string (a list is ``sh -c SCRIPT`` or argv)."""
    command = service.get("command", "")
    if isinstance(command, list):
        if command[:2] == ["sh", "-c"]:
            return str(command[2])
        return shlex.join(command)
    return str(command)


def expand(text: str, env: dict[str, str]) -> str:
    """Shell variables ``$${X:-d}`` / ``${X:-d}`` / ``$X`` of a compose command, as the container's
    shell expands them with the service's environment."""
    text = text.replace("$$", "$")
    text = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: env.get(m.group(1), m.group(2)), text)
    text = re.sub(r"\$\{(\w+)\}", lambda m: env.get(m.group(1), ""), text)
    return re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), text)


def programs(script: str) -> list[list[str]]:
    """The simple commands of a ``sh -c`` script (split at ``&&`` and ``;``), ``exec`` dropped."""
    found = []
    for part in re.split(r"&&|;", script):
        words = shlex.split(part)
        if words and words[0] == "exec":
            words = words[1:]
        if words and words[0] not in ("until", "do", "done", "sleep", "["):
            found.append(words)
    return found


def header_steps() -> list[list[str]]:
    """The ``docker compose exec web ...`` set-up steps of the file's header comment."""
    steps = []
    for line in (REPO / "docker-compose.yml").read_text().splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("# ").split("  #")[0]
        if text.startswith("docker compose exec web "):
            steps.append(shlex.split(text)[len(["docker", "compose", "exec", "web"]) :])
    return steps


def test_every_service_command_runs_something_that_exists() -> None:
    env = env_example()
    checked = 0
    for name, service in SERVICES.items():
        if "build" not in service and service.get("image") != "sharewise:latest":
            continue  # postgres, redis: their images' own commands
        for words in programs(expand(command_of(service), env)):
            checked += 1
            if words[:3] == ["python", "manage.py", words[2] if len(words) > 2 else ""]:
                assert words[2] in get_commands(), f"{name}: no manage.py command {words[2]}"
            elif words[0] == "gunicorn":
                assert words[1] == "config.wsgi" and (REPO / "config" / "wsgi.py").exists()
                assert "0.0.0.0:8000" in words, f"{name}: gunicorn must listen where ports/healthcheck expect"
            elif words[0] == "celery":
                assert words[1:3] == ["-A", "config"] and words[3] in ("worker", "beat")
                if "-Q" in words:
                    assert words[words.index("-Q") + 1] == "scheduler"  # CELERY_TASK_ROUTES' queue
            elif words[:3] == ["python", "-m", "agent"]:
                args = agent_parser().parse_args(words[3:])  # exits (fails the test) on a bad option
                assert args.api == "http://web:8000" and args.broker == env["REDIS_URL"]
            else:
                pytest.fail(f"{name}: unexpected command {words}")
    assert checked >= 5


def test_the_environment_comes_from_env_example() -> None:
    env = env_example()
    text = (REPO / "docker-compose.yml").read_text()
    used = set(re.findall(r"\$\$?\{(\w+)(?::[-?][^}]*)?\}", text))
    defaulted = set(re.findall(r"\$\$?\{(\w+):-", text))
    missing = sorted(used - set(env) - defaulted)
    assert not missing, f"docker-compose.yml uses {missing}, which .env.example does not set"
    for name, service in SERVICES.items():
        if service.get("image") == "sharewise:latest" or "build" in service:
            assert service.get("env_file") == ".env", f"{name} must read .env (copied from .env.example)"


def test_host_names_are_services_and_allowed() -> None:
    env = env_example()
    allowed = environ.Env().parse_value(env["ALLOWED_HOSTS"], list)
    called = set()
    for service in SERVICES.values():
        called |= {
            urlsplit(u).hostname for u in re.findall(r"https?://[\w.-]+(?::\d+)?", command_of(service))
        }
    called.discard("127.0.0.1")
    assert called == {"web"}
    for host in called:
        assert host in SERVICES and validate_host(host, allowed), f"ALLOWED_HOSTS must admit {host!r}"
    for variable in ("DATABASE_URL", "REDIS_URL", "CACHE_URL"):
        assert urlsplit(env[variable]).hostname in SERVICES, f"{variable} names no service"
    database = urlsplit(env["DATABASE_URL"])
    assert (database.username, database.password, database.path.lstrip("/")) == (
        env["POSTGRES_USER"],
        env["POSTGRES_PASSWORD"],
        env["POSTGRES_DB"],
    )


def test_the_header_steps_parse_and_the_agents_read_the_token_file_load_cluster_writes() -> None:
    steps = header_steps()
    assert [s[2] for s in steps] == ["createsuperuser", "load_cluster", "create_tenant"]
    for words in steps:
        assert words[:2] == ["python", "manage.py"]
        command = load_command_class(get_commands()[words[2]], words[2])
        command.create_parser("manage.py", words[2]).parse_args(words[3:])  # fails on a bad option
    load = next(s for s in steps if s[2] == "load_cluster")
    written = workdir() / load[load.index("--token-file") + 1]

    def mounted(service: str, path: PurePosixPath) -> str:
        for volume in SERVICES[service].get("volumes", []):
            source, target = volume.split(":")[:2]
            if path.is_relative_to(target):
                return source
        pytest.fail(f"{path} is in no volume of {service}")

    agents = SERVICES["agents"]
    words = programs(expand(command_of(agents), env_example()))[-1]
    read = workdir() / words[words.index("--token-file") + 1]
    assert read == written
    assert mounted("web", written) == mounted("agents", read) in COMPOSE.get("volumes", {})


def compose_command() -> list[str] | None:
    """``docker compose`` (the plugin) or ``docker-compose`` (the standalone program), whichever is
    installed; ``None`` when neither is."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    standalone = shutil.which("docker-compose")
    return [standalone] if standalone else None


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    compose = compose_command()
    if compose is None:
        pytest.skip(
            "neither `docker compose` nor `docker-compose` is installed: the file is not validated by Docker"
        )
    # a fresh checkout's set-up: the file beside a .env copied from .env.example
    shutil.copy(REPO / "docker-compose.yml", tmp_path / "docker-compose.yml")
    shutil.copy(REPO / ".env.example", tmp_path / ".env")
    result = subprocess.run(
        [*compose, "--profile", "emulated", "config", "-q"], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
