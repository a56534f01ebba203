"""Python clients drive sealed browsers over Airlock's CDP endpoint: Playwright's
connect_over_cdp, then browser-use's BrowserSession pointed at the same cdp_url (no model needed
to navigate and read). Usage: python cdp_python.py HTTP_ENDPOINT TOKEN LAB_URL. Prints one JSON
object."""

import asyncio
import json
import os
import sys

# browser-use would otherwise try to reach its telemetry and cloud services.
os.environ.setdefault("ANONYMIZED_TELEMETRY", "false")
os.environ.setdefault("BROWSER_USE_CLOUD_SYNC", "false")

endpoint, token, lab = sys.argv[1:4]
headers = {"Authorization": f"Bearer {token}"}


async def with_playwright(out):
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.connect_over_cdp(endpoint, headers=headers)
        context = browser.contexts[0]
        page = context.pages[0] if context.pages else await context.new_page()
        await page.goto(lab)
        out["playwright_text"] = await page.text_content("h1")
        try:
            await page.goto("file:///etc/hostname")
            out["playwright_file"] = "opened"
        except Exception as error:  # the guard's refusal, as Playwright raises it
            out["playwright_file"] = str(error).splitlines()[0]
        await browser.close()


async def with_browser_use(out):
    from browser_use import BrowserSession

    session = BrowserSession(cdp_url=endpoint, headers=headers)
    await session.start()
    try:
        await session.navigate_to(lab)
        out["browser_use_url"] = await session.get_current_page_url()
        page = await session.get_current_page()
        out["browser_use_text"] = await page.evaluate("() => document.querySelector('h1').textContent")
    finally:
        await session.kill()


async def main():
    out = {}
    await with_playwright(out)
    await with_browser_use(out)
    print(json.dumps(out))


try:
    asyncio.run(main())
except Exception as error:
    print(json.dumps({"failed": repr(error)}))
    sys.exit(1)
