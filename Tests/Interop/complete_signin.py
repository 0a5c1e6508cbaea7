#!/usr/bin/env python3
"""Completes a sign-in that `sesame login --no-browser` printed, in headless Chromium (run by OIDCLoginCommandTests).

usage: complete_signin.py URL EMAIL PASSWORD SCREENSHOT

Opens URL, signs in on the provider's page from the keyboard, waits for the CLI's loopback page ("close this
tab"), saves a screenshot of it, and prints that page's text.
"""
import sys

from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from headless import chromium

url, email, password, screenshot = sys.argv[1:5]
with chromium() as driver:
    driver.get(url)
    field = driver.switch_to.active_element
    field.send_keys(email)
    field.send_keys(Keys.TAB)
    driver.switch_to.active_element.send_keys(password + Keys.ENTER)
    # The page navigates while we look (the form's POST, the redirect, the CLI's page): a body found on one page and
    # read on the next is stale, which is no failure — look again.
    WebDriverWait(driver, 15, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: "close this tab" in d.find_element(By.TAG_NAME, "body").text)
    driver.save_screenshot(screenshot)
    print(driver.find_element(By.TAG_NAME, "body").text)
