// A raw CDP client (the `ws` package) whose lease is watched meanwhile: it attaches to the page
// (flat session), opens LAB_URL, and prints {"ready":…,"lease":ID} (the upgrade's Airlock-Lease
// header); at each line on stdin it goes on: to LAB_URL + "red" (prints {"moved":true}), then
// reads the title and prints everything it received that was not its own: answers to ids it
// never sent, sessions it never had, attach or detach events for other sessions.
// When the server closes the connection it prints {"closed":CODE,"reason":…} and exits.
// Usage: node cdp_watched.js WS_URL LAB_URL
const WebSocket = require('ws');
const readline = require('readline');

const [url, lab] = process.argv.slice(2);
const socket = new WebSocket(url);
const lines = readline.createInterface({ input: process.stdin });
const nextLine = () => new Promise((resolve) => lines.once('line', resolve));
const sent = new Set();
const foreign = [];
const attaches = [];
const waiting = new Map();
const eventWaiters = [];
let session = null;
let received = 0;
let lease = null;
let nextId = 1;

socket.on('upgrade', (response) => { lease = response.headers['airlock-lease'] || null; });

socket.on('message', (data) => {
  received += 1;
  const text = data.toString();
  const message = JSON.parse(text);
  const theirs = (message.sessionId !== undefined && message.sessionId !== session)
    || (message.id !== undefined && !sent.has(message.id));
  if (theirs) foreign.push(text.slice(0, 300));
  // Its own attach event comes before the answer that names the session: judged at the end.
  if (message.method === 'Target.attachedToTarget' || message.method === 'Target.detachedFromTarget') {
    attaches.push(text);
  }
  if (message.id !== undefined && waiting.has(message.id)) {
    waiting.get(message.id)(message);
    waiting.delete(message.id);
  }
  if (message.method) {
    for (const waiter of eventWaiters.splice(0)) {
      if (waiter.method === message.method && message.sessionId === session) waiter.resolve(message);
      else eventWaiters.push(waiter);
    }
  }
});

function ask(method, params = {}, onSession = false) {
  const id = nextId;
  nextId += 1;
  sent.add(id);
  const message = { id, method, params };
  if (onSession) message.sessionId = session;
  return new Promise((resolve) => {
    waiting.set(id, resolve);
    socket.send(JSON.stringify(message));
  });
}
const event = (method) => new Promise((resolve) => eventWaiters.push({ method, resolve }));

async function open(target) {
  const loaded = event('Page.loadEventFired');
  const answer = await ask('Page.navigate', { url: target }, true);
  if (answer.error) throw new Error(JSON.stringify(answer.error));
  await loaded;
}

socket.on('close', (code, reason) => {
  console.log(JSON.stringify({ closed: code, reason: reason.toString() }));
  process.exit(0);
});

socket.on('error', (error) => {
  console.log(JSON.stringify({ failed: String(error.message) }));
  process.exit(1);
});

socket.on('open', async () => {
  const targets = await ask('Target.getTargets');
  const page = targets.result.targetInfos.find((info) => info.type === 'page');
  const attached = await ask('Target.attachToTarget', { targetId: page.targetId, flatten: true });
  session = attached.result.sessionId;
  await ask('Page.enable', {}, true);
  await open(lab);
  console.log(JSON.stringify({ ready: true, lease }));
  await nextLine();
  await open(`${lab}red`);
  console.log(JSON.stringify({ moved: true }));
  await nextLine();
  const title = await ask('Runtime.evaluate', { expression: 'document.title', returnByValue: true }, true);
  for (const text of attaches) {
    if (JSON.parse(text).params.sessionId !== session) foreign.push(text.slice(0, 300));
  }
  console.log(JSON.stringify({ title: title.result.result.value, received, foreign }));
  socket.removeAllListeners('close');
  socket.close();
  process.exit(0);
});
