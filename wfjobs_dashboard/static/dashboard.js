// workflow-jobs dashboard: refreshes the live part of a page while it is open.
//
// A page with data-events follows the coordinator's job event stream
// (server-sent events): each "change" fetches the live part again, at most
// once a second, and a slow poll (every 10 s) catches what changes without a
// job event (ages, expiries, pauses). Without the stream (no data-events, or
// the coordinator refuses the watch: "unavailable") the page polls every
// data-interval ms (2 s unless the page says otherwise, never more often than
// once a second). Either way: one request at a time, paused while the tab is
// hidden or while one of the live part's forms is being filled in. While the
// coordinator is not answering, the live part is answered with the banner every
// page shows then (X-Coordinator-Down): it is shown above what the page shows,
// greyed; a dashboard that does not answer at all gets a banner of its own.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  var target = document.getElementById("live");
  if (!main || !target) return;
  var url = main.getAttribute("data-live");
  var eventsUrl = main.getAttribute("data-events");
  var every = Math.max(1000, parseInt(main.getAttribute("data-interval") || "2000", 10));
  var EVENTS_POLL_MS = 10000;
  var MIN_GAP_MS = 1000;
  var status = document.createElement("div");
  status.className = "live-status";
  status.id = "live-status";
  status.textContent = "live";
  document.body.appendChild(status);
  var busy = false;
  var again = false;
  var lastFetch = Date.now();
  var following = false;
  var queued = null;
  var banner = null;
  var downBanner = null;
  var failingSince = null;

  // Typing in (or having filled in) one of the live part's forms holds the refresh,
  // so a reason being written is not wiped.
  function editing() {
    var el = document.activeElement;
    if (el && target.contains(el) && /^(INPUT|SELECT|TEXTAREA)$/.test(el.tagName)) return true;
    var fields = target.querySelectorAll("input:not([type=hidden]), textarea");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === "checkbox" ? f.checked !== f.defaultChecked : f.value !== f.defaultValue) {
        return true;
      }
    }
    return false;
  }

  function openDetails() {
    var open = [];
    target.querySelectorAll("details[open]").forEach(function (d, i) { open.push(i); });
    return open;
  }

  // The time in UTC, as every other time on the dashboard (2026-12-04 03:12:45 UTC).
  function utcNow() {
    var iso = new Date().toISOString();
    return iso.slice(0, 10) + " " + iso.slice(11, 19) + " UTC";
  }

  function label() {
    return (following ? "live (events)" : "live") + " · " + utcNow();
  }

  function refresh() {
    if (busy) { again = true; return; }
    if (document.hidden || editing()) return;
    busy = true;
    again = false;
    lastFetch = Date.now();
    fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (r) {
        if (r.status === 401 || r.redirected) {
          window.location.href = r.redirected ? r.url : "/login";
          return null;
        }
        if (!r.ok) {
          var down = r.headers.get("X-Coordinator-Down");
          return r.text().then(function (t) {
            var err = new Error(down ? "the coordinator is not answering" : (t || r.statusText));
            if (down) err.bannerHtml = t;
            throw err;
          });
        }
        return r.text();
      })
      .then(function (html) {
        if (html === null || html === undefined) return;
        var open = openDetails();
        target.innerHTML = html;
        var details = target.querySelectorAll("details");
        open.forEach(function (i) { if (details[i]) details[i].open = true; });
        status.textContent = label();
        status.classList.remove("stale");
        target.classList.remove("stale");
        if (banner) { banner.remove(); banner = null; }
        if (downBanner) { downBanner.remove(); downBanner = null; }
        failingSince = null;
      })
      .catch(function (err) {
        // What the page shows is no longer current: grey it and say since when.
        failingSince = failingSince || utcNow();
        status.textContent = "not updating since " + failingSince + ": " + err.message;
        status.classList.add("stale");
        target.classList.add("stale");
        if (err.bannerHtml) {
          // The dashboard answers but its coordinator does not: the banner every
          // page shows then (#coordinator-down), in place of the one below.
          if (banner) { banner.remove(); banner = null; }
          if (!downBanner) {
            downBanner = document.createElement("div");
            target.parentNode.insertBefore(downBanner, target);
          }
          downBanner.innerHTML = err.bannerHtml;
          return;
        }
        if (downBanner) { downBanner.remove(); downBanner = null; }
        if (!banner) {
          banner = document.createElement("div");
          banner.className = "banner down";
          banner.id = "stale-banner";
          banner.setAttribute("role", "alert");
          target.parentNode.insertBefore(banner, target);
        }
        banner.textContent = "Not updating since " + failingSince + " (" + err.message +
          "): what this page shows may be out of date.";
      })
      .finally(function () {
        busy = false;
        if (again) soon();
      });
  }

  // Refresh as soon as the one-per-second budget allows.
  function soon() {
    if (queued !== null) return;
    var wait = Math.max(0, lastFetch + MIN_GAP_MS - Date.now());
    queued = setTimeout(function () { queued = null; refresh(); }, wait);
  }

  function poll() {
    var gap = following ? EVENTS_POLL_MS : every;
    if (Date.now() - lastFetch >= gap - 50) refresh();
  }

  if (eventsUrl && window.EventSource) {
    var source = new EventSource(eventsUrl);
    source.addEventListener("ready", function () {
      following = true;
      status.textContent = label();
      soon();  // whatever changed between the page load and the watch
    });
    source.addEventListener("change", soon);
    source.addEventListener("unavailable", function (e) {
      following = false;
      source.close();
      status.textContent = "live · polling (" + e.data + ")";
    });
    source.onerror = function () {
      // The browser reconnects by itself; poll at the normal rate meanwhile.
      following = false;
    };
  }
  setInterval(poll, every);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) soon(); });
})();
