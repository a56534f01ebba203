// A person at the dashboard, in the host's headless Chromium (Playwright), watching a CDP lease:
// signs in, finds the lease in the dashboard, opens its live page and waits for a frame; prints
// what the dashboard listed, the frames and the newest frame's mean colour as one JSON object,
// and keeps a screenshot of the live page in SHOTS_DIR.
// Usage: node lease_person.js BASE_URL TOKEN LEASE_ID SHOTS_DIR
const { chromium } = require('playwright-core');

const [base, token, id, shots] = process.argv.slice(2);
const STEP = 90_000;

const { meanColour } = require('./frame_colour.js');

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.AIRLOCK_TEST_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox'],
  });
  // Closed on every path: a failed step must not leave Chromium running.
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const page = await context.newPage();
    const problems = [];
    page.on('console', (message) => { if (message.type() === 'error') problems.push(message.text()); });
    await page.goto(`${base}/ui`);
    await page.fill('#token', token);
    await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
    const row = `tr.lease[data-lease="${id}"]`;
    if (!await page.$(row)) {
      throw new Error(`the dashboard does not list the lease: ${await page.textContent('body')}`);
    }
    const listed = await page.textContent('#leases-open');
    await page.screenshot({ path: `${shots}/dashboard-lease.png`, fullPage: true });
    await Promise.all([page.waitForNavigation(), page.click(`${row} a`)]);
    await page.waitForFunction(() => Number(document.getElementById('lease').dataset.frames || 0) > 0
      && document.getElementById('view').complete, null, { timeout: STEP });
    const colour = await page.evaluate(meanColour);
    await page.screenshot({ path: `${shots}/lease-live.png`, fullPage: true });
    const frames = await page.evaluate(() => Number(document.getElementById('lease').dataset.frames));
    console.log(JSON.stringify({ listed, frames, colour, problems, url: page.url() }));
  } finally {
    await browser.close();
  }
})().catch((error) => {
  console.log(JSON.stringify({ failed: String(error.message).split('\n')[0] }));
  process.exit(1);
});
