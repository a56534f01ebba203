// A viewer of a task's live view (the `ws` package), or a person helping through it: connects
// with the token, prints "open", then one line per message from the server (a frame as its JPEG
// in base64, text as "text …"), and sends each line it reads on stdin as one text message;
// "closed CODE" when the server closes the socket, "refused STATUS" if it will not upgrade.
// Usage: node live_viewer.js WS_URL TOKEN, or WS_URL "cookie NAME=VALUE" for a signed-in
// browser (sent with the page's own Origin, as a browser on the page would).
const WebSocket = require('ws');
const readline = require('readline');

const [url, token] = process.argv.slice(2);
const headers = token.startsWith('cookie ')
  ? { cookie: token.slice('cookie '.length), origin: new URL(url.replace(/^ws/, 'http')).origin }
  : { authorization: `Bearer ${token}` };
const socket = new WebSocket(url, { headers });
socket.on('open', () => {
  console.log('open');
  readline.createInterface({ input: process.stdin }).on('line', (line) => socket.send(line));
});
socket.on('message', (data, binary) => {
  console.log(binary ? Buffer.from(data).toString('base64') : `text ${data}`);
});
socket.on('unexpected-response', (request, response) => {
  console.log(`refused ${response.statusCode}`);
  process.exit(0);
});
socket.on('close', (code) => {
  console.log(`closed ${code}`);
  process.exit(0);
});
socket.on('error', (error) => {
  console.log(`error ${error.message}`);
  process.exit(1);
});
