// Ombre Brain policy playground: check a draft, replay turns under it, show the difference, keep it.
// Local only: every request goes to this server's /api/playground routes. Memory text is set with textContent.
(function () {
  "use strict";

  var root = document.getElementById("playground");
  if (!root) { return; }
  var space = root.getAttribute("data-space");
  var token = root.getAttribute("data-token");
  var apiBase = root.getAttribute("data-api");
  var editor = document.getElementById("policy");
  var gutter = document.getElementById("gutter");
  var form = document.getElementById("draft-form");
  var errorBox = document.getElementById("draft-error");
  var okBox = document.getElementById("draft-ok");
  var sourceSel = document.getElementById("source");
  var replayBtn = document.getElementById("replay");
  var cancelBtn = document.getElementById("cancel");
  var progress = document.getElementById("progress");
  var bar = document.getElementById("bar");
  var progressText = document.getElementById("progress-text");
  var result = document.getElementById("result");
  var job = null;
  var lastResult = null;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }

  function api(method, path, body) {
    var headers = {"Accept": "application/json"};
    if (token) { headers["Authorization"] = "Bearer " + token; }
    var init = {method: method, headers: headers, credentials: "same-origin"};
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    var sep = path.indexOf("?") === -1 ? "?" : "&";
    var url = apiBase + path + (method === "GET" || method === "DELETE" ? sep + "space=" + encodeURIComponent(space) : "");
    return fetch(url, init).then(function (r) {
      return r.json().then(function (data) { return {status: r.status, data: data}; });
    });
  }

  // ------------------------------------------------------------ the editor: line numbers, errors with their line

  function numberLines() {
    var n = editor.value.split("\n").length;
    var out = [];
    for (var i = 1; i <= n; i++) { out.push(i); }
    gutter.textContent = out.join("\n");
    gutter.scrollTop = editor.scrollTop;
  }
  editor.addEventListener("input", function () { numberLines(); clearMessages(); });
  editor.addEventListener("scroll", function () { gutter.scrollTop = editor.scrollTop; });
  numberLines();

  function clearMessages() {
    errorBox.hidden = true;
    okBox.hidden = true;
  }

  function showError(err) {
    okBox.hidden = true;
    errorBox.hidden = false;
    errorBox.textContent = "";
    var line = err && err.line;
    var msg = (err && (err.problem || err.message)) || "the draft could not be used";
    if (line) { errorBox.appendChild(el("b", "line", "line " + line + ": ")); }
    if (err && err.key) { errorBox.appendChild(el("code", "key", err.key)); errorBox.appendChild(document.createTextNode(": ")); }
    errorBox.appendChild(el("span", "message", msg));
    errorBox.setAttribute("data-line", line || "");
    if (line) { selectLine(line); }
  }

  function selectLine(line) {
    var lines = editor.value.split("\n");
    var start = 0;
    for (var i = 0; i < line - 1 && i < lines.length; i++) { start += lines[i].length + 1; }
    var end = start + (lines[line - 1] || "").length;
    editor.focus();
    editor.setSelectionRange(start, end);
    var lineHeight = editor.scrollHeight / Math.max(lines.length, 1);
    editor.scrollTop = Math.max(0, (line - 5) * lineHeight);
  }

  function showOk(text) {
    errorBox.hidden = true;
    okBox.hidden = false;
    okBox.textContent = text;
  }

  // ------------------------------------------------------------ choosing what to replay

  function syncSource() {
    var v = sourceSel.value;
    document.querySelectorAll(".for-recorded").forEach(function (e) { e.hidden = v !== "recorded"; });
    document.querySelectorAll(".for-set").forEach(function (e) { e.hidden = v !== "set"; });
  }
  sourceSel.addEventListener("change", syncSource);
  syncSource();

  function replayBody() {
    var body = {space: space, policy: editor.value, source: sourceSel.value};
    if (body.source === "recorded") { body.last = parseInt(document.getElementById("last").value, 10) || 50; }
    if (body.source === "set") { body.set = document.getElementById("set").value; }
    return body;
  }

  // ------------------------------------------------------------ replay: start, progress, cancel

  function setRunning(running) {
    replayBtn.disabled = running;
    cancelBtn.hidden = !running;
    progress.hidden = !running && !job;
  }

  replayBtn.addEventListener("click", function () {
    clearMessages();
    // checked first (an answer, not a failed request), so a bad draft shows its line and starts nothing
    api("POST", "/check", {space: space, policy: editor.value}).then(function (c) {
      if (c.status !== 200) { showError(c.data.error); return null; }
      if (!c.data.ok) { showError(c.data.error); return null; }
      return api("POST", "/replay", replayBody());
    }).then(function (r) {
      if (r === null) { return; }
      if (r.status !== 202) { showError(r.data.error); return; }
      job = r.data;
      result.hidden = true;
      setRunning(true);
      showProgress(job);
      poll();
    });
  });

  cancelBtn.addEventListener("click", function () {
    if (!job) { return; }
    api("DELETE", "/replay/" + job.id).then(function () { cancelBtn.disabled = true; });
  });

  function showProgress(j) {
    bar.max = Math.max(j.total || 1, 1);
    bar.value = j.done || 0;
    progressText.textContent = j.done + " of " + j.total + " turns replayed (" + j.state + ", " + j.seconds + " s)";
    progress.setAttribute("data-state", j.state);
  }

  function poll() {
    api("GET", "/replay/" + job.id).then(function (r) {
      if (r.status !== 200) { setRunning(false); showError(r.data.error); return; }
      job = r.data;
      showProgress(job);
      if (job.state === "running") { window.setTimeout(poll, 400); return; }
      cancelBtn.disabled = false;
      setRunning(false);
      if (job.state === "done") { render(job.result); showOk("Replayed " + job.done + " turns in " + job.seconds + " s."); }
      else if (job.state === "cancelled") { showOk("Cancelled after " + job.done + " of " + job.total + " turns."); }
      else { showError(job.error); }
    });
  }

  // ------------------------------------------------------------ keeping a draft

  // The overlay comes back from a JSON request (the token in its header) and is saved from a blob: a plain
  // form post would be refused, since another site could make a browser send one.
  form.addEventListener("submit", function (ev) { ev.preventDefault(); });
  document.getElementById("download").addEventListener("click", function () {
    clearMessages();
    api("POST", "/check", {space: space, policy: editor.value}).then(function (c) {
      if (c.status !== 200 || !c.data.ok) { showError(c.data.error); return null; }
      var headers = {"Content-Type": "application/json"};
      if (token) { headers["Authorization"] = "Bearer " + token; }
      return fetch(apiBase + "/overlay", {method: "POST", headers: headers, credentials: "same-origin",
                                          body: JSON.stringify({space: space, policy: editor.value})})
        .then(function (r) {
          if (r.status !== 200) { return r.json().then(function (d) { showError(d.error); }); }
          var disposition = r.headers.get("Content-Disposition") || "";
          var match = /filename="([^"]+)"/.exec(disposition);
          return r.blob().then(function (blob) {
            var a = document.createElement("a");
            a.href = URL.createObjectURL(blob);
            a.download = match ? match[1] : "ombre-overlay.yaml";
            document.body.appendChild(a);
            a.click();
            window.setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
            showOk(c.data.changed.length ? "Overlay downloaded; the draft changes " + c.data.changed.join(", ") + "."
                                         : "Overlay downloaded; the draft changes nothing the serving policy sets.");
          });
        });
    });
  });

  var saveBtn = document.getElementById("save");
  if (saveBtn) {
    saveBtn.addEventListener("click", function () {
      var name = document.getElementById("save-name").value;
      api("POST", "/save", {space: space, policy: editor.value, name: name}).then(function (r) {
        if (r.status !== 201) { showError(r.data.error); return; }
        showOk("Saved " + r.data.saved + ". Serve it with: " + r.data.serve);
      });
    });
  }

  // ------------------------------------------------------------ the difference

  var SECTION_NAMES = {recalled_memory: "Recalled Memory", diffused_memory: "Diffused Memory",
    recent_context: "Recent Context", relationship_weather: "Relationship Weather", favorite_memory: "Favorite Memory",
    dream: "Dream", core_memory: "Core Memory", facts: "Confirmed Facts", context_mode: "Context Mode",
    persona_state: "Persona State"};
  var KIND_WORDS = {enters: "enters", leaves: "leaves", moves: "moves", reshaped: "changes shape in",
    recut: "is cut differently in"};

  function words(code) { return (lastResult && lastResult.words && lastResult.words[code]) || ""; }

  function reasonSpan(code) {
    var s = el("span", "why");
    s.appendChild(el("span", "reason-words", words(code) || code));
    s.appendChild(document.createTextNode(" "));
    s.appendChild(el("code", "reason", code));
    return s;
  }

  function bucketLink(id) {
    if (lastResult.source.kind !== "recorded") { return el("code", "bucket", id); }
    var a = el("a", "bucket");
    a.href = "/debug/buckets/" + encodeURIComponent(id) + "?space=" + encodeURIComponent(space) +
             (token ? "&token=" + encodeURIComponent(token) : "");
    a.setAttribute("data-bucket", id);
    a.appendChild(el("code", null, id));
    return a;
  }

  function changeLine(c) {
    var d = el("div", "change " + c.kind);
    d.setAttribute("data-bucket", c.bucket_id);
    d.setAttribute("data-kind", c.kind);
    d.appendChild(bucketLink(c.bucket_id));
    var sec = c.kind === "leaves" ? c.section_before : c.section_after;
    d.setAttribute("data-section", sec);
    var where = c.kind === "moves" ? (SECTION_NAMES[c.section_before] || c.section_before) + " → " +
      (SECTION_NAMES[c.section_after] || c.section_after) : (SECTION_NAMES[sec] || sec);
    d.appendChild(el("span", "kind", " " + KIND_WORDS[c.kind] + " " + where));
    var why = el("div", "because");
    why.appendChild(el("span", "label", "was: "));
    why.appendChild(reasonSpan(c.reason_before));
    why.appendChild(el("span", "label", " · now: "));
    why.appendChild(reasonSpan(c.reason_after));
    d.appendChild(why);
    c.gates.forEach(function (g) {
      var gl = el("div", "gate-change");
      gl.setAttribute("data-gate", g.gate);
      gl.appendChild(el("b", null, g.gate));
      gl.appendChild(document.createTextNode(": "));
      gl.appendChild(reasonSpan(g.before.reason));
      gl.appendChild(document.createTextNode(" → "));
      gl.appendChild(reasonSpan(g.after.reason));
      gl.title = (lastResult.gate_words && lastResult.gate_words[g.gate]) || g.gate;
      d.appendChild(gl);
    });
    if (c.budget_cut && (c.budget_cut[0] || c.budget_cut[1])) {
      d.appendChild(el("div", "cut", "budget cut: " + (c.budget_cut[0] || "none") + " → " + (c.budget_cut[1] || "none") +
        " (" + c.tokens_before + " → " + c.tokens_after + " tokens)"));
    }
    return d;
  }

  function totalsTable(t) {
    var table = el("table", "mini totals-table");
    var rows = [["turns replayed", t.turns], ["turns changed (what the prompt says)", t.changed],
      ["turns whose memories change", t.memory_changed], ["memories newly injected", t.newly_injected],
      ["memories newly suppressed", t.newly_suppressed], ["memories moved to another section", t.moved],
      ["UNKNOWN answers gained", t.unknown_gained], ["UNKNOWN answers lost", t.unknown_lost],
      ["tokens (all turns)", t.tokens.before + " → " + t.tokens.after]];
    Object.keys(t.section_tokens).forEach(function (k) {
      var v = t.section_tokens[k];
      rows.push(["tokens in " + (SECTION_NAMES[k] || k), v[0] + " → " + v[1]]);
    });
    rows.forEach(function (r) {
      var tr = el("tr");
      tr.appendChild(el("th", null, r[0]));
      var td = el("td", "num", r[1]);
      tr.setAttribute("data-total", r[0]);
      tr.appendChild(td);
      table.appendChild(tr);
    });
    return table;
  }

  function flatten(prefix, v, out) {
    if (v && typeof v === "object" && !Array.isArray(v)) {
      Object.keys(v).forEach(function (k) { flatten(prefix ? prefix + " · " + k : k, v[k], out); });
    } else { out[prefix] = v; }
    return out;
  }

  function metricTable(m) {
    var box = el("div");
    box.appendChild(el("h3", null, m.name + ": before → after"));
    var table = el("table", "mini metric-table");
    var before = flatten("", m.before, {});
    var after = flatten("", m.after, {});
    if (typeof m.before !== "object") { before = {"": m.before}; after = {"": m.after}; }
    Object.keys(before).forEach(function (k) {
      var tr = el("tr");
      tr.appendChild(el("th", null, k || m.name));
      var changed = JSON.stringify(before[k]) !== JSON.stringify(after[k]);
      tr.appendChild(el("td", "num" + (changed ? " moved" : ""), before[k] + " → " + after[k]));
      table.appendChild(tr);
    });
    box.appendChild(table);
    return box;
  }

  function render(res) {
    lastResult = res;
    result.hidden = false;
    var totals = document.getElementById("totals");
    totals.textContent = "";
    totals.appendChild(el("p", "meta", "Replayed " + res.source.name + (res.source.skipped ? " (" + res.source.skipped +
      " logged before replay records were kept: skipped)" : "") + "; the draft changes " +
      (res.changed_keys.join(", ") || "nothing") + "." + (res.drift ? " " + res.drift +
      " turns differ from what was sent under the serving policy too (memories changed since)." : "")));
    totals.appendChild(totalsTable(res.totals));
    var metric = document.getElementById("metric");
    metric.textContent = "";
    if (res.metric) { metric.appendChild(metricTable(res.metric)); }
    drawTurns();
  }

  function drawTurns() {
    var only = document.getElementById("only-changed").checked;
    var tbody = document.querySelector("#turns tbody");
    tbody.textContent = "";
    lastResult.turns.forEach(function (t) {
      if (only && !t.changed) { return; }
      var tr = el("tr", "row " + (t.changed ? "changed" : "same"));
      tr.setAttribute("data-turn", t.key);
      var k = el("td", "turn-key");
      k.appendChild(el("div", null, t.key));
      k.appendChild(el("div", "raw", t.session + " · " + t.at));
      tr.appendChild(k);
      var q = el("td", "memtext", t.query);
      tr.appendChild(q);
      var ch = el("td", "changes");
      t.changes.forEach(function (c) { ch.appendChild(changeLine(c)); });
      if (t.unknown_before !== t.unknown_after) {
        ch.appendChild(el("div", "change unknown", t.unknown_after ? "UNKNOWN answer gained" : "UNKNOWN answer lost"));
      }
      if (!t.changes.length && t.changed) {
        ch.appendChild(el("div", "change note", "the same memories; other lines change (mode " +
          t.context_mode.join(" → ") + ")"));
      }
      if (t.outcome) { ch.appendChild(el("div", "outcome", JSON.stringify(t.outcome))); }
      if (t.rendered) {
        var det = el("details", "rendered-pair");
        det.appendChild(el("summary", null, "rendered: serving | draft"));
        var pair = el("div", "pair");
        pair.appendChild(el("pre", "rendered", t.rendered[0]));
        pair.appendChild(el("pre", "rendered", t.rendered[1]));
        det.appendChild(pair);
        ch.appendChild(det);
      }
      tr.appendChild(ch);
      tr.appendChild(el("td", "num", t.tokens_before + " → " + t.tokens_after));
      tbody.appendChild(tr);
    });
    if (!tbody.children.length) {
      var tr = el("tr");
      var td = el("td", "empty", "No turn changes under this draft.");
      td.colSpan = 4;
      tr.appendChild(td);
      tbody.appendChild(tr);
    }
  }
  document.getElementById("only-changed").addEventListener("change", function () { if (lastResult) { drawTurns(); } });
})();
