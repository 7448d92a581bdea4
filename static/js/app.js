// hitl's page behaviour: the reject form, Enter to send, catching up after a (re)connect, the
// dashboard's live list and notifications, time left, and the pending count in the tab title.
// Everything else is htmx.
(function () {
  "use strict";
  const baseTitle = document.title;

  // A lost socket (daphne or Redis restarted) comes back within seconds: htmx's default waits up to
  // 64 s at random after a few failed tries; ours at most 5 s, jittered so pages do not all come at once.
  htmx.config.wsReconnectDelay = function (retryCount) {
    return Math.min(1000 * Math.pow(2, retryCount), 5000) * (0.5 + Math.random() / 2);
  };

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

  // A critical call's Approve stays disabled until its confirmation is typed exactly (the server
  // checks it again: this only saves a round trip).
  document.addEventListener("input", function (event) {
    const input = event.target.closest("[data-confirmation-hint]");
    if (!input) return;
    const approve = input.form.querySelector('button[value="approve"]');
    if (approve) approve.disabled = input.value.trim() !== input.dataset.confirmationHint;
  });

  // Enter sends the message; Shift+Enter makes a new line.
  document.addEventListener("keydown", function (event) {
    if (event.target.id === "message-box" && event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      event.target.form.requestSubmit();
    }
  });

  // The socket may have missed pushes while it was (re)connecting: the database is the truth. A push
  // that lands while that read is in flight may be newer than what the read brings back, and the
  // read's swap would undo it: then read again. aria-busy marks the page as catching up meanwhile.
  let reading = false;
  let pushedWhileReading = false;
  function rereadConversation() {
    const live = document.getElementById("conversation-live");
    if (!live) return;
    reading = true;
    pushedWhileReading = false;
    live.setAttribute("aria-busy", "true");
    htmx.ajax("GET", live.dataset.refreshUrl, { target: "#conversation-live", swap: "innerHTML" }).finally(function () {
      reading = false;
      if (pushedWhileReading) return rereadConversation();
      live.removeAttribute("aria-busy");
    });
  }
  document.addEventListener("htmx:wsOpen", rereadConversation);
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (reading) pushedWhileReading = true;
  });

  // A pushed message that the page already shows (it came with a refresh) replaces it, not doubles it.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    if (event.detail.target.id !== "messages") return;
    for (const element of Array.from(event.detail.fragment.children)) {
      const existing = element.id && document.getElementById(element.id);
      if (existing) existing.replaceWith(element);
    }
  });

  // The dashboard: a pushed signal says something changed; the page re-reads its own filtered list.
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    // Fired once per element htmx settled; only the signal element itself counts.
    const signal = event.target;
    if (!signal || signal.id !== "dashboard-signal") return;
    htmx.trigger("#dashboard-filters", "refresh");
    if (signal.dataset.event === "approval.requested") notifyNewApproval();
  });
  document.addEventListener("htmx:wsOpen", function () {
    if (document.getElementById("dashboard-filters")) htmx.trigger("#dashboard-filters", "refresh");
  });

  function notifyNewApproval() {
    if (window.Notification && Notification.permission === "granted" && document.hidden) {
      new Notification("hitl: an approval is waiting", { body: "A new tool call needs a decision.", tag: "hitl-approvals" });
    }
  }
  const enable = document.getElementById("enable-notifications");
  if (enable && window.Notification && Notification.permission === "default") {
    enable.hidden = false;
    enable.addEventListener("click", function () {
      Notification.requestPermission().then(function () { enable.hidden = true; });
    });
  }

  // Time left on approvals that expire.
  function updateTimeLeft() {
    for (const element of document.querySelectorAll("[data-expires-at]")) {
      const seconds = Math.round((Date.parse(element.dataset.expiresAt) - Date.now()) / 1000);
      const label = element.querySelector(".time-left");
      if (!label) continue;
      label.textContent = seconds > 0 ? " (" + Math.floor(seconds / 60) + " min " + (seconds % 60) + " s left)" : " (expiring…)";
    }
  }
  setInterval(updateTimeLeft, 1000);
  document.addEventListener("htmx:afterSettle", updateTimeLeft);

  // "(2) title" while cards wait for a decision and the tab is hidden; on the dashboard, the count
  // of pending approvals at all times.
  function updateTitle() {
    const count = document.getElementById("dashboard-count");
    if (count) {
      const pending = Number(count.dataset.count);
      document.title = pending ? "(" + pending + ") " + baseTitle : baseTitle;
      return;
    }
    const pending = document.querySelectorAll('.tool-card[data-status="pending_approval"]').length;
    document.title = document.hidden && pending ? "(" + pending + ") " + baseTitle : baseTitle;
  }
  updateTitle();
  document.addEventListener("visibilitychange", updateTitle);
  document.addEventListener("htmx:afterSettle", updateTitle);
  document.addEventListener("htmx:oobAfterSwap", updateTitle);
  document.addEventListener("htmx:wsAfterMessage", updateTitle);
})();
