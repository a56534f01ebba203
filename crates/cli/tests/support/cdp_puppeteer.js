// Puppeteer (puppeteer-core) drives a sealed browser over Airlock's CDP endpoint, then closes it.
// Usage: node cdp_puppeteer.js WS_ENDPOINT LAB_URL FORBIDDEN_PORT. Prints one JSON object.
const puppeteer = require('puppeteer-core');

const [endpoint, lab, forbiddenPort] = process.argv.slice(2);

async function attempt(action) {
  try {
    return { ok: await action() };
  } catch (error) {
    return { error: String(error.message).split('\n')[0] };
  }
}

(async () => {
  const out = {};
  const browser = await puppeteer.connect({ browserWSEndpoint: endpoint, defaultViewport: null });
  out.version = await browser.version();
  const page = (await browser.pages())[0] || (await browser.newPage());
  await page.goto(lab);
  out.text = await page.$eval('h1', (h) => h.textContent);
  const shot = await page.screenshot();
  out.screenshot_png = Buffer.from(shot).subarray(0, 4).toString('hex') === '89504e47';
  out.file = await attempt(() => page.goto('file:///etc/hostname'));
  out.loopback = await attempt(async () => {
    const response = await page.goto(`http://127.0.0.1:${forbiddenPort}/secret`);
    return { status: response.status(), refused: response.headers()['x-airlock-refused'] || null };
  });
  for (const [name, url] of [
    ['private', 'http://10.0.0.1/'],
    ['metadata', 'http://169.254.169.254/latest/meta-data/'],
  ]) {
    out[name] = await attempt(async () => {
      const response = await page.goto(url);
      return { status: response.status(), refused: response.headers()['x-airlock-refused'] || null };
    });
  }
  await page.goto(lab);
  // The page's own script: the forbidden site must hear nothing of it.
  out.script_fetch = await page.evaluate(async (target) => {
    try {
      await fetch(target, { mode: 'no-cors' });
      return 'answered';
    } catch (error) {
      return 'failed';
    }
  }, `http://127.0.0.1:${forbiddenPort}/secret`);
  out.close = await attempt(() => browser.close());
  console.log(JSON.stringify(out));
})().catch((error) => {
  console.log(JSON.stringify({ failed: String(error.stack || error) }));
  process.exit(1);
});
