// card.js: the card's own behaviour: the "Always…" menu below the action row, and toggles that say
// whether what they open is open (after a push kept it, hx-preserve).
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

  // A plan's steps move up or down before approving: the form sends every step's `order` input in
  // the order they stand, which is the order the agent is told to take them in.
  document.addEventListener("click", function (event) {
    const move = event.target.closest("[data-move]");
    const step = move && move.closest(".plan-step");
    if (!step) return;
    const other = move.dataset.move === "up" ? step.previousElementSibling : step.nextElementSibling;
    if (!other) return;
    if (move.dataset.move === "up") other.before(step); else other.after(step);
    move.focus();
    const list = step.closest("[data-plan-steps]");
    const place = Array.prototype.indexOf.call(list.children, step) + 1;
    move.closest(".step-move").setAttribute("aria-label", "Move this step (now step " + place + " of " + list.children.length + ")");
  });

  // A step's new words show in its line as they are typed: what the checkbox keeps is what it says.
  document.addEventListener("input", function (event) {
    const field = event.target.closest && event.target.closest('.plan-step input[name^="action_"]');
    const line = field && field.closest(".plan-step").querySelector(".step-action");
    if (line) line.textContent = field.value;
  });

  // A pushed card keeps an open menu or reason form (hx-preserve) but brings a fresh toggle.
  function syncToggles() {
    for (const toggle of document.querySelectorAll("[data-menu-toggle], [data-reject-toggle]")) {
      const controlled = document.getElementById(toggle.getAttribute("aria-controls"));
      if (controlled) toggle.setAttribute("aria-expanded", String(!controlled.hidden));
    }
  }

  function settle() {
    syncToggles();
  }
  document.addEventListener("htmx:afterSettle", settle);
  document.addEventListener("htmx:oobAfterSwap", syncToggles);
  document.addEventListener("DOMContentLoaded", settle);
})();
