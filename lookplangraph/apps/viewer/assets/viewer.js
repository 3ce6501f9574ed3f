/* LookPlanGraph episode viewer. Reads the JSON blocks of this page (lookplangraph/apps/viewer/page.py):
   #lpg-index at start; #lpg-ep-N when episode N is opened; #lpg-g-N (a base graph) and #lpg-img-N
   (a thumbnail) when a step shows them. Everything is built with DOM calls and textContent: no
   data is ever parsed as HTML. Graph encoding: lookplangraph/apps/viewer/replay.py. */
(function () {
  "use strict";
  var PRIOR = 1, SEEN = 2, CHANGED = 4, NEW = 8, INSPECTED = 16;
  var SVGNS = "http://www.w3.org/2000/svg";
  var COL = 170, BOX = 156, ROW = 23, BOXH = 18, CHARS = 24;
  var FOCUS_OVER = 70; // graphs with more nodes start with inactive rooms collapsed

  function $(id) { return document.getElementById(id); }
  function block(id) {
    var e = $(id);
    return e ? JSON.parse(e.textContent) : null;
  }
  function el(tag, attrs) {
    var e = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        if (attrs[k] === null || attrs[k] === undefined) continue;
        if (k === "text") e.textContent = attrs[k];
        else if (k === "cls") e.className = attrs[k];
        else if (k === "on") { for (var ev in attrs.on) e.addEventListener(ev, attrs.on[ev]); }
        else e.setAttribute(k, attrs[k]);
      }
    }
    for (var i = 2; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) c.forEach(function (x) { if (x) e.appendChild(typeof x === "string" ? document.createTextNode(x) : x); });
      else e.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs || {}) {
      if (k === "text") e.textContent = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    return e;
  }
  function num(x, d) {
    if (x === null || x === undefined || x === "") return "–";
    return typeof x === "number" ? (d === undefined ? String(x) : x.toFixed(d)) : String(x);
  }

  var INDEX = block("lpg-index");
  var EPISODES = INDEX.episodes;
  var details = {}, graphs = {}, images = {};
  var state = { id: null, step: 0, sortKey: null, sortDir: 1, focus: null, shown: [] };

  function detail(id) {
    if (!(id in details)) details[id] = block("lpg-ep-" + id);
    return details[id];
  }
  function baseGraph(n) {
    if (!(n in graphs)) graphs[n] = block("lpg-g-" + n);
    return graphs[n];
  }
  function image(n) {
    if (!(n in images)) images[n] = block("lpg-img-" + n);
    return images[n];
  }

  /* ---------------------------------------------------------------- runs and the episode list */
  function renderRuns() {
    var box = $("runs");
    INDEX.runs.forEach(function (r) {
      var bits = [r.kind, r.episodes + " episode" + (r.episodes === 1 ? "" : "s")];
      if (r.planner) bits.push(r.planner);
      if (r.lm) bits.push(r.lm);
      if (r.dynamic) bits.push("dynamic");
      box.appendChild(el("div", { cls: "run", title: r.path }, el("b", { text: r.label }), " " + bits.join(" · ")));
      (r.warnings || []).forEach(function (w) { box.appendChild(el("div", { cls: "warn", text: "⚠ " + w })); });
    });
    var splits = {}, fs = $("f-split"), fr = $("f-run");
    EPISODES.forEach(function (e) { if (e.split) splits[e.split] = 1; });
    Object.keys(splits).sort().forEach(function (s) { fs.appendChild(el("option", { value: s, text: s })); });
    if (INDEX.runs.length > 1) {
      INDEX.runs.forEach(function (r, i) { fr.appendChild(el("option", { value: String(i), text: r.label })); });
    } else {
      fr.hidden = true;
    }
  }

  function filtered() {
    var q = $("f-text").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    var v = $("f-verdict").value, s = $("f-split").value, r = $("f-run").value;
    var out = EPISODES.filter(function (e) {
      if (v && e.verdict !== v) return false;
      if (s && e.split !== s) return false;
      if (r && String(e.run) !== r) return false;
      for (var i = 0; i < q.length; i++) if (e.q.indexOf(q[i]) < 0) return false;
      return true;
    });
    if (state.sortKey) {
      var k = state.sortKey, d = state.sortDir;
      out = out.slice().sort(function (a, b) {
        var x = a[k], y = b[k];
        if (x === y) return a.id - b.id;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * d;
      });
    }
    return out;
  }

  function verdictBadge(e) {
    var label = e.verdict === "changed-only" ? "changed-only" : e.verdict;
    return el("span", { cls: "badge v-" + e.verdict, text: label,
      title: e.verdict === "changed-only" ? "goal units met, but something else changed (strict: failure)" : null });
  }

  function renderList() {
    var rows = filtered();
    state.shown = rows.map(function (e) { return e.id; });
    var body = $("episode-rows");
    var frag = document.createDocumentFragment();
    rows.forEach(function (e) {
      var tr = el("tr", { "data-id": String(e.id), cls: e.id === state.id ? "sel" : null, tabindex: "0",
          on: { click: function () { openEpisode(e.id, 0, true); },
                keydown: function (ev) { if (ev.key === "Enter") openEpisode(e.id, 0, true); } } },
        el("td", { cls: "side", text: e.split }),
        el("td", { cls: "task", text: e.task, title: INDEX.runs.length > 1 ? INDEX.runs[e.run].label : null }),
        el("td", { cls: "wide", text: e.planner }),
        el("td", null, verdictBadge(e)),
        el("td", { cls: "num", text: num(e.app, 2) }),
        el("td", { cls: "num", text: num(e.actions) }),
        el("td", { cls: "num wide", text: num(e.tokens) }),
        el("td", { cls: "num wide", text: num(e.seconds, 1) }),
        el("td", { cls: "end wide", text: e.failure || e.end, title: e.failure ? "failure kind (termination: " + e.end + ")" : "termination" }));
      frag.appendChild(tr);
    });
    body.textContent = "";
    body.appendChild(frag);
    var fin = rows.filter(function (e) { return e.sr !== null; });
    var sr = fin.length ? fin.reduce(function (a, e) { return a + e.sr; }, 0) / fin.length : null;
    var len = fin.filter(function (e) { return e.lenient !== null; });
    var lenient = len.length === fin.length && fin.length ? len.reduce(function (a, e) { return a + e.lenient; }, 0) / len.length : null;
    var app = fin.length ? fin.reduce(function (a, e) { return a + (e.app || 0); }, 0) / fin.length : null;
    $("list-stats").textContent = rows.length + " of " + EPISODES.length + " episodes" +
      (fin.length ? " · SR " + num(sr, 3) + (lenient !== null ? " (changed-only " + num(lenient, 3) + ")" : "") +
        " · APP " + num(app, 3) : "") + (fin.length < rows.length ? " · " + (rows.length - fin.length) + " unfinished" : "");
    document.querySelectorAll("#episodes th").forEach(function (th) {
      th.classList.toggle("sorted", th.getAttribute("data-key") === state.sortKey);
      th.setAttribute("aria-sort", th.getAttribute("data-key") === state.sortKey ? (state.sortDir > 0 ? "ascending" : "descending") : "none");
    });
  }

  /* ---------------------------------------------------------------- one episode */
  function openEpisode(id, step, push) {
    if (id === null || id < 0 || id >= EPISODES.length) return;
    var first = state.id !== id;
    state.id = id;
    state.step = step || 0;
    if (first) state.focus = null;
    document.body.classList.add("open");
    $("detail-pane").hidden = false;
    document.querySelectorAll("#episode-rows tr").forEach(function (tr) {
      tr.classList.toggle("sel", tr.getAttribute("data-id") === String(id));
    });
    renderDetail();
    if (push) history.replaceState(null, "", "#ep=" + id + "&step=" + state.step);
    if (first) $("detail-pane").scrollTop = 0;
    if (first && window.matchMedia("(max-width: 899px)").matches) window.scrollTo(0, 0);
  }

  function closeEpisode() {
    state.id = null;
    document.body.classList.remove("open");
    $("detail-pane").hidden = true;
    history.replaceState(null, "", "#");
    renderList();
  }

  function neighbour(delta) {
    var i = state.shown.indexOf(state.id);
    if (i < 0) return null;
    var j = i + delta;
    return j >= 0 && j < state.shown.length ? state.shown[j] : null;
  }

  function kv(label, value, cls) {
    return el("span", { cls: "kv" + (cls ? " " + cls : "") }, el("span", { cls: "k", text: label }), " ", el("span", { cls: "v", text: value }));
  }

  function renderDetail() {
    var e = EPISODES[state.id], d = detail(state.id), r = d.result;
    var box = $("detail");
    box.textContent = "";
    var prev = neighbour(-1), next = neighbour(1);
    box.appendChild(el("nav", { cls: "ep-nav" },
      el("button", { type: "button", id: "back", on: { click: closeEpisode } }, "← episodes"),
      el("button", { type: "button", id: "prev-ep", disabled: prev === null ? "" : null, on: { click: function () { openEpisode(prev, 0, true); } } }, "‹ previous"),
      el("button", { type: "button", id: "next-ep", disabled: next === null ? "" : null, on: { click: function () { openEpisode(next, 0, true); } } }, "next ›")));
    var head = el("div", { cls: "ep-head" },
      el("h2", null, el("span", { id: "ep-title", text: (e.split ? e.split + " / " : "") + (e.task || "(unknown task)") }), " ", verdictBadge(e)),
      d.instruction ? el("p", { cls: "instruction", text: d.instruction }) : null);
    var facts = el("div", { cls: "facts", id: "ep-facts" });
    facts.appendChild(kv("planner", e.planner));
    if (e.lm) facts.appendChild(kv("LM", e.lm));
    if (r) {
      facts.appendChild(kv("strict", r.success ? "success" : "failure", r.success ? "ok" : "bad"));
      if (r.success_changed_only !== null && r.success_changed_only !== undefined)
        facts.appendChild(kv("changed-only", r.success_changed_only ? "success" : "failure", r.success_changed_only ? "ok" : "bad"));
      if (r.success_with_correction !== null && r.success_with_correction !== undefined)
        facts.appendChild(kv("with SGS correction", r.success_with_correction ? "success" : "failure"));
      facts.appendChild(kv("APP", num(r.precision, 3)));
      facts.appendChild(kv("actions", num(e.actions) + (r.gt_actions ? " (GT " + r.gt_actions + ")" : "")));
      if (d.executedCount !== null) facts.appendChild(kv("primitive steps", num(d.executedCount)));
      facts.appendChild(kv("LM calls", num(r.lm_calls)));
      facts.appendChild(kv("tokens", num(r.prompt_tokens) + " + " + num(r.completion_tokens) + (r.cached_tokens ? " (" + r.cached_tokens + " cached)" : "")));
      facts.appendChild(kv("seconds", "LM " + num(r.lm_seconds, 1) + " of " + num(r.wall_s, 1)));
      facts.appendChild(kv("end", r.termination + (r.failure ? " · " + r.failure : "")));
      if (r.augmentation && r.augmentation !== "ground_truth") facts.appendChild(kv("augmentation", r.augmentation + " (" + num(r.augmentation_calls) + " calls)"));
    } else {
      facts.appendChild(kv("state", "unfinished: no result recorded", "bad"));
    }
    // reasons asked of an LM after the run: who gave them, said once for the episode
    if (d.askedBy && d.askedBy.length) facts.appendChild(kv("reasons asked after the run", d.askedBy.join("; ")));
    head.appendChild(facts);
    box.appendChild(head);

    var goal = el("section", { cls: "goal", id: "goal" }, el("h3", { text: "Goal units at the end" }));
    var ul = el("ul", { cls: "units" });
    d.goal.forEach(function (u) {
      var mark = u.met === true ? "✓" : u.met === false ? "✗" : "?";
      ul.appendChild(el("li", { cls: "unit " + (u.met === true ? "met" : u.met === false ? "unmet" : "unknown"), title: u.detail || null },
        el("span", { cls: "mark", text: mark }), " ", el("span", { cls: "label", text: u.label }),
        u.expected ? el("span", { cls: "expected", text: " → " + u.expected }) : null,
        u.detail && u.met === false ? el("div", { cls: "unit-detail", text: u.detail }) : null));
    });
    if (!d.goal.length) ul.appendChild(el("li", { cls: "unit unknown", text: "no goal units known" }));
    goal.appendChild(ul);
    if (d.goalNote) goal.appendChild(el("p", { cls: "note", text: d.goalNote }));
    if (d.moves.length) goal.appendChild(el("p", { cls: "note", text: "dynamic mode moved: " + d.moves.join("; ") }));
    d.infeasible.forEach(function (x) { goal.appendChild(el("p", { cls: "note bad", text: "infeasible action: " + x })); });
    d.notes.forEach(function (x) { goal.appendChild(el("p", { cls: "warn", text: "⚠ " + x })); });
    box.appendChild(goal);

    var body = el("div", { cls: "ep-body" });
    // a step is an action; the actions that came with an earlier step's answer made no call of their own
    var calls = d.steps.filter(function (s) { return !s.inAnswer; }).length;
    var tl = el("section", { cls: "timeline", id: "timeline" }, el("h3", { text: "Timeline (" + calls + " LM call" + (calls === 1 ? "" : "s") +
      (calls !== d.steps.length ? ", " + d.steps.length + " actions" : "") + ")" }));
    if (d.actions.length && e.planner !== "lookplangraph" && e.planner !== "react") {
      tl.appendChild(el("details", { cls: "plan" }, el("summary", { text: "the plan (" + d.actions.length + " actions)" }),
        el("ol", null, d.actions.map(function (a) { return el("li", { cls: "code", text: a }); }))));
    }
    tl.appendChild(stepCard(d, 0));
    d.steps.forEach(function (s, i) { tl.appendChild(stepCard(d, i + 1)); });
    body.appendChild(tl);
    body.appendChild(el("section", { cls: "graph-pane", id: "graph-pane" }));
    box.appendChild(body);
    selectStep(state.step, false);
  }

  function line(label, content, cls) {
    return el("div", { cls: "line" + (cls ? " " + cls : "") }, el("span", { cls: "k", text: label }), " ", content);
  }

  function stepCard(d, k) {
    var card = el("div", { cls: "step", "data-step": String(k), tabindex: "0",
      on: { click: function () { selectStep(k, true); }, keydown: function (ev) { if (ev.key === "Enter") selectStep(k, true); } } });
    if (k === 0) {
      card.classList.add("start");
      card.appendChild(el("div", { cls: "step-head" }, el("span", { cls: "call", text: "start" }),
        el("span", { cls: "proposed", text: "memory before the first call" })));
      return card;
    }
    var s = d.steps[k - 1];
    // a low-level execution failure (the robot's hands or wheels) is its own kind of step
    var status = s.failure ? ["failure", "robot failed: " + s.failure] : s.infeasible ? ["infeasible", "infeasible"]
      : s.accepted ? ["accepted", "accepted"] : ["refused", "refused"];
    card.classList.add(status[0]);
    card.appendChild(el("div", { cls: "step-head" },
      el("span", { cls: "call", text: "#" + s.call }),
      el("span", { cls: "proposed code", text: s.proposed || "(unreadable reply)" }),
      el("span", { cls: "badge s-" + status[0], text: status[1] })));
    if (s.agent || s.form) card.appendChild(line("agent", el("span", { text: [s.agent, s.form].filter(Boolean).join(" · ") })));
    if (s.reason) card.appendChild(line("reason", el("span", { cls: "reason", text: s.reason })));
    else if (s.asked) card.appendChild(line("reason", el("span", {}, el("span", { cls: "reason", text: s.asked.reason }), " ",
      el("span", { cls: "asked", text: "(asked after the run" + (d.askedBy && d.askedBy.length > 1 ? "; " + s.asked.by : "") + ")" }))));
    else if (d.explain && s.proposed && !s.inAnswer) card.appendChild(line("reason", el("span", {}, "not recorded; ask the LM: ",
      el("span", { cls: "code", text: d.explain + " --call " + s.call }))));
    if (s.code) card.appendChild(el("details", { cls: "raw", on: { click: function (ev) { ev.stopPropagation(); } } },
      el("summary", { text: "code" + (s.sandbox ? " · sandbox: " + Object.keys(s.sandbox).map(function (k) { return k + " " + s.sandbox[k]; }).join(", ") : "") }),
      el("pre", { text: s.code })));
    if (s.corrections.length) card.appendChild(line("SGS corrected", el("span", { text: s.corrections.join("; ") }), "corr"));
    if (s.executed.length && !(s.executed.length === 1 && s.executed[0] === s.proposed))
      card.appendChild(line("primitive steps", el("span", { cls: "code", text: s.executed.join(" → ") })));
    if (s.feedback) card.appendChild(line("feedback", el("span", { text: s.feedback }), "fb"));
    if (s.infeasible) card.appendChild(line("infeasible", el("span", { text: s.infeasible + " (not told to the LM)" }), "fb"));
    if (s.observed.length) card.appendChild(line("saw", el("span", { cls: "code", text: s.observed.join(", ") }), "saw"));
    s.perceived.forEach(function (p) {
      var bits = el("div", { cls: "perceived" },
        el("div", { cls: "k", text: p.mode + " augmentation of " + p.node + ": " + p.tokens[0] + " + " + p.tokens[1] + " tokens, " + num(p.seconds, 1) + " s" }));
      if (p.img !== null && p.img !== undefined) bits.appendChild(thumb(p.img, p.node));
      if (p.description) bits.appendChild(el("div", { cls: "desc", text: p.description }));
      if (p.objects.length) bits.appendChild(el("div", { cls: "code", text: "merged: " + p.objects.join(", ") }));
      if (p.notes.length) bits.appendChild(el("div", { cls: "note", text: "dropped: " + p.notes.join("; ") }));
      card.appendChild(bits);
    });
    (s.shots || []).forEach(function (n) { card.appendChild(thumb(n, "observation")); });
    // an action that came in an earlier step's answer has no call (tokens, seconds) of its own
    var tok = s.inAnswer ? "action " + s.inAnswer + " of the answer of #" + (s.call - s.inAnswer + 1) + ": no call of its own"
      : s.tokens[0] + " + " + s.tokens[1] + " tokens" + (s.tokens[2] ? " (" + s.tokens[2] + " cached)" : "") +
      " · " + num(s.seconds, 2) + " s" + (s.excluded ? " · " + s.excluded + " actions excluded" : "");
    card.appendChild(el("div", { cls: "cost", text: tok }));
    if (s.text) card.appendChild(el("details", { cls: "raw", on: { click: function (ev) { ev.stopPropagation(); } } },
      el("summary", { text: "raw reply" }), el("pre", { text: s.text })));
    return card;
  }

  function thumb(n, alt) {
    var img = el("img", { cls: "thumb", alt: "image of " + alt, loading: "lazy" });
    img.src = image(n);
    return el("a", { cls: "thumb-link", href: "#", title: "click to enlarge",
      on: { click: function (ev) { ev.preventDefault(); ev.stopPropagation(); img.classList.toggle("big"); } } }, img);
  }

  function selectStep(k, push) {
    var d = detail(state.id);
    k = Math.max(0, Math.min(k, d.steps.length));
    state.step = k;
    document.querySelectorAll("#timeline .step").forEach(function (c) {
      c.classList.toggle("current", c.getAttribute("data-step") === String(k));
    });
    renderGraph();
    if (push) {
      history.replaceState(null, "", "#ep=" + state.id + "&step=" + k);
      var card = document.querySelector('#timeline .step[data-step="' + k + '"]');
      if (card && card.scrollIntoView && !window.matchMedia("(max-width: 1199px)").matches) card.scrollIntoView({ block: "nearest" });
    }
  }

  /* ---------------------------------------------------------------- the memory graph */
  function graphAt(g, k) {
    var nodes = new Map();
    baseGraph(g.base).forEach(function (n) { nodes.set(n[0], n); });
    var gone = [], touch = [], now = new Set();
    for (var i = 0; i < k && i < g.deltas.length; i++) {
      var d = g.deltas[i], last = i === k - 1;
      (d.del || []).forEach(function (name) {
        if (last && nodes.has(name)) gone.push(nodes.get(name));
        nodes.delete(name);
      });
      (d.set || []).forEach(function (n) { nodes.set(n[0], n); if (last) now.add(n[0]); });
      if (last) touch = d.touch || [];
    }
    return { nodes: nodes, gone: gone, touch: new Set(touch), now: now };
  }

  function layoutGraph(at, focus, goalNodes) {
    var all = new Map(at.nodes);
    at.gone.forEach(function (n) { if (!all.has(n[0])) all.set(n[0], n); });
    var goneSet = new Set(at.gone.map(function (n) { return n[0]; }));
    var kids = new Map(), roots = [], orphans = [];
    all.forEach(function (n) {
      if (n[1] === "p") { roots.push(n); return; }
      var p = n[2];
      if (p === null || !all.has(p)) { orphans.push(n); return; }
      if (!kids.has(p)) kids.set(p, []);
      kids.get(p).push(n);
    });
    kids.forEach(function (list) {
      list.sort(function (a, b) { return (a[1] === "g" ? 0 : 1) - (b[1] === "g" ? 0 : 1); });
    });
    function active(n) {
      var name = n[0];
      if (at.touch.has(name) || goneSet.has(name) || at.now.has(name) || goalNodes.has(name) || n[1] === "g") return true;
      if (n[5] & (CHANGED | NEW | INSPECTED)) return true;
      if (n[1] === "o" && (n[5] & SEEN)) return true;
      return (kids.get(name) || []).some(active);
    }
    function count(n) { return (kids.get(n[0]) || []).reduce(function (a, c) { return a + 1 + count(c); }, 0); }
    var placed = [], rows = 0, maxDepth = 0, hidden = 0, hiddenRooms = 0;
    if (focus) {  // inactive rooms are left out, summed up in one line at the end
      roots = roots.filter(function (n) {
        if (active(n)) return true;
        hiddenRooms += 1;
        hidden += 1 + count(n);
        return false;
      });
    }
    function place(n, depth, parent) {
      maxDepth = Math.max(maxDepth, depth);
      var ch = kids.get(n[0]) || [];
      var item = { n: n, depth: depth, parent: parent };
      if (!ch.length) { item.y = rows++; }
      else {
        item.y = rows;  // top-aligned: a parent sits on its first child's row, so a room heads its block
        ch.forEach(function (c) { place(c, depth + 1, item); });
      }
      placed.push(item);
      return item.y;
    }
    roots.forEach(function (n) { place(n, 0, null); });
    orphans.forEach(function (n) { place(n, 1, null); });
    var more = hiddenRooms ? { y: rows++, rooms: hiddenRooms, nodes: hidden } : null;
    return { placed: placed, rows: rows, maxDepth: maxDepth, gone: goneSet, hidden: hidden, more: more, total: all.size };
  }

  function label(n) {
    var s = n[0] + (n[4] ? " [" + n[4] + "]" : "");
    return s.length > CHARS ? s.slice(0, CHARS - 1) + "…" : s;
  }

  function sizeFor(width) {  // narrower columns on a phone, so more of the tree fits the screen
    if (width < 600) { COL = 142; BOX = 130; CHARS = 19; } else { COL = 170; BOX = 156; CHARS = 24; }
  }

  function drawGraph(lay, at, goalNodes) {
    var width = (lay.maxDepth + 1) * COL + 8, height = Math.max(1, lay.rows) * ROW + 8;
    var root = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, id: "graph-svg",
      role: "img", "aria-label": "memory graph" });
    var edges = svg("g", { "class": "edges" }), nodes = svg("g", { "class": "nodes" });
    root.appendChild(edges); root.appendChild(nodes);
    function X(it) { return 4 + it.depth * COL; }
    function Y(it) { return 4 + it.y * ROW + (ROW - BOXH) / 2; }
    lay.placed.forEach(function (it) {
      var n = it.n, x = X(it), y = Y(it), cls = ["gnode", "l-" + n[1]];
      var f = n[5];
      if (n[1] === "o") cls.push(f & PRIOR ? "prior" : f & SEEN ? "seen" : "map");
      if (f & CHANGED) cls.push("changed");
      if (f & NEW) cls.push("new");
      if (f & INSPECTED) cls.push("inspected");
      if (lay.gone.has(n[0])) cls.push("gone");
      if (at.touch.has(n[0])) cls.push("touched");
      if (at.now.has(n[0])) cls.push("now");
      if (goalNodes.has(n[0])) cls.push("goal");
      var g = svg("g", { "class": cls.join(" "), transform: "translate(" + x + "," + y + ")", "data-name": n[0] });
      var tip = n[0] + " (" + ({ p: "room", a: "asset", o: "object", g: "agent" }[n[1]] || n[1]) + ")" +
        ({ on: "; on top of ", "in": "; inside ", h: "; held by " }[n[3]] ? { on: "; on top of ", "in": "; inside ", h: "; held by " }[n[3]] + n[2] : "") +
        (n[4] ? "; states: " + n[4] : "") + (f & PRIOR ? "; unseen prior from the map" : "") + (f & SEEN ? "; seen" : "") +
        (f & CHANGED ? "; changed from the map" : "") + (f & NEW ? "; not on the map" : "") +
        (f & INSPECTED ? "; inspected" : "") + (lay.gone.has(n[0]) ? "; removed at this step (not found)" : "") +
        (goalNodes.has(n[0]) ? "; named in the goal" : "");
      g.appendChild(svg("title", { text: tip }));
      g.appendChild(svg("rect", { width: BOX, height: BOXH, rx: n[1] === "p" ? 3 : 8 }));
      g.appendChild(svg("text", { x: 7, y: BOXH - 5.5, text: label(n) }));
      if (goalNodes.has(n[0])) g.appendChild(svg("circle", { cx: BOX - 1, cy: 1, r: 4, "class": "goal-dot" }));
      nodes.appendChild(g);
      if (it.parent) {
        var px = X(it.parent) + BOX, py = Y(it.parent) + BOXH / 2, cy = y + BOXH / 2, mx = (px + x) / 2;
        edges.appendChild(svg("path", { d: "M" + px + "," + py + " C" + mx + "," + py + " " + mx + "," + cy + " " + x + "," + cy,
          "class": "edge r-" + (n[3] || "x") + (lay.gone.has(n[0]) ? " gone" : "") }));
      }
    });
    if (lay.more) {
      var m = svg("g", { "class": "gmore", transform: "translate(4," + (4 + lay.more.y * ROW + (ROW - BOXH) / 2) + ")", tabindex: "0" });
      m.appendChild(svg("title", { text: "rooms where nothing was seen, changed or done; click to show every room" }));
      m.appendChild(svg("rect", { width: BOX, height: BOXH, rx: 3 }));
      m.appendChild(svg("text", { x: 7, y: BOXH - 5.5, text: "+ " + lay.more.rooms + " other room" + (lay.more.rooms === 1 ? "" : "s") }));
      m.addEventListener("click", function () { state.focus = false; renderGraph(); });
      nodes.appendChild(m);
    }
    return root;
  }

  function legend() {
    var items = [["l-p", "room"], ["l-a", "asset"], ["prior", "prior (unseen)"], ["seen", "seen"], ["changed", "changed"],
      ["new", "not on map"], ["gone", "removed now"], ["touched", "acted on now"], ["l-g", "agent"],
      ["goalmark", "in the goal"], ["e-in", "inside"], ["e-on", "on top"]];
    return el("div", { cls: "legend" }, items.map(function (it) {
      return el("span", { cls: "lg " + it[0] }, el("i"), it[1]);
    }));
  }

  function renderGraph() {
    var pane = $("graph-pane");
    if (!pane) return;
    var d = detail(state.id), k = state.step;
    pane.textContent = "";
    var title = k === 0 ? "Memory before the first call" : "Memory after " + (d.steps[k - 1].inAnswer ? "step #" : "call #") + d.steps[k - 1].call;
    var nav = el("div", { cls: "step-nav" },
      el("button", { type: "button", id: "step-prev", disabled: k === 0 ? "" : null, on: { click: function () { selectStep(state.step - 1, true); } } }, "◀"),
      el("span", { id: "step-label", text: "step " + k + " / " + d.steps.length }),
      el("button", { type: "button", id: "step-next", disabled: k >= d.steps.length ? "" : null, on: { click: function () { selectStep(state.step + 1, true); } } }, "▶"));
    pane.appendChild(el("div", { cls: "graph-head" }, el("h3", { text: title }), nav));
    if (k > 0) {
      var s = d.steps[k - 1];
      pane.appendChild(el("div", { cls: "graph-step code", id: "graph-step-action", text: (s.proposed || "(unreadable reply)") + (s.accepted ? "" : " (refused)") }));
    }
    if (!d.graph) {
      pane.appendChild(el("p", { cls: "note", id: "graph-why", text: d.graphWhy || "no memory graph" }));
      return;
    }
    sizeFor(pane.clientWidth);
    var at = graphAt(d.graph, k);
    if (state.focus === null) state.focus = at.nodes.size > FOCUS_OVER;
    var goalNodes = new Set(d.goalNodes || []);
    var lay = layoutGraph(at, state.focus, goalNodes);
    var toggle = el("label", { cls: "focus" }, el("input", { type: "checkbox", id: "focus-toggle",
      on: { change: function (ev) { state.focus = ev.target.checked; renderGraph(); } } }),
      " only rooms with activity" + (lay.more ? " (" + lay.more.rooms + " rooms, " + lay.more.nodes + " nodes hidden)" : ""));
    toggle.firstChild.checked = state.focus;
    pane.appendChild(el("div", { cls: "graph-tools" }, legend(), toggle));
    var belief = { memory: "LookPlanGraph's memory graph (priors from the map, confirmed by discover_objects)",
      observed: "what the agent was told (no priors)", map: "the task's map as the planner trusts it (executed plan applied)" }[d.graph.belief];
    pane.appendChild(el("p", { cls: "note", text: belief + (d.graph.exact ? "" : " · approximate: see the notes below") }));
    pane.appendChild(el("div", { cls: "graph-wrap" }, drawGraph(lay, at, goalNodes)));
    d.graph.notes.forEach(function (x) { pane.appendChild(el("p", { cls: "warn", text: "⚠ " + x })); });
  }

  /* ---------------------------------------------------------------- wiring */
  function fromHash() {
    var m = /ep=(\d+)(?:&step=(\d+))?/.exec(location.hash);
    if (m) openEpisode(parseInt(m[1], 10), m[2] ? parseInt(m[2], 10) : 0, false);
  }

  renderRuns();
  ["f-text", "f-verdict", "f-split", "f-run"].forEach(function (id) {
    $(id).addEventListener(id === "f-text" ? "input" : "change", renderList);
  });
  document.querySelectorAll("#episodes th").forEach(function (th) {
    th.addEventListener("click", function () {
      var k = th.getAttribute("data-key");
      if (state.sortKey === k) state.sortDir = -state.sortDir; else { state.sortKey = k; state.sortDir = 1; }
      renderList();
    });
  });
  document.addEventListener("keydown", function (ev) {
    if (state.id === null || /INPUT|SELECT|TEXTAREA/.test((ev.target || {}).tagName || "")) return;
    if (ev.key === "ArrowRight") { selectStep(state.step + 1, true); ev.preventDefault(); }
    else if (ev.key === "ArrowLeft") { selectStep(state.step - 1, true); ev.preventDefault(); }
    else if (ev.key === "Escape") closeEpisode();
  });
  window.addEventListener("hashchange", fromHash);  // a link to #ep=N&step=K within the page
  renderList();
  fromHash();
  document.body.setAttribute("data-ready", "1");
})();
