// inbox.js: the approvers' inbox: keyboard shortcuts (j/k move, o open, a approve, r reject, x select,
// e edit, ? the list), the selection count, and open and focused rows kept across the list's re-reads.
// No key ever approves more than the one focused call: on a group, "a" only focuses its button.
(function () {
  "use strict";
  const box = document.getElementById("dashboard-rows");
  if (!box) return;
  const dialog = document.getElementById("shortcuts");
  const openLines = new Set(); // ids of the lines whose card is open
  let focusedId = null;
  let focusedIndex = -1;

  function visible(element) {
    // A closed <details> keeps layout boxes for its content in Chromium: ask the details themselves.
    for (let details = element.parentElement.closest("details"); details; details = details.parentElement.closest("details")) {
      if (!details.open) return false;
    }
    return element.getClientRects().length > 0;
  }
  const lines = () => Array.from(box.querySelectorAll("[data-line]")).filter(visible);
  const current = () => (focusedId && document.getElementById(focusedId)) || null;
  const card = (line) => line.querySelector(":scope > .row-open .approval");

  function mark(line) {
    for (const other of box.querySelectorAll(".is-focused")) other.classList.remove("is-focused");
    if (!line) return;
    line.classList.add("is-focused");
    focusedId = line.id;
    focusedIndex = lines().indexOf(line);
  }

  function focusLine(line) {
    if (!line) return;
    mark(line);
    line.focus({ preventScroll: true });
    line.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    const all = lines();
    if (!all.length) return;
    const at = all.indexOf(current());
    const next = at === -1 ? (step > 0 ? 0 : all.length - 1) : Math.min(Math.max(at + step, 0), all.length - 1);
    focusLine(all[next]);
  }

  function open(line, wanted) {
    const details = line.querySelector(":scope > .row-open");
    if (!details) return;
    details.open = wanted === undefined ? !details.open : wanted;
  }

  function focusFirst(element, selector) {
    const target = element && element.querySelector(selector);
    if (!target) return false;
    target.focus();
    return true;
  }

  function approve(line) {
    if (line.classList.contains("approval-group")) {
      focusFirst(line, ".group-form button[value=approve]"); // Enter approves the group; the key alone never does
      return;
    }
    const controls = card(line);
    if (!controls) return;
    open(line, true);
    if (focusFirst(controls, ".answer-form input:not([type=hidden]), .answer-form textarea, .answer-form select, .plan-form button[type=submit]")) return;
    if (focusFirst(controls, "input[name=confirmation]")) return; // critical: its typed confirmation first
    const button = controls.querySelector("form.approve-only button[value=approve]");
    if (button && !button.disabled) button.click(); // a click: htmx sends the button's name and value
  }

  function reject(line) {
    if (line.classList.contains("approval-group")) {
      focusFirst(line, ".group-form button[value=reject]");
      return;
    }
    const controls = card(line);
    if (!controls) return;
    open(line, true);
    const toggle = controls.querySelector("[data-reject-toggle]");
    if (!toggle) return;
    const form = document.getElementById(toggle.getAttribute("aria-controls"));
    if (form && form.hidden) toggle.click();
    if (form) focusFirst(form, "textarea, input:not([type=hidden])");
  }

  function select(line) {
    const box_ = line.querySelector(":scope > .row-select");
    if (!box_ || box_.disabled) return;
    box_.checked = !box_.checked;
    box_.dispatchEvent(new Event("change", { bubbles: true }));
  }

  function edit(line) {
    const controls = card(line);
    if (!controls) return;
    open(line, true);
    const link = controls.querySelector("a[href*='/edit/']");
    if (link) link.click();
  }

  function showShortcuts() {
    if (dialog && !dialog.open) dialog.showModal();
  }

  const typing = (element) =>
    element && (element.isContentEditable || element.tagName === "TEXTAREA" || element.tagName === "SELECT" ||
      (element.tagName === "INPUT" && !["checkbox", "radio", "button", "submit", "reset"].includes(element.type)));

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
    if (typing(event.target) || (dialog && dialog.open)) return;
    if (event.key === "?") { event.preventDefault(); showShortcuts(); return; }
    if (event.key === "j") { event.preventDefault(); move(1); return; }
    if (event.key === "k") { event.preventDefault(); move(-1); return; }
    const actions = { o: (line) => open(line), a: approve, r: reject, x: select, e: edit };
    const action = actions[event.key];
    if (!action) return;
    event.preventDefault();
    const line = current();
    // Nothing focused yet: the key only reaches the first row (a stray "a" never approves a call
    // the person has not yet come to).
    if (!line || !visible(line)) { move(1); return; }
    action(line);
  });

  // A click or Tab into a row makes it the focused one, so the keys act where the user is.
  box.addEventListener("focusin", function (event) {
    const line = event.target.closest("[data-line]");
    if (line && line.id !== focusedId) mark(line);
  });
  box.addEventListener("toggle", function (event) {
    const details = event.target;
    if (!details.classList || !details.classList.contains("row-open")) return;
    const line = details.parentElement;
    if (details.open) openLines.add(line.id); else openLines.delete(line.id);
  }, true);

  // The list is re-read on every push: open again what was open, and keep the focus where it was
  // (or, once its call is decided, on the row that took its place).
  document.addEventListener("htmx:afterSettle", function (event) {
    if (event.target !== box) { updateSelection(); return; }
    for (const id of openLines) {
      const line = document.getElementById(id);
      const details = line && line.querySelector(":scope > .row-open");
      if (details) details.open = true; else openLines.delete(id);
    }
    if (focusedId === null) { updateSelection(); return; }
    const all = lines();
    const line = current() || all[Math.min(focusedIndex, all.length - 1)];
    const active = document.activeElement;
    const lost = !active || active === document.body || !document.contains(active);
    if (line && lost) focusLine(line); else mark(line);
    updateSelection();
  });

  // The selection count, beside the bulk buttons.
  const count = document.getElementById("selection-count");
  const bar = document.getElementById("bulk-form");
  function updateSelection() {
    if (!count || !bar) return;
    const selected = document.querySelectorAll("input.row-select:checked").length;
    count.textContent = selected + " selected";
    bar.classList.toggle("has-selection", selected > 0);
    for (const button of bar.querySelectorAll("[data-needs-selection]")) button.disabled = selected === 0;
  }
  document.addEventListener("change", function (event) {
    if (event.target.classList && event.target.classList.contains("row-select")) updateSelection();
  });
  updateSelection();

  const opener = document.getElementById("shortcuts-open");
  if (opener) opener.addEventListener("click", showShortcuts);
})();
