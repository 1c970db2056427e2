// Session Explorer — the Transcript tab: open at the target entry, keep the reading place
// when earlier pages are inserted above, zoom images. Without it the page is plain links.
(function () {
  "use strict";

  function scrollToTarget() {
    var list = document.getElementById("transcript");
    if (!list) { return; }
    var id = (location.hash && location.hash.slice(1)) || list.getAttribute("data-target");
    var el = id ? document.getElementById(id) : null;
    if (el) { el.scrollIntoView({ block: "center" }); }
    else if (!id) { window.scrollTo(0, document.documentElement.scrollHeight); }
  }
  // Before htmx wakes up (deferred scripts run before DOMContentLoaded), so the "earlier"
  // sentinel at the top is out of view and does not load at once.
  scrollToTarget();

  // Inserting a page above the reading place would push it down: measure and give it back.
  var pending = null;
  document.addEventListener("htmx:beforeSwap", function (e) {
    var t = e.detail.target;
    if (t && t.classList && t.classList.contains("t-earlier")) {
      pending = { height: document.documentElement.scrollHeight, y: window.scrollY };
    }
  });
  // Arrivals at the tip: a reader who was at the bottom stays at the bottom.
  var atBottom = false;
  document.addEventListener("htmx:beforeSwap", function (e) {
    var t = e.detail.target;
    if (t && t.classList && t.classList.contains("t-tail")) {
      atBottom = window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80;
    }
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (atBottom) { atBottom = false; window.scrollTo(0, document.documentElement.scrollHeight); }
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!pending) { return; }
    var grown = document.documentElement.scrollHeight - pending.height;
    window.scrollTo(0, pending.y + grown);
    pending = null;
  });

  function toggleZoom(img) { img.classList.toggle("zoomed"); }
  document.addEventListener("click", function (e) {
    var img = e.target.closest && e.target.closest("img.t-img");
    if (img) { toggleZoom(img); }
  });
  // j / k step through the messages, Home / End jump to the window's ends.
  function cards() { return Array.prototype.slice.call(document.querySelectorAll("#transcript > li.t-entry")); }
  function current(list) {
    // The message j / k moved to last, else the first one reaching the upper third.
    var focused = list.indexOf(document.activeElement);
    if (focused >= 0) { return focused; }
    var mid = window.innerHeight / 3;
    for (var i = 0; i < list.length; i++) { if (list[i].getBoundingClientRect().bottom > mid) { return i; } }
    return list.length - 1;
  }
  function go(el) { if (el) { el.setAttribute("tabindex", "-1"); el.focus({ preventScroll: true }); el.scrollIntoView({ block: "start" }); } }
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    var typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
    if (typing || e.ctrlKey || e.metaKey || e.altKey) { return; }
    var list = cards(); if (!list.length) { return; }
    if (e.key === "j" || e.key === "k") {
      var i = current(list) + (e.key === "j" ? 1 : -1);
      go(list[Math.max(0, Math.min(list.length - 1, i))]);
    } else if (e.key === "Home" || e.key === "End") {
      e.preventDefault(); go(e.key === "Home" ? list[0] : list[list.length - 1]);
    }
  });
  document.addEventListener("keydown", function (e) {
    var img = document.activeElement;
    if (img && img.classList && img.classList.contains("t-img") && (e.key === "Enter" || e.key === " ")) {
      e.preventDefault(); toggleZoom(img);
    } else if (e.key === "Escape") {
      Array.prototype.forEach.call(document.querySelectorAll("img.t-img.zoomed"), toggleZoom);
    }
  });
})();
