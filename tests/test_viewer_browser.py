"""The episode viewer's page in a real browser: Debian's headless Chromium through Selenium and the
system chromedriver (no browser download), at a desktop width (1440 x 900) and on a phone-sized
viewport (390 x 844).

The page is written from an evaluation directory made by the runner with SCRIPTED policies
(tests/viewer_runs.py: the error-injection policy and ScriptedBackend replies, not a language
model) and opened as a file:// URL (no server). The test filters the list, opens episodes,
steps through the timeline and checks what is shown against what the run directory holds: the
verdict, the action texts, the number of nodes drawn in the memory graph's SVG (computed from the
replay in Python), the goal units met and not met. Screenshots of each screen go to
``/tmp/viewer_shots/``. Skipped, with the reason, only where Chromium or chromedriver is not
installed (``apt-get install -y chromium chromium-driver``).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from viewer_runs import office_data, scripted_eval

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SHOTS = Path("/tmp/viewer_shots")
BLOCK = re.compile(r'<script type="application/json" id="(lpg-[a-z]+-?\d*)">(.*?)</script>', re.S)

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason="the browser test needs Debian's chromium and chromium-driver (apt-get install -y chromium "
           "chromium-driver); not installed here",
)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The page of six office episodes (two give up) and its JSON blocks."""
    from lookplangraph.apps.viewer import write_view

    root = tmp_path_factory.mktemp("viewer")
    data = office_data(root / "grasif")
    scripted_eval(root / "eval", data, n=6, give_up={"office-02", "office-05"})
    path = write_view([root / "eval"], root / "view.html", data_dir=data)
    found = {m.group(1): json.loads(m.group(2)) for m in BLOCK.finditer(path.read_text())}
    return path, found


@pytest.fixture
def open_browser():
    """``open_browser(mobile)``: a Chromium driver at desktop or phone size (quit at the end)."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra: pip install -e '.[test]'")
    from selenium.webdriver.chrome.service import Service

    drivers = []

    def start(mobile: bool):
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
            opts.add_argument(arg)
        if mobile:
            opts.add_experimental_option("mobileEmulation", {
                "deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 2.0},
                "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
                             "Chrome/120.0 Mobile Safari/537.36"})
        else:
            opts.add_argument("--window-size=1440,900")
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        driver.set_page_load_timeout(30)
        drivers.append(driver)
        return driver

    yield start
    for d in drivers:
        d.quit()


def graph_nodes_at(detail: dict, graphs: dict, k: int) -> int:
    """How many nodes the page must draw after step ``k`` with every room shown: the replayed
    graph's nodes plus those removed at that step (drawn as ghosts)."""
    nodes = {n[0]: n for n in graphs[f"lpg-g-{detail['graph']['base']}"]}
    removed = set()
    for i, delta in enumerate(detail["graph"]["deltas"][:k]):
        removed = {n for n in delta.get("del", ()) if n in nodes} if i == k - 1 else set()
        for name in delta.get("del", ()):
            nodes.pop(name, None)
        for n in delta.get("set", ()):
            nodes[n[0]] = n
    return len(nodes) + len(removed - set(nodes))


def _ready(driver, url):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 10).until(expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "body[data-ready]")))


