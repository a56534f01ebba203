// A page's confirm() and prompt() through Airlock's CDP endpoint, with a client that answers
// every dialog it hears of itself (accepting, with the text "from-client"), and counts them.
// Usage: node cdp_dialogs.js ENDPOINT URL playwright|puppeteer. Prints one JSON object:
// what confirm() and prompt() returned, and how many dialogs the client heard of.
const [endpoint, url, client] = process.argv.slice(2);

(async () => {
  let heard = 0;
  const answer = (dialog) => {
    heard += 1;
    dialog.accept('from-client').catch(() => {});
  };
  const ask = () => ({ confirmed: confirm('Sure?'), prompted: prompt('Name?', 'lab') });
  let browser;
  let page;
  if (client === 'playwright') {
    const { chromium } = require('playwright-core');
    browser = await chromium.connectOverCDP(endpoint);
    const context = browser.contexts()[0];
    page = context.pages()[0] || (await context.newPage());
  } else {
    const puppeteer = require('puppeteer-core');
    browser = await puppeteer.connect({ browserWSEndpoint: endpoint, defaultViewport: null });
    page = (await browser.pages())[0] || (await browser.newPage());
  }
  page.on('dialog', answer);
  await page.goto(url);
  const result = await page.evaluate(ask);
  await browser.close();
  console.log(JSON.stringify({ ...result, heard }));
})().catch((error) => {
  console.log(JSON.stringify({ failed: String(error.stack || error) }));
  process.exit(1);
});
