"""The dashboard in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``).

Logs in through the form, loads the dashboard, checks that the charts render, that every request
the browser made stayed on the live server (no CDN, no telemetry), and that after a scheduling
round places jobs the cluster map shows them within a few seconds. Saves
``artifacts/dashboard.png`` (full page) and ``artifacts/dashboard-top.png`` (first screen).
Nothing downloads a browser: the system's ``/usr/bin/chromium`` and ``/usr/bin/chromedriver``
are used, and the test skips (or fails under ``SHAREWISE_REQUIRE_SERVICES=1``) without them.
"""

from __future__ import annotations

import base64
import json
import shutil
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from cluster.models import Job, Node, Tenant
from scheduling.figures import SHARED_LABEL
from tests.conftest import skip_or_fail

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PASSWORD = "dashboard-test-passphrase-1"
LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}
# Switch off everything Chromium would otherwise fetch from the internet on its own.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--metrics-recording-only",
    "--no-default-browser-check",
    "--window-size=1400,4000",
)


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium driven by Selenium, logging every network request (performance log)."""
    if shutil.which(CHROMIUM) is None or shutil.which(CHROMEDRIVER) is None:
        skip_or_fail(
            "Debian's chromium and chromium-driver are not installed "
            "(apt-get install -y chromium chromium-driver)"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        skip_or_fail("selenium is not installed (pip install -r requirements-dev.txt)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def requested_urls(driver: Any) -> list[str]:
    """Every URL the browser asked for since the last call (DevTools ``Network.requestWillBeSent``)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``condition`` every 0.1 s until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)


def log_in(driver: Any, base_url: str) -> None:
    """Log in as ``admin`` through the form and wait for the dashboard."""
    from selenium.webdriver.common.by import By

    driver.get(f"{base_url}/dashboard/")
    assert "/dashboard/login/" in driver.current_url
    driver.find_element(By.ID, "id_username").send_keys("admin")
    driver.find_element(By.ID, "id_password").send_keys(PASSWORD)
    driver.find_element(By.ID, "login-button").click()
    wait_for(lambda: driver.current_url.rstrip("/").endswith("/dashboard"), 10, "the dashboard after login")


def trace_names(driver: Any, figure_id: str) -> list[str]:
    """Names of the traces Plotly has drawn in ``#figure_id`` (empty before the first draw)."""
    return driver.execute_script(
        "const gd = document.getElementById(arguments[0]);"
        "return gd && gd.data ? gd.data.map(t => t.name) : [];",
        figure_id,
    )


@pytest.mark.django_db(transaction=True)
def test_dashboard_in_headless_chromium(browser: Any, live_server: Any) -> None:
    from selenium.webdriver.common.by import By

    from scheduling.service import run_round

    for i in range(2):
        Node.register(f"node-0{i}", 4, 32_000, "v100")
    team_a, _ = Tenant.create_with_owner("team-a", quota_gpus=4, username="alice")
    team_c, _ = Tenant.create_with_owner("team-c", quota_gpus=4, username="charlie")
    get_user_model().objects.create_user("admin", password=PASSWORD, is_staff=True)

    log_in(browser, live_server.url)

    # charts render: the cluster map draws 8 free GPUs, and each section got its first payload
    wait_for(lambda: trace_names(browser, "fig-cluster_map") == ["free"], 15, "the empty cluster map")
    wait_for(
        lambda: browser.find_element(By.ID, "fig-cluster_map").find_elements(By.CSS_SELECTOR, "svg"),
        5,
        "the cluster map's SVG",
    )
    for section in ("cluster-map", "timeline", "decisions", "learning", "fairness", "quota", "queue"):
        wait_for(
            lambda s=section: browser.find_element(By.ID, s).get_attribute("data-updated"),
            10,
            f"the {section} section's first update",
        )
    assert browser.find_element(By.CSS_SELECTOR, "#queue .empty").text == "No job is waiting."

    # a round places jobs of both tenants; the map shows them within a few seconds
    # 7 gangs of 2 GPUs for 8 GPUs: four start alone, and SJF-BSBF may pair others where it pays
    for i, (model, batch) in enumerate(
        (
            ("resnet50", 128),
            ("vgg16", 64),
            ("lm", 40),
            ("transformer", 64),
            ("resnet18", 128),
            ("a3c", 4),
            ("resnet50", 64),
        )
    ):
        tenant = team_a if i % 2 == 0 else team_c
        Job.objects.create(
            tenant=tenant,
            name=f"{tenant.name[-1]}-{model}-{i}",
            model=model,
            batch_size=batch,
            iterations=5000 * (i + 1),
            gpus=2,
        )
    record = run_round(policy="sjf-bsbf")
    assert record is not None and record.n_started >= 1
    placed_tenants = set(Job.objects.filter(status=Job.Status.RUNNING).values_list("tenant__name", flat=True))
    assert placed_tenants == {"team-a", "team-c"}
    wait_for(
        lambda: set(trace_names(browser, "fig-cluster_map")) >= placed_tenants,
        6,
        "the placed jobs on the cluster map",
    )
    if any(d["shares"] for d in record.decision_list() if d["action"] == "start"):
        wait_for(lambda: SHARED_LABEL in trace_names(browser, "fig-cluster_map"), 6, "the shared mark")
    running = Job.objects.filter(status=Job.Status.RUNNING).first()
    wait_for(
        lambda: (
            f"job {running.pk} {running.name}"
            in browser.find_element(By.ID, "table-cluster_map").get_attribute("textContent")
        ),
        6,
        "the running job in the cluster map's table",
    )
    wait_for(lambda: trace_names(browser, "fig-round_counts"), 6, "the decisions section after the round")
    wait_for(
        lambda: "team-a" in browser.find_element(By.ID, "table-tenants").get_attribute("textContent"),
        6,
        "the fairness table",
    )

    urls = requested_urls(browser)
    assert any(u.endswith("/static/frontend/vendor/plotly.min.js") for u in urls)
    assert any("/dashboard/api/cluster-map.json" in u for u in urls)
    foreign = [
        u
        for u in urls
        if urlsplit(u).scheme not in ("data", "blob", "about") and urlsplit(u).hostname not in LOCAL_HOSTS
    ]
    assert foreign == [], f"requests left localhost: {foreign}"
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors

    ARTIFACTS.mkdir(exist_ok=True)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    save_screenshot(browser, ARTIFACTS / "dashboard.png", 1400, height)
    save_screenshot(browser, ARTIFACTS / "dashboard-top.png", 1400, 900)
    assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000