def _errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_click_through_episodes_at_desktop_width(page, open_browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    path, found = page
    index = found["lpg-index"]
    by_task = {e["task"]: e for e in index["episodes"]}
    SHOTS.mkdir(exist_ok=True)
    driver = open_browser(mobile=False)
    _ready(driver, path.as_uri())

    def rows():
        return driver.find_elements(By.CSS_SELECTOR, "#episode-rows tr")

    def shot(name):
        driver.save_screenshot(str(SHOTS / f"desktop_{name}.png"))

    def text(css):
        return driver.find_element(By.CSS_SELECTOR, css).text

    assert len(rows()) == 6 and "6 of 6 episodes" in text("#list-stats")
    shot("1_list")
    # filters: by verdict, by text, both cleared
    Select(driver.find_element(By.ID, "f-verdict")).select_by_value("failure")
    assert sorted(r.find_elements(By.TAG_NAME, "td")[1].text for r in rows()) == ["office-02", "office-05"]
    assert "SR 0.000" in text("#list-stats")
    Select(driver.find_element(By.ID, "f-verdict")).select_by_value("")
    driver.find_element(By.ID, "f-text").send_keys("office-04")
    assert [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows()] == ["office-04"]
    driver.find_element(By.ID, "f-text").clear()
    driver.find_element(By.ID, "f-text").send_keys(" ")  # clear() sends no input event
    assert len(rows()) == 6

    # a successful episode: click it, step to its first discover_objects, check the graph drawn
    ep = by_task["office-03"]
    detail = found[f"lpg-ep-{ep['id']}"]
    k = next(i + 1 for i, s in enumerate(detail["steps"]) if any(x.startswith("discover_objects") for x in s["executed"]))
    step = detail["steps"][k - 1]
    next(r for r in rows() if r.get_attribute("data-id") == str(ep["id"])).click()
    assert text("#ep-title") == "office / office-03" and "success" in text("#detail .ep-head h2")
    assert "strict success" in text("#ep-facts") and "APP 1.000" in text("#ep-facts")
    assert text("#step-label") == f"step 0 / {len(detail['steps'])}"
    # before the first call the kitchen is drawn though nothing happened there yet: the goal names its nodes
    goal = {g.get_attribute("data-name") for g in driver.find_elements(By.CSS_SELECTOR, "#graph-svg .gnode.goal")}
    assert goal == {"orange-1", "apple-1", "fridge-1"}
    units = driver.find_elements(By.CSS_SELECTOR, "#goal li.unit")
    assert len(units) == len(detail["goal"]) and all("met" in u.get_attribute("class").split() for u in units)
    assert "orange-1 → inside fridge-1" in text("#goal")
    shot("2_episode")
    driver.find_element(By.CSS_SELECTOR, f'#timeline .step[data-step="{k}"]').click()
    assert text("#step-label") == f"step {k} / {len(detail['steps'])}"
    assert text("#graph-step-action") == step["proposed"]
    card = driver.find_element(By.CSS_SELECTOR, f'#timeline .step[data-step="{k}"]')
    assert "current" in card.get_attribute("class") and step["observed"][0] in card.text
    assert driver.find_element(By.ID, "focus-toggle").is_selected()  # a 200-node building starts focused
    focused = len(driver.find_elements(By.CSS_SELECTOR, "#graph-svg .gnode"))
    more = driver.find_element(By.CSS_SELECTOR, "#graph-svg .gmore")
    assert re.fullmatch(r"\+ \d+ other rooms", more.text)
    shot("3_step_graph_focused")
    more.click()  # shows every room, as the toggle does
    assert not driver.find_element(By.ID, "focus-toggle").is_selected()
    driver.find_element(By.ID, "focus-toggle").click()
    assert driver.find_element(By.ID, "focus-toggle").is_selected()
    driver.find_element(By.ID, "focus-toggle").click()
    drawn = driver.find_elements(By.CSS_SELECTOR, "#graph-svg .gnode")
    assert len(drawn) == graph_nodes_at(detail, found, k) > focused
    target = step["executed"][-1][len("discover_objects("):-1]
    touched = [g.get_attribute("data-name") for g in driver.find_elements(By.CSS_SELECTOR, "#graph-svg .gnode.touched")]
    assert target in touched
    seen_name = step["observed"][0].split()[0]
    assert "seen" in driver.find_element(By.CSS_SELECTOR, f'#graph-svg .gnode[data-name="{seen_name}"]').get_attribute("class")
    shot("4_step_graph_all_rooms")
    # the step buttons and the keyboard walk the timeline; the graph follows
    driver.find_element(By.ID, "step-next").click()
    assert text("#step-label") == f"step {k + 1} / {len(detail['steps'])}"
    assert len(driver.find_elements(By.CSS_SELECTOR, "#graph-svg .gnode")) == graph_nodes_at(detail, found, k + 1)
    driver.find_element(By.TAG_NAME, "body").send_keys("\ue012")  # ArrowLeft
    assert text("#step-label") == f"step {k} / {len(detail['steps'])}"

    # a failed episode: its unmet goal units and its refused action
    fail = by_task["office-02"]
    fdetail = found[f"lpg-ep-{fail['id']}"]
    driver.find_element(By.CSS_SELECTOR, f'#episode-rows tr[data-id="{fail["id"]}"]').click()
    assert text("#ep-title") == "office / office-02" and "failure" in text("#detail .ep-head h2")
    unmet = [u.text for u in driver.find_elements(By.CSS_SELECTOR, "#goal li.unit.unmet")]
    want = [u["label"] for u in fdetail["goal"] if u["met"] is False]
    assert want and [u.split(" → ")[0].lstrip("✗ ").strip() for u in unmet] == want
    refused = driver.find_element(By.CSS_SELECTOR, '#timeline .step[data-step="2"]')
    assert "pick_up(unicorn-1)" in refused.text and "refused" in refused.text and "unicorn-1" in refused.text
    refused.click()
    assert text("#graph-step-action") == "pick_up(unicorn-1) (refused)"
    shot("5_failed_episode")

    # a link to an episode's step opens it directly
    driver.get("about:blank")
    _ready(driver, path.as_uri() + f"#ep={ep['id']}&step={k}")
    assert text("#ep-title") == "office / office-03" and text("#step-label").startswith(f"step {k} /")
    assert _errors(driver) == []


def test_the_page_on_a_phone(page, open_browser):
    from selenium.webdriver.common.by import By

    path, found = page
    by_task = {e["task"]: e for e in found["lpg-index"]["episodes"]}
    SHOTS.mkdir(exist_ok=True)
    driver = open_browser(mobile=True)
    _ready(driver, path.as_uri())

    def shot(name):
        driver.save_screenshot(str(SHOTS / f"phone_{name}.png"))

    assert driver.execute_script("return document.documentElement.scrollWidth") <= 390  # no sideways scrolling
    shot("1_list")
    ep = by_task["office-01"]
    detail = found[f"lpg-ep-{ep['id']}"]
    driver.find_element(By.CSS_SELECTOR, f'#episode-rows tr[data-id="{ep["id"]}"]').click()
    assert not driver.find_element(By.ID, "list-pane").is_displayed()  # the episode takes the screen
    assert driver.find_element(By.ID, "ep-title").text == "office / office-01"
    assert driver.execute_script("return document.documentElement.scrollWidth") <= 390
    shot("2_episode")
    last = len(detail["steps"])
    driver.find_element(By.CSS_SELECTOR, f'#timeline .step[data-step="{last}"]').click()
    assert driver.find_element(By.ID, "step-label").text == f"step {last} / {last}"
    assert driver.find_element(By.ID, "step-next").get_attribute("disabled") is not None
    pane = driver.find_element(By.ID, "graph-pane")
    driver.execute_script("arguments[0].scrollIntoView()", pane)
    shot("3_graph")
    assert len(driver.find_elements(By.CSS_SELECTOR, "#graph-svg .gnode")) > 5
    driver.find_element(By.ID, "back").click()
    assert driver.find_element(By.ID, "list-pane").is_displayed()
    assert _errors(driver) == []
