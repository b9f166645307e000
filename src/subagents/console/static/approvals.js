// The pending approvals: each ask a run keeps in the store for a person (its tool, its input,
// why it is asked), with allow and deny. Read again whenever the server says the approvals
// changed ("console:approvals", dispatched by the page's stream). The run page shows those
// of its run's tree.
"use strict";

(() => {
  const { el, getJSON, post, pageRunId, time, showError } = Console;
  const section = document.getElementById("approvals");
  const body = section.querySelector("tbody");
  const runId = pageRunId();

  function runLink(id, text) {
    const link = el("a", null, text);
    link.href = "/runs/" + encodeURIComponent(id);
    return link;
  }

  function row(a) {
    const tr = el("tr");
    tr.dataset.approval = a.approval_id;
    const who = el("td");
    who.append(runLink(a.run_id, a.agent), el("span", "short", " " + a.run_id.slice(-8)));
    const input = el("td");
    input.append(el("pre", "text", JSON.stringify(a.input, null, 1)));
    const reason = el("input", "reason");
    reason.placeholder = "reason (the model reads it)";
    const allow = el("button", "allow", "allow");
    const deny = el("button", "deny", "deny");
    const decide = async (verdict) => {
      allow.disabled = deny.disabled = true;
      try {
        await post(`/api/approvals/${encodeURIComponent(a.approval_id)}/${verdict}`, { reason: reason.value });
        showError("");
        load();
      } catch (error) {
        showError(verdict + ": " + error.message);
        allow.disabled = deny.disabled = false;
        load(); // answered elsewhere, or its run ended, and no event said so: the row goes
      }
    };
    allow.addEventListener("click", () => decide("allow"));
    deny.addEventListener("click", () => decide("deny"));
    const answer = el("td", "answer");
    answer.append(reason, allow, deny);
    tr.append(el("td", "ts", time(a.asked_at)), who, el("td", "kind", a.tool), input,
      el("td", null, a.reason), answer);
    return tr;
  }

  const damagedNotes = el("ul", "damaged");  // the rows left out, named (not only logged)
  section.append(damagedNotes);

  let asked = 0;  // the reads of the list begun
  let shown = 0;  // the latest of them whose answer is on the page

  async function load() {
    const mine = ++asked;
    try {
      const query = "?v=2" + (runId ? "&run=" + encodeURIComponent(runId) : "");
      const { approvals: pending, damaged } = await getJSON("/api/approvals" + query);
      // the answers may come out of order (the server answers each on a thread of its
      // own): one of an earlier read, landing after a later one's, is of an older list
      // (it would take out a row just come, and the reason being typed in it)
      if (mine < shown) return;
      shown = mine;
      // a row still pending is kept as it is, where it is: the reason typed in it stays,
      // and so do the focus and the caret (an ask of another run arriving, or an answer
      // refused for its reason or a busy store, reads the list again, maybe while the
      // person types: whatever the order, the row is the live one, not a copy)
      Console.keepRows(body, pending.map((a) => [a.approval_id, a]), row, "approval");
      damagedNotes.replaceChildren(...Object.entries(damaged).map(
        ([key, what]) => el("li", null, `a damaged row: ${key}, ${what}`)));
      section.hidden = pending.length === 0 && damagedNotes.children.length === 0;
    } catch (error) {
      if (mine > shown) showError("cannot read the approvals: " + error.message);
    }
  }

  document.addEventListener("console:approvals", load);
  load();
})();
