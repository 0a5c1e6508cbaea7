#!/usr/bin/env python3
"""A real browser against the dev server's sign-in page (run by the Swift test BrowserInteropTests).

usage: browser_signin.py SCREENSHOT_DIR EMAIL PASSWORD URL_FIRST URL_FORCED URL_NEIGHBOUR URL_AGAIN

URL_FIRST: a fresh authorization request. Keyboard only (typing, Tab and Enter, no clicks), the script signs in
with a wrong password first (the error must show), then with the right one, and reports the redirect's parameters.
URL_FORCED: prompt=login; the form must show. URL_NEIGHBOUR: a page on another loopback port (the hostile
neighbour, which records the cookies it receives and plants its own). URL_AGAIN: a new authorization request;
reports what the browser shows: "form" (the sign-in form), "consent" (the remembered browser's Continue page,
which the script then accepts with Enter) or "redirect". Prints one JSON object; exits non-zero with a message when
a step fails.
"""
import json
import sys
import urllib.parse

from selenium.webdriver.common.by import By
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from headless import chromium


def fail(message):
    print(json.dumps({"error": message}))
    sys.exit(1)


def redirect_parameters(url):
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlsplit(url).query).items()}


def main():
    shots, email, password, first, forced, neighbour, again = sys.argv[1:8]
    result = {}
    with chromium("--window-size=900,1000", "--disable-extensions") as driver:
        callback = urllib.parse.parse_qs(urllib.parse.urlsplit(first).query)["redirect_uri"][0]
        # A page that navigates while an element is read makes it stale: no failure, look again.
        wait = WebDriverWait(driver, 10, ignored_exceptions=(StaleElementReferenceException,))

        driver.get(first)
        if "Development server" not in driver.page_source:
            fail("no development banner on the sign-in page")
        driver.save_screenshot(shots + "/sign-in.png")
        # Keyboard only from here on: focus starts in the email field (autofocus); Tab reaches the password; Enter
        # submits. A wrong password first: the form again, with a readable error.
        active = driver.switch_to.active_element
        if active.get_attribute("id") != "email":
            fail("the email field does not have the focus (%r does)" % active.get_attribute("id"))
        active.send_keys(email)
        active.send_keys(Keys.TAB)
        focused = driver.switch_to.active_element
        if focused.get_attribute("id") != "password":
            fail("Tab from the email field did not reach the password field")
        focused.send_keys("not-the-password")
        focused.send_keys(Keys.ENTER)
        alert = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "[role=alert]"))
        result["wrongPasswordMessage"] = alert[0].text
        if driver.current_url.startswith(callback):
            fail("a wrong password redirected to the client")
        driver.save_screenshot(shots + "/sign-in-error.png")
        # The email is kept and the password field has the focus: type it, Enter.
        focused = driver.switch_to.active_element
        if focused.get_attribute("id") != "password":
            fail("after an error the password field does not have the focus (%r does)" % focused.get_attribute("id"))
        if driver.find_element(By.ID, "email").get_attribute("value") != email:
            fail("the email was not kept after the error")
        focused.send_keys(password)
        focused.send_keys(Keys.ENTER)
        wait.until(lambda d: d.current_url.startswith(callback))
        result["first"] = redirect_parameters(driver.current_url)
        result["callbackPage"] = driver.find_element(By.TAG_NAME, "body").text[:200]

        driver.get(forced)
        if not driver.find_elements(By.ID, "password"):
            fail("prompt=login did not show the form")
        result["forcedForm"] = True

        driver.get(neighbour)
        result["neighbourPage"] = driver.find_element(By.TAG_NAME, "body").text[:200]

        driver.get(again)
        if driver.current_url.startswith(callback):
            result["again"] = "redirect"
        elif driver.find_elements(By.ID, "password"):
            result["again"] = "form"
            result["againPage"] = driver.find_element(By.TAG_NAME, "body").text[:600]
        elif driver.find_elements(By.ID, "continue"):
            result["again"] = "consent"
            result["againPage"] = driver.find_element(By.TAG_NAME, "body").text[:600]
            driver.save_screenshot(shots + "/consent.png")
            # No autofocus on a button that decides (a stray Enter must not consent): Tab to it, then Enter.
            if driver.switch_to.active_element.get_attribute("id") == "continue":
                fail("the consent page's Continue button has the focus on arrival")
            driver.find_element(By.ID, "continue").send_keys(Keys.ENTER)
            wait.until(lambda d: d.current_url.startswith(callback))
            result["consented"] = redirect_parameters(driver.current_url)
        else:
            fail("after the neighbour: neither form, consent nor redirect: " + driver.page_source[:300])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
