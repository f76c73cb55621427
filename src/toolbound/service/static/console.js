// Progressive enhancement; every page works the same without this script.
// - Times: each <time datetime="..."> (UTC, ISO 8601) is shown in the viewer's local time,
//   the UTC original kept in its title.
// - Deadlines: "expires in N min" counts down, from the server's clock (data-now), not
//   the browser's, so a skewed laptop clock cannot show more time than there is.
// - The pending list refreshes itself every few seconds while the page is visible and
//   nobody is using it.
(function () {
  "use strict";
  var EVERY_MS = 3000;

  function localize(root) {
    var times = root.querySelectorAll("time[datetime]:not([data-local])");
    for (var i = 0; i < times.length; i++) {
      var el = times[i];
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at.getTime())) {
        continue;
      }
      el.title = el.getAttribute("datetime");
      el.textContent = at.toLocaleString(undefined, {
        year: "numeric", month: "short", day: "numeric",
        hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short"
      });
      el.setAttribute("data-local", "");
    }
  }

  // The same words as the server's (console._expires_in): rounded down, so a person
  // never has less time than shown.
  function expiresIn(ms) {
    if (ms <= 0) {
      return "expired";
    }
    var minutes = Math.floor(ms / 60000);
    if (minutes === 0) {
      return "expires in under 1 min";
    }
    if (minutes < 60) {
      return "expires in " + minutes + " min";
    }
    var rest = minutes % 60;
    var hours = (minutes - rest) / 60;
    return "expires in " + hours + " h" + (rest ? " " + rest + " min" : "");
  }

  function countdown(root) {
    var spans = root.querySelectorAll("[data-expires][data-now]");
    for (var i = 0; i < spans.length; i++) {
      var el = spans[i];
      var expires = Date.parse(el.getAttribute("data-expires"));
      var now = Date.parse(el.getAttribute("data-now"));
      if (isNaN(expires) || isNaN(now)) {
        continue;
      }
      if (!el.hasAttribute("data-loaded")) {
        el.setAttribute("data-loaded", String(Date.now()));
      }
      var elapsed = Date.now() - Number(el.getAttribute("data-loaded"));
      el.textContent = expiresIn(expires - now - elapsed);
    }
  }

  localize(document);
  countdown(document);
  window.setInterval(function () { countdown(document); }, 15000);

  var list = document.querySelector("[data-refresh]");
  if (!list || !window.fetch || !window.DOMParser) {
    return;
  }
  function inUse() {
    return list.contains(document.activeElement);
  }
  function refresh() {
    if (document.hidden || inUse()) {
      return;
    }
    fetch(list.getAttribute("data-refresh"), { credentials: "same-origin" })
      .then(function (response) {
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (html === null || inUse()) {
          return;
        }
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("[data-refresh]");
        // A login page (the session ended) has no list: leave the page as it is.
        if (!fresh || fresh.getAttribute("data-ids") === list.getAttribute("data-ids")) {
          return;
        }
        var node = document.importNode(fresh, true);
        list.replaceWith(node);
        list = node;
        localize(list);
        countdown(list);
      })
      .catch(function () {});
  }
  window.setInterval(refresh, EVERY_MS);
  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) {
      refresh();
    }
  });
})();
