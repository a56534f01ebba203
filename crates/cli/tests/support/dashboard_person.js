// A person at the dashboard, in the host's headless Chromium (Playwright): signs in (a wrong
// token first), finds the task asking for help, checks that a page of another origin on the same
// site can neither hand back nor watch with the person's session, opens the live view, presses
// the lab page's button through it, hands back, sees the worker's navigation arrive, cancels the
// task at its second call for help, and opens its record. Another token's person sees none of
// it. Prints what each step saw as one JSON object; keeps screenshots in SHOTS_DIR.
// Usage: node dashboard_person.js BASE_URL TOKEN OTHER_TOKEN TASK_ID LAB_URL SHOTS_DIR
const { chromium } = require('playwright-core');

const [base, token, otherToken, id, lab, shots] = process.argv.slice(2);
const seen = {};
const STEP = 90_000;

const { meanColour } = require('./frame_colour.js');

// Where on the screen the frame's pixel (x, y) is drawn.
async function onScreen(page, x, y) {
  return page.evaluate(([fx, fy]) => {
    const view = document.getElementById('view');
    const box = view.getBoundingClientRect();
    const scale = Math.min(box.width / view.naturalWidth, box.height / view.naturalHeight);
    const left = box.left + (box.width - view.naturalWidth * scale) / 2;
    const top = box.top + (box.height - view.naturalHeight * scale) / 2;
    return { x: left + fx * scale, y: top + fy * scale };
  }, [x, y]);
}

const frames = (page) => page.evaluate(() => Number(document.getElementById('live').dataset.frames || 0));

// What the live page shows of its stream: said when a wait for a frame runs out.
const streamState = (page) => page.evaluate(() => {
  const live = document.getElementById('live');
  return `frames ${live.dataset.frames || 0}, socket ${live.dataset.socket}, task ${live.dataset.state}, `
    + `image complete ${document.getElementById('view').complete}, said "${document.getElementById('said').textContent}"`;
});

// Wait for a newer frame than `after`, then its colour.
async function nextColour(page, after) {
  try {
    await page.waitForFunction((n) => Number(document.getElementById('live').dataset.frames || 0) > n
      && document.getElementById('view').complete, after, { timeout: STEP });
  } catch (error) {
    throw new Error(`no frame after the ${after}th in ${STEP} ms (${await streamState(page)}): ${error.message}`);
  }
  return page.evaluate(meanColour);
}

// Read the frames that come after the `after`th until one passes `wanted`. The count is taken
// before the action whose frame is awaited: its frame may arrive before the action's promise
// settles.
async function untilFrame(page, after, wanted) {
  for (let count = after; ;) {
    const colour = await nextColour(page, count);
    if (wanted(colour)) return colour;
    count = await frames(page);
  }
}

// Move over `points` in turn until the frame shows `wanted`. The stream drops input for a moment
// after a viewer connects, and a page at rest sends no frame, so a dropped move would leave a
// wait for its frame hanging: each move waits a little for a new frame, then the colour shown
// now is judged either way, and the move is sent again, within STEP.
async function hoverUntil(page, points, wanted) {
  const deadline = Date.now() + STEP;
  for (let turn = 0; ; turn = (turn + 1) % points.length) {
    const count = await frames(page);
    await page.mouse.move(points[turn].x, points[turn].y);
    await page.waitForFunction((n) => Number(document.getElementById('live').dataset.frames || 0) > n
      && document.getElementById('view').complete, count, { timeout: 3_000 }).catch(() => {});
    const colour = await page.evaluate(meanColour);
    if (wanted(colour)) return colour;
    if (Date.now() > deadline) {
      throw new Error(`no frame showed the pointer on the button in ${STEP} ms: the last was ${colour} (${await streamState(page)})`);
    }
  }
}

async function signIn(context, withToken) {
  const page = await context.newPage();
  await page.goto(`${base}/ui`);
  await page.fill('#token', withToken);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  return page;
}

