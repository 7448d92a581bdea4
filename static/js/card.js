// card.js: the card's own behaviour: the "Always…" menu below the action row, toggles that say
// whether what they open is open (after a push kept it, hx-preserve), and the edit form's live diff
// against the request (the server's diff on submit stays the one that counts).
(function () {
  "use strict";

  // "Always…" opens its menu below the action row; Cancel or Escape closes it again.
  function setMenu(toggle, open) {
    const menu = document.getElementById(toggle.getAttribute("aria-controls"));
    if (!menu) return;
    menu.hidden = !open;
    toggle.setAttribute("aria-expanded", String(open));
    if (open) {
      const first = menu.querySelector("input[type=radio]:checked") || menu.querySelector("input:not([type=hidden]), button");
      if (first) first.focus();
    } else {
      toggle.focus();
    }
  }
  function toggleOf(menu) {
    return document.querySelector('[data-menu-toggle][aria-controls="' + menu.id + '"]');
  }
  document.addEventListener("click", function (event) {
    const toggle = event.target.closest("[data-menu-toggle]");
    if (toggle) return setMenu(toggle, toggle.getAttribute("aria-expanded") !== "true");
    const cancel = event.target.closest("[data-menu-cancel]");
    if (cancel) {
      const opener = toggleOf(cancel.closest(".remember"));
      if (opener) setMenu(opener, false);
    }
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    const menu = event.target.closest && event.target.closest(".remember:not([hidden])");
    const opener = menu && toggleOf(menu);
    if (opener) setMenu(opener, false);
  });

  // A pushed card keeps an open menu or reason form (hx-preserve) but brings a fresh toggle.
  function syncToggles() {
    for (const toggle of document.querySelectorAll("[data-menu-toggle], [data-reject-toggle]")) {
      const controlled = document.getElementById(toggle.getAttribute("aria-controls"));
      if (controlled) toggle.setAttribute("aria-expanded", String(!controlled.hidden));
    }
  }

  // The edit form's changes so far, as lines of the arguments' pretty JSON (keys sorted, as the
  // server shows an edit): − requested, + edited, one line of context around each change.
  function sorted(value) {
    if (Array.isArray(value)) return value.map(sorted);
    if (value && typeof value === "object") {
      const copy = {};
      for (const key of Object.keys(value).sort()) copy[key] = sorted(value[key]);
      return copy;
    }
    return value;
  }
  function pretty(value) {
    return JSON.stringify(sorted(value), null, 2).split("\n");
  }
  function edited(form, requested) {
    const values = Object.assign({}, requested);
    for (const input of form.querySelectorAll("[data-argument]")) {
      const name = input.dataset.argument;
      const widget = input.dataset.widget;
      if (widget === "checkbox") { values[name] = input.checked; continue; }
      const raw = input.value.replace(/\r\n/g, "\n");
      if (raw === "" && input.hasAttribute("data-optional")) { delete values[name]; continue; }
      if (widget === "number") values[name] = Number.isNaN(Number(raw)) ? raw : Number(raw);
      else if (widget === "json") { try { values[name] = JSON.parse(raw); } catch (error) { values[name] = raw; } }
      else values[name] = raw;
    }
    return values;
  }
  // The lines compared by their longest common subsequence at most (an n·m table): the arguments
  // are whatever the model sent, and a list of thousands of items must not freeze the tab at each key.
  const MAX_COMPARED = 250000;
  function diffLines(before, after) {
    // The common head and tail as they are (an edit changes a few lines of many), the rest compared.
    let head = 0, tail = 0;
    while (head < before.length && head < after.length && before[head] === after[head]) head++;
    while (tail < before.length - head && tail < after.length - head &&
      before[before.length - 1 - tail] === after[after.length - 1 - tail]) tail++;
    const same = (line) => [" ", line];
    return before.slice(0, head).map(same).concat(
      compared(before.slice(head, before.length - tail), after.slice(head, after.length - tail)),
      before.slice(before.length - tail).map(same));
  }
  function compared(before, after) {
    const n = before.length, m = after.length;
    if (n * m > MAX_COMPARED) {  // too many changed lines to match up: all removed, then all added
      return before.map((line) => ["-", line]).concat(after.map((line) => ["+", line]));
    }
    const common = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        common[i][j] = before[i] === after[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
      }
    }
    const lines = [];
    let i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && before[i] === after[j]) { lines.push([" ", before[i]]); i++; j++; }
      else if (j < m && (i === n || common[i][j + 1] >= common[i + 1][j])) { lines.push(["+", after[j]]); j++; }
      else { lines.push(["-", before[i]]); i++; }
    }
    return lines;
  }
  function showDiff(form) {
    const target = document.getElementById(form.dataset.liveDiff);
    if (!target || !form.dataset.requested) return;
    const requested = JSON.parse(form.dataset.requested);
    const lines = diffLines(pretty(requested), pretty(edited(form, requested)));
    const near = lines.map((line, index) => line[0] !== " " ||
      (lines[index - 1] && lines[index - 1][0] !== " ") || (lines[index + 1] && lines[index + 1][0] !== " "));
    target.replaceChildren();
    if (!near.includes(true) || lines.every((line) => line[0] === " ")) {
      const none = document.createElement("span");
      none.className = "meta";
      none.textContent = "No change yet.";
      target.append(none);
      return;
    }
    let skipped = false;
    lines.forEach(function (line, index) {
      if (!near[index]) { skipped = true; return; }
      if (skipped && target.childNodes.length) target.append(Object.assign(document.createElement("span"), { className: "diff-hunk", textContent: "…\n" }));
      skipped = false;
      const span = document.createElement("span");
      span.className = line[0] === "+" ? "diff-add" : line[0] === "-" ? "diff-del" : "";
      span.textContent = line[0] + line[1] + "\n";
      target.append(span);
    });
  }
  document.addEventListener("input", function (event) {
    const form = event.target.closest && event.target.closest("form[data-live-diff]");
    if (form) showDiff(form);
  });
  document.addEventListener("change", function (event) {
    const form = event.target.closest && event.target.closest("form[data-live-diff]");
    if (form) showDiff(form);
  });
  function settle() {
    syncToggles();
    for (const form of document.querySelectorAll("form[data-live-diff]")) showDiff(form);
  }
  document.addEventListener("htmx:afterSettle", settle);
  document.addEventListener("htmx:oobAfterSwap", syncToggles);
  document.addEventListener("DOMContentLoaded", settle);
})();
