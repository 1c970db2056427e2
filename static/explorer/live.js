// Live page glue for the htmx ws extension: resume after (re)connect, follow the newest,
// periodic catch-up. The server does the rest with out-of-band swaps.
(function () {
  "use strict";
  let socket = null;

  // Reconnect soon after the server is back: the extension's own backoff doubles up to
  // a minute, so a page could sit "reconnecting…" long after a restart. Here the wait
  // doubles from 0.5 s to at most 8 s, jittered so that many viewers do not arrive at once.
  htmx.config.wsReconnectDelay = function (retry) {
    const cap = Math.min(8000, 500 * Math.pow(2, Math.min(retry, 4)));
    return cap / 2 + Math.random() * (cap / 2);
  };

  function state() {
    return document.getElementById("live-state");
  }
  function followBox() {
    return document.getElementById("follow-newest");
  }
  function following() {
    const box = followBox();
    return !box || box.checked;
  }
  function setConnection(text, cls) {
    const el = document.getElementById("live-connection");
    // After "follow stopped" a reconnect must not paint the badge green again.
    if (el && el.dataset.stopped && cls === "open") return;
    if (el) {
      el.textContent = text;
      el.className = "live-connection " + (cls || "");
    }
  }
  function send(message) {
    if (socket) socket.send(JSON.stringify(message));
  }
  // A reader who scrolled up is reading: arrivals do not pull the page down (they are
  // counted on the "new entries below" button instead).
  let pinned = true;
  function nearBottom() {
    const transcript = document.getElementById("transcript");
    if (!transcript) return true;
    return transcript.getBoundingClientRect().bottom <= window.innerHeight + 160;
  }
  window.addEventListener("scroll", function () {
    const was = pinned;
    pinned = nearBottom();
    if (pinned !== was) syncNewBelow();
  }, {passive: true});
  function scrollToTip() {
    if (!following() || !pinned) return;
    const transcript = document.getElementById("transcript");
    const stream = document.getElementById("turn-stream");
    const target = stream && !stream.hidden ? stream : (transcript && transcript.lastElementChild);
    if (target) target.scrollIntoView({block: "end"});
  }

  document.addEventListener("htmx:wsOpen", function (evt) {
    socket = evt.detail.socketWrapper;
    const s = state();
    // The client says what it has; the server sends everything after it, in order.
    send({
      type: "resume",
      after: s ? s.dataset.lastPosition : "",
      tip: s ? s.dataset.tip : "",
      follow: following(),
    });
    // "live" only once the server has answered the resume (its first frame carries the
    // position): a socket that opens and closes again (a proxy refusing frames, a server
    // failing) keeps saying "connecting…", never "live".
    setConnection("connecting…", "closed");
    answered = false;
  });
  let answered = false;

  document.addEventListener("htmx:wsClose", function (evt) {
    const code = evt.detail.event && evt.detail.event.code;
    if (code >= 4400 && code < 4500) {
      setConnection("not allowed to watch this session (" + code + ")", "closed");
      return;
    }
    setConnection("reconnecting…", "closed");
    // The extension retries abnormal closes (1006, 1011-1013) by itself; a server that
    // restarts says "going away" (1001) or closes normally, so retry those here.
    if (code === 1000 || code === 1001) {
      const wrapper = evt.detail.socketWrapper;
      setTimeout(function () { wrapper.reconnect(); }, 500 + Math.random() * 1000);
    }
  });

  // The graph is an image of the whole tree: re-fetch it (debounced) when entries arrive.
  let graphTimer = null;
  function refreshGraph() {
    if (graphTimer) return;
    graphTimer = setTimeout(function () {
      graphTimer = null;
      const img = document.getElementById("live-graph");
      const s = state();
      if (img && s) img.src = img.dataset.src + "?v=" + encodeURIComponent(s.dataset.lastPosition);
    }, 1000);
  }

  document.addEventListener("htmx:wsAfterMessage", function (evt) {
    if (!answered && typeof evt.detail.message === "string" &&
        evt.detail.message.indexOf('id="live-state"') >= 0) {
      answered = true;
      setConnection("live", "open");
    }
    if (typeof evt.detail.message === "string" && evt.detail.message.indexOf("tree-arrivals") >= 0) {
      refreshGraph();
    }
    const moved = document.getElementById("cursor-status");
    const expected = document.getElementById("turn-expected-leaf");
    if (moved && expected && moved.dataset.mine === "1" && "entryId" in moved.dataset) {
      // The turn form names the cursor this page shows, so a send raced by another tab's
      // write is refused instead of answered at a leaf nobody here saw.
      expected.value = moved.dataset.entryId;
    }
    fillTokens();
    const empty = document.getElementById("live-empty");
    const list = document.getElementById("transcript");
    if (empty && list && list.querySelector("li.t-entry")) empty.hidden = true;
    scrollToTip();
    const s = state();
    const cursor = document.getElementById("cursor-status");
    if (cursor && cursor.dataset.entryId) {
      document.querySelectorAll("#text-tree .tr.is-cursor").forEach(function (n) {
        n.classList.remove("is-cursor");
      });
      const node = document.querySelector('#text-tree .tr[data-id="' + CSS.escape(cursor.dataset.entryId) + '"]');
      if (node) node.classList.add("is-cursor");
    }
    if (s) document.body.dataset.lastPosition = s.dataset.lastPosition;
  });

  // Entries on other branches are counted, not drawn; this viewer may ask to see one.
  document.addEventListener("click", function (evt) {
    const button = evt.target && evt.target.closest && evt.target.closest("[data-switch-branch]");
    if (button) send({type: "switch", to: button.dataset.switchBranch});
  });

  document.addEventListener("change", function (evt) {
    if (evt.target && evt.target.id === "follow-newest") {
      send({type: "follow", on: evt.target.checked});
      scrollToTip();
    }
  });

  document.addEventListener("htmx:afterRequest", function (evt) {
    const form = document.getElementById("turn-form");
    if (form && evt.detail.elt === form && evt.detail.successful) {
      const text = document.getElementById("turn-text");
      if (text) text.value = "";
    }
  });

  // Cancel is only offered while a turn runs: the status line says "busy" exactly then.
  function syncCancel() {
    const cancel = document.getElementById("cancel-turn");
    if (!cancel) return;
    cancel.disabled = !document.querySelector("#turn-status.busy");
  }

  // Rows arrive rendered once for every viewer, without a CSRF token: give their forms
  // this page's token (the one htmx sends with every request).
  function csrfToken() {
    const input = document.querySelector('#turn-form input[name="csrfmiddlewaretoken"]');
    if (input) return input.value;
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (e) {
      return "";
    }
  }
  function fillTokens() {
    const token = csrfToken();
    if (!token) return;
    document.querySelectorAll('#transcript form[method="post"]').forEach(function (form) {
      if (form.querySelector('input[name="csrfmiddlewaretoken"]')) return;
      const input = document.createElement("input");
      input.type = "hidden";
      input.name = "csrfmiddlewaretoken";
      input.value = token;
      form.prepend(input);
    });
  }

  // The text tree was redrawn (its arrivals notice's "refresh"): the count starts again.
  document.addEventListener("htmx:afterSwap", function (evt) {
    const elt = evt.detail.elt;
    if (elt && elt.id === "tree-panel") {
      send({type: "tree_seen"});
      const note = document.getElementById("tree-arrivals");
      if (note) note.textContent = "";
    }
  });

  fillTokens();  // the rows drawn with the page are shared by every viewer too

  // Not following (or scrolled up): count what arrived since, and offer to jump there.
  let seenPosition = null;
  function syncNewBelow() {
    const button = document.getElementById("new-below");
    const s = state();
    if (!button || !s) return;
    const last = parseInt(s.dataset.lastPosition || "0", 10) || 0;
    if ((following() && pinned) || seenPosition === null) {
      seenPosition = last;
      button.hidden = true;
      return;
    }
    const fresh = last - seenPosition;
    button.hidden = fresh <= 0;
    button.textContent = fresh + (fresh === 1 ? " new entry below" : " new entries below");
  }
  document.addEventListener("click", function (evt) {
    if (evt.target && evt.target.id === "new-below") {
      const box = followBox();
      if (box) { box.checked = true; box.dispatchEvent(new Event("change", {bubbles: true})); }
      pinned = true;
      scrollToTip();
      seenPosition = null;
      syncNewBelow();
    }
  });
  ["htmx:wsAfterMessage", "htmx:afterSwap", "change"].forEach(function (name) {
    document.addEventListener(name, function () { syncCancel(); syncNewBelow(); });
  });
  syncNewBelow();

  // A message the channel layer dropped for a slow viewer is caught up here.
  setInterval(function () { send({type: "sync"}); }, 20000);
})();
