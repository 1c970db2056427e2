// Import page: drag and drop, one XHR per file. While the file travels the bar shows the
// bytes sent; while the server imports it, the page polls the upload's progress (entries
// stored and bytes read, published by the importer under a random token) until the answer,
// the rendered result card, arrives.
(function () {
  "use strict";
  var POLL_MS = 500;

  function human(n) {
    var units = ["bytes", "KB", "MB", "GB"]; var i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + units[i];
  }

  function newToken() {
    var bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    return Array.prototype.map.call(bytes, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
  }

  function init() {
    var form = document.getElementById("import-form");
    if (!form) { return; }
    var zone = document.getElementById("dropzone");
    var input = form.querySelector("input[type=file]");
    var list = document.getElementById("upload-list");
    var summary = document.getElementById("file-summary");
    var limit = parseInt(form.getAttribute("data-limit") || "0", 10);
    var progressUrl = form.getAttribute("data-progress-url") || "";
    var csrf = form.querySelector("input[name=csrfmiddlewaretoken]").value;

    function card(file) {
      var item = document.createElement("li");
      item.className = "upload-item";
      var title = document.createElement("div");
      title.className = "row";
      var name = document.createElement("strong");
      name.className = "mono"; name.textContent = file.name;
      var status = document.createElement("span");
      status.className = "muted small upload-status"; status.textContent = human(file.size) + " — waiting";
      title.appendChild(name); title.appendChild(status);
      var bar = document.createElement("progress");
      bar.max = 100; bar.value = 0;
      bar.setAttribute("aria-label", "Upload of " + file.name);
      item.appendChild(title); item.appendChild(bar);
      list.appendChild(item);
      return { item: item, status: status, bar: bar };
    }

    // Poll the server's progress of this upload until stop() is called.
    function watch(token, file, view) {
      var timer = null; var stopped = false;
      function show(state) {
        if (stopped || !state || state.phase === "waiting") { return; }
        var total = state.total || file.size;
        view.bar.max = total || 1;
        view.bar.value = Math.min(state.bytes, total);
        var what = state.phase === "finishing" ? "Finishing" : "Importing";
        view.status.textContent = what + ": " + state.entries.toLocaleString() + " entries, " +
          human(Math.min(state.bytes, total)) + " of " + human(total) + " read";
      }
      function poll() {
        if (stopped) { return; }
        var xhr = new XMLHttpRequest();
        xhr.open("GET", progressUrl.replace("TOKEN", token));
        xhr.setRequestHeader("Accept", "application/json");
        xhr.addEventListener("load", function () {
          if (xhr.status === 200) {
            try { show(JSON.parse(xhr.responseText)); } catch (e) { /* keep the last figures */ }
          }
          if (!stopped) { timer = window.setTimeout(poll, POLL_MS); }
        });
        xhr.addEventListener("error", function () { if (!stopped) { timer = window.setTimeout(poll, POLL_MS); } });
        xhr.send();
      }
      poll();
      return function stop() { stopped = true; if (timer) { window.clearTimeout(timer); } };
    }

    function upload(file) {
      var view = card(file);
      if (limit && file.size > limit) {
        view.bar.remove();
        view.status.textContent = "";
        var err = document.createElement("p");
        err.className = "alert alert-error"; err.setAttribute("role", "alert");
        err.textContent = file.name + " is " + human(file.size) + "; the limit is " + human(limit) +
          " (setting SESSIONS_MAX_UPLOAD_BYTES). Nothing was imported.";
        view.item.appendChild(err);
        return Promise.resolve();
      }
      return new Promise(function (resolve) {
        var token = newToken();
        var stop = function () {};
        var data = new FormData();
        data.append("files", file, file.name);
        var xhr = new XMLHttpRequest();
        xhr.open("POST", form.action);
        xhr.setRequestHeader("X-CSRFToken", csrf);
        xhr.setRequestHeader("X-Upload", "1");
        xhr.setRequestHeader("X-Upload-Token", token);
        xhr.upload.addEventListener("progress", function (e) {
          if (e.lengthComputable) {
            view.bar.max = 100;
            view.bar.value = Math.round((e.loaded / e.total) * 100);
            view.status.textContent = "Uploading: " + human(e.loaded) + " of " + human(e.total);
          }
        });
        xhr.upload.addEventListener("load", function () {
          view.bar.max = file.size || 1; view.bar.value = 0;
          view.status.textContent = "Uploaded; importing: 0 entries, 0 bytes of " + human(file.size) + " read";
          if (progressUrl) { stop = watch(token, file, view); }
        });
        xhr.addEventListener("load", function () {
          stop();
          var box = document.createElement("div");
          if (xhr.status === 403) {
            box.innerHTML = '<p class="alert alert-error" role="alert">You do not have permission to import.</p>';
          } else {
            box.innerHTML = xhr.responseText; // the server's result card, escaped by Django templates
          }
          view.item.className = "upload-done"; // the result card replaces the progress card
          view.item.replaceChildren(box);
          resolve();
        });
        xhr.addEventListener("error", function () {
          stop();
          view.status.textContent = "Network error — nothing imported"; view.status.className = "sev-error";
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
