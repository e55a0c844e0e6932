/* The task page (pages/templates/pages/task_detail.html): a terminal into the task, its log followed live,
 * its events, and "Open port". No build step; xterm.js and its fit addon are vendored static files.
 *
 * The terminal is an exec session of the API: POST .../tasks/<task>/sessions/ (the pages' session cookie and
 * the CSRF token) hands out a single-use ticket, and the websocket /ws/sessions/exec/<ticket>/ carries
 * v5.channel.k8s.io frames: the first byte names the stream (0 stdin, 1 stdout, 2 stderr, 3 status, 4 resize
 * {"Width","Height"}). The log and the events are the API's GET .../logs/ and .../events/, polled. */
(function () {
  "use strict";

  var STDIN = 0, STDOUT = 1, STDERR = 2, STATUS = 3, RESIZE = 4;
  var SHELL = ["/bin/sh", "-c", "if [ -x /bin/bash ]; then exec /bin/bash; else exec /bin/sh; fi"];

  function api(root, path, params) {
    var query = root.dataset.ownerQuery || "";
    var extra = params ? new URLSearchParams(params).toString() : "";
    if (extra) { query += (query ? "&" : "?") + extra; }
    return root.dataset.api + path + query;
  }

  function json(response) {
    return response.json().then(function (body) {
      if (!response.ok) { throw new Error(body.message || ("HTTP " + response.status)); }
      return body;
    });
  }

  /* ---- terminal ---- */
  function terminal(root) {
    var button = document.getElementById("terminal-open");
    if (!button) { return; }
    var box = document.getElementById("terminal");
    var state = document.getElementById("terminal-state");
    var encoder = new TextEncoder();
    var decoder = new TextDecoder();
    var term = null, fit = null, socket = null;

    function frame(channel, bytes) {
      var data = new Uint8Array(bytes.length + 1);
      data[0] = channel;
      data.set(bytes, 1);
      return data;
    }

    function resize() {
      if (!term || !socket || socket.readyState !== WebSocket.OPEN) { return; }
      fit.fit();
      socket.send(frame(RESIZE, encoder.encode(JSON.stringify({ Width: term.cols, Height: term.rows }))));
    }

    function open() {
      button.disabled = true;
      state.textContent = "Connecting…";
      fetch(api(root, "/tasks/" + encodeURIComponent(root.dataset.task) + "/sessions/"), {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": root.dataset.csrf },
        body: JSON.stringify({ kind: "exec", command: SHELL, tty: true })
      }).then(json).then(function (session) {
        var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
        socket = new WebSocket(scheme + window.location.host + session.websocket, ["v5.channel.k8s.io"]);
        socket.binaryType = "arraybuffer";
        if (!term) {
          box.hidden = false;
          term = new window.Terminal({ cursorBlink: true, convertEol: false, fontSize: 13 });
          fit = new window.FitAddon.FitAddon();
          term.loadAddon(fit);
          term.open(box);
          term.onData(function (text) {
            if (socket && socket.readyState === WebSocket.OPEN) { socket.send(frame(STDIN, encoder.encode(text))); }
          });
          window.addEventListener("resize", resize);
        }
        socket.onopen = function () {
          state.textContent = "Connected (session " + session.id + ").";
          resize();
          term.focus();
        };
        socket.onmessage = function (event) {
          var data = new Uint8Array(event.data);
          if (data[0] === STDOUT || data[0] === STDERR) {
            term.write(decoder.decode(data.subarray(1), { stream: true }));
          } else if (data[0] === STATUS) {
            var status = JSON.parse(decoder.decode(data.subarray(1)));
            state.textContent = status.status === "Success" ? "The shell exited." : "The shell ended: " + status.message + ".";
          }
        };
        socket.onclose = function (event) {
          if (event.code !== 1000 || !/exited|ended/.test(state.textContent)) {
            state.textContent = "Disconnected" + (event.reason ? ": " + event.reason : "") + ".";
          }
          button.disabled = false;
          button.textContent = "Open a new terminal";
          socket = null;
        };
      }).catch(function (error) {
        state.textContent = "Could not open a terminal: " + error.message;
        button.disabled = false;
      });
    }

    button.addEventListener("click", open);
  }

  /* ---- open port ---- */
  function openPort() {
    var form = document.getElementById("open-port");
    if (!form) { return; }
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var port = parseInt(document.getElementById("port-number").value, 10);
      if (port >= 1 && port <= 65535) { window.open(form.dataset.prefix + "/" + port + "/", "_blank"); }
    });
  }

  /* ---- log and events, polled ---- */
  function poll(root) {
    var delay = parseInt(root.dataset.refresh || "4000", 10);
    var log = document.getElementById("task-log");
    var logState = document.getElementById("log-state");
    var follow = document.getElementById("log-follow");
    var events = document.querySelector("#task-events tbody");
    var eventsState = document.getElementById("events-state");
    var lastLog = null, lastEvents = null;

    function showLog(answer) {
      var text = answer.lines.join("\n");
      if (text === lastLog) { return; }
      lastLog = text;
      log.textContent = text;
      log.dataset.lines = String(answer.lines.length);
      if (follow.checked) { log.scrollTop = log.scrollHeight; }
      logState.textContent = (answer.truncated ? "The last " + answer.lines.length + " lines" : answer.lines.length + " lines") +
        "; new lines appear as the task writes them.";
    }

    function showEvents(answer) {
      var mine = answer.events.filter(function (e) { return e.task === root.dataset.task; });
      var key = JSON.stringify(mine);
      if (key === lastEvents) { return; }
      lastEvents = key;
      events.textContent = "";
      mine.forEach(function (e) {
        var row = events.insertRow();
        row.dataset.kind = e.kind;
        [e.time.replace("T", " ").slice(0, 19), e.source, e.kind, e.message].forEach(function (text) {
          row.insertCell().textContent = text;
        });
      });
      eventsState.textContent = answer.backend_error || "";
    }

    function tick() {
      if (document.hidden) { window.setTimeout(tick, delay); return; }
      var work = [fetch(api(root, "/events/"), { credentials: "same-origin", cache: "no-store" }).then(json).then(showEvents)];
      if (root.dataset.hasLog) {
        work.push(fetch(api(root, "/logs/", { task: root.dataset.task, tail: root.dataset.logLines }),
          { credentials: "same-origin", cache: "no-store" }).then(json).then(showLog));
      }
      Promise.all(work).then(function () {
        if (!root.dataset.final) { window.setTimeout(tick, delay); }
      }).catch(function (error) {
        logState.textContent = "Could not read the log: " + error.message;
        window.setTimeout(tick, Math.min(delay * 4, 60000));
      });
    }
    tick();
  }

  function init() {
    var root = document.getElementById("task-page");
    if (!root) { return; }
    terminal(root);
    openPort();
    poll(root);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
