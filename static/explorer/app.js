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

// Import page: drag and drop, one XHR per file with an upload progress bar; the server
// answers with the rendered result (errors and warnings with their line numbers).
(function () {
  "use strict";
  function init() {
    var form = document.getElementById("import-form");
    if (!form) { return; }
    var zone = document.getElementById("dropzone");
    var input = form.querySelector("input[type=file]");
    var list = document.getElementById("upload-list");
    var summary = document.getElementById("file-summary");
    var limit = parseInt(form.getAttribute("data-limit") || "0", 10);
    var token = form.querySelector("input[name=csrfmiddlewaretoken]").value;

    function human(n) {
      var units = ["bytes", "KB", "MB", "GB"]; var i = 0;
      while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
      return (i ? n.toFixed(1) : n) + " " + units[i];
    }

    function upload(file) {
      var item = document.createElement("li");
      item.className = "upload-item";
      var title = document.createElement("div");
      title.className = "row";
      var name = document.createElement("strong");
      name.className = "mono"; name.textContent = file.name;
      var status = document.createElement("span");
      status.className = "muted small"; status.textContent = human(file.size) + " — waiting";
      title.appendChild(name); title.appendChild(status);
      var bar = document.createElement("progress");
      bar.max = 100; bar.value = 0;
      bar.setAttribute("aria-label", "Upload of " + file.name);
      item.appendChild(title); item.appendChild(bar);
      list.appendChild(item);
      if (limit && file.size > limit) {
        bar.remove();
        status.textContent = "";
        var err = document.createElement("p");
        err.className = "alert alert-error"; err.setAttribute("role", "alert");
        err.textContent = file.name + " is " + human(file.size) + "; the limit is " + human(limit) +
          " (setting SESSIONS_MAX_UPLOAD_BYTES). Nothing was imported.";
        item.appendChild(err);
        return Promise.resolve();
      }
      return new Promise(function (resolve) {
        var data = new FormData();
        data.append("files", file, file.name);
        var xhr = new XMLHttpRequest();
        xhr.open("POST", form.action);
        xhr.setRequestHeader("X-CSRFToken", token);
        xhr.setRequestHeader("X-Upload", "1");
        xhr.upload.addEventListener("progress", function (e) {
          if (e.lengthComputable) {
            bar.value = Math.round((e.loaded / e.total) * 100);
            status.textContent = human(e.loaded) + " of " + human(e.total);
          }
        });
        xhr.upload.addEventListener("load", function () {
          bar.removeAttribute("value"); // indeterminate while the server imports
          status.textContent = "Importing…";
        });
        xhr.addEventListener("load", function () {
          bar.remove(); status.remove();
          var box = document.createElement("div");
          if (xhr.status === 403) {
            box.innerHTML = '<p class="alert alert-error" role="alert">You do not have permission to import.</p>';
          } else {
            box.innerHTML = xhr.responseText; // server-rendered, escaped by Django templates
          }
          item.className = "upload-done"; // the server's result card replaces the progress card
          item.replaceChildren(box);
          resolve();
        });
        xhr.addEventListener("error", function () {
          status.textContent = "Network error — nothing imported"; status.className = "sev-error";
          resolve();
        });
        xhr.send(data);
      });
    }

    function uploadAll(files) {
      var chain = Promise.resolve();
      Array.prototype.forEach.call(files, function (file) {
        chain = chain.then(function () { return upload(file); });
      });
      return chain;
    }

    input.addEventListener("change", function () {
      var n = input.files.length;
      summary.textContent = n ? n + " file" + (n === 1 ? "" : "s") + " selected" : "";
    });
    form.addEventListener("submit", function (event) {
      if (!window.FormData || !input.files.length) { return; }
      event.preventDefault();
      uploadAll(input.files).then(function () { input.value = ""; summary.textContent = ""; });
    });
    ["dragenter", "dragover"].forEach(function (type) {
      zone.addEventListener(type, function (e) { e.preventDefault(); zone.classList.add("dragover"); });
    });
    ["dragleave", "drop"].forEach(function (type) {
      zone.addEventListener(type, function (e) { e.preventDefault(); zone.classList.remove("dragover"); });
    });
    zone.addEventListener("drop", function (e) {
      if (e.dataTransfer && e.dataTransfer.files.length) { uploadAll(e.dataTransfer.files); }
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", init); } else { init(); }
})();
