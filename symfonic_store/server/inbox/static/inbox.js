// Live updates for the symfonic-store inbox: when the event stream says the log moved,
// fetch this page again and swap in its #live region. Only server-rendered, escaped
// HTML is used (parsed with DOMParser, which runs no script); no inline script exists.
// The swapped-in text is therefore revealed by the server like the page it replaces
// (invisible characters as escapes, words that mix scripts marked): nothing is set here.
(function () {
  "use strict";
  var body = document.body;
  var url = body.getAttribute("data-stream");
  var status = document.getElementById("live-status");
  if (!url || !window.EventSource || !window.fetch || !window.DOMParser) {
    if (status) { status.className = "live off"; status.textContent = "static"; }
    return;
  }
  var after = body.getAttribute("data-after") || "0";
  var timer = null;
  var RETRY_MS = 5000;
  var busy = false;
  var again = false;

  function show(state, text) {
    if (status) { status.className = "live " + state; status.textContent = text; }
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        var current = document.getElementById("live");
        if (fresh && current) { current.replaceWith(document.importNode(fresh, true)); }
        body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { show("off", "offline"); })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  function open() {
    var source = new EventSource(url + "?after=" + encodeURIComponent(after));
    source.onopen = function () { show("on", "live"); };
    source.onerror = function () {
      if (source.readyState !== EventSource.CLOSED) { show("off", "reconnecting"); return; }
      // A 503 (the store's database is unreachable) closes an EventSource for good: open
      // a new one from the last event seen, after the server's Retry-After.
      show("off", "offline");
      setTimeout(open, RETRY_MS);
    };
    source.onmessage = function (event) {
      if (event.lastEventId) { after = event.lastEventId; }
      // Several events usually come together (a mint and a route): one refresh for them.
      clearTimeout(timer);
      timer = setTimeout(refresh, 150);
    };
  }

  open();
})();
