'use strict';
// A CDP lease's live page: shows the lease's frames while it is open. The lease's client drives
// the page; nothing here reaches it.
(() => {
  const root = document.getElementById('lease');
  const view = document.getElementById('view');
  const placeholder = document.getElementById('placeholder');
  const said = document.getElementById('said');
  const url = `/v1/leases/${encodeURIComponent(root.dataset.lease)}/live`;
  let shown = null;
  let frames = 0;
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const socket = new WebSocket(`${scheme}//${location.host}${url}`);
  socket.binaryType = 'blob';
  socket.onopen = () => { root.dataset.socket = 'open'; };
  socket.onmessage = (message) => {
    if (typeof message.data === 'string') return;
    const next = URL.createObjectURL(message.data);
    const previous = shown;
    shown = next;
    view.src = next;
    if (previous) URL.revokeObjectURL(previous);
    frames += 1;
    root.dataset.frames = String(frames);
    placeholder.hidden = true;
    view.hidden = false;
  };
  socket.onclose = (event) => {
    root.dataset.socket = 'closed';
    said.textContent = event.code === 1000 || event.code === 1006
      ? 'The lease has ended: its browser is gone.'
      : `The view closed: ${event.reason || event.code}`;
  };
})();
