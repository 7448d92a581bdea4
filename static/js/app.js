// hitl's page behaviour: the reject form, Enter to send, catching up after a (re)connect,
// and the pending count in the tab title. Everything else is htmx.
(function () {
  "use strict";
  const baseTitle = document.title;

  // Reject shows the reason form and puts the focus in it; Cancel hides it again.
  document.addEventListener("click", function (event) {
    const toggle = event.target.closest("[data-reject-toggle]");
    if (toggle) {
      const form = document.getElementById(toggle.getAttribute("aria-controls"));
      form.hidden = false;
      toggle.setAttribute("aria-expanded", "true");
      form.querySelector("textarea").focus();
      return;
    }
    const cancel = event.target.closest("[data-reject-cancel]");
    if (cancel) {
      const form = cancel.closest("form");
      form.hidden = true;
      const opener = document.querySelector('[aria-controls="' + form.id + '"]');
      if (opener) { opener.setAttribute("aria-expanded", "false"); opener.focus(); }
    }
  });

  // Enter sends the message; Shift+Enter makes a new line.
  document.addEventListener("keydown", function (event) {
    if (event.target.id === "message-box" && event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      event.target.form.requestSubmit();
    }
  });

  // The socket may have missed pushes while it was (re)connecting: the database is the truth.
  document.addEventListener("htmx:wsOpen", function () {
    const live = document.getElementById("conversation-live");
    if (live) htmx.ajax("GET", live.dataset.refreshUrl, { target: "#conversation-live", swap: "innerHTML" });
  });

  // A pushed message that the page already shows (it came with a refresh) replaces it, not doubles it.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    if (event.detail.target.id !== "messages") return;
    for (const element of Array.from(event.detail.fragment.children)) {
      const existing = element.id && document.getElementById(element.id);
      if (existing) existing.replaceWith(element);
    }
  });

  // "(2) title" while cards wait for a decision and the tab is hidden.
  function updateTitle() {
    const pending = document.querySelectorAll('.tool-card[data-status="pending_approval"]').length;
    document.title = document.hidden && pending ? "(" + pending + ") " + baseTitle : baseTitle;
  }
  document.addEventListener("visibilitychange", updateTitle);
  document.addEventListener("htmx:afterSettle", updateTitle);
  document.addEventListener("htmx:oobAfterSwap", updateTitle);
  document.addEventListener("htmx:wsAfterMessage", updateTitle);
})();
