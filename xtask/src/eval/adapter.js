// Airlock eval adapter, appended to MiniWoB++'s core/core.js by the lab (xtask/src/eval/lab.py).
// MiniWoB++ normally waits for a click on a START cover, runs 10-second episodes with a reward
// that shrinks with time, and starts a new episode as soon as one ends. An agent that reads the
// page, thinks for a minute and acts needs one episode that starts when the page loads, lasts as
// long as the harness allows, and reports its raw reward once.
(function () {
  var parts = window.location.pathname.split('/');
  // Pages are served at /e/<episode>/miniwob/<task>.html.
  var episode = parts[1] === 'e' ? parts[2] : null;
  var seed = core.QueryString.seed;
  var started = false;

  function tell(event) {
    if (episode === null) return;
    event.episode = episode;
    // Synchronous, so the event is in the lab's log before the page goes on (or is closed).
    var request = new XMLHttpRequest();
    request.open('POST', '/e/' + episode + '/airlock/event', false);
    request.setRequestHeader('Content-Type', 'application/json');
    try { request.send(JSON.stringify(event)); } catch (e) { /* the lab is gone: nothing to tell */ }
  }

  var showCover = core.startEpisode;
  core.startEpisode = function () {
    if (started) return; // one episode per page load: the first result is the result
    started = true;
    showCover(); // makes the cover startEpisodeReal hides
    if (seed !== undefined) Math.seedrandom(seed);
    core.EPISODE_MAX_TIME = 24 * 3600 * 1000; // the harness's own time limit ends the task
    core.startEpisodeReal();
    var query = document.getElementById('query');
    tell({ event: 'start', query: query ? query.textContent : '' });
  };

  var end = core.endEpisode;
  core.endEpisode = function (reward, timeProportional, reason) {
    if (core.EP_TIMER === null) return; // already ended
    end(reward, false, reason);
    tell({ event: 'reward', reward: reward, reason: reason === undefined ? null : String(reason) });
  };
})();
