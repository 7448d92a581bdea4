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
