// The tree of runs: the newest trees first, each depth-first, filtered, kept live by the
// server's events (no reloads). One <tbody> per tree, one <tr> per run.
"use strict";

(() => {
  const { el, getJSON, elapsed, tokens, cost, statusBadge, showError, connection, streamError } = Console;
  const table = document.getElementById("tree");
  const form = document.getElementById("filters");
  const more = document.getElementById("more");
  const summary = document.getElementById("summary");
  let rows = new Map();      // run id -> row (as the server sent it)
  let trs = new Map();       // run id -> <tr>
  let groups = new Map();    // root id -> <tbody>
  let cursor = null;         // the next page's cursor (null: everything loaded)
  let version = 0;           // changes up to this one are in what was loaded
  let loadedVersion = null;  // the first page's version, once read
  let streamVersion = null;  // the changes published before the stream opened
  let stream = null;
  let total = 0;
  let generation = 0;        // one more at each read of the page from its start

  function filterQuery() {
    const params = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (String(value).trim()) params.set(key, String(value).trim());
    return params;
  }

  function fillForm() {
    const params = new URLSearchParams(location.search);
    for (const name of ["status", "agent", "label", "requester"]) form.elements[name].value = params.get(name) || "";
  }

  function cells(tr, row) {
    tr.replaceChildren();
    const run = el("td", "run");
    run.style.paddingLeft = (0.4 + row.depth * 1.3) + "em";
    const link = el("a", "agent", row.agent);
    link.href = "/runs/" + encodeURIComponent(row.id);
    run.append(link, el("span", "short", " " + row.id.slice(-8)));
    const status = el("td");
    status.append(statusBadge(row.status));
    tr.append(
      run,
      status,
      el("td", "num", row.depth),
      el("td", "num elapsed", elapsed(row, Date.now() / 1000)),
      el("td", "num", row.steps),
      el("td", "num", tokens(row.tokens)),
      el("td", "num", cost(row.cost)),
      el("td", "label", row.label || ""),
      el("td", "task", row.task),
    );
    tr.dataset.status = row.status;
  }

  function groupFor(row) {
    let body = groups.get(row.root);
    if (body) return body;
    body = document.createElement("tbody");
    body.dataset.root = row.root;
    body.dataset.created = String(row.root_created);
    let before = null;
    for (const other of table.tBodies) {
      if (Number(other.dataset.created) < row.root_created) { before = other; break; }
    }
    table.insertBefore(body, before);
    groups.set(row.root, body);
    return body;
  }

  function order(body) {
    // depth-first over the rows of this tree the page holds, children oldest first
    const mine = [...rows.values()].filter((r) => r.root === body.dataset.root);
    const ids = new Set(mine.map((r) => r.id));
    const byParent = new Map();
    const tops = [];
    for (const r of mine) {
      if (r.parent && ids.has(r.parent)) {
        if (!byParent.has(r.parent)) byParent.set(r.parent, []);
        byParent.get(r.parent).push(r);
      } else tops.push(r);
    }
    const older = (a, b) => a.created - b.created || (a.id < b.id ? -1 : 1);
    const visit = (r) => {
      body.appendChild(trs.get(r.id));
      for (const child of (byParent.get(r.id) || []).sort(older)) visit(child);
    };
    tops.sort(older).forEach(visit);
    const cutRow = body.querySelector("tr.cut");
    if (cutRow) body.appendChild(cutRow);
  }

  function put(row) {
    rows.set(row.id, row);
    let tr = trs.get(row.id);
    const fresh = !tr;
    if (fresh) {
      tr = document.createElement("tr");
      tr.dataset.run = row.id;
      trs.set(row.id, tr);
    }
    cells(tr, row);
    if (fresh) {
      groupFor(row).appendChild(tr);
      return groups.get(row.root);
    }
    return null;
  }

  function drop(id) {
    const row = rows.get(id);
    rows.delete(id);
    const tr = trs.get(id);
    trs.delete(id);
    if (tr) tr.remove();
    if (row) {
      const body = groups.get(row.root);
      if (body && !body.querySelector("tr[data-run]")) { body.remove(); groups.delete(row.root); }
    }
  }

  function belongsHere(row) {
    // a run of a tree shown, or of a tree new enough to be on the pages loaded
    if (groups.has(row.root)) return true;
    if (cursor === null) return true;
    const oldest = table.tBodies[table.tBodies.length - 1];
    return !oldest || row.root_created >= Number(oldest.dataset.created);
  }

  function addCut(root, count) {
    const body = groups.get(root);
    if (!body) return;
    const tr = el("tr", "cut");
    const td = el("td", "dim", `… and ${count} more runs of this tree: `);
    td.colSpan = 9;
    const link = el("a", null, "its root's page lists its children");
    link.href = "/runs/" + encodeURIComponent(root);
    td.append(link);
    tr.append(td);
    body.appendChild(tr);
  }

  let damaged = {};

  function showSummary() {
    summary.textContent = `${rows.size} runs shown of ${total} in the store`;
    for (const [runId, why] of Object.entries(damaged)) {  // left out: named, not hidden
      summary.append(el("br"), `run ${runId} is not shown: its record is damaged (${why})`);
    }
    more.hidden = cursor === null;
  }

  async function loadPage(before) {
    const params = filterQuery();
    if (before) params.set("before", before);
    const mine = generation;
    const page = await getJSON("/api/runs?" + params.toString());
    // the page was read again meanwhile (another filter submitted, the stream opened
    // again): this answer is of what was shown before, and must not land in the new one
    if (mine !== generation) return false;
    const touched = new Set();
    for (const row of page.rows) {
      const body = put(row);
      if (body) touched.add(body);
    }
    touched.forEach(order);
    for (const [root, count] of Object.entries(page.cut || {})) addCut(root, count);
    cursor = page.more;
    version = Math.max(version, page.version);
    total = page.total;
    damaged = page.damaged || {};
    showSummary();
    return true;
  }

  async function reload() {
    const mine = ++generation;
    rows = new Map(); trs = new Map(); groups = new Map(); cursor = null; version = 0;
    for (const body of [...table.tBodies]) body.remove();
    loadedVersion = null;
    try {
      if (!(await loadPage(null))) return;
      loadedVersion = version;
      showError("");
      caughtUp();
    } catch (error) {
      if (mine === generation) showError("cannot read the runs: " + error.message);
    }
  }

  function caughtUp() {
    // a page read before the stream was open may lack the changes published in between:
    // read it again (after the stream opened, so nothing more can fall in between)
    if (streamVersion !== null && loadedVersion !== null && loadedVersion < streamVersion) {
      reload();
    }
  }

  function changed(event) {
    const data = JSON.parse(event.data);
    if (data.version <= version) return;  // already in the page loaded
    const touched = new Set();
    for (const id of data.gone) drop(id);
    for (const row of data.rows) {
      if (!rows.has(row.id) && !belongsHere(row)) continue;
      const body = put(row);
      if (body) touched.add(body);
    }
    touched.forEach(order);
    total = Math.max(total, data.total || total);
    showSummary();
  }

  // the approvals list (approvals.js) is read again: on the server's word, and whenever
  // changes may have been missed (the stream (re)opened, or its changes lost: "reload")
  const approvalsChanged = () => document.dispatchEvent(new Event("console:approvals"));

  function listen() {
    // the page is read at once, beside the stream (a change it missed while both were
    // opening comes with a later number than the page's: ``changed``); again only when the
    // stream opens again after a break, since changes may have been lost meanwhile
    if (stream) stream.close();
    stream = new EventSource("/api/stream?" + filterQuery().toString());
    let opened = false;
    streamVersion = null;
    stream.addEventListener("ready", (event) => {
      connection("live");
      streamVersion = JSON.parse(event.data).version;
      if (opened) reload(); else caughtUp();
      opened = true;
      approvalsChanged();  // an ask made before the stream was open came with no event
    });
    reload();
    stream.addEventListener("rows", changed);
    stream.addEventListener("reload", () => { reload(); approvalsChanged(); });
    stream.addEventListener("approvals", approvalsChanged);
    stream.onerror = (event) => streamError(event.target);
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = filterQuery().toString();
    history.replaceState(null, "", query ? "/?" + query : "/");
    listen();
  });
  document.getElementById("clear").addEventListener("click", () => {
    form.reset();
    for (const input of form.querySelectorAll("input")) input.value = "";
    form.elements.status.value = "";
    history.replaceState(null, "", "/");
    listen();
  });
  more.addEventListener("click", () => {
    if (cursor) loadPage(cursor).catch((error) => showError(error.message));
  });
  setInterval(() => {
    const now = Date.now() / 1000;
    for (const [id, row] of rows) {
      if (row.ended || row.started === null) continue;
      const cell = trs.get(id)?.querySelector("td.elapsed");
      if (cell) cell.textContent = elapsed(row, now);
    }
  }, 1000);

  fillForm();
  Console.sessionInfo().then((s) => { document.getElementById("store").textContent = s.store; })
    .catch((error) => showError(error.message));
  listen();
})();
