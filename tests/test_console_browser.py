"""The operator console in a real browser: Debian's headless Chromium through Selenium and the
system chromedriver (no browser download), on a phone-sized viewport (390 x 844).

One whole trial of the example building's coffee task, as an operator would do it: take a photo
for discover_objects (a small PNG), see what the planner made of it, perform steps, mark a step
failed with a reason, reload in the middle, answer from a stale second tab (refused: already
answered), upload a file that is not a photo (refused, nothing lost), close the tab in the middle
of a step and come back, and fill in the goal checklist. The planner, the describer and the parser
are SCRIPTED (ScriptedBackend; tests/console_server.py), not language models.

A screenshot of each screen goes to the trial's ``screenshots/`` and to ``/tmp/console_shots/``.
Skipped, with the reason, only where Chromium or chromedriver is not installed (``.ci/run``
installs them with apt-get: ``apt-get install -y chromium chromium-driver``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from console_server import start_console
from lookplangraph.planners.config import PlannerConfig

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
SHOTS = Path("/tmp/console_shots")

pytestmark = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()),
    reason="the browser test needs Debian's chromium and chromium-driver (apt-get install -y chromium "
           "chromium-driver; .ci/run installs them); not installed here",
)


@pytest.fixture
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra: pip install -e '.[test]'")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        opts.add_argument(arg)
    opts.add_experimental_option("mobileEmulation", {
        "deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 2.0},
        "userAgent": "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
                     "Chrome/120.0 Mobile Safari/537.36"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def small_png(path: Path) -> Path:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (160, 120), (235, 230, 220))
    d = ImageDraw.Draw(img)
    d.rectangle((20, 20, 140, 110), outline=(90, 60, 30), width=4)  # the cupboard
    d.ellipse((60, 60, 90, 100), fill=(250, 250, 250), outline=(0, 0, 0))  # the cup
    img.save(path)
    return path


def test_a_whole_trial_in_the_browser_on_a_phone_viewport(tmp_path, browser):
    from selenium.webdriver.common.by import By

    # the script's own close(cupboard-1) is the step the operator reports failed: the loop must
    # not have closed the cupboard already (close_at_once would, right after the pick-up)
    console = start_console(tmp_path / "trial_browser", planner=PlannerConfig(close_at_once=False))
    trial = console.trial
    shots = trial.dir / "screenshots"
    shots.mkdir()
    SHOTS.mkdir(exist_ok=True)
    n = [0]

    def shot(name: str) -> None:
        n[0] += 1
        path = shots / f"{n[0]:02d}_{name}.png"
        browser.save_screenshot(str(path))
        shutil.copy(path, SHOTS / path.name)

    def text(element_id: str) -> str:
        return browser.find_element(By.ID, element_id).text

    def pending_step() -> str:
        return text("step-text")

    def click(element_id: str) -> None:
        """Click a submit button and wait for the next page."""
        from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
        from selenium.webdriver.support.ui import WebDriverWait

        def gone(exc: Exception) -> bool:
            # chromedriver names a node of a replaced page in two ways: "stale element", or, when
            # the new page arrives while it is still looking at the node (seen on a loaded 2-core
            # machine), "Node with given id does not belong to the document".
            return isinstance(exc, StaleElementReferenceException) or "does not belong to the document" in str(exc)

        def replaced(_driver) -> bool:
            try:
                page.is_enabled()
                return False
            except WebDriverException as exc:
                if gone(exc):
                    return True
                raise

        page = browser.find_element(By.TAG_NAME, "html")
        try:
            browser.find_element(By.ID, element_id).click()
        except WebDriverException as exc:  # the submit replaced the page under the click: it happened
            if not gone(exc):
                raise
        WebDriverWait(browser, 15).until(replaced)

    try:
        browser.get(console.url + "/")
        # 1. discover_objects: a photo of the cupboard; the page asks with the phone's camera
        assert pending_step().startswith("Look at cupboard-1")
        photo_input = browser.find_element(By.ID, "photo")
        assert photo_input.get_attribute("accept") == "image/*" and photo_input.get_attribute("capture") == "environment"
        # the page fits the phone: nothing wider than the viewport
        assert browser.execute_script("return document.documentElement.scrollWidth") <= 390
        shot("discover_asks_for_a_photo")

        # a file that is not a photo is refused with a message; the step still waits
        not_photo = tmp_path / "notes.txt"
        not_photo.write_text("this is not an image")
        browser.find_element(By.ID, "photo").send_keys(str(not_photo))
        click("send")
        assert "not a photo" in text("error") and pending_step().startswith("Look at cupboard-1")
        shot("not_a_photo_refused")
        assert not (trial.dir / "operator.jsonl").exists()

        browser.find_element(By.ID, "photo").send_keys(str(small_png(tmp_path / "cupboard.png")))
        click("send")
        # the VLM's (scripted) description and the parsed objects: what the planner now believes
        perceived = text("perceived")
        assert "cup-2 inside cupboard-1" in perceived and "tea_box" in perceived and "The VLM saw" in perceived
        assert browser.find_element(By.CSS_SELECTOR, "#perceived img.photo").get_attribute("naturalWidth") == "160"
        # 2. the rearrange: its SGS expansion, the first step highlighted
        assert pending_step() == "Open cupboard-1"
        steps = [li.text for li in browser.find_elements(By.CSS_SELECTOR, "#expansion li")]
        assert steps == ["open(cupboard-1)", "pick_up(cup-2)", "put_inside(coffee_machine-1)"]
        assert browser.find_element(By.CSS_SELECTOR, "#expansion li.current").text == "open(cupboard-1)"
        shot("parsed_objects_and_next_step")
        click("done")
        assert pending_step() == "Pick up cup-2"
        assert "Step 2 recorded: done." in text("notice")

        # a reload in the middle of the trial shows the same pending step
        browser.refresh()
        assert pending_step() == "Pick up cup-2"
        # a second, stale tab at the same step (a phone and a laptop, or an old tab)
        browser.switch_to.new_window("tab")
        browser.get(console.url + "/")
        stale_tab = browser.current_window_handle
        first_tab = browser.window_handles[0]
        browser.switch_to.window(first_tab)
        click("done")
        assert pending_step() == "Put cup-2 inside coffee_machine-1"
        assert "You hold cup-2" in text("now")
        shot("put_step_holding_the_cup")
        browser.switch_to.window(stale_tab)
        click("done")  # answers step 3 again
        assert "Step 3 was already answered (Done); it counts once" in text("notice")
        assert pending_step() == "Put cup-2 inside coffee_machine-1"
        shot("stale_tab_already_answered")
        browser.close()
        browser.switch_to.window(first_tab)
        click("done")

        # 3. close(cupboard-1): the operator reports a failure with a reason
        assert pending_step() == "Close cupboard-1"
        browser.find_element(By.ID, "failed").click()
        browser.find_element(By.ID, "reason").send_keys("the cupboard door is stuck")
        shot("failed_with_a_reason")
        click("send-failed")
        # 4. the planner was told and moved on; the tab is closed in the middle of this step
        assert pending_step() == "Switch on coffee_machine-1"
        history = text("history")
        assert "the operator reports: the cupboard door is stuck" in history
        browser.switch_to.new_window("tab")
        closing = browser.current_window_handle
        browser.get(console.url + "/")
        browser.find_element(By.ID, "failed").click()
        browser.find_element(By.ID, "reason").send_keys("half-typed")
        browser.close()  # the closed tab: nothing was sent, nothing is lost
        browser.switch_to.window(first_tab)
        browser.refresh()
        assert pending_step() == "Switch on coffee_machine-1" and closing not in browser.window_handles
        click("done")
        # 5. the second close succeeds
        assert pending_step() == "Close cupboard-1"
        click("done")

        # 6. done: the goal checklist
        assert pending_step() == "Check the goal"
        legends = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "fieldset.check legend")]
        assert legends[:2] == ["cup-2 is inside coffee_machine-1", "coffee_machine-1 is on"]
        assert legends[2].startswith("nothing else was changed")
        shot("checklist")
        browser.refresh()  # a reload at the checklist keeps it
        assert pending_step() == "Check the goal"
        browser.find_element(By.ID, "submit-checklist").click()  # nothing marked: the browser refuses
        assert pending_step() == "Check the goal" and not trial.path("result.json").exists()
        browser.find_element(By.ID, "notmet_0").click()  # the operator sees the cup is not in the machine
        browser.find_element(By.ID, "met_1").click()
        browser.find_element(By.ID, "met_2").click()
        click("submit-checklist")
        assert pending_step() == "Not successful"
        assert "Precision 0.50" in text("now")
        shot("finished")
        browser.execute_script("document.getElementById('memory').scrollIntoView()")
        shot("memory_graph")
    finally:
        console.stop()

    # everything is recorded
    result = json.loads(trial.path("result.json").read_text())
    assert result["success"] is False and result["precision"] == 0.5 and result["success_changed_only"] is False
    assert result["failed_steps"] == [{"request": 5, "step": "close(cupboard-1)", "action": "close(cupboard-1)",
                                       "reason": "the cupboard door is stuck"}]
    assert result["photos"] == 1 and result["operator_requests"] == 7
    answers = [json.loads(line) for line in trial.path("operator.jsonl").read_text().splitlines()]
    assert [a["request"] for a in answers] == [1, 2, 3, 4, 5, 6, 7]  # the stale Done counted once
    assert answers[0]["photo"] == "photos/001_cupboard_1.png"
    assert (trial.dir / answers[0]["photo"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    [aug] = [json.loads(line) for line in trial.path("augmentations.jsonl").read_text().splitlines()]
    assert aug["description"].startswith("A white cup") and aug["photo"] == "photos/001_cupboard_1.png"
    assert len(list(shots.glob("*.png"))) == n[0] == 9
