"""Headless Chromium for the interop scripts: one way to start it, and a stop that leaves nothing in /tmp."""
import contextlib
import os
import shutil
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


@contextlib.contextmanager
def chromium(*extra_flags):
    """Yields a Selenium driver for headless Chromium; quits it and removes its files afterwards."""
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 *extra_flags):
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    # Chromium makes its profile folder under TMPDIR: one of ours, removed afterwards.
    scratch = tempfile.mkdtemp(prefix="sesame-chromium-")
    os.environ["TMPDIR"] = scratch
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(scratch, ignore_errors=True)
