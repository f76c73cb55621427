// Progressive enhancement for the pending list: refresh it every few seconds while the
// page is visible and nobody is using it. The page works the same without this script.
(function () {
  "use strict";
  var EVERY_MS = 3000;
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
