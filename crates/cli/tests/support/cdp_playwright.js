// Playwright (playwright-core, Node) drives a sealed browser over Airlock's CDP endpoint.
// Usage: node cdp_playwright.js ENDPOINT LAB_URL FORBIDDEN_PORT
// ENDPOINT is an http:// URL (discovery through /json/version). Prints one JSON object.
const { chromium } = require('playwright-core');

const [endpoint, lab, forbiddenPort] = process.argv.slice(2);
const forbidden = `http://127.0.0.1:${forbiddenPort}/secret`;

async function attempt(action) {
  try {
    return { ok: await action() };
  } catch (error) {
    return { error: String(error.message).split('\n')[0] };
  }
}

async function visit(page, url) {
  return attempt(async () => {
    const response = await page.goto(url);
    return {
      status: response.status(),
      refused: response.headers()['x-airlock-refused'] || null,
    };
  });
}

(async () => {
  const out = {};
  const browser = await chromium.connectOverCDP(endpoint);
  const context = browser.contexts()[0];
  const page = context.pages()[0] || (await context.newPage());
  await page.goto(lab);
  out.text = await page.textContent('h1');
  const shot = await page.screenshot();
  out.screenshot_png = shot.subarray(0, 4).toString('hex') === '89504e47';
  out.file = await visit(page, 'file:///etc/hostname');
  out.chrome = await visit(page, 'chrome://version');
  out.view_source = await visit(page, 'view-source:' + lab);
  out.loopback = await visit(page, forbidden);
  out.private = await visit(page, 'http://10.0.0.1/');
  out.metadata = await visit(page, 'http://169.254.169.254/latest/meta-data/');
  out.devtools_port = await visit(page, 'http://127.0.0.1:9222/json/version');
  await page.goto(lab);
  // A page's own script opening a file: the guard never sees it; Chromium refuses it, and says so.
  const blocked = page.waitForEvent('console', {
    predicate: (message) => message.text().includes('Not allowed to load local resource'),
  });
  await page.evaluate(() => { location.href = 'file:///etc/hostname'; });
  out.script_file = { console: (await blocked).text(), url: page.url() };
  // A page's own script reaching for what the browser may not.
  out.script_fetch = await page.evaluate(async (targets) => {
    const results = [];
    for (const target of targets) {
      try {
        const response = await fetch(target, { mode: 'no-cors' });
        results.push(`${target} answered (type ${response.type})`);
      } catch (error) {
        results.push(`${target} failed`);
      }
    }
    return results;
  }, [forbidden, 'http://169.254.169.254/latest/meta-data/']);
  // What the guard lets through is still sealed: a new context has the same single way out.
  const other = await browser.newContext();
  const otherPage = await other.newPage();
  out.new_context_lab = (await visit(otherPage, lab));
  out.new_context_loopback = await visit(otherPage, forbidden);
  await other.close();
  const session = await browser.newBrowserCDPSession();
  out.own_proxy = await attempt(() =>
    session.send('Target.createBrowserContext', { proxyServer: `http://127.0.0.1:${forbiddenPort}` }),
  );
  out.certificates = await attempt(() =>
    session.send('Security.setIgnoreCertificateErrors', { ignore: true }),
  );
  out.expose = await attempt(() =>
    session.send('Target.exposeDevToolsProtocol', { targetId: 'x' }),
  );
  // Paths on the sealed browser's disk are refused; Playwright's own setInputFiles sends a file's
  // content from the client's side, which stays allowed.
  const pageSession = await context.newCDPSession(page);
  out.upload_path = await attempt(() =>
    pageSession.send('DOM.setFileInputFiles', { files: ['/etc/hostname'], backendNodeId: 1 }),
  );
  out.still_works = await page.evaluate(() => 6 * 7);
  await browser.close();
  console.log(JSON.stringify(out));
})().catch((error) => {
  console.log(JSON.stringify({ failed: String(error.stack || error) }));
  process.exit(1);
});
