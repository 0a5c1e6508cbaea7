"""Approves (or denies) a device code at the dev server's /device page, as a person would: the first form with
email and password, then the confirmation. Used by Scripts/check-examples.sh.

    python3 approve_device.py ISSUER USER_CODE EMAIL PASSWORD [deny]
"""
import re
import sys
from html import unescape

import requests


def hidden(page):
    form = page.split("<form", 1)[1].split("</form>", 1)[0]
    fields = {}
    for tag in re.findall(r"<input[^>]*>", form):
        if 'type="hidden"' in tag:
            name = re.search(r' name="([^"]*)"', tag).group(1)
            value = re.search(r' value="([^"]*)"', tag)
            fields[unescape(name)] = unescape(value.group(1)) if value else ""
    return fields


def main():
    issuer, code, email, password = sys.argv[1:5]
    action = "deny" if len(sys.argv) > 5 and sys.argv[5] == "deny" else "approve"
    browser = requests.Session()
    page = browser.get(f"{issuer}/device", params={"user_code": code}, timeout=10)
    page.raise_for_status()
    form = hidden(page.text) | {"user_code": code, "email": email, "password": password, "action": action}
    confirmation = browser.post(f"{issuer}/device", data=form, timeout=10, allow_redirects=False)
    if confirmation.status_code != 200 or f'id="{action}"' not in confirmation.text:
        sys.exit(f"approve_device.py: no confirmation page ({confirmation.status_code})")
    done = browser.post(f"{issuer}/device", data=hidden(confirmation.text) | {"action": action}, timeout=10)
    if done.status_code != 200:
        sys.exit(f"approve_device.py: {done.status_code}")


if __name__ == "__main__":
    main()
