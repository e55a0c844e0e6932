/* Live refresh without a full reload (no library, no build step).
 * <div data-live="URL" data-live-interval="4000"> ... </div>: every interval, fetch URL (a
 * server-rendered fragment) and, when it changed, swap it in. Open <details id=...> stay open.
 * Stops once the fragment carries [data-live-final] (e.g. the workflow finished) or the session
 * ended (the fetch was redirected to the login page); backs off while the server is unreachable. */
(function () {
  "use strict";

  function start(region) {
    var url = region.getAttribute("data-live");
    var base = parseInt(region.getAttribute("data-live-interval") || "4000", 10);
    var delay = base;
    var last = null;

    function schedule() { window.setTimeout(tick, delay); }

    function swap(html) {
      var open = Array.prototype.map.call(region.querySelectorAll("details[id][open]"), function (d) { return d.id; });
      region.innerHTML = html;
      open.forEach(function (id) {
        var details = document.getElementById(id);
        if (details) { details.open = true; }
      });
      region.dispatchEvent(new CustomEvent("live:updated", { bubbles: true }));
    }

    function tick() {
      if (document.hidden) { schedule(); return; }
      fetch(url, { credentials: "same-origin", cache: "no-store", headers: { "X-Requested-With": "live" } })
        .then(function (response) {
          if (response.redirected) { return null; } /* logged out: stop quietly */
          if (!response.ok) { throw new Error("HTTP " + response.status); }
          return response.text();
        })
        .then(function (html) {
          if (html === null) { return; }
          delay = base;
          if (html !== last) { last = html; swap(html); }
          region.setAttribute("data-live-at", String(Date.now()));
          if (!region.querySelector("[data-live-final]")) { schedule(); }
        })
        .catch(function () {
          delay = Math.min(delay * 2, 60000);
          schedule();
        });
    }

    if (!region.querySelector("[data-live-final]")) { schedule(); }
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-live]"), start);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