def save_screenshot(driver: Any, path: Path, width: int, height: int) -> None:
    """PNG of the page's top ``width`` × ``height`` CSS pixels (DevTools, no window resize, so
    Plotly does not redraw mid-capture)."""
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {
            "format": "png",
            "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        },
    )
    path.write_bytes(base64.b64decode(shot["data"]))


def x_axis(driver: Any, figure_id: str) -> dict[str, Any]:
    """The x axis Plotly drew in ``#figure_id`` (its type and title; empty before the first draw)."""
    return driver.execute_script(
        "const gd = document.getElementById(arguments[0]);"
        "if (!gd || !gd.layout || !gd.layout.xaxis) return {};"
        "const ax = gd.layout.xaxis; return {type: ax.type, title: (ax.title || {}).text || ''};",
        figure_id,
    )


def first_column(driver: Any, table_id: str) -> list[str]:
    """The first cell of every body row of the table in ``#table_id``."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#' + arguments[0] + ' tbody tr'))"
        ".map(tr => tr.cells[0].textContent);",
        table_id,
    )


@pytest.mark.django_db(transaction=True)
def test_dashboard_during_a_demo_replay_shows_trace_time_and_older_decisions(
    browser: Any, live_server: Any
) -> None:
    """As ``manage.py demo`` leaves the database mid-replay (its trace clock at 50x, a running
    job, a round every 60 s of trace time = 1.2 wall s for the last 2 wall minutes): the charts'
    time axes are trace seconds, and the rounds control shows decisions of 100 rounds (5,940 s of
    trace time) rather than the last few seconds."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from demo.database import record_trace_clock
    from scheduling.models import Round
    from tests.frontend.conftest import gpu, make_job, place

    Node.register("node-00", 4, 32_000, "v100")
    team_a, _ = Tenant.create_with_owner("team-a", quota_gpus=4, username="alice")
    get_user_model().objects.create_user("admin", password=PASSWORD, is_staff=True)
    now = timezone.now()
    origin = now - timedelta(seconds=125)
    record_trace_clock(50.0, 0.0, origin.timestamp(), "browser-test")
    running = make_job(team_a, "a-run", submitted_at=origin)
    place(running, gpu("node-00", 0), since=origin + timedelta(seconds=2))
    waiting = make_job(team_a, "a-wait", gpus=4, submitted_at=origin)
    for k in range(100):  # trace times 60 s, 120 s, ... 6,000 s
        Round.objects.create(
            started_at=origin + timedelta(seconds=1.2 * (k + 1)),
            policy="sjf-bsbf",
            decisions=[{"job_id": waiting.pk, "action": "wait", "reason": "needs 4 GPUs, 3 idle"}],
            n_waiting=1,
        )

    log_in(browser, live_server.url)
    assert "Times: trace time in seconds (a replay at 50x)" in browser.find_element(By.ID, "time-words").text
    for figure in ("fig-timeline", "fig-usage", "fig-round_counts"):
        axis = wait_for(lambda f=figure: x_axis(browser, f), 15, f"the x axis of {figure}")
        assert axis["type"] == "linear" and axis["title"].startswith("trace time (s"), (figure, axis)
    # the default: the last 10 rounds, 540 s of trace time
    rounds = wait_for(lambda: first_column(browser, "table-decisions"), 10, "the decisions table")
    assert [float(r) for r in rounds] == [60.0 * k for k in range(100, 90, -1)]

    control = browser.find_element(By.ID, "rounds-control")
    control.clear()
    control.send_keys("100")
    browser.execute_script("arguments[0].dispatchEvent(new Event('change'))", control)
    rounds = wait_for(
        lambda: (r := first_column(browser, "table-decisions")) and len(r) == 100 and r,
        10,
        "100 rounds of decisions",
    )
    assert float(rounds[0]) - float(rounds[-1]) == 5940.0  # 99 rounds of 60 s of trace time
    assert "rounds=100" in browser.current_url  # kept in the page's URL

    Select(browser.find_element(By.ID, "window-control")).select_by_visible_text("15 min")
    wait_for(
        lambda: any("/dashboard/api/fairness.json?window=900" in u for u in requested_urls(browser)),
        10,
        "the fairness endpoint asked for 15 minutes",
    )
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    ARTIFACTS.mkdir(exist_ok=True)
    save_screenshot(browser, ARTIFACTS / "dashboard-replay.png", 1400, 2400)
