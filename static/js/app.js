// hitl's page behaviour: the reject form, Enter to send, catching up after a (re)connect, the
// dashboard's live list and notifications, time left, what changed said aloud, the focus after a
// decision, and the pending count in the tab title.
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

  // A call's card only moves forward (waiting for a human, approved, running, finished). Two
  // processes may push the same card (the request that decided it, the one that reported what it
  // did): a push rendered before the other but delivered after it would take the card back, so a
  // pushed card at an earlier stage than the one shown is dropped.
  const STAGES = { pending_approval: 0, approved: 1, running: 2, waiting_for_input: 2 }; // any other: finished (3)
  const stage = (status) => (status in STAGES ? STAGES[status] : 3);
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    const shown = event.detail.target;
    if (!shown.id || !shown.id.startsWith("tool-call-") || !shown.dataset.status) return;
    const pushed = event.detail.fragment.firstElementChild;
    if (pushed && pushed.id === shown.id && pushed.dataset.status && stage(pushed.dataset.status) < stage(shown.dataset.status)) {
      event.detail.shouldSwap = false;
    }
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
  // Decisions name their approvals: the inbox (inbox.js) takes those rows out in place when it can
  // (it cancels the "hitl:decided" event then), and nothing is re-read.
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    // Fired once per element htmx settled; only the signal element itself counts.
    const signal = event.target;
    if (!signal || signal.id !== "dashboard-signal") return;
    const ids = (signal.dataset.ids || "").split(" ").filter(Boolean);
    const decided = new CustomEvent("hitl:decided", { detail: { ids: ids }, cancelable: true });
    if (!ids.length || document.dispatchEvent(decided)) htmx.trigger("#dashboard-filters", "refresh");
    if (signal.dataset.event === "approval.requested") {
      notifyNewApproval();
      requestedSinceRead += Number(signal.dataset.count || 1);
    }
  });
  // Said once the re-read list has landed, with the count it shows: "1 new call needs approval; 3 pending."
  let requestedSinceRead = 0;
  document.addEventListener("htmx:afterSettle", function () {
    const count = document.getElementById("dashboard-count");
    if (!count || !requestedSinceRead) return;
    const fresh = requestedSinceRead;
    requestedSinceRead = 0;
    announce((fresh === 1 ? "1 new call needs" : fresh + " new calls need") + " approval; " + Number(count.dataset.count) + " pending.");
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
      label.textContent = seconds > 0 ? " (" + timeLeft(seconds) + " left)" : " (expiring…)";
    }
  }
  // "23 h 59 min", "4 min 05 s", "12 s": the two largest units, never "1439 min 58 s".
  function timeLeft(seconds) {
    const hours = Math.floor(seconds / 3600), minutes = Math.floor((seconds % 3600) / 60), rest = seconds % 60;
    if (hours) return hours + " h " + minutes + " min";
    if (minutes) return minutes + " min " + String(rest).padStart(2, "0") + " s";
    return rest + " s";
  }
  setInterval(updateTimeLeft, 1000);
  document.addEventListener("htmx:afterSettle", updateTimeLeft);

  // --- Saying what changed (the polite live region #announcer of base.html) -------------------
  // Cards pushed to the chat are compared with what the page knew: a new card to decide is announced
  // in one short sentence ("delete_file needs approval: notes.txt, high risk"; several in one), a
  // decision made elsewhere in a few words ("write_file approved by bob"). The page's own decisions
  // are not announced: the focus moves on instead (below).
  const announcer = document.getElementById("announcer");
  const knownCards = new Map();  // card id -> was pending
  const decidedHere = new Set();  // ids of the cards this page has just decided
  let announceTimer = null;

  function announce(sentence) {
    if (!announcer || !sentence) return;
    announcer.textContent = "";  // the same sentence twice is still said twice
    setTimeout(function () { announcer.textContent = sentence; }, 50);
  }

  function isPending(card) {
    // A decision's answer swaps the card's controls (#approval-N) at once; its status comes with the push.
    const approval = card.querySelector('[id^="approval-"]');
    return card.dataset.status === "pending_approval" && (!approval || approval.classList.contains("approval-pending"));
  }

  function targetOf(card) {
    if (card.dataset.target) return card.dataset.target;
    const args = card.querySelector("pre.arguments");  // before the cards said their target
    try {
      const parsed = JSON.parse(args ? args.textContent : "");
      for (const key of ["path", "paths", "to", "url", "message", "question", "title"]) {
        if (parsed[key]) return String(parsed[key]);
      }
    } catch (error) { /* no arguments to read */ }
    return "";
  }

  function needsWhat(card) {
    const tool = card.dataset.tool || "A tool";
    const question = card.querySelector(".question-text");
    if (card.classList.contains("kind-question") || question) {
      return tool + " asks: " + (question ? question.textContent.replace(/^\s*Question:\s*/, "").trim() : card.dataset.title || "a question");
    }
    if (card.classList.contains("kind-plan") || card.querySelector(".plan-title")) {
      return "A plan needs approval: " + (card.dataset.title || tool);
    }
    const riskElement = card.querySelector(".risk");
    const risk = card.dataset.risk || (riskElement ? riskElement.textContent.replace(/\s*risk\s*$/, "").trim() : "");
    const target = targetOf(card);
    return tool + " needs approval" + (target ? ": " + target : "") + (risk ? ", " + risk + " risk" : "");
  }

  function outcomeOf(card) {
    const tool = card.dataset.tool || "A call";
    const approval = card.querySelector('[id^="approval-"]');
    const decided = card.querySelector(".decided");
    const by = decided && decided.textContent.match(/\bby (\S+?)(?: via\b|[\s:.,]|$)/);
    let verb = (card.dataset.status || "decided").replace(/_/g, " ");
    for (const outcome of ["approved", "rejected", "answered", "declined", "expired", "cancelled"]) {
      if (approval && approval.classList.contains("approval-" + outcome)) verb = outcome;
    }
    return tool + " " + verb + (by && by[1] !== "the" ? " by " + by[1] : "");
  }

  function noteCards(speak) {
    const arrived = [];
    const decidedElsewhere = [];
    const seen = new Set();
    for (const card of document.querySelectorAll('#messages .tool-card[id^="tool-call-"]')) {
      seen.add(card.id);
      const pending = isPending(card);
      const wasPending = knownCards.get(card.id);
      if (pending && wasPending !== true) arrived.push(card);
      if (!pending && wasPending === true && !decidedHere.has(card.id)) decidedElsewhere.push(card);
      if (!pending) decidedHere.delete(card.id);
      knownCards.set(card.id, pending);
    }
    if (!speak) return;
    const sentences = [];
    if (arrived.length === 1) sentences.push(needsWhat(arrived[0]) + ".");
    else if (arrived.length > 1) sentences.push(arrived.length + " calls need approval: " + arrived.map(needsWhat).map(function (text) { return text.replace(/ needs approval:? ?/, " "); }).join("; ") + ".");
    if (decidedElsewhere.length) sentences.push(decidedElsewhere.map(outcomeOf).join(", ") + ".");
    if (sentences.length) announce(sentences.join(" "));
  }
  noteCards(false);  // what the page shows when it opens is read, not announced

  // Several cards pushed at once (one message, or a burst of pushes) make one sentence.
  function noteCardsSoon() {
    clearTimeout(announceTimer);
    announceTimer = setTimeout(function () { noteCards(true); }, 150);
  }
  document.addEventListener("htmx:wsAfterMessage", noteCardsSoon);
  document.addEventListener("htmx:afterSettle", function (event) {
    if (event.target.id === "conversation-live") noteCardsSoon();
  });

  // --- Where the focus goes after a decision ------------------------------------------------------
  // A decision made on a card (its own POST swaps #approval-N) would leave the focus on the body: it
  // moves to the next card that waits for a decision (the card itself, not its Approve, so that a
  // second Enter decides nothing unread), or, with none left, to the message box.
  document.addEventListener("htmx:beforeRequest", function (event) {
    const element = event.detail.elt;
    if (!element || (event.detail.requestConfig && event.detail.requestConfig.verb !== "post")) return;
    const card = element.closest('#messages .tool-card[id^="tool-call-"]');
    if (!card || !element.closest('[id^="approval-"]')) return;
    decidedHere.add(card.id);
    afterAnswer(event.detail.xhr, function (xhr) {
      if (!xhr.status) return decidedHere.delete(card.id);  // never reached the server
      focusAfterDecision(card.id);
    });
  });

  // Runs once htmx has swapped and settled the answer. (htmx's own after-events fire on the element
  // that sent the request, and the swap has just taken it out of the page, so they reach no listener.)
  function afterAnswer(xhr, then) {
    xhr.addEventListener("loadend", function () {
      setTimeout(function () { then(xhr); }, htmx.config.defaultSettleDelay + 30);
    }, { once: true });
  }

  function isShown(element) {
    return element.getClientRects().length > 0 && getComputedStyle(element).visibility !== "hidden";
  }
  function hasControls(card) {
    for (const control of card.querySelectorAll("button, a[href], input:not([type=hidden]), textarea, select, summary")) {
      if (!control.disabled && isShown(control)) return true;
    }
    return false;
  }

  function focusAfterDecision(cardId) {
    const decided = document.getElementById(cardId);
    const active = document.activeElement;
    // The person went somewhere else meanwhile: leave them there.
    if (active && active !== document.body && document.contains(active) && !(decided && decided.contains(active))) return;
    if (decided && isPending(decided) && hasControls(decided)) return moveFocus(decided);  // not decided (an error): stay
    const waiting = Array.from(document.querySelectorAll('#messages .tool-card[id^="tool-call-"]')).filter(function (card) {
      return card.id !== cardId && isPending(card) && hasControls(card);
    });
    const after = decided ? waiting.filter(function (card) {
      return decided.compareDocumentPosition(card) & Node.DOCUMENT_POSITION_FOLLOWING;
    }) : [];
    const next = after[0] || waiting[0];
    if (next) return moveFocus(next);
    const box = document.getElementById("message-box");
    if (box) return box.focus();
    if (decided) moveFocus(decided);
  }

  // The card the focus was moved to may be replaced by a push (its preview, its countdown): the
  // focus, dropped to the body with it, goes back to its new self.
  let movedTo = null;
  function moveFocus(card) {
    movedTo = card.id;
    if (!card.hasAttribute("tabindex")) card.setAttribute("tabindex", "-1");
    card.dataset.focusMoved = "";
    card.addEventListener("blur", function () { delete card.dataset.focusMoved; }, { once: true });
    card.focus({ preventScroll: true });
    card.scrollIntoView({ block: "nearest", behavior: "smooth" });
  }
  document.addEventListener("focusin", function (event) {
    if (event.target.id !== movedTo) movedTo = null;
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    setTimeout(function () {
      const card = movedTo && document.getElementById(movedTo);
      if (card && document.activeElement === document.body && isPending(card)) moveFocus(card);
    }, htmx.config.defaultSettleDelay + 30);
  });

  // The rules page: a Disable, Enable or Delete replaces (or removes) the row whose button had the
  // focus; the focus goes to the new row's first button, or to the status line that says what happened.
  document.addEventListener("htmx:beforeRequest", function (event) {
    const row = event.detail.elt && event.detail.elt.closest("tr.rule");
    if (!row) return;
    const rowId = row.id;
    afterAnswer(event.detail.xhr, function () {
      if (document.activeElement && document.activeElement !== document.body) return;
      const replaced = document.getElementById(rowId);
      const button = replaced && replaced.querySelector("form button");
      if (button) return button.focus();
      const status = document.getElementById("rules-status");
      if (status) status.focus();
    });
  });

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
