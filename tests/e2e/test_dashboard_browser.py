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
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model

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

    browser.get(f"{live_server.url}/dashboard/")
    assert "/dashboard/login/" in browser.current_url
    browser.find_element(By.ID, "id_username").send_keys("admin")
    browser.find_element(By.ID, "id_password").send_keys(PASSWORD)
    browser.find_element(By.ID, "login-button").click()
    wait_for(lambda: browser.current_url.rstrip("/").endswith("/dashboard"), 10, "the dashboard after login")

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
    if any(d["shares"] for d in record.decisions if d["action"] == "start"):
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
