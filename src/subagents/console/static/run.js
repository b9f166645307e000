// One run's page: what it is, its conversation (tool calls and results), its mail, its
// events, its children; stop, send, continue. Read again whenever the server says it changed.
"use strict";

(() => {
  const { el, getJSON, post, pageRunId, elapsed, tokens, cost, time, statusBadge, showError, connection, streamError } = Console;
  const runId = pageRunId();
  const notice = document.getElementById("action-result");
  let pending = false;
  let again = false;

  function fact(list, name, value) {
    if (value === null || value === undefined || value === "") return;
    const dd = el("dd");
    if (value instanceof Node) dd.append(value); else dd.textContent = String(value);
    list.append(el("dt", null, name), dd);
  }

  function runLink(id, text) {
    const link = el("a", null, text || id);
    link.href = "/runs/" + encodeURIComponent(id);
    return link;
  }

  function showFacts(page) {
    const r = page.run;
    document.getElementById("title").replaceChildren(
      el("strong", "agent", r.agent), el("span", "short", " " + r.run_id + " "), statusBadge(page.status));
    document.title = r.agent + " " + r.run_id.slice(-8) + " · subagents console";
    const list = document.getElementById("facts");
    list.replaceChildren();
    fact(list, "task", r.task);
    fact(list, "status", statusBadge(page.status));
    if (r.outcome && r.outcome.result) fact(list, "result", el("pre", "text", r.outcome.result));
    if (r.outcome && r.outcome.error) fact(list, "error", el("pre", "text", (r.outcome.error_kind || "") + ": " + r.outcome.error));
    fact(list, "depth", r.depth);
    if (r.parent_run_id) fact(list, "parent", runLink(r.parent_run_id));
    if (r.root_run_id !== r.run_id) fact(list, "root", runLink(r.root_run_id));
    if (r.continues) fact(list, "continues", runLink(r.continues));
    fact(list, "label", r.label);
    fact(list, "model", r.model);
    fact(list, "created", time(r.created_at));
    fact(list, "started", time(r.started_at));
    fact(list, "ended", r.ended_at ? time(r.ended_at) : null);
    fact(list, "elapsed", elapsed({ started: r.started_at, ended: r.ended_at }, Date.now() / 1000));
    fact(list, "steps", r.steps);
    fact(list, "tool calls", r.tool_calls);
    const u = r.usage || {};
    const input = (u.input_tokens || 0) + (u.cache_creation_input_tokens || 0) + (u.cache_read_input_tokens || 0);
    fact(list, "tokens", `${tokens(page.tokens)} (in ${tokens(input)}, out ${tokens(u.output_tokens)})`);
    fact(list, "model calls", u.model_calls);
    fact(list, "cost", cost(u.cost_usd));
    fact(list, "host", page.host);
    fact(list, "node", r.node);
    if (page.worktree) fact(list, "worktree", `${page.worktree.path} (branch ${page.worktree.branch})`);
  }

  function showActions(page) {
    document.getElementById("stop").disabled = !page.can_stop;
    document.getElementById("send").disabled = !page.can_send;
    document.getElementById("send-text").disabled = !page.can_send;
    document.getElementById("continue").disabled = !page.can_continue;
    document.getElementById("continue-text").disabled = !page.can_continue;
  }

  function showChildren(page) {
    const body = document.querySelector("#children tbody");
    body.replaceChildren();
    for (const row of page.children) {
      const tr = el("tr");
      const run = el("td");
      run.append(runLink(row.id, row.agent), el("span", "short", " " + row.id.slice(-8)));
      const status = el("td");
      status.append(statusBadge(row.status));
      tr.append(run, status, el("td", "num", elapsed(row, Date.now() / 1000)),
        el("td", "num", tokens(row.tokens)), el("td", "num", cost(row.cost)), el("td", "task", row.task));
      body.append(tr);
    }
    if (!page.children.length) {
      const none = el("tr");
      none.append(el("td", "dim", "none"));
      body.append(none);
    }
  }

  function showEntries(page) {
    const list = document.getElementById("entries");
    list.replaceChildren();
    for (const entry of page.entries) {
      const safe = String(entry.kind).replace(/[^a-z_]/g, "");
      const item = el("li", "entry entry-" + safe);
      item.append(el("span", "ts", time(entry.ts)), el("span", "kind", entry.kind), el("pre", "text", entry.text));
      list.append(item);
    }
  }

  function showMail(id, mails, who) {
    const body = document.querySelector(id + " tbody");
    body.replaceChildren();
    for (const m of mails) {
      const tr = el("tr");
      tr.append(el("td", "ts", time(m.sent_at)), el("td", null, who(m)), el("td", null, m.state), el("td", null));
      tr.lastChild.append(el("pre", "text", m.content));
      body.append(tr);
    }
  }

  function showEvents(page) {
    const body = document.querySelector("#events tbody");
    body.replaceChildren();
    for (const e of page.events) {
      const tr = el("tr");
      tr.append(el("td", "ts", time(e.ts)), el("td", "kind", e.kind), el("td", "data", JSON.stringify(e.data)));
      body.append(tr);
    }
  }

  async function load() {
    if (pending) { again = true; return; }
    pending = true;
    try {
      const page = await getJSON("/api/runs/" + encodeURIComponent(runId));
      showFacts(page);
      showActions(page);
      showChildren(page);
      showEntries(page);
      showMail("#mail-in", page.mail_in, (m) => (m.sender_agent ? m.sender_agent + " " : "") + m.sender);
      showMail("#mail-out", page.mail_out, (m) => m.recipient);
      showEvents(page);
      showError("");
    } catch (error) {
      showError("cannot read the run: " + error.message);
    } finally {
      pending = false;
      if (again) { again = false; load(); }
    }
  }

  async function act(action, textId) {
    const body = {};
    const field = textId ? document.getElementById(textId) : null;
    if (field) body.text = field.value;
    try {
      const answer = await post("/api/runs/" + encodeURIComponent(runId) + "/" + action, body);
      notice.replaceChildren(el("span", null, answer.message));
      if (action === "continue") {
        notice.append(" ", runLink(answer.run_id, "open the new run"));
      }
      notice.hidden = false;
      // the text sent is cleared, not what was typed while it was being posted
      if (field && field.value === body.text) field.value = "";
      showError("");
    } catch (error) {
      notice.hidden = true;
      showError(action + ": " + error.message);
    }
    load();
  }

  document.getElementById("stop").addEventListener("click", () => act("stop"));
  document.getElementById("send").addEventListener("click", () => act("send", "send-text"));
  document.getElementById("continue").addEventListener("click", () => act("continue", "continue-text"));

  const stream = new EventSource("/api/stream?run=" + encodeURIComponent(runId));
  // the approvals list (approvals.js) is read again on the server's word, and whenever
  // changes may have been missed: an ask made before the stream was (re)opened, or while
  // its changes were lost ("reload"), came with no event
  const approvalsChanged = () => document.dispatchEvent(new Event("console:approvals"));
  stream.addEventListener("ready", () => { connection("live"); load(); approvalsChanged(); });
  stream.addEventListener("run", load);
  stream.addEventListener("reload", () => { load(); approvalsChanged(); });
  stream.addEventListener("approvals", approvalsChanged);
  stream.onerror = (event) => streamError(event.target);
})();
