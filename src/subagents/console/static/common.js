// What both pages share. Every text that comes from the store (a model's words, an agent's
// name, a task, a tool's output) is put in the page with textContent, never as HTML.
"use strict";

const Console = (() => {
  let session = null;

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  async function getJSON(path) {
    const response = await fetch(path, { credentials: "same-origin" });
    const body = await response.json().catch(() => ({ error: response.statusText }));
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  async function sessionInfo() {
    if (session === null) session = await getJSON("/api/session");
    return session;
  }

  async function post(path, body) {
    const { token } = await sessionInfo();
    const response = await fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Console-Token": token },
      body: JSON.stringify(body || {}),
    });
    const answer = await response.json().catch(() => ({ error: response.statusText }));
    if (!response.ok) throw new Error(answer.error || response.statusText);
    return answer;
  }

  function elapsed(row, now) {
    if (row.started === null || row.started === undefined) return "-";
    const end = row.ended || now;
    const seconds = Math.max(0, end - row.started);
    if (seconds < 60) return seconds.toFixed(1) + "s";
    if (seconds < 3600) return Math.floor(seconds / 60) + "m" + String(Math.floor(seconds % 60)).padStart(2, "0") + "s";
    return Math.floor(seconds / 3600) + "h" + String(Math.floor((seconds % 3600) / 60)).padStart(2, "0") + "m";
  }

  const numbers = new Intl.NumberFormat("en-US");  // one formatter: toLocaleString makes one a call

  function tokens(n) {
    return numbers.format(Number(n || 0));
  }

  function cost(usd) {
    const value = Number(usd || 0);
    return value === 0 ? "-" : "$" + value.toFixed(value < 1 ? 4 : 2);
  }

  function time(ts) {
    if (!ts) return "-";
    return new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 23) + "Z";
  }

  function statusBadge(status) {
    const safe = String(status).replace(/[^a-z_]/g, "");
    return el("span", "status status-" + safe, status);
  }

  // Make ``body``'s rows those of ``wanted`` ([key, item] pairs, in order), each row keyed
  // by ``dataset[keyName]``: a row already shown is kept, the same node, and left in place
  // (a node taken out of the page and put back loses the focus, and the keys typed next go
  // nowhere); the rows no longer wanted are removed, the new ones made by ``make(item)``.
  function keepRows(body, wanted, make, keyName) {
    const keys = new Set(wanted.map(([key]) => key));
    for (const tr of [...body.children]) if (!keys.has(tr.dataset[keyName])) tr.remove();
    const shown = new Map(Array.from(body.children, (tr) => [tr.dataset[keyName], tr]));
    let next = body.firstElementChild;
    for (const [key, item] of wanted) {
      const kept = shown.get(key);
      if (kept === next) { next = next.nextElementSibling; continue; }
      body.insertBefore(kept || make(item), next);  // new, or (rarely) moved
    }
  }

  function showError(message) {
    const box = document.getElementById("error");
    box.textContent = message || "";
    box.hidden = !message;
  }

  function connection(state) {
    const box = document.getElementById("connection");
    box.textContent = state;
    box.dataset.state = state;
  }

  // A stream's error: the browser tries again by itself, unless the server refused the
  // stream (503: more pages open than `serve --max-streams`, or the store is gone), after
  // which it never does: then say so, not "reconnecting…" for ever.
  function streamError(stream) {
    if (stream.readyState === EventSource.CLOSED) {
      connection("stopped");
      document.getElementById("connection").textContent =
        "not following changes (the console refused: reload the page to try again)";
    } else {
      connection("reconnecting…");
    }
  }

  // The run id of a run page: the whole path after "/runs/", decoded as the server decodes
  // it (it matches /runs/a/b and /runs/a%2Fb both to run "a/b"; the last part alone showed
  // run "b"): each run of escapes as UTF-8, a byte that is not UTF-8 as U+FFFD (Python's
  // unquote; decodeURIComponent would throw). null off a run page.
  function pageRunId() {
    const path = location.pathname;
    if (!path.startsWith("/runs/")) return null;
    const utf8 = new TextDecoder();
    return path.slice("/runs/".length).replace(/(?:%[0-9A-Fa-f]{2})+/g, (escaped) =>
      utf8.decode(new Uint8Array(escaped.slice(1).split("%").map((hex) => parseInt(hex, 16)))));
  }

  return { el, getJSON, post, sessionInfo, pageRunId, elapsed, tokens, cost, time, statusBadge, keepRows, showError, connection, streamError };
})();
