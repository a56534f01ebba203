// Open one page through Airlock's CDP endpoint with Playwright and print its body's text, or the
// error the navigation ended with.
// Usage: node cdp_text.js ENDPOINT URL. Prints one JSON object: {text} or {error}.
const { chromium } = require('playwright-core');

const [endpoint, url] = process.argv.slice(2);

(async () => {
  const browser = await chromium.connectOverCDP(endpoint);
  const context = browser.contexts()[0];
  const page = context.pages()[0] || (await context.newPage());
  let result;
  try {
    await page.goto(url, { waitUntil: 'load' });
    result = { text: await page.textContent('body') };
  } catch (error) {
    result = { error: String(error.message || error) };
  }
  await browser.close();
  console.log(JSON.stringify(result));
})().catch((error) => {
  console.log(JSON.stringify({ failed: String(error.stack || error) }));
  process.exit(1);
});
