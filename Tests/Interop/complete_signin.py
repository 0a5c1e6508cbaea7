#!/usr/bin/env python3
"""Completes a sign-in that `sesame login --no-browser` printed, in headless Chromium (run by OIDCLoginCommandTests).

usage: complete_signin.py URL EMAIL PASSWORD SCREENSHOT

Opens URL, signs in on the provider's page from the keyboard, waits for the CLI's loopback page ("close this
tab"), saves a screenshot of it, and prints that page's text.
"""
import os
import shutil
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

url, email, password, screenshot = sys.argv[1:5]
options = webdriver.ChromeOptions()
for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"):
    options.add_argument(flag)
options.binary_location = "/usr/bin/chromium"
# Chromium makes its profile folder under TMPDIR: one of ours, removed afterwards.
scratch = tempfile.mkdtemp(prefix="sesame-chromium-")
os.environ["TMPDIR"] = scratch
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
driver.set_page_load_timeout(20)
try:
    driver.get(url)
    field = driver.switch_to.active_element
    field.send_keys(email)
    field.send_keys(Keys.TAB)
    driver.switch_to.active_element.send_keys(password + Keys.ENTER)
    WebDriverWait(driver, 15).until(lambda d: "close this tab" in d.find_element(By.TAG_NAME, "body").text)
    driver.save_screenshot(screenshot)
    print(driver.find_element(By.TAG_NAME, "body").text)
finally:
    driver.quit()
    shutil.rmtree(scratch, ignore_errors=True)
