// Two Playwright clients at once: each has its own sealed browser; closing one leaves the other.
// Usage: node cdp_two.js ENDPOINT LAB_URL. Prints JSON lines; waits for a line on stdin after
// {"both": …} and after {"closed_first": true}, so the test can look at the containers meanwhile.
const { chromium } = require('playwright-core');
const readline = require('readline');

const [endpoint, lab] = process.argv.slice(2);
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (value) => console.log(JSON.stringify(value));

async function open() {
  const browser = await chromium.connectOverCDP(endpoint);
  const context = browser.contexts()[0];
  const page = context.pages()[0] || (await context.newPage());
  await page.goto(lab);
  return { browser, context, page };
}

(async () => {
  const [first, second] = await Promise.all([open(), open()]);
  await first.page.evaluate(() => localStorage.setItem('who', 'first'));
  await first.context.addCookies([{ name: 'who', value: 'first', url: lab }]);
  say({
    both: true,
    second_sees_storage: await second.page.evaluate(() => localStorage.getItem('who')),
    second_sees_cookies: (await second.context.cookies()).length,
  });
  await lines.next();
  await first.browser.close();
  say({ closed_first: true });
  await lines.next();
  await second.page.reload();
  say({
    second_text: await second.page.textContent('h1'),
    second_storage: await second.page.evaluate(() => localStorage.getItem('who')),
  });
  await second.browser.close();
  process.exit(0);
})().catch((error) => {
  say({ failed: String(error.stack || error) });
  process.exit(1);
});
