// The example client: one HttpAgent of @ag-ui/client per thread; each run's events update the log,
// and a run that ends with interrupts shows one card each, built from the interrupt alone (its
// reason, message, preview, metadata and responseSchema). A decision is the next run's `resume`.
import { HttpAgent } from "./vendor/ag-ui-client.js";

const $ = (id) => document.getElementById(id);
const log = $("log"), cards = $("interrupts"), status = $("status");
let agent = null;

function newThreadId() {
  return "example-" + crypto.randomUUID().slice(0, 8);
}

function makeAgent() {
  const token = $("token").value.trim();
  const headers = token ? { Authorization: `Bearer ${token}` } : {};  // without one, the site's session cookie
  agent = new HttpAgent({ url: `/agui/${encodeURIComponent($("slug").value.trim())}/`, headers, threadId: $("thread").value.trim() });
  agent.subscribe({
    onMessagesChanged: ({ messages }) => renderLog(messages),
    onRunFinishedEvent: ({ outcome, interrupts }) => {
      renderInterrupts(outcome === "interrupt" ? interrupts : []);
      setStatus(outcome === "interrupt" ? "Waiting for your decision." : outcome === "cancelled" ? "Stopped." : "Done.",
                outcome === "success" ? "done" : "");
    },
    onRunErrorEvent: ({ event }) => setStatus(`${event.message}${event.code ? ` (${event.code})` : ""}`, "error"),
  });
}

function setStatus(text, kind = "") {
  status.textContent = text;
  status.className = `status ${kind || "muted"}`;
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}

// A call's arguments as one line to read: the fields it set (a question's unset options and limits left out).
function shortArguments(text) {
  try {
    const set = Object.entries(JSON.parse(text)).filter(([, value]) => value !== null);
    return JSON.stringify(Object.fromEntries(set));
  } catch {
    return text;
  }
}

function renderLog(messages) {
  const results = new Map(messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m.content]));
  log.replaceChildren();
  for (const message of messages) {
    if ((message.role === "user" || message.role === "assistant") && message.content) {
      log.append(element("li", { class: message.role }, String(message.content)));
    }
    for (const call of message.toolCalls || []) {
      const result = results.get(call.id);
      log.append(element("li", { class: "tool" }, element("span", { class: "badge" }, "tool"), element("code", {}, `${call.function.name}(${shortArguments(call.function.arguments)})`),
        result === undefined ? " …" : element("span", { class: "result" }, `→ ${result}`)));
    }
  }
  log.lastElementChild?.scrollIntoView({ block: "nearest" });
}

function renderInterrupts(interrupts) {
  cards.replaceChildren(...interrupts.map(card));
}

function card(interrupt) {
  const meta = interrupt.metadata || {};
  const body = element("div", { class: "card", "data-interrupt": interrupt.id },
    element("h2", {}, element("span", { class: "badge" }, interrupt.reason.replace("_", " ")), interrupt.message || ""));
  const preview = interrupt.preview ?? meta.preview;  // @ag-ui/client keeps only the protocol's fields: metadata has it too
  if (preview) body.append(element("pre", { class: "preview" }, preview.text ?? JSON.stringify(preview, null, 2)));
  if (meta.approverRequired || meta.stepUpRequired) {
    body.append(element("p", { class: "muted" }, meta.stepUpRequired
      ? "Approving needs your passkey on the site; you may reject it here."
      : "Approving needs another approver (four eyes); you may reject it here."));
  }
  const decide = (payload, resumeStatus = "resolved") => resume(interrupt, payload, resumeStatus);
  const reason = element("input", { type: "text", placeholder: "Reason (optional)", "aria-label": "Reason" });
  const confirmation = meta.confirmationHint  // a critical call or plan: approved only with its hint typed
    ? element("input", { type: "text", placeholder: `Type ${meta.confirmationHint} to approve`, "aria-label": "Confirmation" }) : null;
  const confirmed = (payload) => (confirmation ? { ...payload, confirmation: confirmation.value } : payload);
  if (interrupt.reason === "question") {
    body.append(questionControls(interrupt, decide));
  } else if (interrupt.reason === "plan") {
    const steps = (meta.plan?.steps || []).map((step) => {
      const box = element("input", { type: "checkbox", value: step.index });
      box.checked = true;
      box.disabled = !step.optional;
      return element("label", { class: "step" }, box, ` ${step.index}. ${step.action}${step.optional ? " (optional)" : ""}`);
    });
    body.append(...steps, element("div", { class: "row" }, confirmation,
      element("button", { onclick: () => decide(confirmed({ decision: "approve", shownHash: meta.shownHash,
        steps: steps.map((label) => label.firstChild).filter((box) => box.checked).map((box) => Number(box.value)) })) }, "Approve plan"),
      reason, element("button", { class: "reject", onclick: () => decide({ decision: "reject", reason: reason.value }) }, "Reject")));
  } else {
    const args = element("textarea", { rows: 3, "aria-label": "Arguments" });
    args.value = JSON.stringify(meta.arguments ?? {}, null, 2);
    const approve = () => {
      let edited;
      try { edited = JSON.parse(args.value); } catch { return setStatus("The arguments are not JSON.", "error"); }
      const payload = confirmed({ decision: "approve", shownHash: meta.shownHash });
      if (JSON.stringify(edited) !== JSON.stringify(meta.arguments)) payload.editedArgs = edited;
      decide(payload);
    };
    body.append(element("p", { class: "muted" }, `${meta.tool} · risk ${meta.risk}`), args, element("div", { class: "row" },
      confirmation, element("button", { onclick: approve }, "Approve"),
      reason, element("button", { class: "reject", onclick: () => decide({ decision: "reject", reason: reason.value }) }, "Reject")));
  }
  return body;
}

