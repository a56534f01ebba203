// A raw WebSocket client (the `ws` package) for what libraries never send, and for the limits.
// Usage: node cdp_raw.js WS_URL MODE
//   guard: unreadable messages, refused and rewritten commands, then Browser.close.
//   silent: send nothing and report how the server closes the connection.
//   busy: ask for the version every second (never idle) and report how the server closes it.
//   flood: print "open", wait for a line on stdin, then send 1 MiB commands until the server
//     closes the connection (the test freezes the browser first), and report how it closed.
//   hostile: print "open", wait for a line on stdin, then send the largest messages the server
//     takes (32 MiB: one of sixteen million zeros, one long script) and ask the browser for a
//     48 MiB answer, each three times; report the answers (their sizes, not the 48 MiB).
// Prints one JSON object.
const WebSocket = require('ws');

const [url, mode] = process.argv.slice(2);
const socket = new WebSocket(url);
const replies = [];
let waiting = null;

socket.on('message', (data) => {
  const text = data.toString();
  const message = JSON.parse(text);
  if (message.id === undefined && message.method) return; // an event
  replies.push(message);
  if (waiting) {
    const resolve = waiting;
    waiting = null;
    resolve(message);
  }
});

function ask(text) {
  return new Promise((resolve) => {
    waiting = resolve;
    socket.send(text);
  });
}

const closed = new Promise((resolve) => {
  socket.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
});

socket.on('error', (error) => {
  console.log(JSON.stringify({ failed: String(error.message) }));
  process.exit(1);
});

socket.on('open', async () => {
  const out = {};
  if (mode === 'guard') {
    out.not_json = await ask('not json');
    out.no_id = await ask('{"method":"Browser.getVersion"}');
    out.bad_params = await ask('{"id":3,"method":"Page.navigate","params":["file:///"]}');
    out.version = await ask('{"id":4,"method":"Browser.getVersion"}');
    out.unflattened = await ask('{"id":5,"method":"Target.sendMessageToTarget","params":{"message":"{}","targetId":"x"}}');
    out.download = await ask('{"id":6,"method":"Browser.setDownloadBehavior","params":{"behavior":"allow","downloadPath":"/tmp"}}');
    out.new_tab_file = await ask('{"id":7,"method":"Target.createTarget","params":{"url":" FI\\tLE:///etc/passwd"}}');
    out.close = await ask('{"id":8,"method":"Browser.close"}');
    socket.send('{"id":9,"method":"Browser.getVersion"}');
  }
  if (mode === 'busy') {
    let id = 100;
    const timer = setInterval(() => socket.send(JSON.stringify({ id: id++, method: 'Browser.getVersion' })), 1000);
    closed.then(() => clearInterval(timer));
  }
  if (mode === 'flood') {
    console.log('open');
    await new Promise((resolve) => process.stdin.once('data', resolve));
    const big = 'x'.repeat(1024 * 1024);
    let id = 1000;
    const timer = setInterval(() => {
      if (socket.readyState === WebSocket.OPEN) {
        socket.send(JSON.stringify({ id: id++, method: 'Runtime.evaluate', params: { expression: `'${big}'.length` } }));
      }
    }, 20);
    closed.then(() => clearInterval(timer));
  }
  if (mode === 'hostile') {
    const largest = 32 * 1024 * 1024 - 4096;
    const page = await ask('{"id":1,"method":"Target.createTarget","params":{"url":"about:blank"}}');
    const attached = await ask(JSON.stringify({ id: 2, method: 'Target.attachToTarget', params: { targetId: page.result.targetId, flatten: true } }));
    const sessionId = attached.result.sessionId;
    console.log('open');
    await new Promise((resolve) => process.stdin.once('data', resolve));
    const zeros = `[${'0,'.repeat(largest / 2 - 64)}0]`;
    const script = `'${'x'.repeat(largest - 256)}'.length`;
    const answer = 48 * 1024 * 1024;
    out.zeros = [];
    out.script = [];
    out.answer = [];
    for (let round = 0; round < 3; round++) {
      out.zeros.push(await ask(`{"id":${10 + round},"sessionId":"${sessionId}","method":"Runtime.evaluate","params":{"expression":"1","padding":${zeros}}}`));
      out.script.push(await ask(JSON.stringify({ id: 20 + round, sessionId, method: 'Runtime.evaluate', params: { expression: script } })));
      const big = await ask(JSON.stringify({ id: 30 + round, sessionId, method: 'Runtime.evaluate', params: { expression: `'y'.repeat(${answer})`, returnByValue: true } }));
      out.answer.push(big.result ? big.result.result.value.length : big);
    }
    socket.close(1000);
  }
  out.closed = await closed;
  out.replies_after_close = replies.filter((reply) => reply.id === 9).length;
  console.log(JSON.stringify(out));
  process.exit(0);
});