(async () => {
  const browser = await chromium.launch({
    executablePath: process.env.AIRLOCK_TEST_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox'],
  });
  // Closed on every path: a failed step must not leave Chromium running.
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const urls = [];
    context.on('request', (request) => urls.push(request.url()));

    // A wrong token is refused on the form, with the reason.
    const refused = await signIn(context, 'not-a-token-of-this-server');
    seen.wrong_token = await refused.textContent('#problem');
    await refused.close();

    // Signed in: the dashboard lists the task asking for help.
    const page = await signIn(context, token);
    seen.cookie = (await context.cookies()).map(({ name, httpOnly, sameSite, secure, value }) => ({
      name, httpOnly, sameSite, secure, length: value.length,
    }));
    seen.script_cookie = await page.evaluate(() => document.cookie);
    // The test starts this person once the task waits (its events said so).
    if (!await page.$(`tr.task[data-task="${id}"][data-state="waiting_for_human"]`)) {
      throw new Error(`the dashboard does not list the task as waiting for a person: ${await page.textContent('body')}`);
    }
    seen.dashboard_help = await page.textContent('.help-request');
    seen.dashboard_server = await page.textContent('#server');
    await page.screenshot({ path: `${shots}/dashboard-waiting.png`, fullPage: true });
    // A second tab keeps the dashboard open, never navigated by the test, to see it follow.
    const board = await context.newPage();
    await board.goto(`${base}/ui`);

    // A page of another origin on the same site (the lab's) holds the person's cookie too
    // (SameSite counts no ports): it can neither hand back nor open the live view.
    const elsewhere = await context.newPage();
    await elsewhere.goto(lab);
    seen.elsewhere = await elsewhere.evaluate(async ([server, task]) => {
      const out = {};
      try {
        const response = await fetch(`${server}/v1/tasks/${task}/hand-back`, { method: 'POST', credentials: 'include' });
        out.hand_back = `answered ${response.status}`;
      } catch (error) {
        out.hand_back = 'failed';
      }
      out.live = await new Promise((resolve) => {
        const socket = new WebSocket(`${server.replace('http', 'ws')}/v1/tasks/${task}/live`);
        socket.onopen = () => resolve('open');
        socket.onerror = () => resolve('failed');
      });
      return out;
    }, [base, id]);
    await elsewhere.close();

    // The live view: the help request, the frames, and the person's press on the button.
    await Promise.all([page.waitForNavigation(), page.click(`tr.task[data-task="${id}"] a`)]);
    await page.waitForFunction(() => !document.getElementById('help').hidden, null, { timeout: STEP });
    seen.live_reason = await page.textContent('#reason');
    // Positions on the frame are known once one has been drawn.
    await page.waitForFunction(() => document.getElementById('view').naturalWidth > 0, null, { timeout: STEP });
    const button = [await onScreen(page, 640, 180), await onScreen(page, 642, 182)];
    // While a new frame loads the image has no size of its own (Chromium drops it as soon as the
    // source changes). A move then must still land where the last frame put it: a pointer
    // computed from no size is NaN, sent as null, and the server closes the view on it.
    seen.move_without_a_size = await page.evaluate(async ([x, y]) => {
      const view = document.getElementById('view');
      const frame = view.src;
      view.removeAttribute('src');
      for (let turn = 0; view.naturalWidth > 0; turn += 1) {
        if (turn > 600) return 'the image kept its size without a source';
        await new Promise((resolve) => requestAnimationFrame(resolve));
      }
      view.dispatchEvent(new MouseEvent('mousemove', { clientX: x, clientY: y, bubbles: true }));
      // A frame that came meanwhile has set its own source.
      if (!view.getAttribute('src')) view.src = frame;
      return 'sent';
    }, [button[0].x, button[0].y]);
    // Move over the button until the page shows the pointer there (blue).
    await hoverUntil(page, button, ([r, g, b]) => b > 200 && r < 60 && g < 60);
    const beforePress = await frames(page);
    await page.mouse.click(button[0].x, button[0].y);
    seen.pressed = await untilFrame(page, beforePress, ([r, g, b]) => g > 200 && r < 60 && b < 60);
    await page.screenshot({ path: `${shots}/live-helping.png`, fullPage: true });

    // Handed back: the worker goes on to the next page, and the view follows it there. (Its
    // state may pass through `running` faster than the page's events tell it.)
    const beforeHandBack = await frames(page);
    await page.click('#hand-back');
    seen.navigated = await untilFrame(page, beforeHandBack, ([r, g, b]) => r > 100 && b > 100 && g < 60);
    await page.waitForFunction(() => document.querySelectorAll('#steps li').length >= 3, null, { timeout: STEP });
    seen.steps_listed = await page.$$eval('#steps li', (items) => items.map((item) => item.textContent));

    // The second call for help is answered by cancelling the task.
    await page.waitForFunction(() => document.getElementById('reason').textContent === 'Confirm the purchase'
      && !document.getElementById('help').hidden, null, { timeout: STEP });
    seen.second_reason = await page.textContent('#reason');
    await page.screenshot({ path: `${shots}/live-second-call.png`, fullPage: true });
    await page.click('#cancel');
    await page.waitForFunction(() => document.getElementById('live').dataset.state === 'done', null, { timeout: STEP });
    seen.final_state = await page.textContent('#state');
    // The dashboard left open updates itself: the task shows as ended there too.
    await board.waitForSelector(`tr.task[data-task="${id}"][data-state="done"]`, { timeout: STEP });
    seen.board_followed = true;
    await board.close();

    // The dashboard shows how it ended and links its record.
    await page.goto(`${base}/ui`);
    seen.dashboard_done = await page.textContent(`tr.task[data-task="${id}"]`);
    await page.screenshot({ path: `${shots}/dashboard-done.png`, fullPage: true });
    await Promise.all([page.waitForNavigation(), page.click(`tr.task[data-task="${id}"] a[href$="record.html"]`)]);
    seen.record_title = await page.title();
    await page.screenshot({ path: `${shots}/record.png`, fullPage: true });

    // Signing out ends the session: the dashboard asks for a token again.
    await page.goto(`${base}/ui`);
    await Promise.all([page.waitForNavigation(), page.click('header form button')]);
    seen.after_sign_out = await page.$eval('#token', (input) => input.type);
    seen.token_in_a_url = urls.some((url) => url.includes(token));

    // Another token's person sees no task, and this one's live page is missing for them.
    const stranger = await browser.newContext();
    const theirs = await signIn(stranger, otherToken);
    seen.stranger_tasks = await theirs.$$eval('tr.task', (rows) => rows.length);
    const response = await theirs.goto(`${base}/ui/tasks/${id}`);
    seen.stranger_live = response.status();
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(seen));
})().catch((error) => {
  console.error(error);
  console.log(JSON.stringify({ ...seen, error: String(error) }));
  process.exit(1);
});
