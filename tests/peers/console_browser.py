"""Drives Sluice's operator console in a real browser (headless Chromium via chromedriver).

Usage: console_browser.py PLAN_JSON

PLAN: {"url": "http://127.0.0.1:PORT" (the admin listener), "key": admin key,
       "wrong_key": a key Sluice refuses, "upstream": name, "tools": [tool names to see],
       "approve_tool": the held call's tool, "pin_tool": the changed tool,
       "pin_text": a string of the changed definition, "canaries": [argument values that
       must never be in the page], "screenshots": directory, "timeout_s": seconds per wait}

Prints `STEP <name>` as each stage is reached (the driving test acts on `STEP signed-in`:
it makes the held call; on `STEP approved`: it changes the tool), and one final
`SUMMARY {...}` line: the steps, failures, the browser's SEVERE console entries and the
screenshots written. Exits 0 only when every check held.
"""

import json
import os
import sys
import time
import traceback

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

plan = json.loads(sys.argv[1])
timeout = float(plan.get("timeout_s", 30))
shots_dir = plan["screenshots"]
os.makedirs(shots_dir, exist_ok=True)
summary = {"steps": [], "failures": [], "severe": [], "screenshots": [], "events": []}


def step(name):
    summary["steps"].append(name)
    print("STEP " + name, flush=True)


def fail(message):
    summary["failures"].append(message)
    print("FAIL " + message, file=sys.stderr, flush=True)


def wait_for(what, probe, within=None):
    """Polls `probe` (every 100 ms) until it gives a truthy value; raises naming `what`."""
    deadline = time.monotonic() + (within or timeout)
    last = None
    while time.monotonic() < deadline:
        try:
            value = probe()
            if value:
                return value
        except Exception as e:  # stale elements while a panel re-renders
            last = e
        time.sleep(0.1)
    raise AssertionError("timed out waiting for %s (last error: %r)" % (what, last))


def shot(driver, name, element=None):
    path = os.path.join(shots_dir, "console-%s.png" % name)
    if element is not None:
        driver.execute_script("arguments[0].scrollIntoView({block: 'start'})", element)
        ok = element.screenshot(path)
    else:
        ok = driver.save_screenshot(path)
    if ok:
        summary["screenshots"].append(path)
    else:
        fail("could not save screenshot %s" % path)


def browser():
    opts = Options()
    opts.binary_location = plan.get("chromium", "/usr/bin/chromium")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--no-first-run", "--disable-extensions",
              "--lang=en-US", "--force-device-scale-factor=1"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=plan.get("chromedriver", "/usr/bin/chromedriver"))
    return webdriver.Chrome(service=service, options=opts)


def collect_logs(driver):
    """SEVERE console entries (script errors, CSP violations), bar the expected 401s of
    signing in (the boot's session probe and the wrong key)."""
    for entry in driver.get_log("browser"):
        msg = entry.get("message", "")
        if entry.get("level") != "SEVERE":
            continue
        if "/admin/v1/session" in msg and "401" in msg:
            continue
        summary["severe"].append(msg)


def no_canary(driver, where):
    html = driver.page_source
    for c in plan.get("canaries", []):
        if c in html:
            fail("argument value %r is in the page (%s)" % (c, where))


def text_of(driver, css):
    return driver.find_element(By.CSS_SELECTOR, css).text


def sign_in(driver):
    driver.get(plan["url"] + "/console")
    key = wait_for("the sign-in form", lambda: driver.find_element(By.ID, "key").is_displayed()
                   and driver.find_element(By.ID, "key"))
    label = driver.find_element(By.CSS_SELECTOR, "label[for=key]").text
    if label != "Admin key":
        fail("the key field's label is %r" % label)
    if key.get_attribute("type") != "password":
        fail("the key field is not a password field")
    key.send_keys(plan["wrong_key"], Keys.ENTER)
    error = wait_for("the wrong key's error", lambda: text_of(driver, "#signin-error"))
    summary["wrong_key_error"] = error
    shot(driver, "signin-error", driver.find_element(By.ID, "signin"))
    step("wrong key refused")
    key = driver.find_element(By.ID, "key")
    key.clear()
    key.send_keys(plan["key"])
    driver.find_element(By.ID, "signin-button").click()
    wait_for("the console after signing in", lambda: driver.find_element(By.ID, "app").is_displayed())
    summary["operator"] = wait_for("the operator's name", lambda: text_of(driver, "#operator"))
    if driver.execute_script("return window.localStorage.length + window.sessionStorage.length"):
        fail("the console stored something in localStorage or sessionStorage")
    step("signed in")


def see_upstream(driver):
    sel = "article.upstream[data-upstream='%s']" % plan["upstream"]
    card = lambda: driver.find_element(By.CSS_SELECTOR, sel)  # found afresh: panels re-render
    wait_for("upstream %s" % plan["upstream"], card)
    for tool in plan.get("tools", []):
        wait_for("tool %s" % tool, lambda: tool in [
            th.text for th in card().find_elements(By.CSS_SELECTOR, "tbody th")])
    summary["upstream_text"] = wait_for("the upstream's text", lambda: card().text)
    shot(driver, "upstreams", driver.find_element(By.ID, "upstreams"))
    step("upstream seen")


