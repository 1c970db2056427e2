(function () {
  "use strict";
  // The data: rows of entries in chunks, images once each, the routes. Only the cards'
  // HTML (rendered and sanitised server-side) is ever parsed as HTML.
  var E = [];
  Array.prototype.forEach.call(document.querySelectorAll("script.x-rows"), function (s) {
    var part = JSON.parse(s.textContent);
    for (var i = 0; i < part.length; i++) E.push(part[i]);
  });
  var IMG = {};
  Array.prototype.forEach.call(document.querySelectorAll("script.x-img"), function (s) { IMG[s.getAttribute("data-k")] = s; });
  var M = JSON.parse(document.getElementById("export-routes").textContent);
  var byId = {};
  var kids = {};
  var routeOfLeaf = {};
  var current = -1;
  var routeIds = [];
  var state = { filter: "all", thinking: false, tools: false, query: "" };
  E.forEach(function (e, i) { byId[e.id] = i; });
  E.forEach(function (e, i) {
    var key = String(e.p);
    (kids[key] = kids[key] || []).push(i);
  });
  // children in file order: a branch point's children carry that order
  Object.keys(kids).forEach(function (key) {
    var list = kids[key];
    var order = list.length > 1 && E[list[0]].sib ? E[list[0]].sib : null;
    if (order) list.sort(function (a, b) { return order.indexOf(E[a].id) - order.indexOf(E[b].id); });
  });
  M.routes.forEach(function (r, k) { routeOfLeaf[r.leaf] = k; });

  function $(id) { return document.getElementById(id); }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function button(cls, text, label) {
    var b = el("button", cls, text);
    b.type = "button";
    if (label) b.setAttribute("aria-label", label);
    return b;
  }
  function path(leaf) {
    var out = [];
    var seen = {};
    for (var i = leaf; i >= 0 && !seen[i]; i = E[i].p) { seen[i] = 1; out.push(i); }
    return out.reverse();
  }
  function routeFor(i) {
    // the route a click on entry i opens: its branch's newest leaf, chosen server-side
    var e = E[i];
    var leaf = e.nl !== undefined && e.nl !== null ? byId[e.nl] : (kids[String(i)] ? undefined : i);
    if (leaf !== undefined && routeOfLeaf[leaf] !== undefined) return routeOfLeaf[leaf];
    if (current >= 0 && routeIds.indexOf(i) >= 0) return current;
    for (var k = 0; k < M.routes.length; k++) if (path(M.routes[k].leaf).indexOf(i) >= 0) return k;
    return -1;
  }

  // --- totals -------------------------------------------------------------------------
  function fmt(n) {
    if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 1 : 2) + "M";
    if (n >= 1e4) return (n / 1e3).toFixed(1) + "k";
    return String(n);
  }
  function totals(list) {
    var t = { entries: list.length, user: 0, assistant: 0, toolResult: 0, other: 0, calls: 0, tok: [0, 0, 0, 0], cost: 0, models: {}, compactions: 0 };
    list.forEach(function (i) {
      var e = E[i];
      if (e.k === "message" || e.k === "custom_message") {
        if (e.ro === "user" || e.ro === "assistant" || e.ro === "toolResult") t[e.ro]++;
        else t.other++;
      }
      if (e.k === "compaction") t.compactions++;
      if (e.tc) t.calls += e.tc;
      if (e.u) { for (var j = 0; j < 4; j++) t.tok[j] += e.u[j]; t.cost += e.c || 0; }
      if (e.mo) t.models[e.mo] = 1;
    });
    return t;
  }
  function stat(parent, label, value, title) {
    var d = el("div", "x-stat");
    d.appendChild(el("b", "", label));
    var v = el("span", "", value);
    if (title) v.title = title;
    d.appendChild(v);
    parent.appendChild(d);
  }
  function statBlock(box, heading, t) {
    if (heading) box.appendChild(el("div", "x-scope", heading));
    var msgs = t.user + t.assistant + t.toolResult + t.other;
    stat(box, "Entries", String(t.entries));
    stat(box, "Messages", msgs + " (" + t.user + " user, " + t.assistant + " assistant, " + t.toolResult + " tool results" + (t.other ? ", " + t.other + " other" : "") + ")");
    stat(box, "Tool calls", String(t.calls));
    stat(box, "Tokens", "↑" + fmt(t.tok[0]) + " ↓" + fmt(t.tok[1]) + " cache R " + fmt(t.tok[2]) + " W " + fmt(t.tok[3]),
      "Provider-reported: input " + t.tok[0] + ", output " + t.tok[1] + ", cache read " + t.tok[2] + ", cache write " + t.tok[3]);
    stat(box, "Cost", "$" + t.cost.toFixed(t.cost < 1 ? 4 : 2));
    if (t.compactions) stat(box, "Compactions", String(t.compactions));
    var models = Object.keys(t.models);
    if (models.length) stat(box, "Models", models.join(", "));
  }
  var fileTotals = null;
  function renderStats(ids) {
    var box = $("x-stats");
    box.textContent = "";
    if (M.routes.length > 1) {
      statBlock(box, "This route", totals(ids));
      if (!fileTotals) fileTotals = totals(E.map(function (e, i) { return i; }));
      var f = fileTotals;
      var line = el("div", "x-scope x-file", "The whole file (" + M.routes.length + " routes): ");
      line.appendChild(el("span", "", f.entries + " entries · " + (f.user + f.assistant + f.toolResult + f.other) + " messages · " + f.calls + " tool calls · ↑" + fmt(f.tok[0]) + " ↓" + fmt(f.tok[1]) + " · $" + f.cost.toFixed(f.cost < 1 ? 4 : 2)));
      box.appendChild(line);
    } else statBlock(box, "", totals(ids));
  }

  // --- the transcript --------------------------------------------------------------------
  function linkFor(id) {
    var leaf = M.routes.length > 1 && current >= 0 ? "~" + E[M.routes[current].leaf].id : "";
    return location.href.split("#")[0] + "#e-" + id + leaf;
  }
  function copy(text, b) {
    function done(ok) {
      b.textContent = ok ? "Copied" : "Copy failed";
      setTimeout(function () { b.textContent = "Copy link"; }, 1500);
    }
    function fallback() {
      var area = el("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
      document.body.removeChild(area);
      done(ok);
    }
    if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).then(function () { done(true); }, fallback);
    else fallback();
  }
  function switcher(e) {
    var nav = el("nav", "t-switch small");
    nav.setAttribute("aria-label", "Sibling branches");
    var pos = e.sib.indexOf(e.id);
    function go(delta, label) {
      var sib = e.sib[pos + delta];
      var target = sib !== undefined && byId[sib] !== undefined ? routeFor(byId[sib]) : -1;
      var b = button("t-sw", label, delta < 0 ? "Previous branch" : "Next branch");
      if (target < 0) b.disabled = true;
      else b.addEventListener("click", function () { show(target, sib); });
      return b;
    }
    nav.appendChild(el("span", "muted", "branch "));
    nav.appendChild(go(-1, "<"));
    nav.appendChild(el("span", "t-sw-pos", " " + (pos + 1) + "/" + e.sib.length + " "));
    nav.appendChild(go(1, ">"));
    return nav;
  }
  function image(key) {
    var s = IMG[key];
    if (typeof s === "string" || s === undefined) return s;
    IMG[key] = JSON.parse(s.textContent);
    return IMG[key];
  }
  function entryNode(ei, ri, ids, r, marks) {
    var e = E[ei];
    var li = el("li", "t-entry t-k-" + e.k + " t-r-" + e.ro + (e.m ? " is-meta" : "") + (e.ot ? " only-tools" : "") + (e.pt ? " is-stub" : ""));
    li.id = "e-" + e.id;
    li.setAttribute("data-entry", e.id);
    li.setAttribute("data-i", String(ei));
    var bar = el("div", "t-bar small");
    if (e.sib) bar.appendChild(switcher(e));
    var a = el("a", "t-anchor", "#");
    a.href = "#e-" + e.id;
    a.title = "Link to this entry (" + e.id + ")";
    a.setAttribute("aria-label", "Link to entry " + e.id);
    bar.appendChild(a);
    var cp = button("t-copy", "Copy link", "Copy a link to entry " + e.id);
    cp.setAttribute("data-id", e.id);
    bar.appendChild(cp);
    li.appendChild(bar);
    var m = marks[ri];
    if (m) {
      li.className += " t-" + m[2];
      li.appendChild(el("div", "t-mark small", (m[2] === "replaced" ? "summarized by compaction " : "kept tail of compaction ") + E[m[3]].id));
    }
    function editMark(edit) {
      return el("div", "t-edit small", (edit[0] === "hidden" ? "Hidden from the model" : "Replaced in the model's context") + " by edit " + E[edit[1]].id);
    }
    var edit = r.edits[ei];
    if (edit) {
      li.className += " t-edited";
      li.appendChild(editMark(edit));
    }
    var card = el("div", "t-card");
    card.innerHTML = e.h; // rendered and sanitised server-side
    li.appendChild(card);
    // a tool result is read in its call's card: its edit mark goes there
    Array.prototype.forEach.call(card.querySelectorAll(".tool-result[data-result]"), function (box) {
      var rid = byId[box.getAttribute("data-result")];
      var redit = rid !== undefined ? r.edits[rid] : null;
      if (redit) { box.classList.add("t-edited"); box.insertBefore(editMark(redit), box.firstChild); }
    });
    var figures = card.querySelector(".t-figures");
    var time = card.querySelector(".t-time");
    var iso = time && /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(\.\d+)?Z$/.exec(time.textContent);
    if (iso) { time.setAttribute("datetime", time.textContent); time.title = time.textContent; time.textContent = iso[1] + " " + iso[2] + " UTC"; }
    if (figures) figures.title = "Estimated context tokens of this message" + (e.u ? "; provider-reported tokens and cost" : "");
    Array.prototype.forEach.call(card.querySelectorAll("img[data-img]"), function (img) {
      var src = image(img.getAttribute("data-img"));
      if (src) img.src = src;
    });
    if (state.thinking) Array.prototype.forEach.call(card.querySelectorAll("details.thinking"), function (d) { d.open = true; });
    if (state.tools) unfoldAll(card, true);
    var comp = card.querySelector(".t-compaction");
    if (comp && comp.getAttribute("data-replaced") !== "0") {
      var replaced = ids.filter(function (x, j) { var mm = marks[j]; return mm && mm[2] === "replaced" && mm[3] === ei; });
      var more = button("t-expand small", "Show the " + replaced.length + " replaced entries");
      more.setAttribute("aria-expanded", "false");
      var list = el("ol", "replaced-list small");
      list.hidden = true;
      more.addEventListener("click", function () {
        if (!list.childNodes.length) replaced.forEach(function (x) {
          var item = el("li");
          var link = el("a", "", E[x].r + ": " + (E[x].t || E[x].id));
          link.href = "#e-" + E[x].id;
          item.appendChild(link);
          list.appendChild(item);
        });
        list.hidden = !list.hidden;
        more.setAttribute("aria-expanded", String(!list.hidden));
        more.textContent = (list.hidden ? "Show the " : "Hide the ") + replaced.length + " replaced entries";
      });
      comp.appendChild(more);
      comp.appendChild(list);
    }
    return li;
  }
  function show(k, focusId) {
    var r = M.routes[k];
    if (!r) return;
    current = k;
    var ids = path(r.leaf);
    routeIds = ids;
    var marks = {};
    r.marks.forEach(function (run) { for (var i = run[0]; i < run[1]; i++) marks[i] = run; });
    var ol = $("transcript");
    ol.textContent = "";
    var frag = document.createDocumentFragment();
    ids.forEach(function (ei, ri) { frag.appendChild(entryNode(ei, ri, ids, r, marks)); });
    ol.appendChild(frag);
    renderStats(ids);
    markRoute();
    applySearch();
    if (focusId !== undefined && byId[focusId] !== undefined) focus(focusId);
  }
  function focus(id) {
    var e = E[byId[id]];
    if (e && e.pt && $("e-" + e.pt)) id = e.pt; // a tool result is read in its call's card
    var prev = document.querySelector(".t-entry.is-target");
    if (prev) prev.classList.remove("is-target");
    var target = $("e-" + id);
    if (!target) return;
    target.classList.add("is-target");
    if (target.scrollIntoView) target.scrollIntoView({ block: "start" });
    Array.prototype.forEach.call(document.querySelectorAll("#x-tree .is-current"), function (b) { b.classList.remove("is-current"); });
    var row = document.querySelector('#x-tree .x-node[data-i="' + byId[id] + '"]');
    if (row) row.classList.add("is-current");
  }
  function status() {
    var r = M.routes[current];
    if (!r) return;
    var text = "Route to " + E[r.leaf].id + " · " + routeIds.length + " entries" + (M.routes.length > 1 ? " · route " + (current + 1) + " of " + M.routes.length : "");
    if (state.query) {
      var n = document.querySelectorAll("#transcript .t-entry:not(.x-miss):not(.is-stub)").length;
      text += " · " + n + (n === 1 ? " match " : " matches ") + "“" + state.query + "”";
    }
    $("x-route").textContent = text;
  }

  // --- fold and open ---------------------------------------------------------------------
  function unfold(box, open) {
    box.classList.toggle("is-folded", !open);
    var b = box.querySelector(".x-unfold");
    if (b) {
      b.setAttribute("aria-expanded", String(open));
      b.textContent = open ? "Fold" : b.getAttribute("data-more");
    }
  }
  function unfoldAll(root, open) {
    Array.prototype.forEach.call(root.querySelectorAll(".x-fold"), function (box) { unfold(box, open); });
    Array.prototype.forEach.call(root.querySelectorAll("details.t-args"), function (d) { d.open = open; });
  }
  function setThinking(open) {
    state.thinking = open;
    $("x-thinking").setAttribute("aria-pressed", String(open));
    Array.prototype.forEach.call(document.querySelectorAll("#transcript details.thinking"), function (d) { d.open = open; });
  }
  function setTools(open) {
    state.tools = open;
    $("x-tools").setAttribute("aria-pressed", String(open));
    unfoldAll($("transcript"), open);
  }
  function setFilter(name) {
    state.filter = name;
    document.body.className = document.body.className.replace(/\bf-[a-z-]+/g, "").trim() + " f-" + name;
    Array.prototype.forEach.call(document.querySelectorAll(".x-filter"), function (b) {
      b.setAttribute("aria-pressed", String(b.getAttribute("data-filter") === name));
    });
  }

  // --- search ------------------------------------------------------------------------------
  var TEXT = {};
  function textOf(i) {
    if (TEXT[i] === undefined) {
      var s = E[i].h.replace(/<[^>]*>/g, " ").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"').replace(/&#x27;/g, "'").replace(/&#39;/g, "'").replace(/&amp;/g, "&");
      TEXT[i] = (E[i].id + " " + s).toLowerCase();
    }
    return TEXT[i];
  }
  function highlight(q) {
    if (!window.CSS || !CSS.highlights || typeof Highlight === "undefined") return;
    CSS.highlights.delete("x-hit");
    if (!q) return;
    var ranges = [];
    var walker = document.createTreeWalker($("transcript"), NodeFilter.SHOW_TEXT);
    var node;
    while ((node = walker.nextNode()) && ranges.length < 2000) {
      var low = node.nodeValue.toLowerCase();
      var at = low.indexOf(q);
      while (at >= 0 && ranges.length < 2000) {
        var range = new Range();
        range.setStart(node, at);
        range.setEnd(node, at + q.length);
        ranges.push(range);
        at = low.indexOf(q, at + q.length);
      }
    }
    var marks = new Highlight();
    ranges.forEach(function (range) { marks.add(range); });
    CSS.highlights.set("x-hit", marks);
  }
  function applySearch() {
    var q = state.query.toLowerCase();
    var onRoute = {};
    Array.prototype.forEach.call(document.querySelectorAll("#transcript .t-entry"), function (li) {
      var i = Number(li.getAttribute("data-i"));
      onRoute[i] = 1;
      var miss = !!q && textOf(i).indexOf(q) < 0;
      li.classList.toggle("x-miss", miss);
      if (q && !miss) {
        var fold = li.querySelectorAll(".x-fold.is-folded");
        Array.prototype.forEach.call(fold, function (box) { if (box.textContent.toLowerCase().indexOf(q) >= 0) unfold(box, true); });
      }
    });
    var hits = $("x-hits");
    hits.textContent = "";
    hits.hidden = true;
    if (q && M.routes.length > 1) {
      var elsewhere = [];
      for (var i = 0; i < E.length; i++) if (!onRoute[i] && textOf(i).indexOf(q) >= 0) elsewhere.push(i);
      if (elsewhere.length) {
        hits.hidden = false;
        hits.appendChild(el("span", "muted", elsewhere.length + " more on other routes:"));
        var ul = el("ul");
        elsewhere.slice(0, 100).forEach(function (x) {
          var li = el("li");
          var b = button("", E[x].r + ": " + (E[x].t || E[x].id));
          b.addEventListener("click", function () { var k = routeFor(x); if (k >= 0) show(k, E[x].id); });
          li.appendChild(b);
          ul.appendChild(li);
        });
        if (elsewhere.length > 100) ul.appendChild(el("li", "muted", "… and " + (elsewhere.length - 100) + " more"));
        hits.appendChild(ul);
      }
    }
    status();
    highlight(q);
  }

  // --- the tree: chains of single children shown as their user messages, with the runs
  // between them folded into one row each (a click unfolds a run) --------------------------
  var ROW_CAP = 4000;
  function isKey(i) {
    var e = E[i];
    return e.ro === "user" || e.k === "compaction" || e.k === "branch_summary" || e.rv;
  }
  function nodeRow(i, depth) {
    var li = el("li", "x-row");
    li.style.paddingLeft = Math.min(depth, 14) * 0.8 + "em";
    var e = E[i];
    var b = button("x-node");
    b.appendChild(el("span", "x-dot x-dot-" + (e.k === "message" || e.k === "custom_message" ? e.ro : e.k)));
    b.appendChild(document.createTextNode((e.ro === "user" ? "" : e.r + ": ") + (e.t || e.id)));
    b.setAttribute("data-i", String(i));
    b.title = e.r + " · " + e.id;
    li.appendChild(b);
    var n = (kids[String(i)] || []).length;
    if (n > 1) li.appendChild(el("span", "x-fork", n + " branches"));
    return li;
  }
  function runRow(run, depth, rest) {
    var li = el("li", "x-row");
    li.style.paddingLeft = Math.min(depth, 14) * 0.8 + "em";
    var count = {};
    run.forEach(function (i) { var r = E[i].r; count[r] = (count[r] || 0) + 1; });
    var parts = Object.keys(count).map(function (r) { return count[r] + " " + r + (count[r] > 1 && !/s$/.test(r) ? "s" : ""); });
    var text = "⋯ " + run.length + (rest ? " more" : "") + " entr" + (run.length === 1 ? "y" : "ies") + " (" + parts.join(", ") + ")";
    var b = button("x-run", text, "Show " + run.length + " more entries here");
    b.title = "Show these entries in the tree";
    b.addEventListener("click", function () { expandRun(li); });
    li.x_run = run;
    li.x_depth = depth;
    li.x_rest = !!rest;
    li.appendChild(b);
    return li;
  }
  // A chain's rows: its first and last entries and its key entries (user messages,
  // summaries, reviewed entries) as rows, the entries between two of them as one run; past
  // ``budget`` rows, the rest of the chain up to its last entry is one run that unfolds the
  // same way.
  var CHAIN_BUDGET = 300;
  function segment(list, depth, budget, out) {
    var run = [];
    var rows = 0;
    function flush() {
      // a run of one entry is that entry's row
      if (run.length) { out.appendChild(run.length === 1 ? nodeRow(run[0], depth) : runRow(run, depth)); rows++; }
      run = [];
    }
    for (var c = 0; c < list.length; c++) {
      var x = list[c];
      if (rows >= budget && list.length - c > 1) {
        // the rest in one row, the chain's last entry (a leaf or a branch point) still shown
        flush();
        out.appendChild(runRow(list.slice(c, list.length - 1), depth, true));
        out.appendChild(nodeRow(list[list.length - 1], depth));
        return rows + 2;
      }
      if (c === 0 || c === list.length - 1 || isKey(x)) {
        flush();
        out.appendChild(nodeRow(x, depth));
        rows++;
      } else run.push(x);
    }
    return rows;
  }
  function expandRun(li) {
    var run = li.x_run;
    var depth = li.x_depth;
    var frag = document.createDocumentFragment();
    if (li.x_rest) segment(run, depth, CHAIN_BUDGET, frag);
    else {
      run.slice(0, 300).forEach(function (i) { frag.appendChild(nodeRow(i, depth)); });
      if (run.length > 300) frag.appendChild(runRow(run.slice(300), depth));
    }
    li.parentNode.replaceChild(frag, li);
    markRoute();
  }
  function markRoute() {
    if (M.routes.length < 2) return; // one route: every row is on it
    var onRoute = {};
    routeIds.forEach(function (i) { onRoute[i] = 1; });
    Array.prototype.forEach.call(document.querySelectorAll("#x-tree .x-node"), function (b) {
      var on = onRoute[b.getAttribute("data-i")] === 1;
      b.classList.toggle("on-route", on);
      b.setAttribute("aria-pressed", String(on));
    });
  }
  function tree() {
    var ul = $("x-tree");
    var stack = (kids["-1"] || []).slice().reverse().map(function (i) { return [i, 0]; });
    var rows = 0;
    // every chain gets a share of the rows, so every branch has its rows in a big tree
    var chains = stack.length;
    Object.keys(kids).forEach(function (key) { if (key !== "-1" && kids[key].length > 1) chains += kids[key].length; });
    var budget = Math.max(4, Math.min(CHAIN_BUDGET, Math.floor(ROW_CAP / Math.max(chains, 1))));
    while (stack.length && rows < ROW_CAP) {
      var top = stack.pop();
      var depth = top[1];
      var chain = [top[0]];
      var j = top[0];
      while (kids[String(j)] && kids[String(j)].length === 1) { j = kids[String(j)][0]; chain.push(j); }
      rows += segment(chain, depth, Math.min(budget, ROW_CAP - rows), ul);
      var next = kids[String(j)] || [];
      for (var n = next.length - 1; n >= 0; n--) stack.push([next[n], depth + 1]);
    }
    if (stack.length || rows >= ROW_CAP) ul.appendChild(el("li", "muted small", "… the tree has more rows than shown here; use the branch switchers or search"));
    $("x-tree-count").textContent = E.length + " entries · " + rows + " rows" + (M.routes.length > 1 ? " · " + M.routes.length + " routes" : "");
    ul.addEventListener("click", function (ev) {
      var b = ev.target.closest ? ev.target.closest(".x-node") : null;
      if (!b) return;
      var i = Number(b.getAttribute("data-i"));
      var k = routeIds.indexOf(i) >= 0 ? current : routeFor(i); // on this route: stay on it
      if (k < 0) return;
      if (k !== current) show(k, E[i].id);
      else focus(E[i].id);
      if (window.matchMedia && window.matchMedia("(max-width: 860px)").matches) $("x-side").open = false;
    });
  }

  // --- links ---------------------------------------------------------------------------------
  function fromHash() {
    var h = decodeURIComponent(location.hash.replace(/^#/, ""));
    if (h.indexOf("e-") !== 0) return false;
    h = h.slice(2);
    var leaf = null;
    if (byId[h] === undefined && h.lastIndexOf("~") > 0) {
      leaf = h.slice(h.lastIndexOf("~") + 1);
      h = h.slice(0, h.lastIndexOf("~"));
    }
    var i = byId[h];
    if (i === undefined) return false;
    var k = leaf !== null && byId[leaf] !== undefined && routeOfLeaf[byId[leaf]] !== undefined ? routeOfLeaf[byId[leaf]] : (routeIds.indexOf(i) >= 0 ? current : routeFor(i));
    if (k < 0) return false;
    if (k !== current) show(k, h);
    else focus(h);
    return true;
  }

  // --- wiring --------------------------------------------------------------------------------
  $("transcript").addEventListener("click", function (ev) {
    var t = ev.target;
    if (!t.closest) return;
    var fold = t.closest(".x-unfold");
    if (fold) { var box = fold.closest(".x-fold"); unfold(box, box.classList.contains("is-folded")); return; }
    var cp = t.closest(".t-copy");
    if (cp) { copy(linkFor(cp.getAttribute("data-id")), cp); return; }
    if (t.classList.contains("msg-img") && t.src) zoom(t.src);
  });
  function zoom(src) {
    var box = $("x-zoom");
    if (src) box.querySelector("img").src = src;
    box.hidden = !src;
  }
  $("x-zoom").addEventListener("click", function () { zoom(null); });
  $("x-thinking").addEventListener("click", function () { setThinking(!state.thinking); });
  $("x-tools").addEventListener("click", function () { setTools(!state.tools); });
  Array.prototype.forEach.call(document.querySelectorAll(".x-filter"), function (b) {
    b.addEventListener("click", function () { setFilter(b.getAttribute("data-filter")); });
  });
  $("x-expand-runs").addEventListener("click", function () {
    // every run, and the runs the "more" rows unfold into, up to a row count a browser
    // still scrolls smoothly
    for (var pass = 0; pass < 50; pass++) {
      var runs = [];
      Array.prototype.forEach.call(document.querySelectorAll("#x-tree li"), function (li) { if (li.x_run) runs.push(li); });
      if (!runs.length || document.querySelectorAll("#x-tree li").length > 20000) break;
      runs.forEach(expandRun);
    }
  });
  var timer = null;
  $("x-search").addEventListener("input", function (ev) {
    clearTimeout(timer);
    var value = ev.target.value.trim();
    timer = setTimeout(function () { state.query = value; hitAt = -1; applySearch(); }, E.length > 5000 ? 250 : 60);
  });
  // Enter in the search box goes to the next matching entry (Shift+Enter: the previous)
  var hitAt = -1;
  $("x-search").addEventListener("keydown", function (ev) {
    if (ev.key !== "Enter") return;
    ev.preventDefault();
    clearTimeout(timer);
    if (state.query !== ev.target.value.trim()) { state.query = ev.target.value.trim(); applySearch(); hitAt = -1; }
    var shown = Array.prototype.filter.call(document.querySelectorAll("#transcript .t-entry:not(.x-miss)"), function (li) { return li.offsetParent !== null; });
    if (!shown.length) return;
    hitAt = (hitAt + (ev.shiftKey ? -1 : 1) + shown.length) % shown.length;
    focus(shown[hitAt].getAttribute("data-entry"));
  });
  document.addEventListener("keydown", function (ev) {
    var t = ev.target;
    var typing = t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.isContentEditable);
    if (ev.key === "Escape" && !$("x-zoom").hidden) { zoom(null); return; }
    if (ev.key === "Escape" && t && t.id === "x-search") { t.value = ""; state.query = ""; applySearch(); return; }
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === "/") { ev.preventDefault(); $("x-search").focus(); }
    else if (ev.key === "t" || ev.key === "T") setThinking(!state.thinking);
    else if (ev.key === "o" || ev.key === "O") setTools(!state.tools);
  });
  window.addEventListener("hashchange", fromHash);
  if (window.matchMedia && window.matchMedia("(max-width: 860px)").matches) $("x-side").open = false;
  tree();
  if (M.routes.length) {
    show(M.start || 0);
    fromHash();
  } else $("x-route").textContent = "This session has no entries.";
})();
