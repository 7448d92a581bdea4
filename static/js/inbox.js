// inbox.js: the approvers' inbox: keyboard shortcuts (j/k move, o open, a open then approve, r reject,
// x select, e edit, ? the list), the selection count, decided rows taken out in place, and open and
// focused rows kept across the list's re-reads. No key approves a call that was not on screen, nor
// more than the one focused call: on a group, "a" only focuses its button.
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

  const EDGE = 4; // px: a scrolled-into-view edge may sit a fraction of a pixel past the screen's
  function onScreen(element) {
    const rect = element.getBoundingClientRect();
    const height = window.innerHeight || document.documentElement.clientHeight;
    return rect.top >= -EDGE && rect.bottom <= height + EDGE;
  }

  // A question's answer first: its first option (or its default) chosen and focused, so Enter
  // answers; a text or number its field; a plan its Approve button; a critical call its typed
  // confirmation. True when the row needs that rather than an approve.
  function focusAnswer(controls) {
    const choice = controls.querySelector(".answer-form input[type=radio]:checked") || controls.querySelector(".answer-form input[type=radio]");
    if (choice) { choice.checked = true; choice.focus(); return true; }
    return focusFirst(controls, ".answer-form input:not([type=hidden]), .answer-form textarea, .answer-form select, .answer-form button[type=submit], .plan-form button[type=submit]") ||
      focusFirst(controls, "input[name=confirmation]");
  }

  // "a" never approves a call that was not on screen: on a closed row it opens the row (a question
  // also takes the focus to its answer); on an open one whose preview is partly off screen it
  // scrolls the preview in; only then does the next "a" approve (on a group: focus its button,
  // which Enter presses).
  function approve(line) {
    const details = line.querySelector(":scope > .row-open");
    if (details && !details.open) {
      open(line, true);
      const controls = card(line);
      const preview = controls && controls.querySelector(".preview");
      (preview || line).scrollIntoView({ block: "nearest" });
      if (controls) focusAnswer(controls);
      return;
    }
    if (line.classList.contains("approval-group")) {
      focusFirst(line, ".group-form button[value=approve]"); // Enter approves the group; the key alone never does
      return;
    }
    const controls = card(line);
    if (!controls) return;
    const preview = controls.querySelector(".preview");
    if (preview && !onScreen(preview)) { preview.scrollIntoView({ block: "nearest" }); return; }
    if (focusAnswer(controls)) return;
    const button = controls.querySelector("form.approve-only button[value=approve]");
    if (button && !button.disabled) button.click(); // a click: htmx sends the button's name and value
  }

  // Enter on a chosen option answers (a radio or checkbox has no Enter of its own).
  box.addEventListener("keydown", function (event) {
    if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    const option = event.target.closest && event.target.closest(".answer-form input[type=radio], .answer-form input[type=checkbox]");
    if (!option) return;
    const submit = option.form.querySelector(".decision button.approve[type=submit]");
    if (!submit) return;
    event.preventDefault();
    option.form.requestSubmit(submit);
  });

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
    // A held key repeats: j and k may run down the list, but a held "a" must not open a row and
    // approve it (and the next) faster than anyone reads.
    if (event.repeat && !["j", "k"].includes(event.key)) return;
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

  // A decision pushed to every inbox names its approvals (app.js's "hitl:decided"): their rows go,
  // the rest stay as they are (open, focused, half-typed), and the counts follow. The list is
  // re-read instead (the event left alone) when rows must come in: a list cut at its first rows, a
  // group partly decided, the last row gone (the empty list's words), or a narrowed list (filters,
  // the snoozed) whose nav count may count calls it does not show.
  document.addEventListener("hitl:decided", function (event) {
    if (takeOut(event.detail.ids)) event.preventDefault();
  });

  function takeOut(ids) {
    const count = document.getElementById("dashboard-count");
    if (!count || !box.contains(count)) return false;
    const total = Number(count.dataset.count), shown = Number(count.dataset.shown);
    const gone = [];
    let goneCalls = 0;
    for (const id of ids) {
      const row = document.getElementById("approval-row-" + id);
      if (!row) {
        if (count.hasAttribute("data-narrowed")) return false;
        continue;
      }
      const group = row.closest(".approval-group");
      if (!group) { gone.push(row); goneCalls += 1; continue; }
      if (gone.includes(group)) continue;
      const members = group.dataset.approvalIds.split(" ");
      if (!members.every((member) => ids.includes(member))) return false;
      gone.push(group);
      goneCalls += members.length;
    }
    if (!gone.length) return true; // none of them is listed here: nothing changes
    const left = total - goneCalls;
    if (shown < total || left <= 0) return false;
    const all = lines();
    const focused = current();
    const active = document.activeElement;
    const hadFocus = !active || active === document.body || gone.some((element) => element.contains(active));
    const at = focused && gone.some((element) => element.contains(focused)) ? all.indexOf(focused) : -1;
    for (const element of gone) {
      openLines.delete(element.id);
      element.remove();
    }
    count.dataset.count = String(left);
    count.dataset.shown = String(shown - goneCalls);
    count.textContent = left + " pending.";
    const nav = document.getElementById("nav-inbox-count");
    if (nav) nav.innerHTML = " (" + left + ')<span class="visually-hidden"> waiting</span>';
    if (at !== -1) {
      const rest = lines();
      const next = rest[Math.min(at, rest.length - 1)];
      if (hadFocus) focusLine(next); else mark(next);
    }
    updateSelection();
    return true;
  }

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