def approve(driver):
    sel = "#approvals-body tr[data-approval]"

    def held():
        for row in driver.find_elements(By.CSS_SELECTOR, sel):
            if row.find_element(By.CSS_SELECTOR, "th").text == plan["approve_tool"]:
                return row
        return None

    row = wait_for("the held call in the approvals panel", held)
    held_id = row.get_attribute("data-approval")
    summary["approval_row"] = row.text
    no_canary(driver, "a call held")
    shot(driver, "approvals", driver.find_element(By.ID, "approvals"))

    def press():
        # Keyboard: focus the button and press Enter, as an operator without a mouse would.
        # Found afresh each try: an event may have re-rendered the panel meanwhile.
        button = held().find_element(By.CSS_SELECTOR, "button.approve")
        driver.execute_script("arguments[0].focus()", button)
        button.send_keys(Keys.ENTER)
        return True

    wait_for("the Approve button to take Enter", press)
    status = wait_for("the decision's confirmation", lambda: held_id in text_of(driver, "#status")
                      and text_of(driver, "#status"))
    summary["approval_status"] = status
    wait_for("the held call to leave the panel", lambda: held() is None)
    step("approved")


def accept_pin(driver):
    sel = "#pins-body article.pin.quarantined"

    def quarantined():
        for card in driver.find_elements(By.CSS_SELECTOR, sel):
            if card.get_attribute("data-pin").endswith("/ " + plan["pin_tool"]):
                return card
        return None

    wait_for("the quarantined pin", quarantined)

    def lines():
        diff = quarantined().find_element(By.CSS_SELECTOR, "pre.diff")
        return ([s.text for s in diff.find_elements(By.CSS_SELECTOR, "span.add")],
                [s.text for s in diff.find_elements(By.CSS_SELECTOR, "span.del")])

    added, removed = wait_for("the pin's diff", lines)
    summary["diff"] = {"added": added, "removed": removed}
    if not any(plan.get("pin_text", "") in a for a in added):
        fail("the diff adds no line with %r: %r" % (plan.get("pin_text"), added))
    if not removed:
        fail("the diff removes no line")
    shot(driver, "pins", driver.find_element(By.ID, "pins"))
    wait_for("the Accept button to take a click",
             lambda: quarantined().find_element(By.CSS_SELECTOR, "button.accept").click() or True)
    wait_for("the pin to leave quarantine", lambda: quarantined() is None)
    step("pin accepted")


def check_diff(driver):
    same = driver.execute_script(
        "return window.sluiceConsole.lineDiff(['a','b','c'], ['a','x','c'])")
    if same != [[" ", "a"], ["-", "b"], ["+", "x"], [" ", "c"]]:
        fail("lineDiff gave %r" % same)
    big = driver.execute_script(
        "const a = []; const b = [];"
        "for (let i = 0; i < 2500; i++) { a.push('a' + i); b.push('b' + i); }"
        "return window.sluiceConsole.lineDiff(a, b)")
    if big is not None:
        fail("a diff of 2500 changed lines was computed, not refused as too large")


def events_and_audit(driver):
    kinds = plan.get("event_kinds", [])
    for kind in kinds:
        wait_for("a %s event in the list" % kind,
                 lambda: driver.find_elements(By.CSS_SELECTOR, "#events-list li.event.%s" % kind))
    summary["events"] = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#events-list li")]
    shot(driver, "events", driver.find_element(By.ID, "events"))
    driver.find_element(By.ID, "audit-refresh").click()
    if plan.get("audit_name"):
        wait_for("an audit record of %s" % plan["audit_name"],
                 lambda: plan["audit_name"] in text_of(driver, "#audit-body"))
    summary["audit_text"] = text_of(driver, "#audit-body")
    shot(driver, "audit", driver.find_element(By.ID, "audit"))
    step("events and audit seen")


def main():
    driver = browser()
    try:
        stages = [sign_in, see_upstream, check_diff]
        if plan.get("approve_tool"):
            stages.append(approve)
        if plan.get("pin_tool"):
            stages.append(accept_pin)
        stages.append(events_and_audit)
        for stage in stages:
            try:
                stage(driver)
            except Exception as e:
                fail("%s: %s" % (stage.__name__, e))
                traceback.print_exc()
                shot(driver, "failed-" + stage.__name__)
                break
        no_canary(driver, "the end")
        driver.set_window_size(1400, 2600)
        shot(driver, "overview")
        collect_logs(driver)
    finally:
        driver.quit()
    for s in summary["severe"]:
        fail("browser console: " + s)
    print("SUMMARY " + json.dumps(summary), flush=True)
    return 0 if not summary["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
