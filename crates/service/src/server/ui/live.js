'use strict';
// The live page: shows the task's frames, follows its state, and while it asks for help passes a
// person's clicks, keys and scrolls to the page as input events (the server's input checks decide what
// reaches the browser). Coordinates are the frame's own pixels, which are the page's CSS pixels.
(() => {
  const root = document.getElementById('live');
  const view = document.getElementById('view');
  const placeholder = document.getElementById('placeholder');
  const stateText = document.getElementById('state');
  const helpBox = document.getElementById('help');
  const reason = document.getElementById('reason');
  const said = document.getElementById('said');
  const steps = document.getElementById('steps');
  const base = `/v1/tasks/${encodeURIComponent(root.dataset.task)}`;
  let socket = null;
  let shown = null;
  let frames = 0;
  let moving = null;
  let retries = 0;
  const live = (state) => state === 'running' || state === 'waiting_for_human';

  const tell = (text) => { said.textContent = text; };

  function watch() {
    const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
    socket = new WebSocket(`${scheme}//${location.host}${base}/live`);
    socket.binaryType = 'blob';
    socket.onopen = () => { root.dataset.socket = 'open'; };
    socket.onmessage = (message) => {
      if (typeof message.data === 'string') {
        try { tell(JSON.parse(message.data).refused || message.data); } catch { tell(message.data); }
        return;
      }
      const url = URL.createObjectURL(message.data);
      const previous = shown;
      shown = url;
      view.src = url;
      if (previous) URL.revokeObjectURL(previous);
      frames += 1;
      root.dataset.frames = String(frames);
      placeholder.hidden = true;
      view.hidden = false;
    };
    socket.onclose = (event) => {
      root.dataset.socket = 'closed';
      if (event.code === 1008) {
        tell(`The view closed: ${event.reason}`);
      } else if (live(root.dataset.state) && retries < 30) {
        // The browser may not offer its view yet (the task just started): try again shortly.
        retries += 1;
        setTimeout(watch, 1000);
      }
    };
  }

  const send = (message) => {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  };
  const modifiers = (e) => (e.altKey ? 1 : 0) | (e.ctrlKey ? 2 : 0) | (e.metaKey ? 4 : 0) | (e.shiftKey ? 8 : 0);
  const buttons = ['left', 'middle', 'right'];
  // The size of the last frame drawn. While the next one loads, or if one fails to decode, the image
  // itself has no size, and the size from it would put the pointer nowhere (NaN, sent as null,
  // which the server refuses by closing the view).
  let size = null;
  view.addEventListener('load', () => {
    if (view.naturalWidth > 0 && view.naturalHeight > 0) {
      size = { width: view.naturalWidth, height: view.naturalHeight };
    }
  });
  // Where on the frame the pointer is: the frame is drawn whole and centred (object-fit: contain).
  // Nothing before a frame has been drawn.
  function at(e) {
    if (!size) return null;
    const box = view.getBoundingClientRect();
    const scale = Math.min(box.width / size.width, box.height / size.height);
    if (!(scale > 0 && Number.isFinite(scale))) return null;
    const left = box.left + (box.width - size.width * scale) / 2;
    const top = box.top + (box.height - size.height * scale) / 2;
    const x = Math.min(Math.max((e.clientX - left) / scale, 0), size.width);
    const y = Math.min(Math.max((e.clientY - top) / scale, 0), size.height);
    return { x: Math.round(x), y: Math.round(y) };
  }
  function mouse(eventType, e, extra) {
    const point = at(e);
    if (point) send({ type: 'input_mouse', eventType, ...point, modifiers: modifiers(e), ...extra });
  }
  view.addEventListener('mousedown', (e) => {
    e.preventDefault();
    view.focus();
    mouse('mousePressed', e, { button: buttons[e.button] || 'left', clickCount: Math.min(e.detail || 1, 3) });
  });
  view.addEventListener('mouseup', (e) => {
    e.preventDefault();
    mouse('mouseReleased', e, { button: buttons[e.button] || 'left', clickCount: Math.min(e.detail || 1, 3) });
  });
  // One move per animation frame at most: a pointer sends far more than the stream needs.
  view.addEventListener('mousemove', (e) => {
    if (moving === null) {
      moving = requestAnimationFrame(() => { moving = null; });
      mouse('mouseMoved', e, { button: 'none' });
    }
  });
  view.addEventListener('wheel', (e) => {
    e.preventDefault();
    mouse('mouseWheel', e, { deltaX: Math.round(e.deltaX), deltaY: Math.round(e.deltaY) });
  }, { passive: false });
  view.addEventListener('contextmenu', (e) => e.preventDefault());
  view.addEventListener('dragstart', (e) => e.preventDefault());
  function key(eventType, e) {
    e.preventDefault();
    const message = { type: 'input_keyboard', eventType, key: e.key, code: e.code,
      windowsVirtualKeyCode: e.keyCode, modifiers: modifiers(e) };
    if (eventType === 'keyDown' && e.key.length === 1) message.text = e.key;
    send(message);
  }
  view.addEventListener('keydown', (e) => key('keyDown', e));
  view.addEventListener('keyup', (e) => key('keyUp', e));

  async function act(method, path, done) {
    const response = await fetch(`${base}${path}`, { method, credentials: 'same-origin' });
    const body = await response.json().catch(() => ({}));
    tell(response.ok ? done : (body.error || `${response.status}`));
  }
  document.getElementById('hand-back').addEventListener('click', () => act('POST', '/hand-back', 'Handed back to the worker.'));
  document.getElementById('cancel').addEventListener('click', () => act('DELETE', '', 'Cancelling the task.'));

  function follow() {
    const events = new EventSource(`${base}/events`);
    events.addEventListener('state', (message) => {
      const data = JSON.parse(message.data);
      if (data.state !== root.dataset.state) tell('');
      root.dataset.state = data.state;
      stateText.textContent = data.state === 'waiting_for_human' ? 'waiting for a person' : data.state;
      helpBox.hidden = data.state !== 'waiting_for_human';
      reason.textContent = data.help ? data.help.reason : '';
      if (live(data.state) && !socket) watch();
    });
    // The events start from the first step; the page already lists those it was served with.
    events.addEventListener('step', (message) => {
      const data = JSON.parse(message.data);
      if (data.step <= steps.children.length) return;
      const item = document.createElement('li');
      item.textContent = `${data.step}/${data.max_steps} ${data.summary}`;
      steps.append(item);
    });
    events.addEventListener('done', (message) => {
      const data = JSON.parse(message.data);
      root.dataset.state = 'done';
      stateText.textContent = `done: ${data.ended || data.error || ''}`;
      helpBox.hidden = true;
      document.getElementById('record').hidden = false;
      events.close();
    });
  }
  follow();
  if (live(root.dataset.state)) watch();
})();
