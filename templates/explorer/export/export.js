(function () {
  "use strict";
  var E = JSON.parse(document.getElementById("export-entries").textContent);
  var M = JSON.parse(document.getElementById("export-routes").textContent);
  var byId = {};
  var kids = {};
  var routeOfLeaf = {};
  var current = -1;
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

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
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
    for (var k = 0; k < M.routes.length; k++) if (path(M.routes[k].leaf).indexOf(i) >= 0) return k;
    return -1;
  }
  function switcher(e) {
    var nav = el("nav", "t-switch small");
    nav.setAttribute("aria-label", "Sibling branches");
    var pos = e.sib.indexOf(e.id);
    function go(delta, label) {
      var sib = e.sib[pos + delta];
      var target = sib !== undefined && byId[sib] !== undefined ? routeFor(byId[sib]) : -1;
      var b = el("button", "t-sw", label);
      b.type = "button";
      b.setAttribute("aria-label", delta < 0 ? "Previous branch" : "Next branch");
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
  function show(k, focusId) {
    var r = M.routes[k];
    if (!r) return;
    current = k;
    var ids = path(r.leaf);
    var marks = {};
    r.marks.forEach(function (run) { for (var i = run[0]; i < run[1]; i++) marks[i] = run; });
    var ol = document.getElementById("transcript");
    ol.textContent = "";
    ids.forEach(function (ei, ri) {
      var e = E[ei];
      var li = el("li", "t-entry t-k-" + e.k);
      li.id = "e-" + ei;
      li.setAttribute("data-entry", e.id);
      if (e.sib) li.appendChild(switcher(e));
      var m = marks[ri];
      if (m) {
        li.className += " t-" + m[2];
        li.appendChild(el("div", "t-mark small", (m[2] === "replaced" ? "summarized by compaction " : "kept tail of compaction ") + E[m[3]].id));
      }
      var edit = r.edits[ei];
      if (edit) {
        li.className += " t-edited";
        li.appendChild(el("div", "t-edit small", (edit[0] === "hidden" ? "Hidden from the model" : "Replaced in the model's context") + " by edit " + E[edit[1]].id));
      }
      var card = el("div", "t-card");
      card.innerHTML = e.h; // rendered and sanitised server-side
      li.appendChild(card);
      var comp = card.querySelector(".t-compaction");
      if (comp && comp.getAttribute("data-replaced") !== "0") {
        var replaced = ids.filter(function (x, j) { var mm = marks[j]; return mm && mm[2] === "replaced" && mm[3] === ei; });
        var button = el("button", "t-expand small", "Show the " + replaced.length + " replaced entries");
        button.type = "button";
        button.setAttribute("aria-expanded", "false");
        var list = el("ol", "replaced-list small");
        list.hidden = true;
        button.addEventListener("click", function () {
          if (!list.childNodes.length) replaced.forEach(function (x) { list.appendChild(el("li", "", E[x].r + ": " + (E[x].t || E[x].id))); });
          list.hidden = !list.hidden;
          button.setAttribute("aria-expanded", String(!list.hidden));
          button.textContent = (list.hidden ? "Show the " : "Hide the ") + replaced.length + " replaced entries";
        });
        comp.appendChild(button);
        comp.appendChild(list);
      }
      ol.appendChild(li);
    });
    document.getElementById("x-route").textContent = "Route to " + E[r.leaf].id + " · " + ids.length + " entries · route " + (k + 1) + " of " + M.routes.length;
    var onRoute = {};
    ids.forEach(function (i) { onRoute[i] = 1; });
    Array.prototype.forEach.call(document.querySelectorAll("#x-tree button"), function (b) {
      var on = onRoute[b.getAttribute("data-i")] === 1;
      b.classList.toggle("on-route", on);
      b.setAttribute("aria-pressed", String(on));
    });
    if (focusId !== undefined && byId[focusId] !== undefined) {
      var target = document.getElementById("e-" + byId[focusId]);
      if (target && target.scrollIntoView) target.scrollIntoView({ block: "start" });
    }
  }
  function tree() {
    // roots, branch children and leaves; a single-child chain is folded into its first row
    var ul = document.getElementById("x-tree");
    var stack = (kids["-1"] || []).slice().reverse().map(function (i) { return [i, 0]; });
    var rows = 0;
    while (stack.length && rows < 5000) {
      var top = stack.pop();
      var i = top[0];
      var depth = top[1];
      var folded = 0;
      var j = i;
      while (kids[String(j)] && kids[String(j)].length === 1) { j = kids[String(j)][0]; folded++; }
      var li = el("li", "x-row");
      li.style.paddingLeft = Math.min(depth, 40) * 0.9 + "em";
      var b = el("button", "x-node", (depth ? "└ " : "") + E[i].r + ": " + (E[i].t || E[i].id));
      b.type = "button";
      b.setAttribute("data-i", String(i));
      b.title = E[i].id + (folded ? " and " + folded + " more entries below it" : "");
      b.addEventListener("click", (function (node) { return function () { var k = routeFor(node); if (k >= 0) show(k, E[node].id); }; })(i));
      li.appendChild(b);
      if (folded) li.appendChild(el("span", "muted small", " +" + folded));
      ul.appendChild(li);
      rows++;
      var next = kids[String(j)] || [];
      for (var c = next.length - 1; c >= 0; c--) stack.push([next[c], depth + 1]);
    }
    if (stack.length) ul.appendChild(el("li", "muted small", "… the tree has more branches than shown here"));
  }
  tree();
  if (M.routes.length) show(M.start || 0);
  else document.getElementById("x-route").textContent = "This session has no entries.";
})();
