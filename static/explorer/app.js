// Session Explorer — base behaviour shared by all pages (page scripts add their own).
(function () {
  "use strict";
  // Confirm destructive actions declared with data-confirm (works without htmx too).
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var text = form.getAttribute && form.getAttribute("data-confirm");
    if (text && !window.confirm(text)) { event.preventDefault(); }
  }, true);
  // htmx: show server errors instead of failing silently.
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    var box = document.querySelector(".messages") || (function () {
      var ul = document.createElement("ul");
      ul.className = "messages"; ul.setAttribute("role", "status");
      var main = document.getElementById("main");
      main.insertBefore(ul, main.firstChild);
      return ul;
    })();
    var li = document.createElement("li");
    li.className = "message message-error";
    li.textContent = xhr.status === 403 ? "You do not have permission to do that." :
      "Request failed (" + xhr.status + ").";
    box.appendChild(li);
  });
})();
