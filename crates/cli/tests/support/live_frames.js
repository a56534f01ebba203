// A viewer of a task's live view (the `ws` package): connects with the token, prints "open", then
// one line per frame (the JPEG in base64) until the server closes the socket, then "closed CODE".
// Usage: node live_frames.js WS_URL TOKEN
const WebSocket = require('ws');

const [url, token] = process.argv.slice(2);
const socket = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
socket.on('open', () => console.log('open'));
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
