// Open one page through Airlock's CDP endpoint with Playwright, wait until its traps have run
// (the page's own `window.trapsDone` promise), and print the text of #ok.
// Usage: node cdp_open.js ENDPOINT URL. Prints one JSON object.
const { chromium } = require('playwright-core');

const [endpoint, url] = process.argv.slice(2);

(async () => {
  const browser = await chromium.connectOverCDP(endpoint);
  const context = browser.contexts()[0];
  const page = context.pages()[0] || (await context.newPage());
  await page.goto(url, { waitUntil: 'load' });
  const traps = await page.evaluate(() => window.trapsDone);
  const ok = await page.textContent('#ok');
  await browser.close();
  console.log(JSON.stringify({ ok, traps }));
})().catch((error) => {
  console.log(JSON.stringify({ failed: String(error.stack || error) }));
  process.exit(1);
});
