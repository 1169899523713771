// workflow-jobs dashboard: refreshes the live part of a page while it is open.
// One request per refresh, every data-interval ms (2 s unless the page says
// otherwise, never more often than once a second); paused while the tab is
// hidden or while one of the live part's forms is being filled in.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  var target = document.getElementById("live");
  if (!main || !target) return;
  var url = main.getAttribute("data-live");
  var every = Math.max(1000, parseInt(main.getAttribute("data-interval") || "2000", 10));
  var status = document.createElement("div");
  status.className = "live-status";
  status.id = "live-status";
  status.textContent = "live";
  document.body.appendChild(status);
  var busy = false;

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

  function refresh() {
    if (busy || document.hidden || editing()) return;
    busy = true;
    fetch(url, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
      .then(function (r) {
        if (r.status === 401 || r.redirected) {
          window.location.href = r.redirected ? r.url : "/login";
          return null;
        }
        if (!r.ok) {
          return r.text().then(function (t) { throw new Error(t || r.statusText); });
        }
        return r.text();
      })
      .then(function (html) {
        if (html === null || html === undefined) return;
        var open = openDetails();
        target.innerHTML = html;
        var details = target.querySelectorAll("details");
        open.forEach(function (i) { if (details[i]) details[i].open = true; });
        status.textContent = "live · " + new Date().toLocaleTimeString();
        status.classList.remove("stale");
      })
      .catch(function (err) {
        status.textContent = "not updating: " + err.message;
        status.classList.add("stale");
      })
      .finally(function () { busy = false; });
  }

  setInterval(refresh, every);
  document.addEventListener("visibilitychange", function () { if (!document.hidden) refresh(); });
})();