function questionControls(interrupt, decide) {
  const schema = interrupt.responseSchema?.properties?.answer || {};
  const hash = interrupt.metadata?.shownHash;
  const row = element("div", { class: "row" });
  if (schema.enum) {
    row.append(...schema.enum.map((option) => element("button", { class: "secondary", onclick: () => decide({ answer: option, shownHash: hash }) }, option)));
  } else {
    const input = element("input", { type: schema.type === "number" ? "number" : schema.format === "date" ? "date" : "text", "aria-label": "Answer" });
    const value = () => (schema.type === "number" ? Number(input.value) : schema.type === "boolean" ? input.value === "yes" : input.value);
    row.append(input, element("button", { onclick: () => decide({ answer: value(), shownHash: hash }) }, "Answer"));
  }
  row.append(element("button", { class: "reject", onclick: () => decide({ decline: true }) }, "Decline"));
  return row;
}

async function run(parameters = {}) {
  for (const button of document.querySelectorAll("button")) button.disabled = true;
  setStatus("Running…");
  try {
    await agent.runAgent(parameters);
  } catch (error) {
    if (!status.classList.contains("error")) setStatus(error.message || String(error), "error");
  } finally {
    for (const button of document.querySelectorAll("button")) button.disabled = false;
    if (!cards.children.length) renderInterrupts(agent.pendingInterrupts);  // a refused resume: decide again
  }
}

// A resume answers every interrupt of the run at once (the client refuses one that leaves any open):
// each card's decision is kept until the last card is decided, then all go in one run.
let answers = new Map();

function resume(interrupt, payload, resumeStatus) {
  answers.set(interrupt.id, { interruptId: interrupt.id, status: resumeStatus, payload });
  const decided = cards.querySelector(`[data-interrupt="${CSS.escape(interrupt.id)}"]`);
  decided?.classList.add("decided");
  decided?.querySelectorAll("button, input, textarea").forEach((control) => { control.disabled = true; });
  const open = agent.pendingInterrupts.filter((pending) => !answers.has(pending.id));
  if (open.length) return setStatus(`Decided ${answers.size}; ${open.length} more to decide before the agent goes on.`);
  const entries = agent.pendingInterrupts.map((pending) => answers.get(pending.id));
  answers = new Map();
  cards.replaceChildren();
  return run({ resume: entries });
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const text = $("message").value.trim();
  if (!text) return;
  if (!agent) makeAgent();
  agent.addMessage({ id: crypto.randomUUID(), role: "user", content: text });
  $("message").value = "";
  cards.replaceChildren();
  run();
});

$("settings").addEventListener("change", () => { makeAgent(); log.replaceChildren(); cards.replaceChildren(); });
$("new-thread").addEventListener("click", () => { $("thread").value = newThreadId(); makeAgent(); log.replaceChildren(); cards.replaceChildren(); });

$("thread").value = newThreadId();
makeAgent();
