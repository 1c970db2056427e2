// Session Explorer — the visual explorer: graph zoom/pan/minimap, keyboard text tree,
// side-panel loading, tab shortcuts. Everything degrades to plain links without it.
(function () {
  "use strict";

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }

  // ---- graph: zoom, pan, fit, minimap -------------------------------------------------
  var view = { k: 1, x: 0, y: 0 };

  function graphParts() {
    var vp = $("#graph"); if (!vp) { return null; }
    var canvas = $(".graph-canvas", vp); var svg = canvas && $("svg", canvas);
    if (!svg) { return null; }
    return { vp: vp, canvas: canvas, svg: svg };
  }

  function apply(g) {
    g.canvas.style.transform = "translate(" + view.x + "px," + view.y + "px) scale(" + view.k + ")";
    updateMinimap(g);
  }

  function svgSize(g) {
    var w = parseFloat(g.svg.getAttribute("width")) * 4 / 3 || g.svg.getBoundingClientRect().width;
    var h = parseFloat(g.svg.getAttribute("height")) * 4 / 3 || g.svg.getBoundingClientRect().height;
    return { w: w, h: h };
  }

  function fit(g) {
    var s = svgSize(g); var r = g.vp.getBoundingClientRect();
    view.k = Math.min(1.2, Math.max(0.05, Math.min(r.width / s.w, r.height / s.h) * 0.95));
    view.x = (r.width - s.w * view.k) / 2; view.y = Math.max(8, (r.height - s.h * view.k) / 2);
    apply(g);
  }

  function focusNode(g, node) {
    if (!node) { return; }
    var r = g.vp.getBoundingClientRect(); var b = node.getBoundingClientRect();
    var cx = (b.left + b.width / 2 - r.left - view.x) / view.k;
    var cy = (b.top + b.height / 2 - r.top - view.y) / view.k;
    view.k = Math.max(view.k, 0.6);
    view.x = r.width / 2 - cx * view.k; view.y = r.height / 2 - cy * view.k;
    apply(g);
  }

  function zoom(g, factor, px, py) {
    var r = g.vp.getBoundingClientRect();
    if (px === undefined) { px = r.width / 2; py = r.height / 2; }
    var k = Math.min(4, Math.max(0.03, view.k * factor));
    view.x = px - (px - view.x) * (k / view.k); view.y = py - (py - view.y) * (k / view.k); view.k = k;
    apply(g);
  }

  function updateMinimap(g) {
    var mm = $(".minimap", g.vp); if (!mm) { return; }
    var s = svgSize(g); var box = mm.getBoundingClientRect(); var r = g.vp.getBoundingClientRect();
    var big = s.w * view.k > r.width * 1.05 || s.h * view.k > r.height * 1.05;
    mm.style.display = big ? "block" : "none";
    if (!big) { return; }
    var scale = Math.min(box.width / s.w, box.height / s.h);
    var rect = $(".minimap-view", mm);
    rect.style.left = (-view.x / view.k) * scale + "px"; rect.style.top = (-view.y / view.k) * scale + "px";
    rect.style.width = (r.width / view.k) * scale + "px"; rect.style.height = (r.height / view.k) * scale + "px";
  }

  function initGraph() {
    var g = graphParts(); if (!g) { return; }
    var mm = $(".minimap", g.vp);
    if (mm && !$("svg", mm)) {
      var clone = g.svg.cloneNode(true);
      clone.removeAttribute("width"); clone.removeAttribute("height");
      // The copy must not repeat the graph's ids (invalid, and getElementById finds it first).
      clone.removeAttribute("id");
      $all("[id]", clone).forEach(function (el) { el.removeAttribute("id"); });
      $all("a", clone).forEach(function (a) { a.removeAttribute("xlink:href"); a.removeAttribute("href"); });
      mm.insertBefore(clone, mm.firstChild);
      mm.addEventListener("click", function (e) {
        var s = svgSize(g); var box = mm.getBoundingClientRect(); var r = g.vp.getBoundingClientRect();
        var scale = Math.min(box.width / s.w, box.height / s.h);
        var cx = (e.clientX - box.left) / scale; var cy = (e.clientY - box.top) / scale;
        view.x = r.width / 2 - cx * view.k; view.y = r.height / 2 - cy * view.k; apply(g);
      });
      mm.style.pointerEvents = "auto";
    }
    var sel = $(".ge-selected", g.svg) || $(".ge-active.ge-leaf", g.svg);
    fit(g);
    if (sel && view.k < 0.5) { focusNode(g, sel); }
    var drag = null; var moved = false;
    g.vp.addEventListener("pointerdown", function (e) {
      if (e.button !== 0 || (mm && mm.contains(e.target))) { return; }
      drag = { x: e.clientX, y: e.clientY, vx: view.x, vy: view.y }; moved = false;
    });
    window.addEventListener("pointermove", function (e) {
      if (!drag) { return; }
      var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 4) { moved = true; g.vp.classList.add("dragging"); }
      if (moved) { view.x = drag.vx + dx; view.y = drag.vy + dy; apply(g); }
    });
    window.addEventListener("pointerup", function () { drag = null; g.vp.classList.remove("dragging"); });
    g.vp.addEventListener("wheel", function (e) {
      e.preventDefault(); var r = g.vp.getBoundingClientRect();
      zoom(g, e.deltaY < 0 ? 1.15 : 1 / 1.15, e.clientX - r.left, e.clientY - r.top);
    }, { passive: false });
    g.vp.addEventListener("click", function (e) {
      var a = e.target.closest && e.target.closest("a"); if (!a) { return; }
      if (moved) { e.preventDefault(); return; }
      var href = a.getAttribute("xlink:href") || a.getAttribute("href"); if (!href) { return; }
      var url = new URL(href, window.location.href);
      var entry = url.searchParams.get("entry");
      // An entry node opens in the side panel, whatever unfolded chains its link carries
      // (after an unfold every node link has expand=…, and used to reload only the graph).
      var node = a.closest(".node");
      var isNodeLink = entry && (node ? node.classList.contains("ge-entry") :
        !url.searchParams.has("root") && href.indexOf("expand=") === -1);
      if (entry && window.htmx && isNodeLink) {
        e.preventDefault();
        openEntry(entry, href);
      } else if (window.htmx && (url.searchParams.has("expand") || url.searchParams.has("root"))) {
        // Unfold a chain or open a subtree: swap the tree and graph in place.
        e.preventDefault();
        window.htmx.ajax("GET", url.pathname + url.search, { target: "#tree-and-graph", swap: "outerHTML" }).then(function () {
          history.pushState(null, "", url.pathname + url.search + "#graph");
        });
      }
    });
    $all("[data-zoom]").forEach(function (b) {
      b.addEventListener("click", function () {
        var z = b.getAttribute("data-zoom");
        if (z === "fit") { fit(g); } else { zoom(g, z === "in" ? 1.25 : 0.8); }
      });
    });
  }

  function openEntry(entryId, permalink) {
    var base = document.body.getAttribute("data-entry-url") || entryUrl();
    if (!base) { return; }
    var target = $("#entry-panel-wrap");
    if (!target) { window.location.href = permalink; return; }
    window.htmx.ajax("GET", base + "?id=" + encodeURIComponent(entryId), { target: "#entry-panel-wrap", swap: "innerHTML" });
    if (permalink) { history.replaceState(null, "", permalink); }
    markSelected(entryId);
  }

  function entryUrl() {
    var m = window.location.pathname.match(/^(.*\/sessions\/\d+\/)/);
    return m ? m[1] + "entry/" : null;
  }

  function markSelected(entryId) {
    $all(".tr.selected").forEach(function (li) { li.classList.remove("selected"); });
    $all(".tr").forEach(function (li) {
      if (li.getAttribute("data-id") === entryId && li.getAttribute("data-kind") === "entry") {
        li.classList.add("selected"); setFocus(li, false);
      }
    });
    var g = graphParts();
    if (g) {
      $all(".ge-selected", g.svg).forEach(function (n) { n.classList.remove("ge-selected"); });
      $all(".node a", g.svg).forEach(function (a) {
        var href = a.getAttribute("xlink:href") || "";
        try {
          var u = new URL(href, window.location.href);
          if (u.searchParams.get("entry") === entryId && a.closest(".ge-entry")) { a.closest(".node").classList.add("ge-selected"); }
        } catch (err) { /* ignore */ }
      });
    }
  }

  // ---- text tree: roving focus, arrows, fold/unfold, filters -------------------------
  function rows() { return $all("#text-tree > .tr").filter(function (li) { return li.offsetParent !== null; }); }

  function setFocus(li, scroll) {
    $all("#text-tree .tr[tabindex='0']").forEach(function (x) { x.setAttribute("tabindex", "-1"); });
    li.setAttribute("tabindex", "0");
    if (scroll !== false) { li.focus(); } else { li.scrollIntoView({ block: "nearest" }); }
  }

  function descendants(li) {
    var level = parseInt(li.getAttribute("data-indent") || "0", 10); var out = [];
    var n = li.nextElementSibling;
    while (n && parseInt(n.getAttribute("data-indent") || "0", 10) > level) { out.push(n); n = n.nextElementSibling; }
    return out;
  }

  function fold(li, collapse) {
    if (!li.classList.contains("branch")) { return false; }
    var kids = descendants(li);
    kids.forEach(function (k) { k.hidden = collapse; });
    li.classList.toggle("collapsed", collapse); li.setAttribute("aria-expanded", collapse ? "false" : "true");
    return true;
  }

  function applyFilter(name) {
    var tree = $("#text-tree"); if (!tree) { return; }
    tree.setAttribute("data-filter", name);
    var every = document.getElementById("all-labels");
    if (every) { every.open = name === "labelled"; }
    $all(".tr", tree).forEach(function (li) {
      var kind = li.getAttribute("data-kind"); var role = li.getAttribute("data-role");
      var keep = true;
      if (kind === "page") { keep = true; }  // paging rows stay reachable under any filter
      else if (kind === "entry") {
        if (name === "notools") { keep = li.getAttribute("data-tool") !== "1"; }
        else if (name === "user") { keep = role === "user"; }
        else if (name === "labelled") { keep = li.getAttribute("data-labelled") === "1"; }
      } else if (name === "user" || name === "labelled") { keep = false; }
      li.classList.toggle("filtered-out", !keep);
    });
    $all("[data-filter]").forEach(function (c) {
      if (c.tagName === "A") { var on = c.getAttribute("data-filter") === name; c.classList.toggle("on", on); c.setAttribute("aria-pressed", on ? "true" : "false"); }
    });
  }

  // Filter as you type (as Pi's /tree): entry rows whose text, role or id lack every typed
  // word are hidden; folded and paging rows stay so the rest stays reachable.
  function applyFind() {
    var box = $("#tree-find"); var tree = $("#text-tree"); if (!box || !tree) { return; }
    var words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
    $all(".tr", tree).forEach(function (li) {
      if (li.getAttribute("data-kind") !== "entry" || !words.length) { li.classList.remove("unmatched", "found"); return; }
      var hay = (li.textContent + " " + li.getAttribute("data-role") + " " + li.getAttribute("data-id")).toLowerCase();
      var hit = words.every(function (w) { return hay.indexOf(w) >= 0; });
      li.classList.toggle("unmatched", !hit); li.classList.toggle("found", hit);  // found: shown even inside a fold
    });
  }
  document.addEventListener("input", function (e) { if (e.target && e.target.id === "tree-find") { applyFind(); } });
  document.addEventListener("htmx:afterSettle", applyFind);

  // The rows are the tab stop (roving tabindex); their links stay clickable and are
  // followed with Enter, so Tab does not step through every row.
  function untabLinks(tree) { $all(".tr a", tree).forEach(function (a) { a.setAttribute("tabindex", "-1"); }); }

  function initTree() {
    var tree = $("#text-tree"); if (!tree) { return; }
    untabLinks(tree);
    var first = $(".tr.selected", tree) || $(".tr.active.leaf", tree) || $(".tr", tree);
    if (first) { first.setAttribute("tabindex", "0"); }
    // A long route is drawn around the cursor: open the panel there, not at the root.
    var panel = tree.closest(".tree-panel");
    if (first && panel && panel.scrollHeight > panel.clientHeight) {
      panel.scrollTop += first.getBoundingClientRect().top - panel.getBoundingClientRect().top - panel.clientHeight / 2;
    }
    applyFilter(tree.getAttribute("data-filter") || "all");
    $all("[data-filter]").forEach(function (c) {
      if (c.tagName !== "A") { return; }
      c.addEventListener("click", function (e) { e.preventDefault(); applyFilter(c.getAttribute("data-filter")); });
    });
    tree.addEventListener("keydown", function (e) {
      var li = e.target.closest(".tr"); if (!li) { return; }
      var list = rows(); var i = list.indexOf(li);
      if (e.key === "ArrowDown" || e.key === "j") { e.preventDefault(); if (list[i + 1]) { setFocus(list[i + 1]); } }
      else if (e.key === "ArrowUp" || e.key === "k") { e.preventDefault(); if (i > 0) { setFocus(list[i - 1]); } }
      else if (e.key === "Home") { e.preventDefault(); setFocus(list[0]); }
      else if (e.key === "End") { e.preventDefault(); setFocus(list[list.length - 1]); }
      else if (e.key === "ArrowRight") {
        e.preventDefault();
        var k = li.getAttribute("data-kind");
        if (k === "chain" || k === "page") { var a = $("a", li); if (a) { a.click(); } }
        else if (li.classList.contains("collapsed")) { fold(li, false); }
        else if (list[i + 1]) { setFocus(list[i + 1]); }
      } else if (e.key === "ArrowLeft") {
        e.preventDefault();
        if (li.classList.contains("branch") && !li.classList.contains("collapsed")) { fold(li, true); }
        else {
          var level = parseInt(li.getAttribute("data-indent") || "0", 10);
          for (var j = i - 1; j >= 0; j--) { if (parseInt(list[j].getAttribute("data-indent") || "0", 10) < level) { setFocus(list[j]); break; } }
        }
      } else if (e.key === "Enter" || e.key === " ") {
        e.preventDefault(); var link = $("a", li); if (link) { link.click(); }
      }
    });
    tree.addEventListener("click", function (e) {
      var li = e.target.closest(".tr"); if (!li) { return; }
      if (li.getAttribute("data-kind") === "entry") {
        var id = li.getAttribute("data-id");
        $all(".tr.selected").forEach(function (x) { x.classList.remove("selected"); });
        li.classList.add("selected"); setFocus(li, false);
        var g = graphParts();
        if (g) {
          var url = new URL(window.location.href); url.searchParams.set("entry", id);
          history.replaceState(null, "", url.toString());
          markSelected(id);
          var node = $(".ge-selected", g.svg); if (node) { focusNode(g, node); }
        }
      }
    });
  }

  // ---- global keys ------------------------------------------------------------------
  function initKeys() {
    document.addEventListener("keydown", function (e) {
      var t = e.target; var typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable);
      var help = $("#shortcuts");
      if (e.key === "Escape" && help && !help.hidden) { help.hidden = true; return; }
      if (typing || e.ctrlKey || e.metaKey || e.altKey) { return; }
      var g = graphParts();
      if (e.key === "?") { if (help) { help.hidden = !help.hidden; } }
      else if (e.key === "/") { var s = $("[data-key='search']"); if (s) { e.preventDefault(); window.location.href = s.href; } }
      else if (e.key === "r") { var rv = $("[data-key='review']"); if (rv) { window.location.href = rv.href; } }
      else if (e.key.length === 1 && e.key >= "1" && e.key <= "9") { var tabs = $all(".tabs a"); var tab = tabs[parseInt(e.key, 10) - 1]; if (tab) { window.location.href = tab.href; } }
      else if (g && (e.key === "+" || e.key === "=")) { zoom(g, 1.25); }
      else if (g && e.key === "-") { zoom(g, 0.8); }
      else if (g && e.key === "0") { fit(g); }
      else if (e.key === "g" && g) { g.vp.focus(); }
      else if (e.key === "t") { var f = $("#text-tree .tr[tabindex='0']") || $("#text-tree .tr"); if (f) { f.focus(); } }
    });
    var help = $("#shortcuts");
    if (help) { help.addEventListener("click", function (e) { if (e.target === help) { help.hidden = true; } }); }
  }

  var bound = new WeakSet();
  function init() {
    var vp = $("#graph"); var tree = $("#text-tree");
    if (vp) { bound.add(vp); } if (tree) { bound.add(tree); }
    initGraph(); initTree(); initKeys();
  }
  function rebind() {
    var vp = $("#graph");
    if (vp && !bound.has(vp)) { bound.add(vp); initGraph(); }
    var tree = $("#text-tree");
    if (tree && !bound.has(tree)) { bound.add(tree); initTree(); }
    else if (tree) { untabLinks(tree); applyFilter(tree.getAttribute("data-filter") || "all"); }
  }
  // A row that loads more rows (unfold, show earlier/later) is replaced by them: keep the
  // keyboard focus next to where it was (the nearest new row).
  var pendingFocus = null;
  document.addEventListener("htmx:beforeSwap", function (e) {
    var li = e.detail.target;
    if (!li || !li.matches || !li.matches("#text-tree > .tr")) { pendingFocus = null; return; }
    pendingFocus = { prev: li.previousElementSibling, next: li.nextElementSibling,
      earlier: li.classList.contains("tr-page-earlier"),
      focused: li.contains(document.activeElement) || li.getAttribute("tabindex") === "0" };
  });
  document.addEventListener("htmx:afterSettle", function () {
    var p = pendingFocus; pendingFocus = null;
    if (!p || !p.focused) { return; }
    var li = p.earlier ? (p.next ? p.next.previousElementSibling : $("#text-tree > .tr:last-child"))
      : (p.prev ? p.prev.nextElementSibling : $("#text-tree > .tr"));
    if (li && li.classList.contains("tr")) { setFocus(li); }
  });
  document.addEventListener("htmx:afterSettle", rebind);
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", init); } else { init(); }

  // "New since you last looked": the page lists which of its entries arrived after the
  // reader's previous visit (#new-ids); mark those rows of the transcript and the tree.
  function markNew() {
    var data = document.getElementById("new-ids");
    if (!data) { return; }
    var ids;
    try { ids = JSON.parse(data.textContent); } catch (err) { return; }
    var wanted = {};
    ids.forEach(function (id) { wanted[id] = true; });
    document.querySelectorAll("[data-entry], #text-tree [data-id]").forEach(function (el) {
      var id = el.getAttribute("data-entry") || el.getAttribute("data-id");
      if (wanted[id] && !el.classList.contains("is-new")) {
        el.classList.add("is-new");
        el.setAttribute("title", (el.getAttribute("title") ? el.getAttribute("title") + " · " : "") + "new since your last visit");
      }
    });
  }
  document.addEventListener("htmx:afterSettle", markNew);
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", markNew); } else { markNew(); }
})();
