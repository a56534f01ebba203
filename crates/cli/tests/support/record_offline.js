// Opens a task's record (record.html) in the host's headless Chromium with the network off, and
// prints what a person would see: the steps, the refusals, whether every picture loaded, what the
// page asked for beyond itself, and what it logged. Saves a screenshot for a person to look at.
// Usage: node record_offline.js RECORD_HTML SCREENSHOT_PNG
const { chromium } = require('playwright-core');

(async () => {
  const [file, shot] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: process.env.AIRLOCK_TEST_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox'],
  });
  const context = await browser.newContext({ offline: true, viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  const asked = [];
  const logged = [];
  const dialogs = [];
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith('data:') && url !== `file://${file}`) asked.push(url);
  });
  page.on('console', (message) => logged.push(`${message.type()}: ${message.text()}`));
  page.on('dialog', async (dialog) => { dialogs.push(dialog.message()); await dialog.dismiss(); });
  await page.goto(`file://${file}`, { waitUntil: 'load' });
  const seen = await page.evaluate(() => {
    const images = [...document.querySelectorAll('img.thumb')];
    return {
      title: document.title,
      steps: document.querySelectorAll('#timeline .step').length,
      refused_steps: document.querySelectorAll('#timeline .step.is-refused').length,
      allowed_rows: [...document.querySelectorAll('#egress-allowed tr.allowed code')].map((c) => c.textContent),
      images: images.length,
      images_loaded: images.filter((img) => img.complete && img.naturalWidth > 0).length,
      egress_refusals: [...document.querySelectorAll('#egress-refusals tr.refusal')].map((row) => row.innerText),
      report: document.querySelector('#report').innerText,
      timeline: document.querySelector('#timeline').innerText,
      scripts: document.scripts.length,
    };
  });
  // A thumbnail grows when clicked: the page's one script ran (its hash matched the policy).
  let enlarged = false;
  if (seen.images > 0) {
    await page.click('img.thumb');
    enlarged = await page.evaluate(() => document.querySelector('img.thumb').classList.contains('big'));
    await page.screenshot({ path: shot.replace(/\.png$/, '-enlarged.png') });
    await page.click('img.thumb.big');
  }
  await page.screenshot({ path: shot, fullPage: true });
  await browser.close();
  console.log(JSON.stringify({ ...seen, enlarged, asked, logged, dialogs }));
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
